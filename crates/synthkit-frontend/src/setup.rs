//! The model setup: which model answers ([`ModelChoice`]) and the stack around it
//! ([`StackOptions`]), built in one place ([`ModelSetup::build`] -> [`BuiltModel`]).
//!
//! The layer order and every default are the core's ([`synthkit::layer::stack`]); the
//! connect path is the core's ([`synthkit::backend::connect`]). This module adds the one
//! choice the core cannot name, the extractive backend, and the mapping from a choice to
//! a built stack, so no front end writes it again.

use std::sync::Arc;

use synthkit::backend::anthropic::AnthropicConfig;
use synthkit::backend::connect::{
    Connect, ConnectError, ConnectedServer, Counting, ServerSettings,
};
use synthkit::backend::openai::OpenAiConfig;
use synthkit::backend::probe::Readiness;
use synthkit::layer::meter::CallMeter;
use synthkit::layer::retry::RetryPolicy;
use synthkit::layer::sharing::Sharing;
use synthkit::layer::stack::{CacheIdentity, ModelStack, calls_in_flight};
use synthkit::model::LanguageModel;
use synthkit::text::{BpeTokenizer, SharedTokenizer};
use synthkit_extractive::ExtractiveModel;

/// The extractive backend's name in reports.
pub const EXTRACTIVE: &str = "extractive";

/// Which model answers.
#[derive(Clone)]
#[non_exhaustive]
pub enum ModelChoice {
    /// The offline extractive backend (no server, no weights).
    Extractive(ExtractiveChoice),
    /// A model server.
    Server(ServerChoice),
    /// A model of your own (a Python LLM, a test double), named in reports by `name`,
    /// its replies depending on `identity` beyond the request.
    Custom {
        /// The backend's name in reports (`python`).
        name: &'static str,
        /// The model.
        model: Arc<dyn LanguageModel>,
        /// What its replies depend on (the cache keys).
        identity: CacheIdentity,
    },
}

impl std::fmt::Debug for ModelChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelChoice::Extractive(e) => f.debug_tuple("Extractive").field(e).finish(),
            ModelChoice::Server(s) => f.debug_tuple("Server").field(s).finish(),
            ModelChoice::Custom { name, identity, .. } => f
                .debug_struct("Custom")
                .field("name", name)
                .field("identity", identity)
                .finish_non_exhaustive(),
        }
    }
}

/// The extractive backend's facts; `None` keeps its defaults.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ExtractiveChoice {
    /// The context window it packs prompts for.
    pub context_window: Option<usize>,
    /// The output reserve of each call.
    pub num_output: Option<usize>,
    /// The model name in reports.
    pub name: Option<String>,
    /// Its tokenizer (default `cl100k_base`), which also counts the budgets.
    pub tokenizer: Option<SharedTokenizer>,
}

/// A server: its API's settings, how prompts are counted, whether a key is required.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerChoice {
    /// The API and its config (URL, key, model, window, sampling, transport).
    pub settings: ServerSettings,
    /// How the connected model counts prompts (default: the server where it can).
    pub counting: Counting,
    /// Refuse the API's own server without a key before any request (default true; a
    /// dry run that makes no call may go without).
    pub require_key: bool,
}

/// The stack around the model. [`StackOptions::default`]: the core's default calls in
/// flight, default retries, no budget, no cache, no meter.
#[derive(Clone)]
#[non_exhaustive]
pub struct StackOptions {
    /// Calls in flight of one synthesis (`None`: the core's default; 0: no cap); never
    /// more than the server's slots when it says ([`calls_in_flight`], the one rule).
    pub calls_in_flight: Option<usize>,
    /// Syntheses that run at once on this stack (each may have its calls in flight).
    pub syntheses: usize,
    /// Retries of transient failures ([`RetryPolicy::none`]: each call sent once).
    pub retry: RetryPolicy,
    /// Where the rate budget and the response cache live.
    pub sharing: Sharing,
    /// Meters that see every attempt and retry (metrics).
    pub meters: Vec<Arc<dyn CallMeter>>,
}

impl Default for StackOptions {
    fn default() -> Self {
        Self {
            calls_in_flight: None,
            syntheses: 1,
            retry: RetryPolicy::default(),
            sharing: Sharing::default(),
            meters: Vec::new(),
        }
    }
}

impl std::fmt::Debug for StackOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StackOptions")
            .field("calls_in_flight", &self.calls_in_flight)
            .field("syntheses", &self.syntheses)
            .field("retry", &self.retry)
            .field("sharing", &self.sharing)
            .field("meters", &self.meters.len())
            .finish()
    }
}

impl StackOptions {
    /// Sets the calls in flight of one synthesis (`None`: the default; 0: no cap).
    pub fn with_calls_in_flight(mut self, n: Option<usize>) -> Self {
        self.calls_in_flight = n;
        self
    }

