//! synthkit's errors as Python exceptions.

use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::{PyErr, Python};
use synthkit::SynthError;
use synthkit::error::message_with_sources;
use synthkit_frontend::request::error_kind;

use crate::{InputError, ModelError, RefusalError, SynthkitError};

/// The Python exception for `e`, with synthkit's message (and its sources' messages).
///
/// Model failures become [`ModelError`] (a refusal or a reply without text its subclass
/// [`RefusalError`]), bad input and options [`InputError`], and
/// anything else [`SynthkitError`]. When a Python LLM raised the failure, its exception is
/// the new one's `__cause__`.
pub(crate) fn to_py(e: SynthError) -> PyErr {
    let message = message_with_sources(&e);
    let err = classify(&e, message);
    if let Some(cause) = crate::pyllm::llm_exception(&e) {
        return Python::attach(|py| {
            // Ctrl-C landing while the calling thread ran a step of the call (its Python
            // plumbing runs there for a blocking caller) stays a KeyboardInterrupt.
            if cause.is_instance_of::<PyKeyboardInterrupt>(py) {
                return cause.clone_ref(py);
            }
            err.set_cause(py, Some(cause.clone_ref(py)));
            err
        });
    }
    err
}

fn classify(e: &SynthError, message: String) -> PyErr {
    match e {
        _ if error_kind(e) == "model_refused" => RefusalError::new_err(message),
        SynthError::Model { .. }
        | SynthError::Count { .. }
        | SynthError::Truncated { .. }
        | SynthError::Task { .. }
        | SynthError::StreamFailed
        | SynthError::Parse { .. }
        | SynthError::NoRoomForContext { .. } => ModelError::new_err(message),
        // The caller's options, as the library classes them, and a tree that cannot shrink
        // (the window and the output reserve leave no room).
        SynthError::TreeNotConverging { .. } => InputError::new_err(message),
        _ if error_kind(e) == "invalid_option" => InputError::new_err(message),
        _ => SynthkitError::new_err(message),
    }
}
