//! A model implemented over a Python object: `Synthesizer(llm=...)` with a LlamaIndex LLM
//! or any callable.
//!
//! The Python side (`synthkit_rs._llm`) turns the object into an *adapter* with `call`
//! (blocking) and `acall` (a coroutine); [`PyLlm`] calls it and sits at the bottom of the
//! same [`ModelStack`] as the HTTP backend, so concurrency limits, retries and everything
//! above them apply to it. Where a call runs depends on its caller ([`bridge::Caller`]):
//! from asyncio, `acall` on the caller's event loop; from a blocking call, `call` on a
//! worker thread. In both, the Rust side waits without the GIL.
//!
//! An exception the LLM raises becomes a [`ModelError::Layer`] carrying it (the Python
//! `ModelError` gets it as `__cause__`); one of the `retry_on` classes becomes
//! [`ModelError::RateLimited`], which the stack's retry layer sends again within its
//! limits (there is no retry loop here).

use std::sync::Arc;

use futures::stream;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use synthkit::layer::sharing::Sharing;
use synthkit::model::{
    Completion, CompletionStream, FinishReason, LanguageModel, ModelError, ModelFuture, ModelInfo,
    ModelRequest, StreamEvent, Usage,
};
use synthkit::prompt::RenderedPrompt;
use synthkit::text::SharedTokenizer;
use synthkit_frontend::ModelSetup;

use crate::backend::Backend;
use crate::{InputError, block_on};

pub(crate) mod bridge;
pub(crate) mod convert;
pub(crate) mod scope;

use bridge::{Caller, Runner, helpers};
pub(crate) use convert::llm_exception;
use convert::{LastFailure, LlmFailure};
use scope::Scope;

/// What the constructor says about a Python model.
pub(crate) struct LlmOptions<'a, 'py> {
    /// The LLM object or callable.
    pub llm: &'a Bound<'py, PyAny>,
    /// A model name for reports (else the LLM's).
    pub name: Option<String>,
    /// The window, if given (else the LLM's metadata, else the library's default).
    pub context_window: Option<usize>,
    /// The output reserve, if given (else the LLM's metadata, else 256).
    pub num_output: Option<usize>,
    /// Calls in flight at most (0: no limit).
    pub concurrency: usize,
    /// Exception classes to retry (a class or a tuple of them).
    pub retry_on: Option<&'a Bound<'py, PyAny>>,
    /// A tokenizer callable or name, if given (else LlamaIndex's configured one, else
    /// cl100k_base).
    pub tokenizer: Option<&'a Bound<'py, PyAny>>,
    /// For a plain callable: chat messages (else one prompt string).
    pub chat: bool,
}

/// Whether the adapter `adapter` (its `id()`) is running a call in the current Python
/// context (a synthesis started from inside it).
pub(crate) fn in_call(py: Python<'_>, adapter: usize) -> PyResult<bool> {
    helpers(py)?.call_method1("in_call", (adapter,))?.extract()
}

/// The model for `opts.llm`, behind the library's stack, with `sharing`'s budget and cache.
pub(crate) fn backend(
    py: Python<'_>,
    opts: &LlmOptions<'_, '_>,
    sharing: &Sharing,
) -> PyResult<Backend> {
    let kwargs = PyDict::new(py);
    kwargs.set_item("chat", opts.chat)?;
    kwargs.set_item("name", opts.name.as_deref())?;
    kwargs.set_item("tokenizer", opts.tokenizer)?;
    let adapter = helpers(py)?
        .getattr("adapt")?
        .call((opts.llm,), Some(&kwargs))
        .map_err(|e| {
            if e.is_instance_of::<pyo3::exceptions::PyTypeError>(py) {
                InputError::new_err(e.value(py).to_string())
            } else {
                e
            }
        })?;
    let model = PyLlm::new(&adapter, opts)?;
    // Read from the LLM object only when a cache needs it (its attributes may be properties).
    let identity = match sharing.cache() {
        Some(_) => crate::sharing::llm_identity(opts.llm, &model.info.name, model.info.is_chat),
        None => Default::default(),
    };
    let adapter_id = adapter.as_ptr() as usize;
    let setup = ModelSetup::custom("python", Arc::new(model), identity);
    let sharing = sharing.clone();
    let concurrency = opts.concurrency;
    block_on(py, async move {
        Backend::build(setup, concurrency, &sharing, Some(adapter_id))
            .await
            .map_err(|e| crate::SynthkitError::new_err(e.to_string()))
    })
}

