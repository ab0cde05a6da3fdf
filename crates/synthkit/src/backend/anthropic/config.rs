//! [`AnthropicConfig`]: where the Messages API server is and what to ask of it.

use serde_json::{Map, Value};

use crate::backend::http::builders::config_builders;
use crate::backend::http::{Sampling, Transport};

/// How to reach a server of Anthropic's Messages API and what to ask of it.
///
/// Build with [`AnthropicConfig::new`] or [`AnthropicConfig::from_env`] and the `with_*`
/// methods. Where the server is and how to reach it is its [`Transport`] (shared with the
/// other HTTP backends): the API key, sent as `x-api-key`, never appears in `Debug`
/// output, logs or errors, and a base URL with user-info is shown without it everywhere
/// ([`crate::secret::redact_url`]). The config is not serializable.
#[derive(Clone)]
#[non_exhaustive]
pub struct AnthropicConfig {
    /// How to reach the server: the API base URL, with or without its `/v1` (default
    /// `https://api.anthropic.com`; requests go to `{root}/v1/messages`), the key (sent
    /// as `x-api-key`; local servers need none), the timeouts, the client and the reply
    /// cap.
    pub transport: Transport,
    /// How the server samples (`temperature`, `top_p`, `top_k`, `stop_sequences`; the
    /// Messages API has no `seed`, which is sent only when set, for servers that take it).
    pub sampling: Sampling,
    /// The model name sent with every request.
    pub model: String,
    /// The `anthropic-version` header (default [`AnthropicConfig::API_VERSION`]).
    pub version: String,
    /// The context window, if known; else [`AnthropicModel::connect`](super::AnthropicModel::connect)
    /// asks the server (llama.cpp's `/props`), and failing that
    /// [`ModelInfo::DEFAULT_CONTEXT_WINDOW`](crate::model::ModelInfo::DEFAULT_CONTEXT_WINDOW) is used.
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
    /// Extra fields merged into every `/v1/messages` body; they override synthkit's.
    pub extra_body: Map<String, Value>,
}

config_builders!(AnthropicConfig, own fields: [version: Self::API_VERSION.to_string()]);

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

    /// The Messages endpoint: `{root}/v1/messages`.
    pub fn endpoint(&self) -> String {
        self.root_join("/v1/messages")
    }

    /// The counting endpoint: `{root}/v1/messages/count_tokens`.
    pub fn count_tokens_url(&self) -> String {
        self.root_join("/v1/messages/count_tokens")
    }

    /// What replies depend on beyond the request, for response-cache keys: the endpoint,
    /// the API version and the sampling parameters (those not set are left out).
    pub fn cache_identity(&self) -> crate::layer::stack::CacheIdentity {
        let params = format!(
            "version={} temperature={:?} extra_body={}{}",
            self.version,
            self.sampling.temperature,
            Value::Object(self.extra_body.clone()),
            self.sampling.identity_tail()
        );
        crate::layer::stack::CacheIdentity::new(format!("anthropic {}", self.endpoint()), params)
    }
}
