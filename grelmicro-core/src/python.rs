//! All pyo3 glue: the `grelmicro_core._core` module.
//!
//! Errors cross in one place ([`to_py`]): every core error becomes a
//! `CoreError(kind, message)` whose `context` attribute holds the error's
//! structured context as a dict (or `None`); the Python layer maps the kind
//! to its class.
//! Signature work runs detached from the interpreter (the GIL is released
//! on GIL builds); only the payload's conversion into Python objects needs
//! to be attached. Every class is frozen: rotation builds new objects.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use num_bigint::BigInt;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyMappingProxy, PyString, PyTuple};

use crate::algorithm::{Algorithm, Family};
use crate::cache::Cache;
use crate::error::{Detail, Error, ErrorKind};
use crate::json::{self, Builder};
use crate::keyset::{KeySet as CoreKeySet, DEFAULT_MAX_KEYS};
use crate::policy::{
    Policy as CorePolicy, PolicyOptions, DEFAULT_MAX_DEPTH, DEFAULT_MAX_TOKEN_SIZE,
};
use crate::verifier::Verifier as CoreVerifier;
use crate::{digest, dpop, header, key, peek, token};

create_exception!(
    _core,
    CoreError,
    PyException,
    "Raised by the core for every refusal; args are (kind, message), context is a dict or None."
);

/// The single conversion of a core error into a Python exception.
fn to_py(err: Error) -> PyErr {
    let py_err = CoreError::new_err((err.kind().as_str(), err.message().to_owned()));
    if err.context().is_empty() {
        return py_err;
    }
    Python::attach(|py| {
        let context = PyDict::new(py);
        for (name, detail) in err.context() {
            let value = match detail {
                Detail::Number(n) => PyFloat::new(py, *n).into_any(),
                Detail::Text(t) => PyString::new(py, t).into_any(),
                Detail::Texts(items) => match PyTuple::new(py, items) {
                    Ok(tuple) => tuple.into_any(),
                    Err(_) => continue,
                },
            };
            if context.set_item(*name, value).is_err() {
                return py_err;
            }
        }
        let _ = py_err.value(py).setattr("context", context);
        py_err
    })
}

/// Borrows the bytes of a `str` or `bytes` argument.
fn input_bytes<'a>(
    value: &'a Bound<'_, PyAny>,
    kind: ErrorKind,
    what: &'static str,
) -> PyResult<&'a [u8]> {
    if let Ok(bytes) = value.cast::<PyBytes>() {
        return Ok(bytes.as_bytes());
    }
    if let Ok(text) = value.cast::<PyString>() {
        return text
            .to_str()
            .map(str::as_bytes)
            .map_err(|_| to_py(Error::new(kind, "text is not valid Unicode")));
    }
    Err(to_py(Error::with(
        kind,
        format!("{what} must be str or bytes"),
    )))
}

fn parse_algorithm(name: &str) -> PyResult<Algorithm> {
    Algorithm::parse_config(name).map_err(to_py)
}

/// Builds Python objects; arrays become tuples and nested objects read-only
/// mapping proxies, so a verified payload shared between requests cannot be
/// changed through its values.
struct PyBuilder<'py, 'a> {
    py: Python<'py>,
    /// The configured issuers and audiences as Python strings, built once
    /// and interned (immortal on 3.12+, so threads sharing them never
    /// contend on their reference counts).
    issuers: &'a [Py<PyString>],
    audiences: &'a [Py<PyString>],
}

fn lost(_: PyErr) -> Error {
    Error::new(ErrorKind::Malformed, "could not build the decoded value")
}

