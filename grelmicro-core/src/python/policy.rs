//! `Policy`: the validated claim rules and limits.

use std::sync::Arc;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::policy::{Policy as CorePolicy, PolicyOptions};

/// A validated verification policy.
#[pyclass(frozen, module = "grelmicro_core._core", name = "Policy")]
pub struct PyPolicy {
    pub(super) inner: Arc<CorePolicy>,
}

#[pymethods]
impl PyPolicy {
    /// Keywords are the fields of `PolicyOptions` (its defaults fill the
    /// rest): the option list is written once, in `crate::policy`.
    #[new]
    #[pyo3(signature = (**options))]
    fn new(py: Python<'_>, options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let merged = PolicyOptions::default().into_pyobject(py)?;
        if let Some(given) = options {
            for name in given.keys() {
                if !merged.contains(&name)? {
                    return Err(PyTypeError::new_err(format!(
                        "Policy() got an unexpected keyword argument {name}"
                    )));
                }
            }
            merged.update(given.as_mapping())?;
        }
        let policy = CorePolicy::new(merged.extract::<PolicyOptions>()?)?;
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

    #[getter]
    fn leeway_ahead(&self) -> f64 {
        self.inner.leeway_ahead()
    }
}
