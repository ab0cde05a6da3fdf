//! [`OpenAiConfig`]: where the server is and what to ask of it.

use super::OpenAi;
use crate::backend::http::{HttpConfig, Sampling, Transport};

/// How to reach an OpenAI-compatible server and what to ask of it: the
/// [`HttpConfig`] of the [`OpenAi`] API, with [`OpenAiOptions`] in its `api` field.
///
/// Build with [`OpenAiConfig::new`] or [`OpenAiConfig::from_env`] and the `with_*` methods.
/// The base URL goes up to and including `/v1` (default `https://api.openai.com/v1`);
/// the key is sent as `Authorization: Bearer` (local servers need none) and never
/// appears in `Debug` output, logs or errors; the extra body fields go into every
/// completion request, chat and completion alike. [`OpenAiModel::discover`](super::OpenAiModel::discover)
/// asks the server for the window the config does not set; with `discover_model`,
/// [`OpenAiModel::connect`](super::OpenAiModel::connect) asks `GET {base}/models`
/// which model it serves; with `server_tokenizer`, it probes the server's `/tokenize`.
pub type OpenAiConfig = HttpConfig<OpenAi>;

/// The OpenAI API's own options (the `api` field of an [`OpenAiConfig`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OpenAiOptions {
    /// Chat model (`/chat/completions`, the default) or completion model (`/completions`).
    pub is_chat: bool,
    /// Whether the server enforces JSON schemas through `response_format` (default true).
    /// When false, structured calls rely on the prompt and tolerant parsing.
    pub json_schema: bool,
    /// Whether to ask for usage in streams (`stream_options.include_usage`, default true).
    pub stream_usage: bool,
    /// Whether calls carry llama.cpp's `id_slot` when the server reported its slots
    /// (`/props` `total_slots`; default true): calls whose prompts share a prefix go to
    /// the slot that last held it, calls at once spread over the others. Never sent to
    /// a server that reported no slots.
    pub slot_affinity: bool,
    /// Whether calls carry `prompt_cache_key` (the prompt's shared prefix's key, 32 hex
    /// digits), which OpenAI uses to send requests sharing a prefix to the same cache:
    /// `Some(true)` always, `Some(false)` never, `None` (the default) only to OpenAI's
    /// own server ([`OpenAiConfig::is_api_server`]). Other servers ignore or refuse the
    /// field; a refusal is answered by sending again without it, and it is not sent to
    /// that server again.
    pub prompt_cache_key: Option<bool>,
}

impl Default for OpenAiOptions {
    fn default() -> Self {
        Self {
            is_chat: true,
            json_schema: true,
            stream_usage: true,
            slot_affinity: true,
            prompt_cache_key: None,
        }
    }
}

impl OpenAiConfig {
    /// The default sampling temperature.
    pub const DEFAULT_TEMPERATURE: f32 = Sampling::DEFAULT_TEMPERATURE;
    /// The default cap on one reply's bytes ([`Transport::max_reply_bytes`]): 8 MiB.
    pub const DEFAULT_MAX_REPLY_BYTES: usize = Transport::DEFAULT_MAX_REPLY_BYTES;

    setters! {
        /// Chat model (`true`) or completion model (`false`).
        pub fn with_chat(is_chat: bool) => api.is_chat;

        /// Whether the server enforces JSON schemas (`response_format`).
        pub fn with_json_schema(supported: bool) => api.json_schema;

        /// Whether to ask for usage in streams.
        pub fn with_stream_usage(include: bool) => api.stream_usage;

        /// Whether calls carry llama.cpp's `id_slot` (its `slot_affinity` option).
        pub fn with_slot_affinity(enabled: bool) => api.slot_affinity;

        /// Whether calls carry `prompt_cache_key` (`None`: only to OpenAI's server).
        pub fn with_prompt_cache_key(enabled: Option<bool>) => api.prompt_cache_key;
    }

    /// The reuse hints `hints` chooses: `id_slot` unless `None`, `prompt_cache_key` as
    /// [`ReuseHints::prompt_cache_key`](crate::backend::http::reuse::ReuseHints::prompt_cache_key) says.
    pub fn with_reuse_hints(self, hints: crate::backend::http::reuse::ReuseHints) -> Self {
        self.with_slot_affinity(hints.slots_and_breakpoints())
            .with_prompt_cache_key(hints.prompt_cache_key())
    }
}
