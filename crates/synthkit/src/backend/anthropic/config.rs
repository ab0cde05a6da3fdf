//! [`AnthropicConfig`]: where the Messages API server is and what to ask of it.

use std::fmt;
use std::time::Duration;

use secrecy::SecretString;
use serde_json::{Map, Value};

use crate::model::ModelInfo;
use crate::secret::redact_url;

/// How to reach a server of Anthropic's Messages API and what to ask of it.
///
/// Build with [`AnthropicConfig::new`] or [`AnthropicConfig::from_env`] and the `with_*`
/// methods. The API key is a [`SecretString`] sent as `x-api-key`: it never appears in
/// `Debug` output, logs or errors, and the config is not serializable. A base URL with
/// user-info is shown without it everywhere ([`crate::secret::redact_url`]).
#[derive(Clone)]
#[non_exhaustive]
pub struct AnthropicConfig {
    /// The API base URL, with or without its `/v1` (default `https://api.anthropic.com`):
    /// requests go to `{root}/v1/messages`.
    pub base_url: String,
    /// The API key, sent as `x-api-key`; local servers need none.
    pub api_key: Option<SecretString>,
    /// The model name sent with every request.
    pub model: String,
    /// The `anthropic-version` header (default [`AnthropicConfig::API_VERSION`]).
    pub version: String,
    /// The sampling temperature (default 0.1); `None` leaves it to the server.
    pub temperature: Option<f32>,
    /// The nucleus-sampling `top_p` (default `None`: left to the server).
    pub top_p: Option<f32>,
    /// Sample from the `top_k` likeliest tokens (default `None`: left to the server).
    pub top_k: Option<u32>,
    /// Texts that end a reply when the model writes them (`stop_sequences`; default none).
    pub stop_sequences: Vec<String>,
    /// The request timeout (default 600 s): a non-streamed call must be answered in full
    /// within it, a streamed call must send its first event within it.
    pub timeout: Duration,
    /// How long opening the connection may take (default 10 s). Not used with an
    /// [`AnthropicConfig::http_client`] of your own (set it on that client).
    pub connect_timeout: Duration,
    /// The HTTP client to send with (default `None`: one built with synthkit's user agent
    /// and [`AnthropicConfig::connect_timeout`]). Give your own for proxies, custom root
    /// certificates, or one connection pool shared with the rest of your program; the
    /// per-call timeouts above still apply to every call.
    pub http_client: Option<reqwest::Client>,
    /// How long a stream may stay silent between two events once its first event came
    /// (default 120 s).
    pub idle_timeout: Duration,
    /// The context window, if known; else [`AnthropicModel::connect`](super::AnthropicModel::connect)
    /// asks the server (llama.cpp's `/props`), and failing that
    /// [`ModelInfo::DEFAULT_CONTEXT_WINDOW`] is used.
    pub context_window: Option<usize>,
    /// Tokens reserved for the output (default 256); also the `max_tokens` sent when a
    /// request asks for 0 (the API requires `max_tokens`).
    pub num_output: usize,
    /// A system prompt for every request (reported by `info()`, added by the synthesizer).
    pub system_prompt: Option<String>,
    /// Whether [`AnthropicModel::connect`](super::AnthropicModel::connect) probes the
    /// server's `/v1/messages/count_tokens` for exact prompt counts (default false).
    pub server_tokenizer: bool,
    /// Whether [`AnthropicModel::connect`](super::AnthropicModel::connect) asks the server
    /// which model it serves (`GET {root}/v1/models`) and uses the first one's id instead
    /// of [`AnthropicConfig::model`] (default false).
    pub discover_model: bool,
    /// The most bytes read of one reply, streamed or not (default 8 MiB): past it the
    /// reply is refused with [`ModelError::ReplyTooLarge`](crate::model::ModelError::ReplyTooLarge),
    /// never held whole.
    pub max_reply_bytes: usize,
    /// Extra fields merged into every `/v1/messages` body; they override synthkit's.
    pub extra_body: Map<String, Value>,
}

