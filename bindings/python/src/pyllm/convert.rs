//! Between synthkit's model types and the adapter's Python values: prompts, replies,
//! streamed items, exceptions and tokenizers.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use pyo3::prelude::*;
use pyo3::types::PyList;
use synthkit::model::{Completion, FinishReason, ModelError, Usage};
use synthkit::prompt::RenderedPrompt;
use synthkit::text::tokenizer::default_tokenizer;
use synthkit::text::{BpeTokenizer, SharedTokenizer, Tokenizer};

use crate::InputError;

/// The prompt as the adapter takes it: a string, or a list of `(role, content)` pairs.
pub(crate) fn prompt_to_py<'py>(
    py: Python<'py>,
    prompt: &RenderedPrompt,
) -> PyResult<Bound<'py, PyAny>> {
    match prompt {
        RenderedPrompt::Text(t) => Ok(t.into_pyobject(py)?.into_any()),
        RenderedPrompt::Chat(messages) => {
            let pairs: Vec<(&str, &str)> = messages
                .iter()
                .map(|m| (m.role.as_str(), m.content.as_str()))
                .collect();
            Ok(PyList::new(py, pairs)?.into_any())
        }
    }
}

/// One reply or streamed item: `(text, usage, finish_reason)`.
type Parts = (String, Option<(u64, u64)>, Option<String>);

fn parts(value: &Bound<'_, PyAny>) -> Result<Parts, ModelError> {
    value.extract::<Parts>().map_err(|e| {
        ModelError::Malformed(format!(
            "the LLM adapter's reply is not (text, usage, finish_reason): {e}"
        ))
    })
}

fn usage(u: Option<(u64, u64)>) -> Option<Usage> {
    u.map(|(prompt_tokens, completion_tokens)| Usage {
        prompt_tokens,
        completion_tokens,
        ..Default::default()
    })
}

fn finish(reason: Option<String>) -> Option<FinishReason> {
    reason.map(|r| match r.as_str() {
        "stop" => FinishReason::Stop,
        "length" => FinishReason::Length,
        _ => FinishReason::Other,
    })
}

/// A finished reply.
pub(crate) fn completion(value: &Bound<'_, PyAny>) -> Result<Completion, ModelError> {
    let (text, u, reason) = parts(value)?;
    let mut c = Completion::text(text);
    if let Some(u) = usage(u) {
        c = c.with_usage(u);
    }
    if let Some(r) = finish(reason) {
        c = c.with_finish_reason(r);
    }
    Ok(c)
}

/// One streamed item: its delta, and its usage and finish reason when it has them.
pub(crate) fn item(
    value: &Bound<'_, PyAny>,
) -> Result<(String, Option<Usage>, Option<FinishReason>), ModelError> {
    let (delta, u, reason) = parts(value)?;
    Ok((delta, usage(u), finish(reason)))
}

/// An exception the LLM raised, kept whole so that the `ModelError` the caller gets has
/// it as its `__cause__`.
pub(crate) struct LlmFailure {
    /// `Type: message`, and what was done about it.
    pub message: String,
    /// The exception.
    pub error: PyErr,
}

impl LlmFailure {
    /// The failure for `error`, described as `Type: message` with `note` after it.
    pub(crate) fn new(py: Python<'_>, error: PyErr, note: &str) -> Self {
        Self {
            message: format!("{}{note}", describe(py, &error)),
            error,
        }
    }
}

impl fmt::Debug for LlmFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmFailure")
            .field("message", &self.message)
            .finish_non_exhaustive()
    }
}

impl fmt::Display for LlmFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for LlmFailure {}

/// `Type: message` (or just `Type` for an exception without a message).
pub(crate) fn describe(py: Python<'_>, error: &PyErr) -> String {
    let name = error
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".to_string());
    let text = error
        .value(py)
        .str()
        .map(|s| s.to_string())
        .unwrap_or_default();
    if text.is_empty() {
        name
    } else {
        format!("{name}: {text}")
    }
}

/// The exception behind a model error, when the LLM raised one: the first
/// [`LlmFailure`] among its sources.
pub(crate) fn llm_exception<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a PyErr> {
    let mut source = Some(e);
    while let Some(s) = source {
        if let Some(f) = s.downcast_ref::<LlmFailure>() {
            return Some(&f.error);
        }
        source = s.source();
    }
    None
}

/// The exception of the latest failed attempt of one call whose error was retryable
/// (a `retry_on` class): the retry layer passes on its own error kind, and the call's
/// scope puts the exception back as its cause.
#[derive(Clone, Default)]
pub(crate) struct LastFailure(Arc<Mutex<Option<(PyErr, String)>>>);

impl LastFailure {
    pub(crate) fn set(&self, error: PyErr, message: String) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some((error, message));
    }

    /// `e` with the recorded exception as its source, when `e` is the retryable error
    /// the exception became.
    pub(crate) fn chain(&self, e: ModelError) -> ModelError {
        if !matches!(e, ModelError::RateLimited { .. }) {
            return e;
        }
        match self.0.lock().unwrap_or_else(PoisonError::into_inner).take() {
            Some((error, message)) => ModelError::Layer {
                layer: "llm",
                source: Box::new(LlmFailure {
                    message: format!(
                        "{message} (a retry_on error: sent again within the retry limits, then given up)"
                    ),
                    error,
                }),
            },
            None => e,
        }
    }
}

/// A tokenizer from the adapter: a built-in one by name, or a Python callable
/// `str -> list` (LlamaIndex's `Settings.tokenizer`) counted as the length of its list.
pub(crate) fn tokenizer(value: &Bound<'_, PyAny>) -> PyResult<Option<SharedTokenizer>> {
    if value.is_none() {
        return Ok(None);
    }
    if let Ok(name) = value.extract::<String>() {
        return BpeTokenizer::by_name(&name)
            .map(|t| Some(t.shared()))
            .map_err(|e| InputError::new_err(e.to_string()));
    }
    if !value.is_callable() {
        return Err(InputError::new_err(
            "tokenizer must be a callable (str -> list of tokens) or a built-in tokenizer's name",
        ));
    }
    let name = value
        .getattr("__name__")
        .and_then(|n| n.extract::<String>())
        .unwrap_or_else(|_| "python".to_string());
    Ok(Some(Arc::new(PyTokenizer {
        encode: value.clone().unbind(),
        name,
        fallback: default_tokenizer(),
    })))
}

/// A Python tokenizer callable. It cannot fail here (counts are not fallible): if it
/// raises, the count is cl100k_base's. Its Debug output shows the callable as `Py(..)`
/// (an address, nothing of the callable's state).
#[derive(Debug)]
struct PyTokenizer {
    encode: Py<PyAny>,
    name: String,
    fallback: SharedTokenizer,
}

impl PyTokenizer {
    fn tokens(&self, text: &str) -> Option<Vec<u32>> {
        Python::attach(|py| {
            self.encode
                .call1(py, (text,))
                .and_then(|v| v.extract::<Vec<u32>>(py))
                .ok()
        })
    }
}

impl Tokenizer for PyTokenizer {
    fn name(&self) -> &str {
        &self.name
    }

    fn count(&self, text: &str) -> usize {
        let n = Python::attach(|py| {
            self.encode
                .call1(py, (text,))
                .and_then(|v| v.bind(py).len())
                .ok()
        });
        n.unwrap_or_else(|| self.fallback.count(text))
    }

    fn encode(&self, text: &str) -> Vec<u32> {
        self.tokens(text)
            .unwrap_or_else(|| self.fallback.encode(text))
    }

    fn decode(&self, _tokens: &[u32]) -> Option<String> {
        None
    }
}
