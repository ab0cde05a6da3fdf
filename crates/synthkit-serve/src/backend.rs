//! The model stack, built once at startup and shared by every request: the backend
//! (offline extractive, or an OpenAI-compatible server), then the layers, innermost
//! first:
//!
//! 1. [`MeteredModel`]: calls in flight and latency at the backend (`/metrics`);
//! 2. adaptive concurrency (OpenAI-compatible servers: halved on overload);
//! 3. one in-process [`Limiter`]: calls in flight, and requests/tokens per minute unless
//!    a shared budget is given;
//! 4. the shared [`RateBudget`] (Redis), when given: one budget for every replica;
//! 5. retries (every attempt passes the limits above and is charged);
//! 6. the response cache, outermost, so that a hit waits for no budget.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use synthkit::backend::extractive::ExtractiveModel;
use synthkit::backend::openai::{OpenAiConfig, OpenAiModel};
use synthkit::layer::adaptive::{AdaptiveLimit, AdaptiveModel};
use synthkit::layer::cache::{CacheCounters, CachedModel, MemoryCache, ResponseCache};
use synthkit::layer::limit::{LimitedModel, Limiter, Limits};
use synthkit::layer::retry::{RetryModel, RetryPolicy};
use synthkit::model::LanguageModel;
use synthkit::secret::{redact_url, redact_urls};
use synthkit::text::BpeTokenizer;

use crate::budget::{BudgetModel, RateBudget};
use crate::error::ServeError;
use crate::meter::MeteredModel;
use crate::metrics::Metrics;

/// Which backend answers.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum BackendKind {
    /// The offline extractive backend (no server).
    Extractive,
    /// An OpenAI-compatible server (OpenAI, vLLM, llama.cpp, Ollama).
    OpenAi(Box<OpenAiConfig>),
}

/// Which response cache the stack has.
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum CacheChoice {
    /// No cache.
    #[default]
    None,
    /// An in-memory cache for the life of the process.
    Memory,
    /// This store (SQLite, Redis, your own).
    Store(Arc<dyn ResponseCache>),
}

/// How to build the model stack. [`BackendConfig::extractive`] and
/// [`BackendConfig::openai`] start one; the fields are public.
#[derive(Clone)]
#[non_exhaustive]
pub struct BackendConfig {
    /// The backend.
    pub kind: BackendKind,
    /// The extractive backend's context window (an OpenAI config carries its own).
    pub context_window: Option<usize>,
    /// The extractive backend's output reserve.
    pub num_output: Option<usize>,
    /// Calls in flight at the backend across all requests (0: no cap).
    pub max_in_flight: usize,
    /// Requests per minute across all requests of the process (0: none). With a
    /// [`BackendConfig::shared_budget`] this is the shared budget's business instead.
    pub requests_per_minute: u32,
    /// Tokens per minute across all requests of the process (0: none).
    pub tokens_per_minute: u32,
    /// A budget shared with other replicas (Redis).
    pub shared_budget: Option<Arc<dyn RateBudget>>,
    /// Retries of transient failures (`None`: no retries).
    pub retry: Option<RetryPolicy>,
    /// The response cache.
    pub cache: CacheChoice,
    /// Whether to ask the server's `/tokenize` for exact counts where it has one.
    pub server_tokenizer: bool,
}

impl BackendConfig {
    /// The offline extractive backend, 8 calls in flight, default retries, no cache.
    pub fn extractive() -> Self {
        Self::with_kind(BackendKind::Extractive)
    }

    /// An OpenAI-compatible server.
    pub fn openai(config: OpenAiConfig) -> Self {
        Self::with_kind(BackendKind::OpenAi(Box::new(config)))
    }

    fn with_kind(kind: BackendKind) -> Self {
        Self {
            kind,
            context_window: None,
            num_output: None,
            max_in_flight: 8,
            requests_per_minute: 0,
            tokens_per_minute: 0,
            shared_budget: None,
            retry: Some(RetryPolicy::default()),
            cache: CacheChoice::None,
            server_tokenizer: true,
        }
    }

    /// Sets the calls in flight at the backend (0: no cap).
    pub fn with_max_in_flight(mut self, n: usize) -> Self {
        self.max_in_flight = n;
        self
    }

    /// Sets the per-process requests and tokens per minute (0: none).
    pub fn with_rates(mut self, requests_per_minute: u32, tokens_per_minute: u32) -> Self {
        self.requests_per_minute = requests_per_minute;
        self.tokens_per_minute = tokens_per_minute;
        self
    }

    /// Uses a budget shared with other replicas instead of the per-process rates.
    pub fn with_shared_budget(mut self, budget: Arc<dyn RateBudget>) -> Self {
        self.shared_budget = Some(budget);
        self
    }

    /// Sets the retry policy (`None`: no retries).
    pub fn with_retry(mut self, retry: Option<RetryPolicy>) -> Self {
        self.retry = retry;
        self
    }

    /// Sets the response cache.
    pub fn with_cache(mut self, cache: CacheChoice) -> Self {
        self.cache = cache;
        self
    }

    /// Sets the extractive backend's context window and output reserve.
    pub fn with_window(mut self, context_window: Option<usize>, num_output: Option<usize>) -> Self {
        self.context_window = context_window;
        self.num_output = num_output;
        self
    }
}

/// How `/readyz` checks the backend.
#[derive(Clone)]
#[non_exhaustive]
pub enum Readiness {
    /// Always ready (the offline backend).
    Always,
    /// Ready when `GET url` answers 2xx (an OpenAI-compatible server's `/models`).
    Http {
        /// The URL asked.
        url: String,
        /// The key sent as `Authorization: Bearer`, if any.
        key: Option<SecretString>,
    },
}

