//! [`Gated`]: a model whose every call passes a [`Gate`] first. One layer for everything
//! that waits before a call and holds something while it runs: the [limiter's
//! slots](super::limit::LimitedModel), the [rate budget](super::budget::BudgetModel), the
//! [adaptive places](super::adaptive::AdaptiveModel) and the [meter's
//! attempts](super::meter::MeteredModel) are each a gate, and [`Gated`] is the one model
//! around them.
//!
//! ```
//! use std::future::Future;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use synthkit::layer::gate::{Gate, Gated};
//! use synthkit::model::{LanguageModel, ModelError, ModelInfo, ModelRequest};
//! use synthkit::testing::ScriptedModel;
//!
//! /// Counts the calls it lets through.
//! #[derive(Default)]
//! struct Counting(AtomicUsize);
//!
//! impl Gate for Counting {
//!     type Pass = ();
//!     fn enter(&self, _: &ModelRequest) -> impl Future<Output = Result<(), ModelError>> + Send {
//!         self.0.fetch_add(1, Ordering::Relaxed);
//!         std::future::ready(Ok(()))
//!     }
//! }
//!
//! let model = Gated::new(ScriptedModel::constant(ModelInfo::new("m"), "ok"), Counting::default());
//! assert_eq!(model.info().name, "m");
//! ```

use std::fmt;
use std::future::Future;

use futures::StreamExt;

use crate::model::{
    Completion, CompletionStream, LanguageModel, ModelError, ModelFuture, ModelLayer, ModelRequest,
    StreamEvent,
};

/// What a [`Gated`] model does around each call: waits before it goes to the inner model
/// (or refuses it), and holds a pass while it runs; for a stream, until the stream ends
/// or is dropped.
pub trait Gate: Send + Sync {
    /// What a call holds while it runs (a slot, a place, a metered attempt); dropping it
    /// gives it back.
    type Pass: Send + 'static;

    /// Waits until the call may go to the inner model, or refuses it.
    fn enter(
        &self,
        request: &ModelRequest,
    ) -> impl Future<Output = Result<Self::Pass, ModelError>> + Send;

    /// The inner model answered a completion, or opened a stream (`error`: it failed).
    /// Returns the pass to keep holding (for a stream, until it ends), or `None` to hold
    /// nothing more. By default the pass is kept.
    fn settle(&self, pass: Self::Pass, _error: Option<&ModelError>) -> Option<Self::Pass> {
        Some(pass)
    }

    /// One event of a stream that holds `pass`. By default nothing is done.
    fn streamed(_pass: &mut Self::Pass, _event: &Result<StreamEvent, ModelError>) {}

    /// The gate, for the model's `Debug` output. By default nothing is shown.
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("..")
    }
}

/// A model whose every call passes `G` first (see the [module](self)).
pub struct Gated<M, G> {
    inner: M,
    gate: G,
}

impl<M, G> Gated<M, G> {
    /// `inner` with its calls passing `gate` first.
    pub fn new(inner: M, gate: G) -> Self {
        Self { inner, gate }
    }

    /// The gate.
    pub fn gate(&self) -> &G {
        &self.gate
    }

    /// The wrapped model.
    pub fn inner(&self) -> &M {
        &self.inner
    }

    /// The wrapped model, unwrapped.
    pub fn into_inner(self) -> M {
        self.inner
    }
}

impl<M: fmt::Debug, G: Gate> fmt::Debug for Gated<M, G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Described<'a, G>(&'a G);
        impl<G: Gate> fmt::Debug for Described<'_, G> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.describe(f)
            }
        }
        f.debug_struct("Gated")
            .field("inner", &self.inner)
            .field("gate", &Described(&self.gate))
            .finish()
    }
}

impl<M: LanguageModel, G: Gate> ModelLayer for Gated<M, G> {
    type Inner = M;

    fn inner(&self) -> &M {
        &self.inner
    }

    fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, Completion> {
        Box::pin(async move {
            let pass = self.gate.enter(request).await?;
            let result = self.inner.complete(request).await;
            drop(self.gate.settle(pass, result.as_ref().err()));
            result
        })
    }

    /// The pass is held until the stream ends or is dropped.
    fn stream<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, CompletionStream> {
        Box::pin(async move {
            let pass = self.gate.enter(request).await?;
            match self.inner.stream(request).await {
                Ok(stream) => Ok(match self.gate.settle(pass, None) {
                    Some(pass) => holding(stream, pass, G::streamed),
                    None => stream,
                }),
                Err(e) => {
                    drop(self.gate.settle(pass, Some(&e)));
                    Err(e)
                }
            }
        })
    }
}

/// What a pass is shown of each event of its stream.
type Streamed<P> = fn(&mut P, &Result<StreamEvent, ModelError>);

/// `stream` with `pass` held (and shown every event) until the stream ends or is dropped.
fn holding<P: Send + 'static>(
    stream: CompletionStream,
    pass: P,
    streamed: Streamed<P>,
) -> CompletionStream {
    Box::pin(futures::stream::unfold(
        (stream, pass),
        move |(mut stream, mut pass)| async move {
            let event = stream.next().await?;
            streamed(&mut pass, &event);
            Some((event, (stream, pass)))
        },
    ))
}
