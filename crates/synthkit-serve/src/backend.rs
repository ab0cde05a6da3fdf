//! The backend and its model stack, built once at startup and shared by every request:
//! the offline extractive backend, an OpenAI-compatible server or an Anthropic Messages
//! API server, behind the library's
//! [`ModelStack`] (metering into [`Metrics`], adaptive concurrency, the rate budget
//! local or shared through Redis, retries, the response cache; the order and the
//! defaults are the library's), and how `/readyz` checks it.

use std::sync::Arc;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use synthkit::backend::anthropic::AnthropicConfig;
use synthkit::backend::connect::{
    Connect, ConnectError, ConnectedServer, Counting, ServerSettings,
};
use synthkit::backend::openai::OpenAiConfig;
use synthkit::layer::budget::RateBudget;
use synthkit::layer::cache::{CacheCounters, MemoryCache, ResponseCache};
use synthkit::layer::retry::RetryPolicy;
use synthkit::layer::stack::ModelStack;
use synthkit::model::LanguageModel;
use synthkit::secret::{redact_url, redact_urls};
use synthkit::text::BpeTokenizer;
use synthkit_extractive::ExtractiveModel;

use crate::error::ServeError;
use crate::metrics::Metrics;

/// Which backend answers.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum BackendKind {
    /// The offline extractive backend (no server).
    Extractive,
    /// An OpenAI-compatible server (OpenAI, vLLM, llama.cpp, Ollama).
    OpenAi(Box<OpenAiConfig>),
    /// A server of Anthropic's Messages API (Anthropic, llama.cpp).
    Anthropic(Box<AnthropicConfig>),
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
    /// Calls in flight at the backend across all requests (0: no cap; never more than
    /// the server's slots when it says).
    pub max_in_flight: usize,
    /// Requests per minute across all requests of the process (0: none). With a
    /// [`BackendConfig::shared_budget`] this is the shared budget's business instead.
    pub requests_per_minute: u32,
    /// Tokens per minute across all requests of the process (0: none).
    pub tokens_per_minute: u32,
    /// A budget shared with other replicas (Redis).
    pub shared_budget: Option<Arc<dyn RateBudget>>,
    /// Retries of transient failures, 429s and overloads included (`None`: each call is
    /// sent once).
    pub retry: Option<RetryPolicy>,
    /// The response cache.
    pub cache: CacheChoice,
    /// Whether to ask the server for exact counts where it can (`/tokenize`,
    /// `/v1/messages/count_tokens`).
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

    /// A server of Anthropic's Messages API.
    pub fn anthropic(config: AnthropicConfig) -> Self {
        Self::with_kind(BackendKind::Anthropic(Box::new(config)))
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
    /// Ready when `GET url` answers 2xx with Anthropic's headers (`x-api-key`,
    /// `anthropic-version`): a Messages API server's `/v1/models`.
    Anthropic {
        /// The URL asked.
        url: String,
        /// The key sent as `x-api-key`, if any.
        key: Option<SecretString>,
        /// The `anthropic-version` sent.
        version: String,
    },
}