impl<'py> Builder for PyBuilder<'py, '_> {
    type Value = Bound<'py, PyAny>;
    type Key = Bound<'py, PyString>;
    type Object = Bound<'py, PyDict>;

    fn null(&mut self) -> BuildResult<Self::Value> {
        Ok(self.py.None().into_bound(self.py))
    }
    fn boolean(&mut self, value: bool) -> BuildResult<Self::Value> {
        Ok(PyBool::new(self.py, value).to_owned().into_any())
    }
    fn int(&mut self, value: i64) -> BuildResult<Self::Value> {
        Ok(value
            .into_pyobject(self.py)
            .map_err(|e| match e {})?
            .into_any())
    }
    fn big_int(&mut self, value: &BigInt) -> BuildResult<Self::Value> {
        Ok(value.into_pyobject(self.py).map_err(lost)?.into_any())
    }
    fn float(&mut self, value: f64) -> BuildResult<Self::Value> {
        Ok(PyFloat::new(self.py, value).into_any())
    }
    fn string(&mut self, value: &str) -> BuildResult<Self::Value> {
        Ok(PyString::new(self.py, value).into_any())
    }
    fn array(&mut self, items: Vec<Self::Value>) -> BuildResult<Self::Value> {
        Ok(PyTuple::new(self.py, items).map_err(lost)?.into_any())
    }
    fn key(&mut self, name: &str) -> BuildResult<Self::Key> {
        Ok(claim_name(self.py, name))
    }
    fn known(&mut self, issuer: bool, index: usize, text: &str) -> BuildResult<Self::Value> {
        let list = if issuer { self.issuers } else { self.audiences };
        match list.get(index) {
            Some(shared) => Ok(shared.bind(self.py).clone().into_any()),
            None => self.string(text),
        }
    }
    fn object(&mut self) -> BuildResult<Self::Object> {
        Ok(PyDict::new(self.py))
    }
    fn insert(
        &mut self,
        object: &mut Self::Object,
        key: Self::Key,
        value: Self::Value,
    ) -> BuildResult<bool> {
        let before = object.len();
        object.set_item(key, value).map_err(lost)?;
        Ok(object.len() > before)
    }
    fn finish_object(&mut self, object: Self::Object) -> BuildResult<Self::Value> {
        Ok(PyMappingProxy::new(self.py, object.as_mapping()).into_any())
    }
    fn finish_root(&mut self, object: Self::Object) -> BuildResult<Self::Value> {
        Ok(object.into_any())
    }
}

#[allow(non_camel_case_types)]
type BuildResult<T> = crate::error::Result<T>;

/// Claim names repeat from token to token. The common ones are interned
/// once per process (a match and a reference count instead of a new string,
/// and their hash is already known to the dict); others go through jiter's
/// string cache. Measured on the canonical token under callgrind: the
/// static table saves ~1,000 instructions per verification over the cache.
fn claim_name<'py>(py: Python<'py>, name: &str) -> Bound<'py, PyString> {
    macro_rules! table {
        ($($name:literal),* $(,)?) => {
            match name {
                $($name => pyo3::intern!(py, $name).clone(),)*
                _ => jiter::cached_py_string(py, name),
            }
        };
    }
    table!(
        "iss",
        "sub",
        "aud",
        "exp",
        "nbf",
        "iat",
        "jti",
        "scope",
        "scp",
        "azp",
        "client_id",
        "email",
        "email_verified",
        "name",
        "given_name",
        "family_name",
        "preferred_username",
        "roles",
        "groups",
        "permissions",
        "sid",
        "auth_time",
        "nonce",
        "acr",
        "amr",
        "at_hash",
        "typ",
        "tid",
        "oid",
        "org_id",
        "ver",
        "cnf",
        "act",
        "may_act",
        "entitlements",
        "locale",
        "zoneinfo",
        "picture",
        "updated_at",
    )
}

