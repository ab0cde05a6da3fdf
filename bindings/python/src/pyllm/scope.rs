//! Which caller a model call belongs to.
//!
//! The engine runs a synthesis's calls in tasks of its own, so nothing of the Python
//! caller (its event loop, its contextvars) reaches the model through the call stack. A
//! Python model's synthesizer is therefore built per synthesis around [`Scoped`]: the
//! shared [`synthkit::layer::stack::ModelStack`] (one concurrency limit, one retry policy
//! for every synthesis) inside a thin layer that sets the caller as a task-local for the
//! whole of each call, down to the [`super::PyLlm`] at the bottom of the stack.

use std::sync::Arc;

use futures::StreamExt;
use synthkit::SynthError;
use synthkit::model::{
    Completion, CompletionStream, LanguageModel, ModelFuture, ModelInfo, ModelRequest,
    SharedCounter,
};
use synthkit::text::SharedTokenizer;

use pyo3::Python;

use super::bridge::Caller;
use super::convert::LastFailure;
use crate::call_events::CallHook;

tokio::task_local! {
    static SCOPE: Scope;
}

/// One model call's scope: its caller, and where the bottom of the stack records the
/// exception of a retryable failure (so that the final error can have it as its cause).
#[derive(Clone)]
pub(crate) struct Scope {
    pub caller: Caller,
    pub last: LastFailure,
}

impl Scope {
    /// The scope of the call running in this task, if any.
    pub(crate) fn current() -> Option<Scope> {
        SCOPE.try_with(Scope::clone).ok()
    }
}

/// The stack's model, with every call scoped to one caller.
pub(crate) struct Scoped {
    inner: Arc<dyn LanguageModel>,
    caller: Caller,
}

impl Scoped {
    /// A new call's scope, and its record of a retryable failure.
    fn scope(&self) -> (Scope, LastFailure) {
        let last = LastFailure::default();
        let scope = Scope {
            caller: self.caller.clone(),
            last: last.clone(),
        };
        (scope, last)
    }
}

impl LanguageModel for Scoped {
    fn info(&self) -> ModelInfo {
        self.inner.info()
    }

    fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, Completion> {
        Box::pin(async move {
            let (scope, last) = self.scope();
            SCOPE
                .scope(scope, self.inner.complete(request))
                .await
                .map_err(|e| last.chain(e))
        })
    }

    fn stream<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, CompletionStream> {
        Box::pin(async move {
            let (scope, last) = self.scope();
            let stream = SCOPE
                .scope(scope, self.inner.stream(request))
                .await
                .map_err(|e| last.chain(e))?;
            let chained: CompletionStream =
                Box::pin(stream.map(move |event| event.map_err(|e| last.chain(e))));
            Ok(chained)
        })
    }

    fn tokenizer(&self) -> Option<SharedTokenizer> {
        self.inner.tokenizer()
    }

    fn counter(&self) -> Option<SharedCounter> {
        self.inner.counter()
    }
}

/// Builds a synthesizer around a model (the constructor's options, applied again).
pub(crate) type Configure =
    Arc<dyn Fn(Arc<dyn LanguageModel>) -> Result<synthkit::Synthesizer, SynthError> + Send + Sync>;

/// A synthesizer for each caller: the one built at construction for a backend that does
/// not call Python, one per synthesis (cheap: the stack is shared) for a Python model or
/// a synthesizer with a call hook (`on_call=`: `crate::call_events`), which run Python
/// code in the caller's context.
#[derive(Clone)]
pub(crate) struct PerCaller {
    built: synthkit::Synthesizer,
    each: Option<Each>,
}

/// How the synthesizer of one synthesis is built.
#[derive(Clone)]
struct Each {
    model: Arc<dyn LanguageModel>,
    configure: Configure,
    /// The model calls Python (`Scoped` to the caller).
    python: bool,
    hook: Option<CallHook>,
}

impl PerCaller {
    /// The same synthesizer for every caller.
    pub(crate) fn fixed(built: synthkit::Synthesizer) -> Self {
        Self { built, each: None }
    }

    /// `built` for checks and reports; each synthesis gets `configure(Scoped(model))`.
    pub(crate) fn python(
        built: synthkit::Synthesizer,
        model: Arc<dyn LanguageModel>,
        configure: Configure,
    ) -> Self {
        Self {
            built,
            each: Some(Each {
                model,
                configure,
                python: true,
                hook: None,
            }),
        }
    }

    /// These synthesizers with every model call reported to `hook`, in the context of the
    /// caller (`model` and `configure` as for [`PerCaller::python`]).
    pub(crate) fn with_hook(
        self,
        hook: CallHook,
        model: Arc<dyn LanguageModel>,
        configure: Configure,
    ) -> Self {
        let python = self.each.is_some_and(|e| e.python);
        Self {
            built: self.built,
            each: Some(Each {
                model,
                configure,
                python,
                hook: Some(hook),
            }),
        }
    }

    /// The synthesizer built at construction.
    pub(crate) fn built(&self) -> &synthkit::Synthesizer {
        &self.built
    }

    /// The synthesizer for one synthesis by `caller`.
    pub(crate) fn for_caller(&self, caller: Caller) -> Result<synthkit::Synthesizer, SynthError> {
        let Some(each) = &self.each else {
            return Ok(self.built.clone());
        };
        let mut model = Arc::clone(&each.model);
        if let Some(hook) = &each.hook {
            let context = Python::attach(|py| caller.context(py));
            model = hook.around(model, context);
        }
        if each.python {
            model = Arc::new(Scoped {
                inner: model,
                caller,
            });
        }
        (each.configure)(model)
    }

    /// Whether syntheses call Python (and so need their caller).
    pub(crate) fn needs_caller(&self) -> bool {
        self.each.is_some()
    }
}
