//! [`OpenAiConfig`]: where the server is and what to ask of it.

use serde_json::{Map, Value};

use crate::backend::http::builders::config_builders;
use crate::backend::http::{Sampling, Transport};

/// How to reach an OpenAI-compatible server and what to ask of it.
///
/// Build with [`OpenAiConfig::new`] or [`OpenAiConfig::from_env`] and the `with_*` methods.
/// Where the server is and how to reach it is its [`Transport`] (shared with the other
/// HTTP backends): the API key is a [`SecretString`](secrecy::SecretString) that never
/// appears in `Debug` output, logs or errors, and a base URL with user-info
/// (`http://user:password@host/v1`, sent as basic authentication) is shown without it
/// everywhere ([`crate::secret::redact_url`]: `http://***@host/v1`). The config is not
/// serializable.
#[derive(Clone)]
#[non_exhaustive]
pub struct OpenAiConfig {
    /// How to reach the server: the API base URL, up to and including `/v1` (default
    /// `https://api.openai.com/v1`), the key (sent as `Authorization: Bearer`; local
    /// servers need none), the timeouts, the client and the reply cap.
    pub transport: Transport,
    /// How the server samples (`temperature`, `top_p`, `top_k`, `seed`, `stop`).
    pub sampling: Sampling,
    /// The model name sent with every request.
    pub model: String,
    /// The context window, if known; else [`OpenAiModel::discover`](super::OpenAiModel::discover) asks the server, and
    /// failing that [`ModelInfo::DEFAULT_CONTEXT_WINDOW`](crate::model::ModelInfo::DEFAULT_CONTEXT_WINDOW) is used.
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
    /// Extra fields merged into every completion request body, chat and completion alike
    /// (`cache_prompt`, `min_p`, ...); they override the fields synthkit sets.
    pub extra_body: Map<String, Value>,
}

config_builders!(OpenAiConfig, own fields: [is_chat: true, json_schema: true, stream_usage: true]);

impl OpenAiConfig {
    /// OpenAI's API base URL.
    pub const DEFAULT_BASE_URL: &'static str = "https://api.openai.com/v1";
    /// The model used when none is named.
    pub const DEFAULT_MODEL: &'static str = "gpt-4o-mini";
    /// The default sampling temperature.
    pub const DEFAULT_TEMPERATURE: f32 = Sampling::DEFAULT_TEMPERATURE;
    /// The default cap on one reply's bytes ([`Transport::max_reply_bytes`]): 8 MiB.
    pub const DEFAULT_MAX_REPLY_BYTES: usize = Transport::DEFAULT_MAX_REPLY_BYTES;
    /// The environment variable read for the API key by [`OpenAiConfig::from_env`].
    pub const DEFAULT_KEY_VAR: &'static str = "OPENAI_API_KEY";
    /// The environment variable read for the base URL after `SYNTHKIT_BASE_URL`.
    pub const BASE_URL_VAR: &'static str = "OPENAI_BASE_URL";

    setters! {
        /// Chat model (`true`) or completion model (`false`).
        pub fn with_chat(is_chat: bool) => is_chat;

        /// Whether the server enforces JSON schemas (`response_format`).
        pub fn with_json_schema(supported: bool) => json_schema;

        /// Whether to ask for usage in streams.
        pub fn with_stream_usage(include: bool) => stream_usage;
    }

    /// The completion endpoint: `{base}/chat/completions` or `{base}/completions`.
    pub fn endpoint(&self) -> String {
        if self.is_chat {
            self.api_url("/chat/completions")
        } else {
            self.api_url("/completions")
        }
    }

    /// What replies depend on beyond the request, for response-cache keys: the endpoint,
    /// and the sampling parameters, schema mode and extra body fields (the sampling
    /// fields after the temperature only when set). The model's name is part of every key already.
    pub fn cache_identity(&self) -> crate::layer::stack::CacheIdentity {
        let params = format!(
            "temperature={:?} json_schema={} extra_body={}{}",
            self.sampling.temperature,
            self.json_schema,
            Value::Object(self.extra_body.clone()),
            self.sampling.identity_tail()
        );
        crate::layer::stack::CacheIdentity::new(format!("openai {}", self.endpoint()), params)
    }
}