/// A verification key bound to one algorithm.
#[pyclass(frozen, module = "grelmicro_core._core", name = "Key")]
pub struct PyKey {
    inner: Arc<key::Key>,
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
        let bytes = input_bytes(secret, ErrorKind::InvalidKey, "secret")?;
        let built = py
            .detach(|| key::Key::secret(bytes, alg, kid))
            .map_err(to_py)?;
        Ok(PyKey {
            inner: Arc::new(built),
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
        let bytes = input_bytes(data, ErrorKind::InvalidKey, "PEM data")?;
        let built = py
            .detach(|| key::Key::pem(bytes, alg, kid))
            .map_err(to_py)?;
        Ok(PyKey {
            inner: Arc::new(built),
        })
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
        let bytes = input_bytes(document, ErrorKind::InvalidKey, "JWK document")?;
        let built = py
            .detach(|| key::Key::jwk_json(bytes, alg, allow_symmetric))
            .map_err(to_py)?;
        Ok(PyKey {
            inner: Arc::new(built),
        })
    }

    #[getter]
    fn algorithm(&self) -> &'static str {
        self.inner.algorithm().name()
    }

    #[getter]
    fn kid(&self) -> Option<&str> {
        self.inner.kid()
    }

    #[getter]
    fn kty(&self) -> &'static str {
        self.inner.kty()
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
    inner: Arc<CoreKeySet>,
}

#[pymethods]
impl PyKeySet {
    #[new]
    fn new(keys: Vec<PyRef<'_, PyKey>>) -> PyResult<Self> {
        let keys = keys.iter().map(|k| Arc::clone(&k.inner)).collect();
        Ok(PyKeySet {
            inner: Arc::new(CoreKeySet::new(keys).map_err(to_py)?),
        })
    }

    /// A JWKS document (JSON text). Unusable keys are skipped and listed in
    /// `skipped`; `oct` keys need `allow_symmetric=True`.
    #[staticmethod]
    #[pyo3(signature = (document, *, allow_symmetric=false, max_keys=DEFAULT_MAX_KEYS))]
    fn from_jwks(
        py: Python<'_>,
        document: &Bound<'_, PyAny>,
        allow_symmetric: bool,
        max_keys: usize,
    ) -> PyResult<Self> {
        let bytes = input_bytes(document, ErrorKind::InvalidKey, "JWKS document")?;
        let set = py
            .detach(|| CoreKeySet::from_jwks(bytes, allow_symmetric, max_keys))
            .map_err(to_py)?;
        Ok(PyKeySet {
            inner: Arc::new(set),
        })
    }

