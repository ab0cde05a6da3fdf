//! [`OpenAiConfig`]: where the server is and what to ask of it.

use std::fmt;
use std::time::Duration;

use serde_json::{Map, Value};

use super::SecretString;
use crate::model::ModelInfo;
use crate::secret::redact_url;

/// How to reach an OpenAI-compatible server and what to ask of it.
///
/// Build with [`OpenAiConfig::new`] or [`OpenAiConfig::from_env`] and the `with_*` methods.
/// The API key is a [`SecretString`]: it never appears in `Debug` output, logs or errors,
/// and the config is not serializable. A base URL with user-info
/// (`http://user:password@host/v1`, sent as basic authentication) is shown without it
/// everywhere ([`crate::secret::redact_url`]: `http://***@host/v1`).
#[derive(Clone)]
#[non_exhaustive]
pub struct OpenAiConfig {
    /// The API base URL, up to and including `/v1` (default `https://api.openai.com/v1`).
    pub base_url: String,
    /// The API key, sent as `Authorization: Bearer`; local servers need none.
    pub api_key: Option<SecretString>,
    /// The model name sent with every request.
    pub model: String,
    /// The sampling temperature (default 0.1); `None` leaves it to the server.
    pub temperature: Option<f32>,
    /// The nucleus-sampling `top_p` (default `None`: left to the server).
    pub top_p: Option<f32>,
    /// The sampling `seed` (default `None`: left to the server); servers that honour it
    /// (llama.cpp, vLLM, OpenAI) then sample reproducibly.
    pub seed: Option<i64>,
    /// The request timeout (default 600 s, as OpenAI's SDKs use). A non-streamed call must
    /// be answered in full within it; a streamed call must send its first event within
    /// it (a server reads the whole prompt before the first token, which takes minutes
    /// for long prompts on a CPU), after which only [`OpenAiConfig::idle_timeout`] applies,
    /// so a stream that keeps producing tokens is never cut.
    pub timeout: Duration,
    /// How long opening the connection may take (default 10 s). Not used with an
    /// [`OpenAiConfig::http_client`] of your own (set it on that client).
    pub connect_timeout: Duration,
    /// The HTTP client to send with (default `None`: one built with synthkit's user agent
    /// and [`OpenAiConfig::connect_timeout`]). Give your own for proxies, custom root
    /// certificates, or one connection pool shared with the rest of your program; the
    /// per-call timeouts above still apply to every call.
    pub http_client: Option<reqwest::Client>,
    /// How long a stream may stay silent between two events once its first event came
    /// (default 120 s).
    pub idle_timeout: Duration,
    /// The context window, if known; else [`OpenAiModel::discover`](super::OpenAiModel::discover) asks the server, and
    /// failing that [`ModelInfo::DEFAULT_CONTEXT_WINDOW`] is used.
    pub context_window: Option<usize>,
    /// Tokens reserved for the output (default 256).
    pub num_output: usize,
    /// Chat model (`/chat/completions`, the default) or completion model (`/completions`).
    pub is_chat: bool,
    /// A system prompt for every request (reported by `info()`, added by the synthesizer).
    pub system_prompt: Option<String>,
    /// Whether the server enforces JSON schemas through `response_format` (default true).
    /// When false, structured calls rely on the prompt and tolerant parsing.
    pub json_schema: bool,
    /// Whether to ask for usage in streams (`stream_options.include_usage`, default true).
    pub stream_usage: bool,
    /// Whether [`OpenAiModel::connect`](super::OpenAiModel::connect) probes the server's `/tokenize` (default false).
    pub server_tokenizer: bool,
    /// Whether [`OpenAiModel::connect`](super::OpenAiModel::connect) asks the server which
    /// model it serves (`GET {base}/models`) and uses the first one's id instead of
    /// [`OpenAiConfig::model`] (default false; see
    /// [`OpenAiModel::discover_model`](super::OpenAiModel::discover_model)).
    pub discover_model: bool,
    /// The most bytes read of one reply (default
    /// [`OpenAiConfig::DEFAULT_MAX_REPLY_BYTES`], 8 MiB): a non-streamed body, or all
    /// the bytes of a streamed one (SSE framing included: at typical chunk sizes 8 MiB is
    /// some 35,000 streamed tokens), also the answers to discovery and `/tokenize`.
    /// Reading stops as soon as a reply passes it, with
    /// [`ModelError::ReplyTooLarge`](crate::model::ModelError::ReplyTooLarge), so a
    /// server that answers without end costs at most this much memory. Error bodies are
    /// read up to 64 KiB (or this cap, if smaller) and cut there.
    pub max_reply_bytes: usize,
    /// Extra fields merged into every completion request body, chat and completion alike
    /// (`cache_prompt`, `top_k`, `min_p`, ...); they override the fields synthkit sets.
    pub extra_body: Map<String, Value>,
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &redact_url(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| "[REDACTED]"))
            .field("model", &self.model)
            .field("temperature", &self.temperature)
            .field("top_p", &self.top_p)
            .field("seed", &self.seed)
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("http_client", &self.http_client.as_ref().map(|_| "custom"))
            .field("idle_timeout", &self.idle_timeout)
            .field("context_window", &self.context_window)
            .field("num_output", &self.num_output)
            .field("is_chat", &self.is_chat)
            .field("system_prompt", &self.system_prompt)
            .field("json_schema", &self.json_schema)
            .field("stream_usage", &self.stream_usage)
            .field("server_tokenizer", &self.server_tokenizer)
            .field("discover_model", &self.discover_model)
            .field("max_reply_bytes", &self.max_reply_bytes)
            .field("extra_body", &self.extra_body.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl OpenAiConfig {
    /// OpenAI's API base URL.
    pub const DEFAULT_BASE_URL: &'static str = "https://api.openai.com/v1";
    /// The model used when none is named.
    pub const DEFAULT_MODEL: &'static str = "gpt-4o-mini";
    /// The default sampling temperature.
    pub const DEFAULT_TEMPERATURE: f32 = 0.1;
    /// The default request timeout ([`OpenAiConfig::timeout`]): 600 s, as OpenAI's SDKs.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
    /// The default connect timeout ([`OpenAiConfig::connect_timeout`]).
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
    /// The default idle timeout between stream events ([`OpenAiConfig::idle_timeout`]).
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);
    /// The default cap on one reply's bytes ([`OpenAiConfig::max_reply_bytes`]): 8 MiB.
    pub const DEFAULT_MAX_REPLY_BYTES: usize = 8 << 20;
    /// The environment variable read for the API key by [`OpenAiConfig::from_env`].
    pub const DEFAULT_KEY_VAR: &'static str = "OPENAI_API_KEY";

    /// A config for `model` at OpenAI's base URL, with no key and the defaults.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            base_url: Self::DEFAULT_BASE_URL.to_string(),
            api_key: None,
            model: model.into(),
            temperature: Some(Self::DEFAULT_TEMPERATURE),
            top_p: None,
            seed: None,
            timeout: Self::DEFAULT_TIMEOUT,
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
            http_client: None,
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
            context_window: None,
            num_output: ModelInfo::DEFAULT_NUM_OUTPUT,
            is_chat: true,
            system_prompt: None,
            json_schema: true,
            stream_usage: true,
            server_tokenizer: false,
            discover_model: false,
            max_reply_bytes: Self::DEFAULT_MAX_REPLY_BYTES,
            extra_body: Map::new(),
        }
    }

    /// A config from the environment: base URL from `SYNTHKIT_BASE_URL`, else
    /// `OPENAI_BASE_URL`, else OpenAI's; model from `SYNTHKIT_MODEL`, else
    /// [`OpenAiConfig::DEFAULT_MODEL`]; key from `OPENAI_API_KEY` (empty means none).
    pub fn from_env() -> Self {
        Self::from_env_with_key_var(Self::DEFAULT_KEY_VAR)
    }

    /// Like [`OpenAiConfig::from_env`], with the key read from the variable `key_var`.
    pub fn from_env_with_key_var(key_var: &str) -> Self {
        Self::from_lookup(key_var, |name| std::env::var(name).ok())
    }

    /// Like [`OpenAiConfig::from_env`], reading variables through `lookup` (for tests and
    /// for settings that come from elsewhere).
    pub fn from_lookup(key_var: &str, lookup: impl Fn(&str) -> Option<String>) -> Self {
        let get = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let model = get("SYNTHKIT_MODEL").unwrap_or_else(|| Self::DEFAULT_MODEL.to_string());
        let mut config = Self::new(model);
        if let Some(url) = get("SYNTHKIT_BASE_URL").or_else(|| get("OPENAI_BASE_URL")) {
            config.base_url = url;
        }
        config.api_key = get(key_var).map(SecretString::from);
        config
    }

    /// Sets the base URL (up to and including `/v1`).
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

    /// Sets the sampling `seed`; `None` leaves it to the server.
    pub fn with_seed(mut self, seed: impl Into<Option<i64>>) -> Self {
        self.seed = seed.into();
        self
    }

    /// Sets the request timeout ([`OpenAiConfig::timeout`]).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the connect timeout ([`OpenAiConfig::connect_timeout`]).
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sends with `client` ([`OpenAiConfig::http_client`]) instead of a client of synthkit's own.
    pub fn with_http_client(mut self, client: reqwest::Client) -> Self {
        self.http_client = Some(client);
        self
    }

    /// The client to send with: [`OpenAiConfig::http_client`], else a new one with synthkit's
    /// user agent and [`OpenAiConfig::connect_timeout`].
    pub(crate) fn client(&self) -> Result<reqwest::Client, crate::model::ModelError> {
        crate::backend::http::given_or_built(self.http_client.as_ref(), self.connect_timeout)
    }

    /// Sets the idle timeout between stream events ([`OpenAiConfig::idle_timeout`]).
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

    /// Chat model (`true`) or completion model (`false`).
    pub fn with_chat(mut self, is_chat: bool) -> Self {
        self.is_chat = is_chat;
        self
    }

    /// Sets the system prompt.
    pub fn with_system_prompt(mut self, prompt: impl Into<Option<String>>) -> Self {
        self.system_prompt = prompt.into();
        self
    }

    /// Whether the server enforces JSON schemas (`response_format`).
    pub fn with_json_schema(mut self, supported: bool) -> Self {
        self.json_schema = supported;
        self
    }

    /// Whether to ask for usage in streams.
    pub fn with_stream_usage(mut self, include: bool) -> Self {
        self.stream_usage = include;
        self
    }

    /// Whether [`OpenAiModel::connect`](super::OpenAiModel::connect) probes the server's `/tokenize`.
    pub fn with_server_tokenizer(mut self, enabled: bool) -> Self {
        self.server_tokenizer = enabled;
        self
    }

    /// Whether [`OpenAiModel::connect`](super::OpenAiModel::connect) uses the first model
    /// the server lists ([`OpenAiConfig::discover_model`]).
    pub fn with_model_discovery(mut self, enabled: bool) -> Self {
        self.discover_model = enabled;
        self
    }

    /// Sets the most bytes read of one reply ([`OpenAiConfig::max_reply_bytes`]).
    pub fn with_max_reply_bytes(mut self, bytes: usize) -> Self {
        self.max_reply_bytes = bytes;
        self
    }

    /// Adds a field to every completion request body.
    pub fn with_extra_body(mut self, key: impl Into<String>, value: Value) -> Self {
        self.extra_body.insert(key.into(), value);
        self
    }

    /// Adds every field of `fields` to every completion request body (a field already
    /// there is replaced).
    pub fn with_extra_body_fields(mut self, fields: Map<String, Value>) -> Self {
        self.extra_body.extend(fields);
        self
    }

    /// The base URL without trailing slashes.
    pub fn base(&self) -> &str {
        self.base_url.trim_end_matches('/')
    }

    /// The server root: the base URL without its trailing `/v1` (where llama.cpp and vLLM
    /// serve `/props`, `/tokenize` and `/health`).
    pub fn root_url(&self) -> &str {
        let base = self.base();
        base.strip_suffix("/v1").unwrap_or(base)
    }

    /// The completion endpoint: `{base}/chat/completions` or `{base}/completions`.
    pub fn endpoint(&self) -> String {
        if self.is_chat {
            format!("{}/chat/completions", self.base())
        } else {
            format!("{}/completions", self.base())
        }
    }

    /// What replies depend on beyond the request, for response-cache keys: the endpoint,
    /// and the sampling parameters, schema mode and extra body fields (top_p and seed
    /// only when set). The model's name is part of every key already.
    pub fn cache_identity(&self) -> crate::layer::stack::CacheIdentity {
        let mut params = format!(
            "temperature={:?} json_schema={} extra_body={}",
            self.temperature,
            self.json_schema,
            Value::Object(self.extra_body.clone())
        );
        // Only when set, so the keys of runs without them stay as they were.
        if let Some(p) = self.top_p {
            params.push_str(&format!(" top_p={p:?}"));
        }
        if let Some(seed) = self.seed {
            params.push_str(&format!(" seed={seed}"));
        }
        crate::layer::stack::CacheIdentity::new(format!("openai {}", self.endpoint()), params)
    }
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        Self::new(Self::DEFAULT_MODEL)
    }
}
