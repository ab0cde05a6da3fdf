//! `on_call=`: a Python object told about every model call as it starts and ends, so
//! that a front end can report calls the Python code does not make itself (the
//! LlamaIndex adapter dispatches its LLM start/end events from it on the direct HTTP
//! path, where no LlamaIndex LLM is called).
//!
//! The hook's protocol:
//! - `call_started(prompt) -> token`: `prompt` is a string (a completion prompt) or a list
//!   of `(role, content)` pairs (chat messages), as sent;
//! - `call_finished(token, reply, usage)`: `reply` is the whole reply text and `usage` a
//!   dict `{"prompt_tokens", "completion_tokens", "reported", "counted_prompt_tokens"}`
//!   (`reported`: the server counted them; else synthkit did, with the model's
//!   tokenizer; `counted_prompt_tokens`: synthkit's own count of the prompt, which its
//!   budget packed it by);
//! - `call_failed(token, message)`: the call failed, or was cancelled.
//!
//! Each method runs in a copy of the context of the caller that started the synthesis
//! (its contextvars, such as LlamaIndex's active span), with the GIL held briefly. The
//! layer sits above the model's stack, so one call is one start and one end however many
//! times the retry layer sent it. A hook that raises does not fail the call: its
//! exception is reported through `sys.unraisablehook` (printed to stderr by default).

use std::sync::Arc;

use futures::StreamExt;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use synthkit::model::{
    Completion, CompletionStream, LanguageModel, ModelError, ModelFuture, ModelLayer, ModelRequest,
    StreamEvent, Usage,
};
use synthkit::text::SharedTokenizer;
use synthkit::text::tokenizer::default_tokenizer;

use crate::InputError;
use crate::pyllm::bridge::helpers;
use crate::pyllm::convert::prompt_to_py;

/// The hook object given as `on_call=`.
#[derive(Clone)]
pub(crate) struct CallHook(Arc<Py<PyAny>>);

impl CallHook {
    /// The hook `value` stands for (`None`: no hook); it must have the three methods.
    pub(crate) fn read(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Self>> {
        let Some(value) = value.filter(|v| !v.is_none()) else {
            return Ok(None);
        };
        for method in ["call_started", "call_finished", "call_failed"] {
            if !value.getattr(method).is_ok_and(|m| m.is_callable()) {
                return Err(InputError::new_err(format!(
                    "on_call must have the methods call_started, call_finished and call_failed; {} has no {method}",
                    value.get_type().name()?
                )));
            }
        }
        Ok(Some(Self(Arc::new(value.clone().unbind()))))
    }

    /// `model` with every call reported to this hook, in a copy of `context`.
    pub(crate) fn around(
        &self,
        model: Arc<dyn LanguageModel>,
        context: Option<Arc<Py<PyAny>>>,
    ) -> Arc<dyn LanguageModel> {
        Arc::new(Reported {
            inner: model,
            hook: self.clone(),
            context,
        })
    }
}

/// A model whose calls are reported to a [`CallHook`].
struct Reported {
    inner: Arc<dyn LanguageModel>,
    hook: CallHook,
    context: Option<Arc<Py<PyAny>>>,
}

impl Reported {
    /// Tells the hook a call starts; the returned guard reports its end.
    fn start(&self, request: &ModelRequest) -> Pending {
        let token = Python::attach(|py| match prompt_to_py(py, &request.prompt) {
            Ok(prompt) => self.invoke(py, "call_started", vec![prompt]),
            Err(e) => {
                e.write_unraisable(py, None);
                None
            }
        });
        Pending {
            hook: self.hook.clone(),
            context: self.context.clone(),
            token: Some(token),
            prompt_tokens: request.prompt_tokens,
            tokenizer: self.inner.as_ref().tokenizer(),
        }
    }

    /// Tells the hook a call starts, then makes it with `call`: the guard and the call's
    /// value, or the call's error, reported as the call's end.
    async fn started<'a, T>(
        &'a self,
        request: &'a ModelRequest,
        call: impl FnOnce() -> ModelFuture<'a, T>,
    ) -> Result<(Pending, T), ModelError> {
        let mut pending = self.start(request);
        let value = call().await.map_err(|e| pending.failed_with(e))?;
        Ok((pending, value))
    }

    fn invoke(
        &self,
        py: Python<'_>,
        method: &str,
        args: Vec<Bound<'_, PyAny>>,
    ) -> Option<Py<PyAny>> {
        invoke(py, &self.hook, self.context.as_deref(), method, args)
    }
}

