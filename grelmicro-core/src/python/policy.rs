//! `Policy`: the validated claim rules and limits.

use std::sync::Arc;

use pyo3::prelude::*;

use crate::policy::{
    Policy as CorePolicy, PolicyOptions, DEFAULT_MAX_DEPTH, DEFAULT_MAX_TOKEN_SIZE,
};

/// A validated verification policy.
#[pyclass(frozen, module = "grelmicro_core._core", name = "Policy")]
pub struct PyPolicy {
    pub(super) inner: Arc<CorePolicy>,
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
        })?;
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