impl Readiness {
    /// Checks the backend: `Err` says why it is not ready.
    pub async fn check(&self, client: &reqwest::Client) -> Result<(), String> {
        let (url, mut request) = match self {
            Readiness::Always => return Ok(()),
            Readiness::Http { url, key } => {
                let mut request = client.get(url);
                if let Some(key) = key {
                    request = request.bearer_auth(key.expose_secret());
                }
                (url, request)
            }
            Readiness::Anthropic { url, key, version } => {
                let mut request = client.get(url).header("anthropic-version", version);
                if let Some(key) = key {
                    let mut v = reqwest::header::HeaderValue::from_str(key.expose_secret())
                        .map_err(|_| "the API key is not a valid header value".to_string())?;
                    v.set_sensitive(true);
                    request = request.header("x-api-key", v);
                }
                (url, request)
            }
        };
        request = request.timeout(Duration::from_secs(3));
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

/// The built backend: the model stack every request uses, and how `/readyz` checks it.
#[derive(Clone)]
pub struct Backend {
    /// The model behind its layers.
    pub stack: ModelStack,
    /// How to check the backend.
    pub readiness: Readiness,
    /// The budget shared with other replicas, if any: `/readyz` reports its
    /// [`RateBudget::health`] (not ready while Redis is failing).
    pub shared_budget: Option<Arc<dyn RateBudget>>,
}

impl Backend {
    /// Builds the backend and its stack once; share [`Backend::model`] between requests.
    /// For a server this may ask it for its context window, model, slots and counter
    /// (`/tokenize`, `/v1/messages/count_tokens`), never a model call.
    pub async fn build(config: BackendConfig, metrics: Arc<Metrics>) -> Result<Self, ServeError> {
        let (backend, slots, identity, readiness) = match &config.kind {
            BackendKind::Extractive => {
                let tokenizer = BpeTokenizer::cl100k_base().shared();
                let mut m = ExtractiveModel::new().with_tokenizer(tokenizer);
                if let Some(w) = config.context_window {
                    m = m.with_context_window(w);
                }
                if let Some(n) = config.num_output {
                    m = m.with_num_output(n);
                }
                let identity = m.cache_identity();
                let model: Arc<dyn LanguageModel> = Arc::new(m);
                (model, None, identity, Readiness::Always)
            }
            BackendKind::OpenAi(openai) => {
                let readiness = Readiness::Http {
                    url: openai.api_url("/models"),
                    key: openai.transport.api_key.clone(),
                };
                let server = connect(&config, (**openai).clone()).await?;
                (
                    server.model,
                    server.server_slots,
                    server.identity,
                    readiness,
                )
            }
            BackendKind::Anthropic(anthropic) => {
                let readiness = Readiness::Anthropic {
                    url: anthropic.root_join("/v1/models"),
                    key: anthropic.transport.api_key.clone(),
                    version: anthropic.api.version.clone(),
                };
                let server = connect(&config, (**anthropic).clone()).await?;
                (
                    server.model,
                    server.server_slots,
                    server.identity,
                    readiness,
                )
            }
        };
        let mut builder = ModelStack::builder_arc(backend)
            .max_in_flight(config.max_in_flight)
            .server_slots(slots)
            .retry(config.retry.unwrap_or_else(RetryPolicy::none))
            .meter(Arc::clone(&metrics) as Arc<dyn synthkit::layer::meter::CallMeter>);
        builder = match &config.shared_budget {
            Some(budget) => builder.shared_budget(Arc::clone(budget)),
            None => builder.rates_per_minute(config.requests_per_minute, config.tokens_per_minute),
        };
        let store: Option<Arc<dyn ResponseCache>> = match &config.cache {
            CacheChoice::None => None,
            CacheChoice::Memory => Some(Arc::new(MemoryCache::new())),
            CacheChoice::Store(s) => Some(Arc::clone(s)),
        };
        if let Some(store) = store {
            builder = builder.cache(store, identity);
        }
        let stack = builder.build();
        if let Some(counters) = stack.cache_counters() {
            metrics.watch_cache(CacheCounters::clone(counters));
        }
        Ok(Self {
            stack,
            readiness,
            shared_budget: config.shared_budget.clone(),
        })
    }

    /// The model with all its layers.
    pub fn model(&self) -> Arc<dyn LanguageModel> {
        self.stack.model()
    }
}

/// Connects to the server `settings` names as the library's front ends do, asking it for
/// exact counts where it can when `config.server_tokenizer` says so. The key is not
/// checked here: the caller decides whether the API's own server may go without one.
async fn connect(
    config: &BackendConfig,
    settings: impl Into<ServerSettings>,
) -> Result<ConnectedServer, ServeError> {
    let counting = if config.server_tokenizer {
        Counting::ServerWhereAvailable
    } else {
        Counting::AsConfigured
    };
    Connect::new(settings)
        .counting(counting)
        .require_key(false)
        .connect()
        .await
        .map_err(|e| match e {
            ConnectError::Setup(e) => ServeError::Backend(e.to_string()),
            other => ServeError::Backend(other.to_string()),
        })
}
