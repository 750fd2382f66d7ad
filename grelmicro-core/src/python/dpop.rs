//! DPoP proofs (RFC 9449): `ProofVerifier`, thumbprints, `htu` normalisation.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::input_bytes;
use crate::algorithm::Algorithm;
use crate::error::{Error, ErrorKind};
use crate::policy::{DEFAULT_MAX_DEPTH, DEFAULT_MAX_TOKEN_SIZE};
use crate::{dpop, json, key};

// --- DPoP proofs (RFC 9449) -------------------------------------------------

/// The rules a DPoP proof is checked against; `verify` checks one proof.
#[pyclass(frozen, module = "grelmicro_core._core", name = "ProofVerifier")]
pub struct PyProofVerifier {
    inner: dpop::ProofVerifier,
}

#[pymethods]
impl PyProofVerifier {
    #[new]
    #[pyo3(signature = (
        *,
        algorithms=None,
        max_age=dpop::DEFAULT_MAX_AGE,
        leeway=dpop::DEFAULT_LEEWAY,
        max_size=DEFAULT_MAX_TOKEN_SIZE,
        max_depth=DEFAULT_MAX_DEPTH,
    ))]
    fn new(
        algorithms: Option<Vec<String>>,
        max_age: f64,
        leeway: f64,
        max_size: usize,
        max_depth: usize,
    ) -> PyResult<Self> {
        let inner = dpop::ProofVerifier::new(dpop::ProofOptions {
            algorithms,
            max_age,
            leeway,
            max_size,
            max_depth,
        })?;
        Ok(PyProofVerifier { inner })
    }

    /// Checks `proof` for a request (`method`, `uri`) carrying
    /// `access_token` bound to `jkt`, at `now`; the signature work runs
    /// detached. Returns `(replay_key, iat, nonce)`.
    #[allow(clippy::too_many_arguments)]
    fn verify<'py>(
        &self,
        py: Python<'py>,
        proof: &Bound<'py, PyAny>,
        method: &str,
        uri: &str,
        access_token: &Bound<'py, PyAny>,
        jkt: &str,
        now: f64,
    ) -> PyResult<(Bound<'py, PyBytes>, f64, Option<String>)> {
        let proof = input_bytes(proof, ErrorKind::Malformed, "proof")?;
        let access_token = input_bytes(access_token, ErrorKind::Malformed, "access token")?;
        let accepted = py
            .detach(|| {
                self.inner
                    .verify(proof, method, uri, access_token, jkt, now)
            })
            .map_err(Error::from)?;
        Ok((
            PyBytes::new(py, &accepted.replay_key),
            accepted.iat,
            accepted.nonce,
        ))
    }

    /// Algorithms proofs may be signed with.
    #[getter]
    fn algorithms(&self) -> Vec<&'static str> {
        Algorithm::names_where(|a| self.inner.allows(a))
    }

    #[getter]
    fn max_age(&self) -> f64 {
        self.inner.max_age()
    }

    #[getter]
    fn leeway(&self) -> f64 {
        self.inner.leeway()
    }

    fn __repr__(&self) -> String {
        format!("ProofVerifier(algorithms={:?})", self.algorithms())
    }
}

/// The RFC 7638 SHA-256 thumbprint of a public JWK (JSON text), after the
/// same checks as a configured key.
#[pyfunction]
pub(super) fn jwk_thumbprint(py: Python<'_>, document: &Bound<'_, PyAny>) -> PyResult<String> {
    let bytes = input_bytes(document, ErrorKind::InvalidKey, "JWK document")?;
    py.detach(|| {
        let value = json::Value::parse(bytes, 16)
            .map_err(|_| Error::new(ErrorKind::InvalidKey, "JWK is not valid JSON"))?;
        key::Key::jwk(&value, None, false)?;
        dpop::thumbprint(&value)
    })
    .map_err(PyErr::from)
}

/// A URI as RFC 9449 §4.3 compares `htu`, or `None` if it is not an
/// absolute http(s) URI.
#[pyfunction]
pub(super) fn normalize_htu(uri: &str) -> Option<String> {
    dpop::normalize_htu(uri)
}