impl fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicConfig")
            .field("base_url", &redact_url(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| "[REDACTED]"))
            .field("model", &self.model)
            .field("version", &self.version)
            .field("temperature", &self.temperature)
            .field("top_p", &self.top_p)
            .field("top_k", &self.top_k)
            .field("stop_sequences", &self.stop_sequences)
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("http_client", &self.http_client.as_ref().map(|_| "custom"))
            .field("idle_timeout", &self.idle_timeout)
            .field("context_window", &self.context_window)
            .field("num_output", &self.num_output)
            .field("system_prompt", &self.system_prompt)
            .field("server_tokenizer", &self.server_tokenizer)
            .field("discover_model", &self.discover_model)
            .field("max_reply_bytes", &self.max_reply_bytes)
            .field("extra_body", &self.extra_body.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl AnthropicConfig {
    /// Anthropic's API base URL.
    pub const DEFAULT_BASE_URL: &'static str = "https://api.anthropic.com";
    /// The model used when none is named.
    pub const DEFAULT_MODEL: &'static str = "claude-haiku-4-5";
    /// The `anthropic-version` sent by default.
    pub const API_VERSION: &'static str = "2023-06-01";
    /// The environment variable read for the API key by [`AnthropicConfig::from_env`].
    pub const DEFAULT_KEY_VAR: &'static str = "ANTHROPIC_API_KEY";
    /// The environment variable read for the base URL after `SYNTHKIT_BASE_URL`.
    pub const BASE_URL_VAR: &'static str = "ANTHROPIC_BASE_URL";

    /// A config for `model` at Anthropic's base URL, with no key and the defaults (those
    /// of [`crate::backend::openai::OpenAiConfig`] where both have a setting).
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            base_url: Self::DEFAULT_BASE_URL.to_string(),
            api_key: None,
            model: model.into(),
            version: Self::API_VERSION.to_string(),
            temperature: Some(0.1),
            top_p: None,
            top_k: None,
            stop_sequences: Vec::new(),
            timeout: Duration::from_secs(600),
            connect_timeout: Duration::from_secs(10),
            http_client: None,
            idle_timeout: Duration::from_secs(120),
            context_window: None,
            num_output: ModelInfo::DEFAULT_NUM_OUTPUT,
            system_prompt: None,
            server_tokenizer: false,
            discover_model: false,
            max_reply_bytes: 8 << 20,
            extra_body: Map::new(),
        }
    }

    /// A config from the environment: base URL from `SYNTHKIT_BASE_URL`, else
    /// `ANTHROPIC_BASE_URL`, else Anthropic's; model from `SYNTHKIT_MODEL`, else
    /// [`AnthropicConfig::DEFAULT_MODEL`]; key from `ANTHROPIC_API_KEY` (empty means none).
    pub fn from_env() -> Self {
        Self::from_env_with_key_var(Self::DEFAULT_KEY_VAR)
    }

    /// Like [`AnthropicConfig::from_env`], with the key read from the variable `key_var`.
    pub fn from_env_with_key_var(key_var: &str) -> Self {
        Self::from_lookup(key_var, |name| std::env::var(name).ok())
    }

    /// Like [`AnthropicConfig::from_env`], reading variables through `lookup`.
    pub fn from_lookup(key_var: &str, lookup: impl Fn(&str) -> Option<String>) -> Self {
        let get = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let model = get("SYNTHKIT_MODEL").unwrap_or_else(|| Self::DEFAULT_MODEL.to_string());
        let mut config = Self::new(model);
        if let Some(url) = get("SYNTHKIT_BASE_URL").or_else(|| get(Self::BASE_URL_VAR)) {
            config.base_url = url;
        }
        config.api_key = get(key_var).map(SecretString::from);
        config
    }

    /// Sets the base URL (with or without `/v1`).
    pub fn with_base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    /// Sets the API key.
    pub fn with_api_key(mut self, key: impl Into<SecretString>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Sets the model name.
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// Sets the temperature; `None` leaves it to the server.
    pub fn with_temperature(mut self, temperature: impl Into<Option<f32>>) -> Self {
        self.temperature = temperature.into();
        self
    }

    /// Sets `top_p`; `None` leaves it to the server.
    pub fn with_top_p(mut self, top_p: impl Into<Option<f32>>) -> Self {
        self.top_p = top_p.into();
        self
    }

    /// Sets `top_k`; `None` leaves it to the server.
    pub fn with_top_k(mut self, top_k: impl Into<Option<u32>>) -> Self {
        self.top_k = top_k.into();
        self
    }

    /// Sets the stop sequences.
    pub fn with_stop_sequences(mut self, stops: impl IntoIterator<Item = String>) -> Self {
        self.stop_sequences = stops.into_iter().collect();
        self
    }

    /// Sets the request timeout ([`AnthropicConfig::timeout`]).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the connect timeout ([`AnthropicConfig::connect_timeout`]).
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sends with `client` ([`AnthropicConfig::http_client`]) instead of a client of synthkit's own.
    pub fn with_http_client(mut self, client: reqwest::Client) -> Self {
        self.http_client = Some(client);
        self
    }

    /// The client to send with: [`AnthropicConfig::http_client`], else a new one with synthkit's
    /// user agent and [`AnthropicConfig::connect_timeout`].
    pub(crate) fn client(&self) -> Result<reqwest::Client, crate::model::ModelError> {
        crate::backend::http::given_or_built(self.http_client.as_ref(), self.connect_timeout)
    }

    /// Sets the idle timeout between stream events ([`AnthropicConfig::idle_timeout`]).
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// Sets the context window, overriding discovery.
    pub fn with_context_window(mut self, tokens: usize) -> Self {
        self.context_window = Some(tokens);
        self
    }

    /// Sets the output reserve.
    pub fn with_num_output(mut self, tokens: usize) -> Self {
        self.num_output = tokens;
        self
    }

    /// Sets the system prompt.
    pub fn with_system_prompt(mut self, prompt: impl Into<Option<String>>) -> Self {
        self.system_prompt = prompt.into();
        self
    }

    /// Whether [`AnthropicModel::connect`](super::AnthropicModel::connect) probes
    /// `/v1/messages/count_tokens`.
    pub fn with_server_tokenizer(mut self, enabled: bool) -> Self {
        self.server_tokenizer = enabled;
        self
    }

    /// Whether [`AnthropicModel::connect`](super::AnthropicModel::connect) uses the first
    /// model the server lists ([`AnthropicConfig::discover_model`]).
    pub fn with_model_discovery(mut self, enabled: bool) -> Self {
        self.discover_model = enabled;
        self
    }

    /// Sets the most bytes read of one reply ([`AnthropicConfig::max_reply_bytes`]).
    pub fn with_max_reply_bytes(mut self, bytes: usize) -> Self {
        self.max_reply_bytes = bytes;
        self
    }

    /// Adds every field of `fields` to every `/v1/messages` body.
    pub fn with_extra_body_fields(mut self, fields: Map<String, Value>) -> Self {
        self.extra_body.extend(fields);
        self
    }

    /// The server root: the base URL without trailing slashes and without its `/v1`.
    pub fn root_url(&self) -> &str {
        let base = self.base_url.trim_end_matches('/');
        base.strip_suffix("/v1").unwrap_or(base)
    }

    /// The Messages endpoint: `{root}/v1/messages`.
    pub fn endpoint(&self) -> String {
        format!("{}/v1/messages", self.root_url())
    }

    /// The counting endpoint: `{root}/v1/messages/count_tokens`.
    pub fn count_tokens_url(&self) -> String {
        format!("{}/v1/messages/count_tokens", self.root_url())
    }

    /// What replies depend on beyond the request, for response-cache keys: the endpoint,
    /// the API version and the sampling parameters (those not set are left out).
    pub fn cache_identity(&self) -> crate::layer::stack::CacheIdentity {
        let mut params = format!(
            "version={} temperature={:?} extra_body={}",
            self.version,
            self.temperature,
            Value::Object(self.extra_body.clone())
        );
        if let Some(p) = self.top_p {
            params.push_str(&format!(" top_p={p:?}"));
        }
        if let Some(k) = self.top_k {
            params.push_str(&format!(" top_k={k}"));
        }
        if !self.stop_sequences.is_empty() {
            params.push_str(&format!(" stop={:?}", self.stop_sequences));
        }
        crate::layer::stack::CacheIdentity::new(format!("anthropic {}", self.endpoint()), params)
    }
}

impl Default for AnthropicConfig {
    fn default() -> Self {
        Self::new(Self::DEFAULT_MODEL)
    }
}
