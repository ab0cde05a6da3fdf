//! synthkit's errors as Python exceptions.

use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::{PyErr, Python};
use synthkit::SynthError;

use crate::{InputError, ModelError, SynthkitError};

/// The Python exception for `e`, with synthkit's message (and its sources' messages).
///
/// Model failures become [`ModelError`], bad input and options [`InputError`], and
/// anything else [`SynthkitError`]. When a Python LLM raised the failure, its exception is
/// the new one's `__cause__`.
pub(crate) fn to_py(e: SynthError) -> PyErr {
    let message = full_message(&e);
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
        SynthError::Model { .. }
        | SynthError::Count { .. }
        | SynthError::Truncated { .. }
        | SynthError::Task { .. }
        | SynthError::StreamFailed
        | SynthError::Parse { .. } => ModelError::new_err(message),
        SynthError::Budget(_)
        | SynthError::Template(_)
        | SynthError::Split(_)
        | SynthError::Tokenizer(_)
        | SynthError::Schema(_)
        | SynthError::UnknownMode(_)
        | SynthError::TreeNotConverging { .. }
        | SynthError::InvalidOption(_)
        | SynthError::DuplicateNodeId { .. } => InputError::new_err(message),
        _ => SynthkitError::new_err(message),
    }
}

/// The error's message followed by each source's, where a source adds something.
fn full_message(e: &(dyn std::error::Error + 'static)) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = s.source();
    }
    message
}
