//! Middleware: layers that wrap any [`LanguageModel`] and are one themselves.
//!
//! - [`stack`]: **start here**: [`stack::ModelStack`] puts a backend behind every layer
//!   below, in the one order every front end uses, with every default.
//! - [`meter`]: counts every attempt at the backend (and reports it to metrics).
//! - [`adaptive`]: as many calls in flight as the server can take now (halved on
//!   overload, grown back); never sends a call again itself.
//! - [`budget`]: requests and tokens per minute, local ([`limit::Limiter`]) or shared
//!   between processes (`redis`, feature `redis`), charged for every send.
//! - [`retry`]: the one layer that sends a call again on transient failures (backoff
//!   with jitter, `Retry-After`, a bound on sends and on time).
//! - [`cache`]: answers repeated requests from a store.
//! - [`cost`]: a cap on what a run may cost at the user's prices, held at every call
//!   (put outside the stack, per run or request).
//! - [`sharing`]: where the rate budget and the response cache live (this process, a
//!   file, or Redis shared by every process), as every front end chooses them.
//! - [`limit`]: the in-process limiter (calls in flight and the per-minute budgets),
//!   also usable on its own.
//! - [`gate`]: the one model behind the meter, the adaptive limit, the budget and the
//!   limiter: each is a [`gate::Gate`] that a call passes first.
//!
//! [`ModelExt`] stacks single layers by hand, innermost first; prefer the stack, which
//! gets the order right (the cache outermost so that a hit waits for no budget and spends
//! no retry; the budget inside the retries so that every attempt is charged):
//!
//! ```
//! use std::sync::Arc;
//! use synthkit::layer::ModelExt;
//! use synthkit::layer::cache::MemoryCache;
//! use synthkit::layer::limit::{Limiter, Limits};
//! use synthkit::layer::retry::RetryPolicy;
//! use synthkit::{model::ModelInfo, testing::ScriptedModel};
//!
//! let model = ScriptedModel::constant(ModelInfo::new("demo"), "ok")
//!     .limit(Limiter::new(Limits::default().with_max_in_flight(4)))
//!     .retry(RetryPolicy::default())
//!     .cache(Arc::new(MemoryCache::new()), "scripted", "");
//! let model: Arc<dyn synthkit::model::LanguageModel> = Arc::new(model);
//! # let _ = model;
//! ```

use std::sync::Arc;

use crate::model::LanguageModel;

pub mod adaptive;
pub mod budget;
pub mod cache;
pub mod cost;
pub mod gate;
pub mod limit;
pub mod meter;
#[cfg(feature = "redis")]
pub mod redis;
pub mod retry;
pub mod sharing;
pub mod stack;

/// Stacks layers around a model: `model.limit(..).retry(..).cache(..)`.
pub trait ModelExt: LanguageModel + Sized {
    /// Retries transient failures with `policy` ([`retry::RetryModel`]).
    fn retry(self, policy: retry::RetryPolicy) -> retry::RetryModel<Self> {
        retry::RetryModel::new(self, policy)
    }

    /// Waits for `limiter` before each call ([`limit::LimitedModel`]).
    fn limit(self, limiter: limit::Limiter) -> limit::LimitedModel<Self> {
        limit::LimitedModel::new(self, limiter)
    }

    /// Keeps the calls in flight within `limit`, which adapts to the server's overloads
    /// ([`adaptive::AdaptiveModel`]).
    fn adaptive(self, limit: adaptive::AdaptiveLimit) -> adaptive::AdaptiveModel<Self> {
        adaptive::AdaptiveModel::new(self, limit)
    }

    /// Answers repeated requests from `store` ([`cache::CachedModel`]); `identity` names the
    /// backend (kind and address) and `params` the settings that change replies.
    fn cache(
        self,
        store: Arc<dyn cache::ResponseCache>,
        identity: impl Into<String>,
        params: impl Into<String>,
    ) -> cache::CachedModel<Self> {
        cache::CachedModel::new(self, store, identity, params)
    }
}

impl<M: LanguageModel + Sized> ModelExt for M {}

#[cfg(all(test, feature = "testing"))]
mod tests {
    use super::*;
    use crate::model::{ModelFuture, PromptCounter};
    use crate::prompt::RenderedPrompt;

    #[derive(Debug)]
    struct Counter;

    impl PromptCounter for Counter {
        fn name(&self) -> &str {
            "test counter"
        }
        fn count_prompts<'a>(
            &'a self,
            prompts: &'a [RenderedPrompt],
        ) -> ModelFuture<'a, Vec<usize>> {
            Box::pin(async move { Ok(vec![1; prompts.len()]) })
        }
    }

    #[test]
    fn every_layer_keeps_the_models_counter() {
        let inner =
            crate::testing::ScriptedModel::constant(crate::model::ModelInfo::new("m"), "ok")
                .with_counter(Arc::new(Counter));
        let stacked = inner
            .limit(limit::Limiter::new(limit::Limits::default()))
            .adaptive(adaptive::AdaptiveLimit::new(2))
            .retry(retry::RetryPolicy::default())
            .cache(Arc::new(cache::MemoryCache::new()), "m", "");
        assert_eq!(
            stacked.counter().map(|c| c.name().to_string()).as_deref(),
            Some("test counter")
        );
    }
}
