//! [`AnthropicConfig`]: where the Messages API server is and what to ask of it.

use super::Anthropic;
use crate::backend::http::HttpConfig;

/// How to reach a server of Anthropic's Messages API and what to ask of it: the
/// [`HttpConfig`] of the [`Anthropic`] API, with [`AnthropicOptions`] in its `api`
/// field.
///
/// Build with [`AnthropicConfig::new`] or [`AnthropicConfig::from_env`] and the `with_*`
/// methods. The base URL is taken with or without its `/v1` (default
/// `https://api.anthropic.com`; requests go to `{root}/v1/messages`); the key, sent as
/// `x-api-key` (local servers need none), never appears in `Debug` output, logs or
/// errors. The Messages API has no `seed`, which is sent only when set, for servers that
/// take it; the output reserve is also the `max_tokens` sent when a request asks for 0
/// (the API requires `max_tokens`). [`AnthropicModel::connect`](super::AnthropicModel::connect)
/// asks the server (llama.cpp's `/props`) for the window the config does not set; with
/// `discover_model`, `GET {root}/v1/models` for the model; with `server_tokenizer`, it
/// probes the server's `/v1/messages/count_tokens`.
pub type AnthropicConfig = HttpConfig<Anthropic>;

/// The Messages API's own options (the `api` field of an [`AnthropicConfig`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AnthropicOptions {
    /// The `anthropic-version` header (default [`AnthropicConfig::API_VERSION`]).
    pub version: String,
    /// Whether calls mark the end of the prompt's shared prefix with a `cache_control`
    /// breakpoint (`{"type": "ephemeral"}`, default true), so that the server caches it
    /// for the calls that repeat it. Sent only when the prefix's whole leading messages
    /// reach the model's minimum for caching
    /// ([`AnthropicConfig::min_cached_tokens`]), one breakpoint per call (the API
    /// allows four). A server that refuses it gets the call again without it, and it
    /// is not sent to that server again.
    pub cache_control: bool,
}

impl Default for AnthropicOptions {
    fn default() -> Self {
        Self {
            version: AnthropicConfig::API_VERSION.to_string(),
            cache_control: true,
        }
    }
}

impl AnthropicConfig {
    /// The `anthropic-version` sent by default.
    pub const API_VERSION: &'static str = "2023-06-01";

    /// The fewest prompt tokens Anthropic caches for the config's model: 2048 for Haiku
    /// models, 1024 for the others. A shorter prefix is not marked.
    pub fn min_cached_tokens(&self) -> usize {
        if self.model.to_ascii_lowercase().contains("haiku") {
            2048
        } else {
            1024
        }
    }

    setters! {
        /// Whether calls mark the shared prefix with `cache_control` (its
        /// `cache_control` option).
        pub fn with_cache_control(enabled: bool) => api.cache_control;
    }

    /// The reuse hints `hints` chooses: `cache_control` breakpoints unless `None`.
    pub fn with_reuse_hints(self, hints: crate::backend::http::reuse::ReuseHints) -> Self {
        self.with_cache_control(hints.slots_and_breakpoints())
    }

    /// The counting endpoint: `{root}/v1/messages/count_tokens`.
    pub fn count_tokens_url(&self) -> String {
        self.root_join("/v1/messages/count_tokens")
    }
}
