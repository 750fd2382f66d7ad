//! `Verifier`: keys plus policy, the whole check in one call.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyMappingProxy, PyString};

use super::input_bytes;
use super::keys::PyKeySet;
use super::objects::PyBuilder;
use super::policy::PyPolicy;
use crate::algorithm::{Algorithm, Family};
use crate::error::{Error, ErrorKind};
use crate::token;
use crate::verifier::{PayloadRoom, Verifier as CoreVerifier};

/// Keys plus policy; `verify(token, now)` does the whole check in one call.
#[pyclass(frozen, module = "grelmicro_core._core", name = "Verifier")]
pub struct PyVerifier {
    inner: CoreVerifier,
    issuers: Vec<Py<PyString>>,
    audiences: Vec<Py<PyString>>,
    /// Signature checks cheap enough that releasing the GIL costs more than
    /// it frees (HMAC over small tokens) run attached.
    detach_from: usize,
    /// Members of the last payload built: the next one's top-level dict is
    /// made that large at once (tokens of one issuer share a layout), so it
    /// never resizes while filling. Written only when it changes, so
    /// threads verifying one issuer's tokens only read it.
    layout: AtomicUsize,
}

/// Tokens at least this long are verified detached even under HMAC.
const HMAC_DETACH_BYTES: usize = 2048;

impl PyVerifier {
    /// The whole check: the payload as a read-only mapping, and until when
    /// it holds.
    pub(super) fn check<'py>(
        &self,
        py: Python<'py>,
        token: &Bound<'py, PyAny>,
        now: f64,
    ) -> PyResult<(Bound<'py, PyMappingProxy>, Option<f64>)> {
        let bytes = input_bytes(token, ErrorKind::Malformed, "token")?;
        let mut room = PayloadRoom::new();
        let payload = if bytes.len() >= self.detach_from {
            py.detach(|| self.inner.authenticate(bytes, &mut room))
        } else {
            self.inner.authenticate(bytes, &mut room)
        }
        .map_err(|err| PyErr::from(token::explain(bytes, err)))?;
        let mut builder = PyBuilder::new(py, &self.issuers, &self.audiences);
        builder.root_room = self.layout.load(Ordering::Relaxed);
        // The top level is read-only too: the cache shares it between
        // requests and threads.
        let verified = self.inner.claims(payload, &mut builder, now)?;
        let claims = verified.claims.cast_into::<PyMappingProxy>().map_err(|_| {
            PyErr::from(Error::new(
                ErrorKind::Malformed,
                "payload is not a JSON object",
            ))
        })?;
        if builder.root_members != builder.root_room {
            self.layout.store(builder.root_members, Ordering::Relaxed);
        }
        Ok((claims, verified.valid_until))
    }
}

#[pymethods]
impl PyVerifier {
    #[new]
    fn new(py: Python<'_>, keys: &PyKeySet, policy: &PyPolicy) -> PyResult<Self> {
        let inner = CoreVerifier::new(Arc::clone(&keys.inner), Arc::clone(&policy.inner))?;
        let only_hmac = inner
            .keys()
            .keys()
            .iter()
            .all(|k| k.algorithm().family() == Family::Hmac);
        let detach_from = if only_hmac { HMAC_DETACH_BYTES } else { 0 };
        let shared = |names: &[String]| -> Vec<Py<PyString>> {
            names
                .iter()
                .map(|n| PyString::intern(py, n).unbind())
                .collect()
        };
        Ok(PyVerifier {
            issuers: shared(policy.inner.issuers()),
            audiences: shared(policy.inner.audiences()),
            inner,
            detach_from,
            layout: AtomicUsize::new(0),
        })
    }

    /// Verifies `token` at time `now` (seconds since the epoch) and returns
    /// the payload as a read-only mapping (arrays as tuples, objects as
    /// read-only mappings).
    fn verify<'py>(
        &self,
        py: Python<'py>,
        token: &Bound<'py, PyAny>,
        now: f64,
    ) -> PyResult<Bound<'py, PyMappingProxy>> {
        Ok(self.check(py, token, now)?.0)
    }

    /// `verify`, and until when its answer holds: `(payload, valid_until)`,
    /// `valid_until` the earliest of `exp` and, under `max_age`,
    /// `iat + max_age` (None without `exp`).
    fn verify_until<'py>(
        &self,
        py: Python<'py>,
        token: &Bound<'py, PyAny>,
        now: f64,
    ) -> PyResult<(Bound<'py, PyMappingProxy>, Option<f64>)> {
        self.check(py, token, now)
    }

    /// Whether results `old` verified still hold under this verifier's keys
    /// (no key of `old` gone, no token selecting another key; the policy is
    /// taken to be the same): a cache filled by `old` may then be kept.
    fn keeps_cache_of(&self, old: &PyVerifier) -> bool {
        self.inner.keys().keeps_selections_of(old.inner.keys())
    }

    /// Algorithms this verifier accepts.
    #[getter]
    fn algorithms(&self) -> Vec<&'static str> {
        Algorithm::names_where(|a| self.inner.allows(a))
    }

    fn __repr__(&self) -> String {
        format!("Verifier(algorithms={:?})", self.algorithms())
    }
}
