//! All pyo3 glue: the `grelmicro_core._core` module.
//!
//! Errors cross in one place (`impl From<Error> for PyErr`): every core error becomes a
//! `CoreError(kind, message)` whose `context` attribute holds the error's
//! structured context as a dict (or `None`); the Python layer maps the kind
//! to its class.
//! Signature work runs detached from the interpreter (the GIL is released
//! on GIL builds); only the payload's conversion into Python objects needs
//! to be attached. Every class is frozen: rotation builds new objects.
//!
//! Submodules, one concept each: [`objects`] (JSON into Python objects),
//! [`keys`], [`policy`], [`verifier`], [`functions`] (module-level
//! functions), [`cache`] (the verified-token cache), [`front`] (a
//! verifier's `verify`, with per-thread views of the cache) and [`dpop`].

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyFloat, PyString, PyTuple};

use crate::algorithm::Algorithm;
use crate::error::{Detail, Error, ErrorKind};

#[cfg(feature = "bench-hooks")]
mod bench;
mod cache;
mod dpop;
mod front;
mod functions;
mod keys;
mod objects;
mod policy;
mod raw;
mod verifier;

create_exception!(
    _core,
    CoreError,
    PyException,
    "Raised by the core for every refusal; args are (kind, message), context is a dict or None."
);

/// The single conversion of a core error into a Python exception.
impl From<Error> for PyErr {
    fn from(err: Error) -> PyErr {
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
}

/// Borrows the bytes of a `str` or `bytes` argument.
pub(crate) fn input_bytes<'a>(
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
            .map_err(|_| PyErr::from(Error::new(kind, "text is not valid Unicode")));
    }
    Err(PyErr::from(Error::with(
        kind,
        format!("{what} must be str or bytes"),
    )))
}

pub(crate) fn parse_algorithm(name: &str) -> PyResult<Algorithm> {
    Algorithm::parse_config(name).map_err(PyErr::from)
}

#[pymodule(gil_used = false)]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("SOURCE_HASH", crate::SOURCE_HASH)?;
    m.add("PGO", crate::PGO)?;
    let core_error = py.get_type::<CoreError>();
    core_error.setattr("context", py.None())?;
    m.add("CoreError", core_error)?;
    m.add_class::<keys::PyKey>()?;
    m.add_class::<keys::PyKeySet>()?;
    m.add_class::<policy::PyPolicy>()?;
    m.add_class::<verifier::PyVerifier>()?;
    m.add_function(wrap_pyfunction!(functions::sha256_digest, m)?)?;
    m.add_function(wrap_pyfunction!(functions::unverified_header, m)?)?;
    m.add_function(wrap_pyfunction!(functions::error_kinds, m)?)?;
    m.add_function(wrap_pyfunction!(functions::algorithms, m)?)?;
    m.add_function(wrap_pyfunction!(functions::skip_codes, m)?)?;
    #[cfg(feature = "bench-hooks")]
    m.add_function(wrap_pyfunction!(bench::_decode_payload, m)?)?;
    m.add_class::<cache::PyTokenCache>()?;
    m.add_class::<front::PyVerifyCall>()?;
    m.add_function(wrap_pyfunction!(functions::unverified_issuer, m)?)?;
    m.add_class::<dpop::PyProofVerifier>()?;
    m.add_function(wrap_pyfunction!(dpop::jwk_thumbprint, m)?)?;
    m.add_function(wrap_pyfunction!(dpop::normalize_htu, m)?)?;
    Ok(())
}