    /// Sets the syntheses that run at once on the stack (at least 1).
    pub fn with_syntheses(mut self, n: usize) -> Self {
        self.syntheses = n.max(1);
        self
    }

    /// Sets the retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Sets where the budget and the cache live.
    pub fn with_sharing(mut self, sharing: Sharing) -> Self {
        self.sharing = sharing;
        self
    }

    /// Adds a meter.
    pub fn with_meter(mut self, meter: Arc<dyn CallMeter>) -> Self {
        self.meters.push(meter);
        self
    }

    /// The stack's cap on calls in flight: each synthesis's, times the syntheses (0: no
    /// cap); the stack lowers it to the server's slots.
    fn stack_cap(&self) -> usize {
        let one = self
            .calls_in_flight
            .unwrap_or(ModelStack::DEFAULT_MAX_IN_FLIGHT);
        one.saturating_mul(self.syntheses.max(1))
    }
}

/// What the user chose: the model and the stack around it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ModelSetup {
    /// Which model answers.
    pub choice: ModelChoice,
    /// The stack around it.
    pub stack: StackOptions,
}

impl ModelSetup {
    /// The offline extractive backend with its defaults.
    pub fn extractive() -> Self {
        Self::new(ModelChoice::Extractive(ExtractiveChoice::default()))
    }

    /// A server (an [`OpenAiConfig`] or an [`AnthropicConfig`]), counted by the server
    /// where it can, a key required for the API's own server.
    pub fn server(settings: impl Into<ServerSettings>) -> Self {
        Self::new(ModelChoice::Server(ServerChoice {
            settings: settings.into(),
            counting: Counting::ServerWhereAvailable,
            require_key: true,
        }))
    }

    /// An OpenAI-compatible server.
    pub fn openai(config: OpenAiConfig) -> Self {
        Self::server(config)
    }

    /// A server of Anthropic's Messages API.
    pub fn anthropic(config: AnthropicConfig) -> Self {
        Self::server(config)
    }

    /// A model of your own, named `name` in reports (see [`ModelChoice::Custom`]).
    pub fn custom(
        name: &'static str,
        model: Arc<dyn LanguageModel>,
        identity: CacheIdentity,
    ) -> Self {
        Self::new(ModelChoice::Custom {
            name,
            model,
            identity,
        })
    }

    /// `choice` with the default stack.
    pub fn new(choice: ModelChoice) -> Self {
        Self {
            choice,
            stack: StackOptions::default(),
        }
    }

    /// Sets the stack options.
    pub fn with_stack(mut self, stack: StackOptions) -> Self {
        self.stack = stack;
        self
    }

    /// Changes the stack options.
    pub fn map_stack(mut self, f: impl FnOnce(StackOptions) -> StackOptions) -> Self {
        self.stack = f(self.stack);
        self
    }

    /// Sets how a server's prompts are counted (no effect on the extractive backend).
    pub fn with_counting(mut self, counting: Counting) -> Self {
        if let ModelChoice::Server(s) = &mut self.choice {
            s.counting = counting;
        }
        self
    }

    /// Whether the API's own server is refused without a key (no effect on the
    /// extractive backend).
    pub fn require_key(mut self, require: bool) -> Self {
        if let ModelChoice::Server(s) = &mut self.choice {
            s.require_key = require;
        }
        self
    }

    /// Sets the extractive backend's window and output reserve (no effect on a server,
    /// whose config carries its own).
    pub fn with_window(mut self, context_window: Option<usize>, num_output: Option<usize>) -> Self {
        if let ModelChoice::Extractive(e) = &mut self.choice {
            e.context_window = context_window;
            e.num_output = num_output;
        }
        self
    }

    /// Counts prompts (and splits files) with `tokenizer`: the extractive backend's
    /// tokenizer, a server's [`Counting::Tokenizer`].
    pub fn with_tokenizer(mut self, tokenizer: SharedTokenizer) -> Self {
        match &mut self.choice {
            ModelChoice::Extractive(e) => e.tokenizer = Some(tokenizer),
            ModelChoice::Server(s) => s.counting = Counting::Tokenizer(tokenizer),
            ModelChoice::Custom { .. } => {}
        }
        self
    }

    /// Names the extractive backend's model in reports (a server's config names its own).
    pub fn with_name(mut self, name: Option<String>) -> Self {
        if let ModelChoice::Extractive(e) = &mut self.choice {
            e.name = name;
        }
        self
    }