    /// `(kid, reason)` for every key of a JWKS that was left out.
    #[getter]
    fn skipped(&self) -> Vec<(Option<String>, String)> {
        self.inner
            .skipped()
            .iter()
            .map(|s| (s.kid.clone(), s.reason.clone()))
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

/// A validated verification policy.
#[pyclass(frozen, module = "grelmicro_core._core", name = "Policy")]
pub struct PyPolicy {
    inner: Arc<CorePolicy>,
}

#[pymethods]
impl PyPolicy {
    #[new]
    #[pyo3(signature = (
        *,
        audience=Vec::new(),
        issuer=Vec::new(),
        algorithms=None,
        leeway=0.0,
        required=vec!["exp".to_owned()],
        typ=None,
        max_age=None,
        max_token_size=DEFAULT_MAX_TOKEN_SIZE,
        max_depth=DEFAULT_MAX_DEPTH,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        audience: Vec<String>,
        issuer: Vec<String>,
        algorithms: Option<Vec<String>>,
        leeway: f64,
        required: Vec<String>,
        typ: Option<String>,
        max_age: Option<f64>,
        max_token_size: usize,
        max_depth: usize,
    ) -> PyResult<Self> {
        let policy = CorePolicy::new(PolicyOptions {
            audiences: audience,
            issuers: issuer,
            algorithms,
            leeway,
            required,
            typ,
            max_age,
            max_token_size,
            max_depth,
        })
        .map_err(to_py)?;
        Ok(PyPolicy {
            inner: Arc::new(policy),
        })
    }

    #[getter]
    fn max_token_size(&self) -> usize {
        self.inner.max_token_size()
    }

    #[getter]
    fn leeway(&self) -> f64 {
        self.inner.leeway()
    }
}

/// Keys plus policy; `verify(token, now)` does the whole check in one call.
#[pyclass(frozen, module = "grelmicro_core._core", name = "Verifier")]
pub struct PyVerifier {
    inner: CoreVerifier,
    issuers: Vec<Py<PyString>>,
    audiences: Vec<Py<PyString>>,
    /// Signature checks cheap enough that releasing the GIL costs more than
    /// it frees (HMAC over small tokens) run attached.
    detach_from: usize,
}

/// Tokens at least this long are verified detached even under HMAC.
const HMAC_DETACH_BYTES: usize = 2048;

#[pymethods]
impl PyVerifier {
    #[new]
    fn new(py: Python<'_>, keys: &PyKeySet, policy: &PyPolicy) -> PyResult<Self> {
        let inner =
            CoreVerifier::new(Arc::clone(&keys.inner), Arc::clone(&policy.inner)).map_err(to_py)?;
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
        })
    }

    /// Verifies `token` at time `now` (seconds since the epoch) and returns
    /// the payload as a dict (arrays as tuples, nested objects read-only).
    fn verify<'py>(
        &self,
        py: Python<'py>,
        token: &Bound<'py, PyAny>,
        now: f64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let bytes = input_bytes(token, ErrorKind::Malformed, "token")?;
        let payload = if bytes.len() >= self.detach_from {
            py.detach(|| self.inner.authenticate(bytes))
        } else {
            self.inner.authenticate(bytes)
        }
        .map_err(|err| to_py(token::explain(bytes, err)))?;
        let mut builder = PyBuilder {
            py,
            issuers: &self.issuers,
            audiences: &self.audiences,
        };
        // The top level stays a plain dict: the Python layer keeps it private.
        let claims = self
            .inner
            .claims(&payload, &mut builder, now)
            .map_err(to_py)?;
        claims.cast_into::<PyDict>().map_err(|_| {
            to_py(Error::new(
                ErrorKind::Malformed,
                "payload is not a JSON object",
            ))
        })
    }

    /// Algorithms this verifier accepts.
    #[getter]
    fn algorithms(&self) -> Vec<&'static str> {
        Algorithm::ALL
            .iter()
            .filter(|a| self.inner.allows(**a))
            .map(|a| a.name())
            .collect()
    }

    fn __repr__(&self) -> String {
        format!("Verifier(algorithms={:?})", self.algorithms())
    }
}

/// The raw 32-byte SHA-256 digest of `data` (str is hashed as UTF-8).
#[pyfunction]
fn sha256_digest<'py>(py: Python<'py>, data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let bytes = input_bytes(data, ErrorKind::Malformed, "data")?;
    Ok(PyBytes::new(py, &digest::sha256(bytes)))
}

/// The cache key of a token: its SHA-256 digest, after the same size cap
/// the verifier applies (a huge token is refused before it is hashed).
#[pyfunction]
fn _cache_key<'py>(
    py: Python<'py>,
    token: &Bound<'py, PyAny>,
    max_token_size: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    let bytes = input_bytes(token, ErrorKind::Malformed, "token")?;
    if bytes.len() > max_token_size {
        return Err(to_py(token::too_large(bytes.len(), max_token_size)));
    }
    Ok(PyBytes::new(py, &digest::sha256(bytes)))
}

/// The decoded header of a token, WITHOUT any verification (diagnostics only).
#[pyfunction]
#[pyo3(signature = (token, *, max_token_size=DEFAULT_MAX_TOKEN_SIZE))]
fn unverified_header<'py>(
    py: Python<'py>,
    token: &Bound<'py, PyAny>,
    max_token_size: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let bytes = input_bytes(token, ErrorKind::Malformed, "token")?;
    let explain = |err| to_py(token::explain(bytes, err));
    let segments = token::split(bytes, max_token_size).map_err(explain)?;
    let decoded = token::decode(segments.header).map_err(explain)?;
    // Validate like the verifier would, then build the full mapping.
    header::parse(&decoded, DEFAULT_MAX_DEPTH).map_err(to_py)?;
    let mut builder = PyBuilder {
        py,
        issuers: &[],
        audiences: &[],
    };
    json::document(&decoded, &mut builder, DEFAULT_MAX_DEPTH)
        .map_err(to_py)?
        .call_method0("copy")
}

