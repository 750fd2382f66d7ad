//! Module-level functions: digests, unverified reads, the kind and algorithm lists.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::input_bytes;
use super::objects::PyBuilder;
use crate::algorithm::Algorithm;
use crate::error::ErrorKind;
use crate::keyset::SkipCode;
use crate::policy::{DEFAULT_MAX_DEPTH, DEFAULT_MAX_TOKEN_SIZE};
use crate::{digest, header, json, peek, token};

/// The raw 32-byte SHA-256 digest of `data` (str is hashed as UTF-8).
#[pyfunction]
pub(super) fn sha256_digest<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let bytes = input_bytes(data, ErrorKind::Malformed, "data")?;
    Ok(PyBytes::new(py, &digest::sha256(bytes)))
}

/// The decoded header of a token, WITHOUT any verification (diagnostics only).
#[pyfunction]
#[pyo3(signature = (token, *, max_token_size=DEFAULT_MAX_TOKEN_SIZE))]
pub(super) fn unverified_header<'py>(
    py: Python<'py>,
    token: &Bound<'py, PyAny>,
    max_token_size: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let bytes = input_bytes(token, ErrorKind::Malformed, "token")?;
    let explain = |err| PyErr::from(token::explain(bytes, err));
    let segments = token::split(bytes, max_token_size).map_err(explain)?;
    let decoded = token::decode(segments.header).map_err(explain)?;
    // Validate like the verifier would, then build the full mapping.
    header::parse(&decoded, DEFAULT_MAX_DEPTH)?;
    let mut builder = PyBuilder::new(py, &[], &[]);
    json::document(&decoded, &mut builder, DEFAULT_MAX_DEPTH)?.call_method0("copy")
}

/// The unverified `iss` of a token (`None` when absent or not a string),
/// read as strictly as a verification reads; for routing among issuers only.
#[pyfunction]
#[pyo3(signature = (token, max_token_size=DEFAULT_MAX_TOKEN_SIZE))]
pub(super) fn unverified_issuer(
    token: &Bound<'_, PyAny>,
    max_token_size: usize,
) -> PyResult<Option<String>> {
    let bytes = input_bytes(token, ErrorKind::Malformed, "token")?;
    peek::unverified_issuer(bytes, max_token_size, DEFAULT_MAX_DEPTH).map_err(PyErr::from)
}

/// Every error kind the core can raise, in a stable order.
#[pyfunction]
pub(super) fn error_kinds() -> Vec<&'static str> {
    ErrorKind::ALL.iter().map(|k| k.as_str()).collect()
}

/// Every code a key set names a skipped key with, in a stable order.
#[pyfunction]
pub(super) fn skip_codes() -> Vec<&'static str> {
    SkipCode::ALL.iter().map(|c| c.as_str()).collect()
}

/// Every algorithm name the core knows.
#[pyfunction]
pub(super) fn algorithms() -> Vec<&'static str> {
    Algorithm::ALL.iter().map(|a| a.name()).collect()
}