    /// The backend's name in reports: `extractive`, the server API's name (`openai`,
    /// `anthropic`), or a custom model's.
    pub fn backend_name(&self) -> &'static str {
        match &self.choice {
            ModelChoice::Extractive(_) => EXTRACTIVE,
            ModelChoice::Server(s) => s.settings.api_name(),
            ModelChoice::Custom { name, .. } => name,
        }
    }

    /// Builds the model and its stack. For a server this connects: the key check (when
    /// required), discovery (model, window, slots, as the config asks) and counting; it
    /// never makes a model call.
    pub async fn build(self) -> Result<BuiltModel, ConnectError> {
        let backend = self.backend_name();
        let options = self.stack;
        let (model, identity, budget_tokenizer, split_tokenizer, server, readiness) =
            match self.choice {
                ModelChoice::Extractive(e) => {
                    let tokenizer = e
                        .tokenizer
                        .unwrap_or_else(|| BpeTokenizer::cl100k_base().shared());
                    let mut model = ExtractiveModel::new().with_tokenizer(tokenizer.clone());
                    if let Some(w) = e.context_window {
                        model = model.with_context_window(w);
                    }
                    if let Some(n) = e.num_output {
                        model = model.with_num_output(n);
                    }
                    if let Some(name) = e.name {
                        model = model.with_name(name);
                    }
                    let identity = model.cache_identity();
                    let model: Arc<dyn LanguageModel> = Arc::new(model);
                    (
                        model,
                        identity,
                        tokenizer.clone(),
                        tokenizer,
                        None,
                        Readiness::Always,
                    )
                }
                ModelChoice::Custom {
                    model, identity, ..
                } => {
                    let tokenizer = BpeTokenizer::cl100k_base().shared();
                    let budget = model.tokenizer().unwrap_or_else(|| tokenizer.clone());
                    (model, identity, budget, tokenizer, None, Readiness::Always)
                }
                ModelChoice::Server(s) => {
                    let split = match &s.counting {
                        Counting::Tokenizer(t) => t.clone(),
                        _ => BpeTokenizer::cl100k_base().shared(),
                    };
                    let server = Connect::new(s.settings)
                        .counting(s.counting)
                        .require_key(s.require_key)
                        .connect()
                        .await?;
                    let budget = server.model.tokenizer().unwrap_or_else(|| split.clone());
                    (
                        Arc::clone(&server.model),
                        server.identity.clone(),
                        budget,
                        split,
                        Some(server.clone()),
                        server.readiness.clone(),
                    )
                }
            };
        let server_slots = server.as_ref().and_then(|s| s.server_slots);
        let mut builder = ModelStack::builder_arc(model)
            .max_in_flight(options.stack_cap())
            .server_slots(server_slots)
            .retry(options.retry);
        builder = options.sharing.apply(builder, identity.clone());
        for meter in &options.meters {
            builder = builder.meter(Arc::clone(meter));
        }
        let stack = builder.build();
        Ok(BuiltModel {
            calls_in_flight: calls_in_flight(options.calls_in_flight, server_slots),
            stack,
            backend,
            identity,
            server_slots,
            budget_tokenizer,
            split_tokenizer,
            server,
            readiness,
            sharing: options.sharing,
        })
    }
}

/// A built model: the stack and what the front ends report and check of it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BuiltModel {
    /// The model behind every layer.
    pub stack: ModelStack,
    /// `extractive`, `openai` or `anthropic`.
    pub backend: &'static str,
    /// Calls in flight of one synthesis: the asked number (or the default) under the
    /// server's slots.
    pub calls_in_flight: usize,
    /// What the replies depend on beyond the request (the cache keys).
    pub identity: CacheIdentity,
    /// Requests the server runs at once, when it said (llama.cpp's `/props`).
    pub server_slots: Option<usize>,
    /// Counts prompts for the budget: the model's own counter when it has one, else the
    /// splitting tokenizer.
    pub budget_tokenizer: SharedTokenizer,
    /// Splits files into nodes: the tokenizer the user named, else `cl100k_base`.
    pub split_tokenizer: SharedTokenizer,
    /// The connected server (none for the extractive backend).
    pub server: Option<ConnectedServer>,
    /// How to ask whether the backend is still there.
    pub readiness: Readiness,
    /// Where the budget and the cache live (for health and reports).
    pub sharing: Sharing,
}

impl BuiltModel {
    /// The model with all its layers.
    pub fn model(&self) -> Arc<dyn LanguageModel> {
        self.stack.model()
    }

    /// Whether the offline extractive backend answers.
    pub fn is_extractive(&self) -> bool {
        self.backend == EXTRACTIVE
    }

    /// The model's name in reports: the one the server gave in its latest reply, else
    /// the configured (or discovered) name.
    pub fn model_name(&self) -> String {
        self.server
            .as_ref()
            .and_then(ConnectedServer::served_model)
            .unwrap_or_else(|| self.stack.model().info().name)
    }
}