/// The unverified `iss` of a token (`None` when absent or not a string),
/// read as strictly as a verification reads; for routing among issuers only.
#[pyfunction]
#[pyo3(signature = (token, max_token_size=DEFAULT_MAX_TOKEN_SIZE))]
fn unverified_issuer(token: &Bound<'_, PyAny>, max_token_size: usize) -> PyResult<Option<String>> {
    let bytes = input_bytes(token, ErrorKind::Malformed, "token")?;
    peek::unverified_issuer(bytes, max_token_size, DEFAULT_MAX_DEPTH).map_err(to_py)
}

/// Decodes an already-authenticated payload (JSON bytes) under `policy` at
/// `now`, exactly as `Verifier.verify` does after the signature check.
/// For benchmarks and tests of the JSON path; never a way to skip a signature.
#[pyfunction]
fn _decode_payload<'py>(
    py: Python<'py>,
    payload: &Bound<'py, PyBytes>,
    policy: &PyPolicy,
    now: f64,
) -> PyResult<Bound<'py, PyAny>> {
    let shared = |names: &[String]| -> Vec<Py<PyString>> {
        names
            .iter()
            .map(|n| PyString::intern(py, n).unbind())
            .collect()
    };
    let issuers = shared(policy.inner.issuers());
    let audiences = shared(policy.inner.audiences());
    let mut builder = PyBuilder {
        py,
        issuers: &issuers,
        audiences: &audiences,
    };
    crate::claims::decode(payload.as_bytes(), &policy.inner, &mut builder, now).map_err(to_py)
}

/// Every error kind the core can raise, in a stable order.
#[pyfunction]
fn error_kinds() -> Vec<&'static str> {
    ErrorKind::ALL
        .iter()
        .map(|k| k.as_str())
        .chain(dpop::KINDS)
        .collect()
}

/// Every algorithm name the core knows.
#[pyfunction]
fn algorithms() -> Vec<&'static str> {
    Algorithm::ALL.iter().map(|a| a.name()).collect()
}

// --- DPoP proofs (RFC 9449) -------------------------------------------------

/// A refused DPoP proof crosses as `CoreError("dpop-proof" | "dpop-binding",
/// message)` with `context = {"check": <the rule it broke>}`.
fn dpop_to_py(refusal: dpop::Refusal) -> PyErr {
    let py_err = CoreError::new_err((refusal.kind(), refusal.message().to_owned()));
    Python::attach(|py| {
        let context = PyDict::new(py);
        if context.set_item("check", refusal.check.as_str()).is_ok() {
            let _ = py_err.value(py).setattr("context", context);
        }
        py_err
    })
}

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
        })
        .map_err(to_py)?;
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
            .map_err(dpop_to_py)?;
        Ok((
            PyBytes::new(py, &accepted.replay_key),
            accepted.iat,
            accepted.nonce,
        ))
    }

    /// Algorithms proofs may be signed with.
    #[getter]
    fn algorithms(&self) -> Vec<&'static str> {
        Algorithm::ALL
            .iter()
            .filter(|a| self.inner.allows(**a))
            .map(|a| a.name())
            .collect()
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
fn jwk_thumbprint(py: Python<'_>, document: &Bound<'_, PyAny>) -> PyResult<String> {
    let bytes = input_bytes(document, ErrorKind::InvalidKey, "JWK document")?;
    py.detach(|| {
        let value = json::Value::parse(bytes, 16)
            .map_err(|_| Error::new(ErrorKind::InvalidKey, "JWK is not valid JSON"))?;
        key::Key::jwk(&value, None, false)?;
        dpop::thumbprint(&value)
    })
    .map_err(to_py)
}

