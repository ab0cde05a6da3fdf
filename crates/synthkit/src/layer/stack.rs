//! The model stack: a backend behind every layer, in one order, with every default.
//!
//! Every front end (the CLI, the HTTP service, the Python package) builds its model the
//! same way, here. From the backend outwards:
//!
//! 1. **metering** ([`super::meter`]): every attempt at the backend is counted
//!    ([`ModelStack::stats`]) and reported to the meters given;
//! 2. **adaptive concurrency** ([`super::adaptive`]): at most the ceiling in flight
//!    (`max_in_flight`, never more than the server's slots when it says), halved while
//!    the server is overloaded; it never sends a call again itself;
//! 3. **the rate budget** ([`super::budget`]): requests and tokens per minute, local
//!    ([`super::limit::Limiter`]) or shared between processes (Redis), charged for every
//!    send of every attempt;
//! 4. **retries** ([`super::retry`]): the only layer that sends a call again: at most
//!    `max_attempts` sends of one call (429s and overloads included), all within
//!    `max_elapsed` (Retry-After waits included);
//! 5. **the response cache** ([`super::cache`]), outermost: a hit waits for no budget and
//!    spends no attempt.
//!
//! ```
//! # async fn demo() -> Result<(), synthkit::model::ModelError> {
//! use std::sync::Arc;
//! use synthkit::layer::cache::MemoryCache;
//! use synthkit::layer::retry::RetryPolicy;
//! use synthkit::layer::stack::{CacheIdentity, ModelStack};
//! use synthkit::{model::ModelInfo, testing::ScriptedModel};
//!
//! let backend = ScriptedModel::constant(ModelInfo::new("demo"), "ok");
//! let stack = ModelStack::builder(backend)
//!     .max_in_flight(8)
//!     .rates_per_minute(500, 200_000)
//!     .retry(RetryPolicy::default().with_max_attempts(3))
//!     .cache(Arc::new(MemoryCache::new()), CacheIdentity::new("scripted", ""))
//!     .build();
//! let model = stack.model(); // an Arc<dyn LanguageModel> for Synthesizer::builder
//! # let _ = model; Ok(()) }
//! ```

use std::fmt;
use std::sync::Arc;

use super::adaptive::{AdaptiveLimit, AdaptiveModel, AdaptiveStats};
use super::budget::{BudgetModel, RateBudget};
use super::cache::{CacheCounters, CacheStats, CachedModel, ResponseCache};
use super::limit::{Limiter, Limits};
use super::meter::{CallMeter, MeteredModel, Meters, StackCounters, StackStats};
use super::retry::{RetryModel, RetryPolicy};
use crate::model::LanguageModel;

// The one slot rule lives with the option types (a leaf every layer may import); the
// stack names it here too, where its users look for it.
pub use crate::options::{UNLIMITED_IN_FLIGHT, calls_in_flight, ceiling};

/// What a backend's replies depend on beyond the request, for cache keys: its kind and
/// address, and the parameters that change replies (sampling, endpoint, extra fields).
/// Its `Debug` shows the address without user-info or query ([`crate::secret::redact_url`]).
#[derive(Clone, PartialEq, Eq, Default)]
pub struct CacheIdentity {
    /// The backend's kind and address (`openai http://127.0.0.1:8080/v1/chat/completions`).
    pub backend: String,
    /// Parameters that change replies (`temperature=0.1 json_schema=true ...`).
    pub params: String,
}

impl fmt::Debug for CacheIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CacheIdentity")
            .field("backend", &crate::secret::redact_urls(&self.backend))
            .field("params", &self.params)
            .finish()
    }
}

impl CacheIdentity {
    /// An identity from its two parts.
    pub fn new(backend: impl Into<String>, params: impl Into<String>) -> Self {
        Self {
            backend: backend.into(),
            params: params.into(),
        }
    }
}

enum Budget {
    None,
    Local(Limits),
    Shared(Arc<dyn RateBudget>),
}

/// Builds a [`ModelStack`]; see the [module documentation](self) for the order.
#[must_use]
pub struct StackBuilder {
    backend: Arc<dyn LanguageModel>,
    max_in_flight: usize,
    server_slots: Option<usize>,
    budget: Budget,
    retry: RetryPolicy,
    cache: Option<(Arc<dyn ResponseCache>, CacheIdentity)>,
    meters: Vec<Arc<dyn CallMeter>>,
}

impl fmt::Debug for StackBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StackBuilder")
            .field("max_in_flight", &self.max_in_flight)
            .field("server_slots", &self.server_slots)
            .field("retry", &self.retry)
            .field("cache", &self.cache.as_ref().map(|(_, id)| id))
            .finish_non_exhaustive()
    }
}

impl StackBuilder {
    setters! {
        /// Caps the calls in flight at the backend (0: no cap; default
        /// [`ModelStack::DEFAULT_MAX_IN_FLIGHT`]).
        pub fn max_in_flight(n: usize) => max_in_flight;

        /// The number of requests the server runs at once, when it says (llama.cpp's
        /// `/props`): the calls in flight never exceed it.
        pub fn server_slots(slots: Option<usize>) => server_slots;
    }

