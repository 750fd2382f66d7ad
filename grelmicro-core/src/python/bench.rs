//! Hooks for benchmarks only (cargo feature `bench-hooks`, never in a
//! released wheel): they reach a step of the verifier on its own.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use super::objects::PyBuilder;
use super::policy::PyPolicy;

/// Decodes an already-authenticated payload (JSON bytes) under `policy` at
/// `now`, exactly as `Verifier.verify` does after the signature check.
/// For benchmarks of the JSON path (feature `bench-hooks`, never in a
/// released wheel); never a way to skip a signature.
#[pyfunction]
pub(super) fn _decode_payload<'py>(
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
    let mut builder = PyBuilder::new(py, &issuers, &audiences);
    crate::claims::decode(payload.as_bytes(), &policy.inner, &mut builder, now)
        .map(|verified| verified.claims)
        .map_err(PyErr::from)
}
