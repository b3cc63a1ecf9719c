//! `strata._strata`, the extension module of the `strata` Python package: the engine
//! ([`db`]), the simulator and the policy registry ([`sim`]), and policies written in Python
//! ([`policy`]). The package's `__init__.py`
//! re-exports it; `strata/_strata.pyi` types it.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyString};

mod db;
mod policy;
mod sim;

create_exception!(
    strata,
    Error,
    PyException,
    "An error of the engine, the simulator or a policy, carrying its message."
);

/// The engine's error as a Python `strata.Error`.
pub(crate) fn engine_error(e: strata_engine::Error) -> PyErr {
    Error::new_err(e.to_string())
}

/// Any error with a message as a Python `strata.Error`.
pub(crate) fn error(message: impl std::fmt::Display) -> PyErr {
    Error::new_err(message.to_string())
}

/// The bytes of a key or value: `bytes`, `bytearray` or `str` (as UTF-8).
pub(crate) fn bytes_of(value: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(b) = value.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(b) = value.cast::<PyByteArray>() {
        return Ok(b.to_vec());
    }
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(s.to_cow()?.as_bytes().to_vec());
    }
    Err(pyo3::exceptions::PyTypeError::new_err(format!(
        "keys and values are bytes, bytearray or str, not {}",
        value.get_type().name()?
    )))
}

/// A JSON value (what the engine's and simulator's reports serialize to) as Python objects.
pub(crate) fn to_python(py: Python<'_>, value: &serde_json::Value) -> PyResult<Py<PyAny>> {
    let text = serde_json::to_string(value).map_err(error)?;
    let loads = py.import("json")?.getattr("loads")?;
    Ok(loads.call1((text,))?.unbind())
}

#[pymodule]
fn _strata(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("Error", m.py().get_type::<Error>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    db::register(m)?;
    policy::register(m)?;
    sim::register(m)?;
    Ok(())
}