    /// A requests-per-minute and a tokens-per-minute budget for this process (0: none).
    /// Each call is charged its prompt tokens plus its whole output reserve.
    pub fn rates_per_minute(mut self, requests: u32, tokens: u32) -> Self {
        let limits = Limits::default()
            .with_requests_per_minute(requests)
            .with_tokens_per_minute(tokens);
        self.budget = if limits.is_unlimited() {
            Budget::None
        } else {
            Budget::Local(limits)
        };
        self
    }

    /// A budget shared with other processes (Redis), in place of
    /// [`StackBuilder::rates_per_minute`].
    pub fn shared_budget(mut self, budget: Arc<dyn RateBudget>) -> Self {
        self.budget = Budget::Shared(budget);
        self
    }

    setters! {
        /// The retry policy (default [`RetryPolicy::default`]; [`RetryPolicy::none`] sends
        /// each call once).
        pub fn retry(policy: RetryPolicy) => retry;
    }

    /// A response cache, with what the backend's replies depend on.
    pub fn cache(mut self, store: Arc<dyn ResponseCache>, identity: CacheIdentity) -> Self {
        self.cache = Some((store, identity));
        self
    }

    /// Reports every attempt and retry to `meter` too (metrics); may be given many times.
    pub fn meter(mut self, meter: Arc<dyn CallMeter>) -> Self {
        self.meters.push(meter);
        self
    }

    /// Builds the stack.
    pub fn build(self) -> ModelStack {
        let counters = StackCounters::default();
        let mut meters: Vec<Arc<dyn CallMeter>> = vec![Arc::new(counters.clone())];
        meters.extend(self.meters);
        let meter: Arc<dyn CallMeter> = Arc::new(Meters(meters));

        let mut model: Arc<dyn LanguageModel> =
            Arc::new(MeteredModel::new(self.backend, Arc::clone(&meter)));
        let adaptive = AdaptiveLimit::new(ceiling(self.max_in_flight, self.server_slots));
        model = Arc::new(AdaptiveModel::new(model, adaptive.clone()));
        let budget: Option<Arc<dyn RateBudget>> = match self.budget {
            Budget::None => None,
            Budget::Local(limits) => Some(Arc::new(Limiter::new(limits))),
            Budget::Shared(b) => Some(b),
        };
        if let Some(b) = &budget {
            model = Arc::new(BudgetModel::new(model, Arc::clone(b)));
        }
        if self.retry.max_attempts > 1 {
            let hook = Arc::clone(&meter);
            model = Arc::new(
                RetryModel::new(model, self.retry).on_retry(move |event| hook.retrying(event)),
            );
        }
        let mut cache = None;
        if let Some((store, identity)) = self.cache {
            let cached = CachedModel::new(model, store, identity.backend, identity.params);
            cache = Some(cached.counters());
            model = Arc::new(cached);
        }
        ModelStack {
            model,
            adaptive,
            budget,
            retry: self.retry,
            cache,
            counters,
        }
    }
}

/// A backend behind its layers, and what they report; cheap to clone (clones share
/// the model, the limits and the counters).
#[derive(Clone)]
pub struct ModelStack {
    model: Arc<dyn LanguageModel>,
    adaptive: AdaptiveLimit,
    budget: Option<Arc<dyn RateBudget>>,
    retry: RetryPolicy,
    cache: Option<CacheCounters>,
    counters: StackCounters,
}

impl fmt::Debug for ModelStack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelStack")
            .field("model", &self.model.info().name)
            .field("adaptive", &self.adaptive.stats())
            .field(
                "budget",
                &self.budget.as_ref().map(|b| b.name().to_string()),
            )
            .field("retry", &self.retry)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl ModelStack {
    /// The default cap on calls in flight at the backend: the calls in flight of one
    /// synthesis ([`DEFAULT_CONCURRENCY`](crate::options::DEFAULT_CONCURRENCY)), the one
    /// default of every front end.
    pub const DEFAULT_MAX_IN_FLIGHT: usize = crate::options::DEFAULT_CONCURRENCY;

    /// A builder for a stack around `backend`.
    pub fn builder(backend: impl LanguageModel + 'static) -> StackBuilder {
        Self::builder_arc(Arc::new(backend))
    }

    /// A builder for a stack around a shared `backend`.
    pub fn builder_arc(backend: Arc<dyn LanguageModel>) -> StackBuilder {
        StackBuilder {
            backend,
            max_in_flight: Self::DEFAULT_MAX_IN_FLIGHT,
            server_slots: None,
            budget: Budget::None,
            retry: RetryPolicy::default(),
            cache: None,
            meters: Vec::new(),
        }
    }

    /// The model with all its layers.
    pub fn model(&self) -> Arc<dyn LanguageModel> {
        Arc::clone(&self.model)
    }

    /// The calls in flight: the ceiling, the limit now, the peak, the overloads.
    pub fn adaptive(&self) -> AdaptiveStats {
        self.adaptive.stats()
    }

    /// The retry policy.
    pub fn retry_policy(&self) -> &RetryPolicy {
        &self.retry
    }

    /// Attempts, failures and retries so far.
    pub fn stats(&self) -> StackStats {
        self.counters.snapshot()
    }

    /// The cache's hits and misses, when the stack has a cache.
    pub fn cache_stats(&self) -> Option<CacheStats> {
        self.cache.as_ref().map(CacheCounters::snapshot)
    }

    /// The cache's live counters, when the stack has a cache.
    pub fn cache_counters(&self) -> Option<&CacheCounters> {
        self.cache.as_ref()
    }
}