/// A URI as RFC 9449 §4.3 compares `htu`, or `None` if it is not an
/// absolute http(s) URI.
#[pyfunction]
fn normalize_htu(uri: &str) -> Option<String> {
    dpop::normalize_htu(uri)
}

/// The verified-token cache (`cache.rs`), keyed by the token's SHA-256
/// digest or by the token itself. `verify(token, now)` is the whole request
/// in one call: a hit returns the stored claims; a miss calls the engine's
/// `verify(token, now)` and the claims type, stores the result until its
/// deadline and returns it, with the key computed once.
#[pyclass(frozen, module = "grelmicro_core._core", name = "TokenCache")]
pub struct PyTokenCache {
    inner: Arc<Cache<Py<PyAny>>>,
    /// False for `max_size=0`: `verify` only verifies.
    enabled: bool,
    digest_key: bool,
    max_token_size: usize,
    ttl: f64,
    max_age: Option<f64>,
    /// `(engine.verify, claims type)`, when built for `verify`.
    paths: Option<(Py<PyAny>, Py<PyAny>)>,
    /// The engine when it is this module's `Verifier`: called directly.
    core: Option<Py<PyVerifier>>,
    /// Called by `verify` for the time when none is given (the caller's
    /// clock, `time.time` by default: the core itself reads no clock).
    clock: Option<Py<PyAny>>,
    /// `[hits, misses]` when counting was asked for.
    counts: Option<Arc<[AtomicU64; 2]>>,
}

/// The core `Verifier` behind a bound `verify` method, if that is what it is.
fn core_of(verify: &Bound<'_, PyAny>) -> Option<Py<PyVerifier>> {
    let engine = verify.getattr("__self__").ok()?;
    engine.cast_into::<PyVerifier>().ok().map(Bound::unbind)
}