impl Readiness {
    /// Checks the backend: `Err` says why it is not ready.
    pub async fn check(&self, client: &reqwest::Client) -> Result<(), String> {
        let Readiness::Http { url, key } = self else {
            return Ok(());
        };
        let mut request = client.get(url).timeout(Duration::from_secs(3));
        if let Some(key) = key {
            request = request.bearer_auth(key.expose_secret());
        }
        // The body is public (`/readyz`): no user-info of the URL, in ours or reqwest's.
        let shown = redact_url(url);
        match request.send().await {
            Ok(r) if r.status().is_success() => Ok(()),
            Ok(r) => Err(format!(
                "the model server answered {shown} with {}",
                r.status()
            )),
            Err(e) => Err(format!(
                "the model server does not answer {shown}: {}",
                redact_urls(&e.to_string())
            )),
        }
    }
}

/// The built stack: the model every request uses, and what `/metrics` and `/readyz` read.
#[derive(Clone)]
pub struct ModelStack {
    /// The model with all its layers.
    pub model: Arc<dyn LanguageModel>,
    /// How to check the backend.
    pub readiness: Readiness,
    /// The in-process limiter.
    pub limiter: Limiter,
    /// The cache's hit and miss counters, when there is a cache.
    pub cache: Option<CacheCounters>,
}

impl ModelStack {
    /// Builds the stack once; share [`ModelStack::model`] between requests. For an
    /// OpenAI-compatible server this may ask the server for its context window, model and
    /// `/tokenize` (never a model call).
    pub async fn build(config: BackendConfig, metrics: Arc<Metrics>) -> Result<Self, ServeError> {
        let (base, readiness, identity, params) = match &config.kind {
            BackendKind::Extractive => {
                let tokenizer = BpeTokenizer::cl100k_base().shared();
                let mut m = ExtractiveModel::new().with_tokenizer(tokenizer.clone());
                if let Some(w) = config.context_window {
                    m = m.with_context_window(w);
                }
                if let Some(n) = config.num_output {
                    m = m.with_num_output(n);
                }
                let metered = MeteredModel::new(m, Arc::clone(&metrics));
                let model: Arc<dyn LanguageModel> = Arc::new(metered);
                let params = format!("tokenizer={}", tokenizer.name());
                (model, Readiness::Always, "extractive".to_string(), params)
            }
            BackendKind::OpenAi(openai) => openai_base(openai, &config, &metrics).await?,
        };
        let local = Limits::default()
            .with_max_in_flight(config.max_in_flight)
            .with_requests_per_minute(if config.shared_budget.is_some() {
                0
            } else {
                config.requests_per_minute
            })
            .with_tokens_per_minute(if config.shared_budget.is_some() {
                0
            } else {
                config.tokens_per_minute
            });
        let limiter = Limiter::new(local);
        let mut model: Arc<dyn LanguageModel> = Arc::new(LimitedModel::new(base, limiter.clone()));
        if let Some(budget) = &config.shared_budget {
            model = Arc::new(BudgetModel::new(model, Arc::clone(budget)));
        }
        if let Some(policy) = config.retry {
            let m = Arc::clone(&metrics);
            model = Arc::new(RetryModel::new(model, policy).on_retry(move |_| {
                m.retries.fetch_add(1, Ordering::Relaxed);
            }));
        }
        let store: Option<Arc<dyn ResponseCache>> = match &config.cache {
            CacheChoice::None => None,
            CacheChoice::Memory => Some(Arc::new(MemoryCache::new())),
            CacheChoice::Store(s) => Some(Arc::clone(s)),
        };
        let mut cache = None;
        if let Some(store) = store {
            let cached = CachedModel::new(model, store, identity, params);
            cache = Some(cached.counters());
            metrics.watch_cache(cached.counters());
            model = Arc::new(cached);
        }
        Ok(Self {
            model,
            readiness,
            limiter,
            cache,
        })
    }
}

type Base = (Arc<dyn LanguageModel>, Readiness, String, String);

/// The OpenAI-compatible model with metering and adaptive concurrency, its readiness
/// check, and its cache identity and parameters (the same as the CLI's, so a cache file
/// is shared with `synthkit ask --cache`).
async fn openai_base(
    openai: &OpenAiConfig,
    config: &BackendConfig,
    metrics: &Arc<Metrics>,
) -> Result<Base, ServeError> {
    let mut model = OpenAiModel::connect(openai.clone())
        .await
        .map_err(|e| ServeError::Backend(e.to_string()))?;
    if config.server_tokenizer && model.tokenizer().is_none() {
        model.use_server_counter().await;
    }
    let ceiling = match (config.max_in_flight, model.server_slots()) {
        (0, Some(slots)) => slots,
        (0, None) => 4096,
        (n, Some(slots)) => n.min(slots),
        (n, None) => n,
    };
    let readiness = Readiness::Http {
        url: format!("{}/models", openai.base().trim_end_matches('/')),
        key: openai.api_key.clone(),
    };
    let mut params = format!(
        "temperature={:?} json_schema={} extra_body={}",
        openai.temperature,
        openai.json_schema,
        serde_json::Value::Object(openai.extra_body.clone())
    );
    if let Some(p) = openai.top_p {
        params.push_str(&format!(" top_p={p:?}"));
    }
    if let Some(seed) = openai.seed {
        params.push_str(&format!(" seed={seed}"));
    }
    let identity = format!("openai {}", openai.endpoint());
    let metered = MeteredModel::new(model, Arc::clone(metrics));
    let adaptive = AdaptiveModel::new(metered, AdaptiveLimit::new(ceiling.max(1)));
    Ok((Arc::new(adaptive), readiness, identity, params))
}