/// The retry classes as one `isinstance` target: a tuple (empty: retry nothing).
fn retry_classes<'py>(py: Python<'py>, given: Option<&Bound<'py, PyAny>>) -> PyResult<Py<PyAny>> {
    let Some(given) = given.filter(|g| !g.is_none()) else {
        return Ok(PyTuple::empty(py).into_any().unbind());
    };
    let classes: Vec<Bound<'py, PyAny>> = match given.cast::<PyTuple>() {
        Ok(t) => t.iter().collect(),
        Err(_) => vec![given.clone()],
    };
    let base = py.get_type::<pyo3::exceptions::PyBaseException>();
    for c in &classes {
        let is_exception = c
            .cast::<pyo3::types::PyType>()
            .map(|t| t.is_subclass(&base).unwrap_or(false))
            .unwrap_or(false);
        if !is_exception {
            return Err(InputError::new_err(format!(
                "retry_on takes exception classes, got {}",
                c.repr()?
            )));
        }
    }
    Ok(PyTuple::new(py, classes)?.into_any().unbind())
}

/// A Python adapter as a [`LanguageModel`].
pub(crate) struct PyLlm {
    adapter: Arc<Py<PyAny>>,
    info: ModelInfo,
    tokenizer: Option<SharedTokenizer>,
    retry_on: Arc<Py<PyAny>>,
    has_sync: bool,
    has_async: bool,
}

impl PyLlm {
    fn new(adapter: &Bound<'_, PyAny>, opts: &LlmOptions<'_, '_>) -> PyResult<Self> {
        let py = adapter.py();
        let name: String = adapter.getattr("name")?.extract()?;
        let window: Option<usize> = adapter.getattr("context_window")?.extract()?;
        let output: Option<usize> = adapter.getattr("num_output")?.extract()?;
        let context_window = opts
            .context_window
            .or(window)
            .unwrap_or(ModelInfo::DEFAULT_CONTEXT_WINDOW);
        let num_output = opts
            .num_output
            .or(output)
            .unwrap_or(ModelInfo::DEFAULT_NUM_OUTPUT);
        if num_output == 0 || context_window <= num_output {
            return Err(InputError::new_err(format!(
                "the LLM's context_window ({context_window}) must be larger than num_output ({num_output}): pass context_window= or num_output="
            )));
        }
        let info = ModelInfo::new(name)
            .with_context_window(context_window)
            .with_num_output(num_output)
            .with_chat(adapter.getattr("is_chat")?.extract()?)
            .with_system_prompt(adapter.getattr("system_prompt")?.extract()?)
            // The adapter hands the LLM text (role, content) only: image nodes are
            // refused before any call (the direct HTTP path sends them).
            .with_vision(Some(false));
        Ok(Self {
            tokenizer: convert::tokenizer(&adapter.getattr("tokenizer")?)?,
            retry_on: Arc::new(retry_classes(py, opts.retry_on)?),
            has_sync: adapter.getattr("has_sync")?.extract()?,
            has_async: adapter.getattr("has_async")?.extract()?,
            adapter: Arc::new(adapter.clone().unbind()),
            info,
        })
    }

    /// Calls the adapter for `request` (streamed or not): its reply, where the call ran,
    /// and how its failures are reported.
    async fn send(
        &self,
        request: &ModelRequest,
        stream: bool,
    ) -> Result<(Py<PyAny>, Runner, Failures), ModelError> {
        let (runner, failures) = self.start()?;
        let reply = self
            .call(&runner, request.prompt.clone(), stream)
            .await
            .map_err(|e| failures.map(e))?;
        Ok((reply, runner, failures))
    }

    /// Where this call runs, and how its failures are reported.
    fn start(&self) -> Result<(Runner, Failures), ModelError> {
        let scope = Scope::current();
        let caller = match &scope {
            Some(s) => s.caller.clone(),
            None => Caller::Blocking(None),
        };
        let failures = Failures {
            retry_on: Arc::clone(&self.retry_on),
            last: scope.map(|s| s.last),
        };
        let runner = caller
            .runner(self.has_sync, self.has_async)
            .map_err(|e| failures.map(e))?;
        Ok((runner, failures))
    }

