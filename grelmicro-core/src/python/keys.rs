//! `Key` and `KeySet`: keys bound to one algorithm, and the selection rule.

use std::sync::Arc;

use pyo3::prelude::*;

use super::{input_bytes, parse_algorithm};
use crate::error::ErrorKind;
use crate::key;
use crate::keyset::{KeySet as CoreKeySet, DEFAULT_MAX_KEYS};

/// A verification key bound to one algorithm, or to its key type's family
/// (a JWK without `alg`).
#[pyclass(frozen, module = "grelmicro_core._core", name = "Key")]
pub struct PyKey {
    inner: Arc<key::Key>,
}

impl PyKey {
    /// The one path of the three constructors: read the input as bytes,
    /// build the key detached from the interpreter, wrap it.
    fn build(
        py: Python<'_>,
        input: &Bound<'_, PyAny>,
        what: &'static str,
        make: impl FnOnce(&[u8]) -> crate::Result<key::Key> + Send,
    ) -> PyResult<Self> {
        let bytes = input_bytes(input, ErrorKind::InvalidKey, what)?;
        let built = py.detach(|| make(bytes))?;
        Ok(PyKey {
            inner: Arc::new(built),
        })
    }
}

#[pymethods]
impl PyKey {
    /// An HMAC secret (HS256/384/512), at least as long as the hash output.
    #[staticmethod]
    #[pyo3(signature = (secret, algorithm, kid=None))]
    fn secret(
        py: Python<'_>,
        secret: &Bound<'_, PyAny>,
        algorithm: &str,
        kid: Option<String>,
    ) -> PyResult<Self> {
        let alg = parse_algorithm(algorithm)?;
        PyKey::build(py, secret, "secret", |bytes| {
            key::Key::secret(bytes, alg, kid)
        })
    }

    /// A public key in PEM (SPKI, PKCS#1 RSA or X.509 certificate).
    #[staticmethod]
    #[pyo3(signature = (data, algorithm, kid=None))]
    fn pem(
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        algorithm: &str,
        kid: Option<String>,
    ) -> PyResult<Self> {
        let alg = parse_algorithm(algorithm)?;
        PyKey::build(py, data, "PEM data", |bytes| key::Key::pem(bytes, alg, kid))
    }

    /// One JWK given as JSON text.
    #[staticmethod]
    #[pyo3(signature = (document, algorithm=None, *, allow_symmetric=false))]
    fn jwk(
        py: Python<'_>,
        document: &Bound<'_, PyAny>,
        algorithm: Option<&str>,
        allow_symmetric: bool,
    ) -> PyResult<Self> {
        let alg = algorithm.map(parse_algorithm).transpose()?;
        PyKey::build(py, document, "JWK document", |bytes| {
            key::Key::jwk_json(bytes, alg, allow_symmetric)
        })
    }

    #[getter]
    fn algorithm(&self) -> &'static str {
        self.inner.algorithm().name()
    }

    /// Every algorithm the key can verify: its own, or, for a JWK without
    /// `alg`, its family's (a verifier's `algorithms` choose among them;
    /// without them the key verifies `algorithm` alone).
    #[getter]
    fn algorithms(&self) -> Vec<&'static str> {
        let own = self.inner.algorithms();
        crate::algorithm::Algorithm::names_where(|a| own.contains(a))
    }

    /// Whether EC coordinates shorter than the curve size were left-padded.
    #[getter]
    fn padded(&self) -> bool {
        self.inner.padded()
    }

    #[getter]
    fn kid(&self) -> Option<&str> {
        self.inner.kid()
    }

    #[getter]
    fn kty(&self) -> &'static str {
        self.inner.kty().as_str()
    }

    /// Hex SHA-256 over the algorithm and key bytes (safe to log).
    #[getter]
    fn fingerprint(&self) -> String {
        use std::fmt::Write as _;
        let mut hex = String::with_capacity(64);
        for byte in self.inner.fingerprint() {
            let _ = write!(hex, "{byte:02x}");
        }
        hex
    }

    fn __repr__(&self) -> String {
        match self.inner.kid() {
            Some(kid) => format!(
                "Key(algorithm={:?}, kid={kid:?}, kty={:?})",
                self.algorithm(),
                self.kty()
            ),
            None => format!(
                "Key(algorithm={:?}, kty={:?})",
                self.algorithm(),
                self.kty()
            ),
        }
    }
}

/// An immutable set of keys with the selection rule by `kid` and `alg`.
#[pyclass(frozen, module = "grelmicro_core._core", name = "KeySet")]
pub struct PyKeySet {
    pub(super) inner: Arc<CoreKeySet>,
}

#[pymethods]
impl PyKeySet {
    #[new]
    fn new(keys: Vec<PyRef<'_, PyKey>>) -> PyResult<Self> {
        let keys = keys.iter().map(|k| Arc::clone(&k.inner)).collect();
        Ok(PyKeySet {
            inner: Arc::new(CoreKeySet::new(keys)?),
        })
    }

    /// A JWKS document (JSON text). Unusable keys are skipped and listed in
    /// `skipped`; `oct` keys need `allow_symmetric=True`. An object of `kid`
    /// to PEM certificate (the X.509 form) is read too (`crate::certificates`).
    #[staticmethod]
    #[pyo3(signature = (document, *, allow_symmetric=false, max_keys=DEFAULT_MAX_KEYS))]
    fn from_jwks(
        py: Python<'_>,
        document: &Bound<'_, PyAny>,
        allow_symmetric: bool,
        max_keys: usize,
    ) -> PyResult<Self> {
        let bytes = input_bytes(document, ErrorKind::InvalidKey, "JWKS document")?;
        let set = py.detach(|| CoreKeySet::from_jwks(bytes, allow_symmetric, max_keys))?;
        Ok(PyKeySet {
            inner: Arc::new(set),
        })
    }

    /// `(kid, code, reason)` for every key that was left out: `code` is
    /// stable kebab-case (`skip_codes()`), `reason` is for people.
    #[getter]
    fn skipped(&self) -> Vec<(Option<String>, &'static str, String)> {
        self.inner
            .skipped()
            .iter()
            .map(|s| (s.kid.clone(), s.code.as_str(), s.reason.clone()))
            .collect()
    }

    #[getter]
    fn keys(&self) -> Vec<PyKey> {
        self.inner
            .keys()
            .iter()
            .map(|k| PyKey {
                inner: Arc::clone(k),
            })
            .collect()
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __repr__(&self) -> String {
        format!("KeySet(<{} keys>)", self.inner.len())
    }
}