/// Calls `hook.method(*args)` in a copy of `context`; an exception goes to
/// `sys.unraisablehook` and gives `None`.
fn invoke(
    py: Python<'_>,
    hook: &CallHook,
    context: Option<&Py<PyAny>>,
    method: &str,
    args: Vec<Bound<'_, PyAny>>,
) -> Option<Py<PyAny>> {
    let run = || -> PyResult<Py<PyAny>> {
        let hook = hook.0.bind(py);
        let f = hook.getattr(method)?;
        let context = context.map(|c| c.bind(py).clone());
        let mut all = vec![context.into_pyobject(py)?.into_any(), f];
        all.extend(args);
        let out = helpers(py)?
            .getattr("run_in")?
            .call1(PyTuple::new(py, all)?)?;
        Ok(out.unbind())
    };
    match run() {
        Ok(v) => Some(v),
        Err(e) => {
            e.write_unraisable(py, Some(hook.0.bind(py)));
            None
        }
    }
}

/// A call the hook was told about and not yet told the end of. Dropped unfinished (the
/// call was cancelled: asyncio cancellation, Ctrl-C, a stream closed early), it reports
/// the call as failed.
struct Pending {
    hook: CallHook,
    context: Option<Arc<Py<PyAny>>>,
    /// `None` once the end was reported. The inner option: what `call_started` returned
    /// (`None` when it raised).
    token: Option<Option<Py<PyAny>>>,
    prompt_tokens: usize,
    tokenizer: Option<SharedTokenizer>,
}

impl Pending {
    /// Reports the reply `text` with `usage` (the server's) or synthkit's counts.
    fn finished(mut self, text: &str, usage: Option<Usage>) {
        let Some(token) = self.token.take() else {
            return;
        };
        let (prompt_tokens, completion_tokens, reported) = match usage {
            Some(u) => (u.prompt_tokens, u.completion_tokens, true),
            None => {
                let tokenizer = self.tokenizer.clone().unwrap_or_else(default_tokenizer);
                (
                    self.prompt_tokens as u64,
                    tokenizer.count(text) as u64,
                    false,
                )
            }
        };
        Python::attach(|py| {
            let run = || -> PyResult<Vec<Bound<'_, PyAny>>> {
                let u = PyDict::new(py);
                u.set_item("prompt_tokens", prompt_tokens)?;
                u.set_item("completion_tokens", completion_tokens)?;
                u.set_item("reported", reported)?;
                u.set_item("counted_prompt_tokens", self.prompt_tokens)?;
                Ok(vec![
                    token.into_pyobject(py)?.into_any(),
                    text.into_pyobject(py)?.into_any(),
                    u.into_any(),
                ])
            };
            match run() {
                Ok(args) => {
                    invoke(
                        py,
                        &self.hook,
                        self.context.as_deref(),
                        "call_finished",
                        args,
                    );
                }
                Err(e) => e.write_unraisable(py, None),
            }
        });
    }

    /// Reports the call as failed with `error`, and gives it back.
    fn failed_with(&mut self, error: ModelError) -> ModelError {
        self.failed(&error.to_string());
        error
    }

    /// Reports the call as failed with `message`.
    fn failed(&mut self, message: &str) {
        let Some(token) = self.token.take() else {
            return;
        };
        // At interpreter exit there is nobody left to tell.
        let _ = Python::try_attach(|py| {
            let args = match token.into_pyobject(py) {
                Ok(t) => t.into_any(),
                Err(_) => py.None().into_bound(py),
            };
            let message = pyo3::types::PyString::new(py, message).into_any();
            invoke(
                py,
                &self.hook,
                self.context.as_deref(),
                "call_failed",
                vec![args, message],
            );
        });
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.failed("the call was cancelled");
    }
}

impl ModelLayer for Reported {
    type Inner = dyn LanguageModel;

    fn inner(&self) -> &Self::Inner {
        self.inner.as_ref()
    }

    fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, Completion> {
        Box::pin(async move {
            let (pending, c) = self
                .started(request, || self.inner.as_ref().complete(request))
                .await?;
            pending.finished(&c.text, c.usage);
            Ok(c)
        })
    }

    fn stream<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, CompletionStream> {
        Box::pin(async move {
            let (pending, events) = self
                .started(request, || self.inner.as_ref().stream(request))
                .await?;
            // The reply is reported when its `Done` arrives (a failed or dropped stream
            // reports a failure); the text is kept until then, bounded by the backend's
            // reply size cap.
            let mut state = Some((pending, String::new()));
            let reported: CompletionStream = Box::pin(events.map(move |event| {
                match &event {
                    Ok(StreamEvent::Delta(d)) => {
                        if let Some((_, text)) = state.as_mut() {
                            text.push_str(d);
                        }
                    }
                    // Thinking is not the reply's text.
                    Ok(StreamEvent::Thinking(_)) => {}
                    Ok(StreamEvent::Done { usage, .. }) => {
                        if let Some((pending, text)) = state.take() {
                            pending.finished(&text, *usage);
                        }
                    }
                    Err(e) => {
                        if let Some((mut pending, _)) = state.take() {
                            pending.failed(&e.to_string());
                        }
                    }
                }
                event
            }));
            Ok(reported)
        })
    }
}