    /// Calls the adapter with `prompt` (`acall` on a loop, `call` on a thread).
    async fn call(
        &self,
        runner: &Runner,
        prompt: RenderedPrompt,
        stream: bool,
    ) -> PyResult<Py<PyAny>> {
        let adapter = Arc::clone(&self.adapter);
        // Through `_llm`'s wrappers, which mark the adapter as running in the call's
        // context (a synthesis started from inside it is then refused, see
        // `Synthesizer::for_caller`).
        let function = if runner.is_async() {
            "acall_adapter"
        } else {
            "call_adapter"
        };
        runner
            .run(move |py| {
                let prompt = convert::prompt_to_py(py, &prompt)?;
                let args = PyTuple::new(
                    py,
                    [
                        adapter.bind(py).clone().into_any(),
                        prompt,
                        stream.into_pyobject(py)?.to_owned().into_any(),
                    ],
                )?;
                Ok((helpers(py)?.getattr(function)?, args))
            })
            .await
    }
}

/// Turns the adapter's exceptions into model errors.
#[derive(Clone)]
struct Failures {
    retry_on: Arc<Py<PyAny>>,
    last: Option<LastFailure>,
}

impl Failures {
    fn map(&self, error: PyErr) -> ModelError {
        Python::attach(|py| {
            // A server's "prompt too long", raised by the LLM's client: the engine lowers
            // its prompt limit and packs again, as on the HTTP path.
            let text = convert::describe(py, &error);
            if let Some(context) = synthkit::backend::http::context_error_in(&text) {
                return context;
            }
            if error.is_instance(py, self.retry_on.bind(py))
                && let Some(last) = &self.last
            {
                let message = convert::describe(py, &error);
                last.set(error, message.clone());
                return ModelError::RateLimited {
                    status: 429,
                    retry_after: None,
                    body: message,
                };
            }
            ModelError::Layer {
                layer: "llm",
                source: Box::new(LlmFailure::new(py, error, "")),
            }
        })
    }
}

impl LanguageModel for PyLlm {
    fn info(&self) -> ModelInfo {
        self.info.clone()
    }

    fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, Completion> {
        Box::pin(async move {
            let (reply, _, _) = self.send(request, false).await?;
            Python::attach(|py| convert::completion(reply.bind(py)))
        })
    }

    fn stream<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, CompletionStream> {
        Box::pin(async move {
            let (items, runner, failures) = self.send(request, true).await?;
            let state = Items {
                runner,
                failures,
                items: Some(Arc::new(items)),
                usage: None,
                finish: None,
            };
            let events: CompletionStream = Box::pin(stream::unfold(state, Items::next));
            Ok(events)
        })
    }

    fn tokenizer(&self) -> Option<SharedTokenizer> {
        self.tokenizer.clone()
    }
}

/// A streamed reply being read: the adapter's (async) iterator of items.
struct Items {
    runner: Runner,
    failures: Failures,
    /// `None` once the end was handed on.
    items: Option<Arc<Py<PyAny>>>,
    usage: Option<Usage>,
    finish: Option<FinishReason>,
}

type Event = Result<StreamEvent, ModelError>;

impl Items {
    /// The next event: a non-empty delta, or `Done` with the last usage and finish
    /// reason the items carried, then the end.
    async fn next(mut self) -> Option<(Event, Self)> {
        let items = self.items.clone()?;
        loop {
            let helper = if self.runner.is_async() {
                "anext"
            } else {
                "next_item"
            };
            let it = Arc::clone(&items);
            let got = self
                .runner
                .run(move |py| {
                    let args = PyTuple::new(py, [it.bind(py)])?;
                    Ok((helpers(py)?.getattr(helper)?, args))
                })
                .await;
            let value = match got {
                Ok(v) => v,
                Err(e) => {
                    self.items = None;
                    return Some((Err(self.failures.map(e)), self));
                }
            };
            let parsed = Python::attach(|py| {
                let v = value.bind(py);
                if v.is_none() {
                    Ok(None)
                } else {
                    convert::item(v).map(Some)
                }
            });
            match parsed {
                Ok(None) => {
                    self.items = None;
                    let done = StreamEvent::Done {
                        usage: self.usage,
                        finish_reason: self.finish,
                    };
                    return Some((Ok(done), self));
                }
                Ok(Some((delta, usage, finish))) => {
                    self.usage = usage.or(self.usage);
                    self.finish = finish.or(self.finish);
                    if !delta.is_empty() {
                        return Some((Ok(StreamEvent::Delta(delta)), self));
                    }
                }
                Err(e) => {
                    self.items = None;
                    return Some((Err(e), self));
                }
            }
        }
    }
}
