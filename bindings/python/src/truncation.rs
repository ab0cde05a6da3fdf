//! `on_truncation=`: what a model reply cut at the output limit does, and the warnings it
//! gives.

use pyo3::prelude::*;

use crate::InputError;

/// `on_truncation=`: what a model reply cut at the output limit (`num_output`) does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TruncationPolicy {
    /// Keep the answer and warn (`synthkit_rs.TruncationWarning`): the default.
    Warn,
    /// Fail the synthesis with `synthkit_rs.ModelError`.
    Error,
    /// Keep the answer silently (`usage["truncated_calls"]` still counts).
    Ignore,
}

impl TruncationPolicy {
    pub(crate) fn parse(name: &str) -> PyResult<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "warn" => Ok(Self::Warn),
            "error" => Ok(Self::Error),
            "ignore" => Ok(Self::Ignore),
            _ => Err(InputError::new_err(format!(
                "on_truncation must be \"warn\", \"error\" or \"ignore\", got `{name}`"
            ))),
        }
    }

    /// The library's policy (the library keeps a cut reply unless told to fail).
    pub(crate) fn library(self) -> synthkit::OnTruncation {
        match self {
            Self::Error => synthkit::OnTruncation::Error,
            Self::Warn | Self::Ignore => synthkit::OnTruncation::Warn,
        }
    }

    /// Warns (`synthkit_rs.TruncationWarning`) when `response` holds replies cut at the
    /// output limit and the policy says to.
    pub(crate) fn check(self, py: Python<'_>, response: &synthkit::Response) -> PyResult<()> {
        let cut = response.usage.truncated_calls;
        if self != Self::Warn || cut == 0 {
            return Ok(());
        }
        let message = format!(
            "{cut} model repl{} cut at the output limit (num_output): the answer may be incomplete; raise num_output, or pass on_truncation=\"error\" to fail instead (\"ignore\" to keep quiet)",
            if cut == 1 { "y was" } else { "ies were" }
        );
        Self::warn(py, message)
    }

    /// Warns once for a batch (`synthesize_many`) where `cut` of its `total` results
    /// hold replies cut at the output limit, when the policy says to.
    pub(crate) fn check_many(self, py: Python<'_>, cut: usize, total: usize) -> PyResult<()> {
        if self != Self::Warn || cut == 0 {
            return Ok(());
        }
        let message = format!(
            "{cut} of {total} results hold model replies cut at the output limit (num_output): their answers may be incomplete (Response.truncation says which); raise num_output, or pass on_truncation=\"error\" to have them fail instead (\"ignore\" to keep quiet)"
        );
        Self::warn(py, message)
    }

    fn warn(py: Python<'_>, message: String) -> PyResult<()> {
        let category = py.get_type::<crate::TruncationWarning>();
        let message = std::ffi::CString::new(message).unwrap_or_default();
        PyErr::warn(py, &category, &message, 1)
    }
}
