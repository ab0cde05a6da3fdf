//! [`ModelLayer`]: a model that wraps another and changes only part of what it does.

use super::{
    Completion, CompletionStream, LanguageModel, ModelFuture, ModelInfo, ModelRequest,
    SharedCounter,
};
use crate::text::SharedTokenizer;

/// A model wrapped around an inner one: every method not written forwards to
/// [`ModelLayer::inner`], and every `ModelLayer` is a [`LanguageModel`]. A layer writes
/// only what it changes: a rate budget its calls, a cache its calls and nothing else.
///
/// The methods mirror [`LanguageModel`]'s. Call them through `LanguageModel` (a type that
/// is both has the two traits' methods; import only `LanguageModel` where you call it).
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use synthkit::model::{Completion, LanguageModel, ModelFuture, ModelInfo, ModelLayer, ModelRequest};
/// use synthkit::testing::ScriptedModel;
///
/// /// Counts the calls; everything else is the inner model's.
/// struct Counting<M> { inner: M, calls: AtomicUsize }
///
/// impl<M: LanguageModel> ModelLayer for Counting<M> {
///     type Inner = M;
///     fn inner(&self) -> &M { &self.inner }
///     fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, Completion> {
///         self.calls.fetch_add(1, Ordering::Relaxed);
///         self.inner.complete(request)
///     }
/// }
///
/// let model = Counting { inner: ScriptedModel::constant(ModelInfo::new("m"), "ok"), calls: AtomicUsize::new(0) };
/// assert_eq!(LanguageModel::info(&model).name, "m");
/// ```
pub trait ModelLayer: Send + Sync {
    /// The wrapped model.
    type Inner: LanguageModel + ?Sized;

    /// The wrapped model.
    fn inner(&self) -> &Self::Inner;

    /// [`LanguageModel::info`]; the inner model's by default.
    fn info(&self) -> ModelInfo {
        self.inner().info()
    }

    /// [`LanguageModel::complete`]; the inner model's by default.
    fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, Completion> {
        self.inner().complete(request)
    }

    /// [`LanguageModel::stream`]; the inner model's by default.
    fn stream<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, CompletionStream> {
        self.inner().stream(request)
    }

    /// [`LanguageModel::tokenizer`]; the inner model's by default.
    fn tokenizer(&self) -> Option<SharedTokenizer> {
        self.inner().tokenizer()
    }

    /// [`LanguageModel::counter`]; the inner model's by default.
    fn counter(&self) -> Option<SharedCounter> {
        self.inner().counter()
    }
}

impl<L: ModelLayer> LanguageModel for L {
    fn info(&self) -> ModelInfo {
        ModelLayer::info(self)
    }

    fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, Completion> {
        ModelLayer::complete(self, request)
    }

    fn stream<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, CompletionStream> {
        ModelLayer::stream(self, request)
    }

    fn tokenizer(&self) -> Option<SharedTokenizer> {
        ModelLayer::tokenizer(self)
    }

    fn counter(&self) -> Option<SharedCounter> {
        ModelLayer::counter(self)
    }
}