impl PyTokenCache {
    /// The engine's `verify(token, now)`: the core's own verifier directly,
    /// anything else (the network key router) through Python.
    fn engine_verify<'py>(
        &self,
        verify: &Py<PyAny>,
        token: &Bound<'py, PyAny>,
        now: f64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = token.py();
        match &self.core {
            Some(core) => Ok(core.get().verify(py, token, now)?.into_any()),
            None => verify.bind(py).call1((token, now)),
        }
    }

    /// Runs `f` on the cache key of `token`, after the verifier's size cap.
    fn with_key<R>(&self, token: &Bound<'_, PyAny>, f: impl FnOnce(&[u8]) -> R) -> PyResult<R> {
        let bytes = input_bytes(token, ErrorKind::Malformed, "token")?;
        if bytes.len() > self.max_token_size {
            return Err(to_py(token::too_large(bytes.len(), self.max_token_size)));
        }
        Ok(if self.digest_key {
            f(&digest::sha256(bytes))
        } else {
            f(bytes)
        })
    }

    fn count(&self, miss: bool) {
        if let Some(counts) = &self.counts {
            counts[usize::from(miss)].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// When verified claims stop being served: the earliest of `exp`,
    /// `now + ttl` and `iat + max_age`; None (never stored) without a
    /// numeric `exp` (or `iat` under `max_age`) or once already passed.
    fn deadline(&self, payload: &Bound<'_, PyAny>, now: f64) -> PyResult<Option<f64>> {
        let Ok(payload) = payload.cast::<PyDict>() else {
            return Ok(None);
        };
        let Some(exp) = claim_time(payload, "exp")? else {
            return Ok(None);
        };
        let mut deadline = exp.min(now + self.ttl);
        if let Some(max_age) = self.max_age {
            let Some(iat) = claim_time(payload, "iat")? else {
                return Ok(None);
            };
            deadline = deadline.min(iat + max_age);
        }
        Ok((deadline > now).then_some(deadline))
    }
}

/// A time claim as a float: exactly an int or a float (never a bool); an int
/// too large for a float is +/- infinity.
fn claim_time(payload: &Bound<'_, PyDict>, name: &str) -> PyResult<Option<f64>> {
    let Some(value) = payload.get_item(name)? else {
        return Ok(None);
    };
    if value.is_exact_instance_of::<PyFloat>() {
        return value.extract().map(Some);
    }
    if !value.is_exact_instance_of::<PyInt>() {
        return Ok(None);
    }
    Ok(Some(value.extract::<f64>().unwrap_or_else(|_| {
        if value.lt(0).unwrap_or(false) {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        }
    })))
}

#[pymethods]
impl PyTokenCache {
    #[new]
    #[pyo3(signature = (
        max_size, *, digest_key, max_token_size, ttl, max_age=None, verify=None, claims=None,
        clock=None, count=false
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        max_size: usize,
        digest_key: bool,
        max_token_size: usize,
        ttl: f64,
        max_age: Option<f64>,
        verify: Option<Py<PyAny>>,
        claims: Option<Py<PyAny>>,
        clock: Option<Py<PyAny>>,
        count: bool,
    ) -> Self {
        PyTokenCache {
            inner: Arc::new(Cache::new(max_size)),
            enabled: max_size > 0,
            digest_key,
            max_token_size,
            ttl,
            max_age,
            core: verify.as_ref().and_then(|v| core_of(v.bind(py))),
            paths: verify.zip(claims),
            clock,
            counts: count.then(|| Arc::new([AtomicU64::new(0), AtomicU64::new(0)])),
        }
    }

    /// A cache sharing this one's entries and counts, whose misses call
    /// `verify` (keys were added: everything cached stays valid).
    fn rebind(&self, py: Python<'_>, verify: Py<PyAny>) -> Self {
        let core = core_of(verify.bind(py));
        PyTokenCache {
            inner: Arc::clone(&self.inner),
            enabled: self.enabled,
            digest_key: self.digest_key,
            max_token_size: self.max_token_size,
            ttl: self.ttl,
            max_age: self.max_age,
            paths: self
                .paths
                .as_ref()
                .map(|(_, claims)| (verify, claims.clone_ref(py))),
            core,
            clock: self.clock.as_ref().map(|c| c.clone_ref(py)),
            counts: self.counts.clone(),
        }
    }

    /// The claims for `token` at `now`: from the cache, else verified by the
    /// engine (its errors propagate; nothing is stored then) and stored.
    /// With `max_size=0` nothing is cached: `claims(verify(token, now))`.
    /// Without `now`, the time comes from `clock()`.
    #[pyo3(signature = (token, now=None))]
    fn verify(
        &self,
        py: Python<'_>,
        token: &Bound<'_, PyAny>,
        now: Option<f64>,
    ) -> PyResult<Py<PyAny>> {
        let Some((verify, claims_type)) = &self.paths else {
            return Err(PyTypeError::new_err(
                "TokenCache built without verify= and claims=",
            ));
        };
        let now = match (now, &self.clock) {
            (Some(now), _) => now,
            (None, Some(clock)) => clock.bind(py).call0()?.extract()?,
            (None, None) => return Err(PyTypeError::new_err("no now= and no clock")),
        };
        if !self.enabled {
            let payload = self.engine_verify(verify, token, now)?;
            return Ok(claims_type.bind(py).call1((payload,))?.unbind());
        }
        let bytes = input_bytes(token, ErrorKind::Malformed, "token")?;
        if bytes.len() > self.max_token_size {
            return Err(to_py(token::too_large(bytes.len(), self.max_token_size)));
        }
        let digest;
        let key: &[u8] = if self.digest_key {
            digest = digest::sha256(bytes);
            &digest
        } else {
            bytes
        };
        if let Some(hit) = self.inner.get(key, now, |v| v.clone_ref(py)) {
            self.count(false);
            return Ok(hit);
        }
        self.count(true);
        let payload = self.engine_verify(verify, token, now)?;
        let claims = claims_type.bind(py).call1((&payload,))?;
        if let Some(deadline) = self.deadline(&payload, now)? {
            // What left the cache is dropped here, after the lock is released.
            drop(
                self.inner
                    .insert(key, claims.clone().unbind(), deadline, now),
            );
        }
        Ok(claims.unbind())
    }

    /// The value stored for `token` if `stored_at <= now < deadline`, else
    /// None. A token that is not str/bytes or is over the size cap raises.
    fn get(
        &self,
        py: Python<'_>,
        token: &Bound<'_, PyAny>,
        now: f64,
    ) -> PyResult<Option<Py<PyAny>>> {
        self.with_key(token, |key| self.inner.get(key, now, |v| v.clone_ref(py)))
    }

    /// Remembers `value`, verified from `payload`, for `token` until the
    /// payload's deadline (see `verify`).
    fn store(
        &self,
        token: &Bound<'_, PyAny>,
        value: Py<PyAny>,
        payload: &Bound<'_, PyAny>,
        now: f64,
    ) -> PyResult<()> {
        let Some(deadline) = self.deadline(payload, now)? else {
            return Ok(());
        };
        drop(self.with_key(token, |key| self.inner.insert(key, value, deadline, now))?);
        Ok(())
    }

    /// Drops every entry.
    fn clear(&self) {
        drop(self.inner.clear());
    }

    /// `(hits, misses)` of `verify` when built with `count=True`, else None.
    #[getter]
    fn counts(&self) -> Option<(u64, u64)> {
        self.counts
            .as_ref()
            .map(|c| (c[0].load(Ordering::Relaxed), c[1].load(Ordering::Relaxed)))
    }

    /// For tests: `(deadline, value, stored_at)` stored for `token`, or None.
    fn _entry(
        &self,
        py: Python<'_>,
        token: &Bound<'_, PyAny>,
    ) -> PyResult<Option<(f64, Py<PyAny>, f64)>> {
        self.with_key(token, |key| {
            self.inner.entry(key, |v, deadline, stored_at| {
                (deadline, v.clone_ref(py), stored_at)
            })
        })
    }

    /// For tests: the stored keys (digests, or token bytes), oldest first.
    fn _keys<'py>(&self, py: Python<'py>) -> Vec<Bound<'py, PyBytes>> {
        self.inner
            .keys()
            .iter()
            .map(|k| PyBytes::new(py, k))
            .collect()
    }

    /// Length of the insertion order (bounded like the entries).
    #[getter]
    fn order_length(&self) -> usize {
        self.inner.order_len()
    }

    /// The bound on the number of entries.
    #[getter]
    fn max_size(&self) -> usize {
        self.inner.max_size()
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }
}

#[pymodule(gil_used = false)]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("SOURCE_HASH", crate::SOURCE_HASH)?;
    let core_error = py.get_type::<CoreError>();
    core_error.setattr("context", py.None())?;
    m.add("CoreError", core_error)?;
    m.add_class::<PyKey>()?;
    m.add_class::<PyKeySet>()?;
    m.add_class::<PyPolicy>()?;
    m.add_class::<PyVerifier>()?;
    m.add_function(wrap_pyfunction!(sha256_digest, m)?)?;
    m.add_function(wrap_pyfunction!(unverified_header, m)?)?;
    m.add_function(wrap_pyfunction!(error_kinds, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms, m)?)?;
    m.add_function(wrap_pyfunction!(_decode_payload, m)?)?;
    m.add_function(wrap_pyfunction!(_cache_key, m)?)?;
    m.add_class::<PyTokenCache>()?;
    m.add_function(wrap_pyfunction!(unverified_issuer, m)?)?;
    m.add_class::<PyProofVerifier>()?;
    m.add_function(wrap_pyfunction!(jwk_thumbprint, m)?)?;
    m.add_function(wrap_pyfunction!(normalize_htu, m)?)?;
    Ok(())
}
