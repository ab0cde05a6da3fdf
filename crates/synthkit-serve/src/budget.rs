//! Shared budgets: a [`RateBudget`] is a requests/tokens-per-minute budget that lives
//! outside the process (Redis, with the `redis` feature), and [`BudgetModel`] is the layer
//! that takes a permit from it before every model call.
//!
//! The charge of a call is the same as the in-process limiter's
//! ([`synthkit::layer::limit::Limiter::charge`]): its prompt tokens plus its `max_tokens`.

use std::sync::Arc;

use futures::future::BoxFuture;
use synthkit::layer::limit::Limiter;
use synthkit::model::{
    Completion, CompletionStream, LanguageModel, ModelError, ModelInfo, ModelRequest,
    SharedCounter, StructuredCompletion,
};
use synthkit::text::SharedTokenizer;

/// A per-minute budget of requests and tokens shared with other processes.
pub trait RateBudget: Send + Sync {
    /// Waits until one request and `tokens` tokens may be spent, and spends them. Fails
    /// when the charge can never fit or the budget's store cannot be reached.
    fn acquire(&self, tokens: u64) -> BoxFuture<'_, Result<(), ModelError>>;
}

/// A model that takes a permit from a [`RateBudget`] before every call (every attempt, when
/// placed inside the retry layer).
pub struct BudgetModel<M> {
    inner: M,
    budget: Arc<dyn RateBudget>,
}

impl<M: LanguageModel> BudgetModel<M> {
    /// Wraps `inner` with `budget`.
    pub fn new(inner: M, budget: Arc<dyn RateBudget>) -> Self {
        Self { inner, budget }
    }
}

impl<M: LanguageModel> LanguageModel for BudgetModel<M> {
    fn info(&self) -> ModelInfo {
        self.inner.info()
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<Completion, ModelError>> {
        Box::pin(async move {
            self.budget.acquire(Limiter::charge(request)).await?;
            self.inner.complete(request).await
        })
    }

    fn stream<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<CompletionStream, ModelError>> {
        Box::pin(async move {
            self.budget.acquire(Limiter::charge(request)).await?;
            self.inner.stream(request).await
        })
    }

    fn structured<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<StructuredCompletion, ModelError>> {
        Box::pin(async move {
            self.budget.acquire(Limiter::charge(request)).await?;
            self.inner.structured(request).await
        })
    }

    fn tokenizer(&self) -> Option<SharedTokenizer> {
        self.inner.tokenizer()
    }

    fn counter(&self) -> Option<SharedCounter> {
        self.inner.counter()
    }
}
