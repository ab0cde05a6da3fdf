//! Anthropic's Messages API backend: Anthropic, and llama.cpp's `llama-server` (which
//! serves `/v1/messages` and `/v1/messages/count_tokens` beside its OpenAI API).
//!
//! ```no_run
//! # async fn demo() -> Result<(), synthkit::model::ModelError> {
//! use synthkit::model::LanguageModel;
//! use synthkit::backend::anthropic::{AnthropicConfig, AnthropicModel};
//!
//! // A local llama.cpp server (no key): the window is read from `/props` and prompts are
//! // counted by the server's `/v1/messages/count_tokens`.
//! let config = AnthropicConfig::new("local")
//!     .with_base_url("http://127.0.0.1:8080")
//!     .with_server_tokenizer(true);
//! let model = AnthropicModel::connect(config).await?;
//! println!("{:?}", model.info());
//! # Ok(()) }
//! ```
//!
//! What it does:
//! - **Requests** go to `POST {root}/v1/messages` (the base URL is taken with or without
//!   its `/v1`) with `x-api-key` (a secret: never in `Debug`, logs or errors) and
//!   `anthropic-version: 2023-06-01`. A text prompt is one user message; a chat's system
//!   messages become `system` (the synthesizer has already added the system prompt that
//!   [`LanguageModel::info`](crate::model::LanguageModel::info) reports), the rest are the `messages`. `max_tokens` (required
//!   by the API) is the request's; `temperature`, `top_p`, `top_k`, `stop_sequences` and
//!   the extra body fields come from the config.
//! - **Replies**: the text of the `text` blocks; `stop_reason: "max_tokens"` is
//!   [`FinishReason::Length`](crate::model::FinishReason::Length), a truncation as with
//!   the OpenAI backend; usage is `input_tokens` (plus the cached prompt tokens, which the
//!   API counts apart) and `output_tokens`.
//! - **Streaming** reads the API's SSE events (`message_start`, `content_block_delta`
//!   `text_delta`s, `message_delta` with the stop reason and usage, `message_stop`,
//!   `ping`, `error`); see [`LanguageModel::stream`](crate::model::LanguageModel::stream) for the guarantees. Timeouts and the
//!   reply size cap are the OpenAI backend's ([`Transport::timeout`](crate::backend::http::Transport::timeout),
//!   [`Transport::idle_timeout`](crate::backend::http::Transport::idle_timeout), [`Transport::max_reply_bytes`](crate::backend::http::Transport::max_reply_bytes)).
//! - **Structured** calls (a request with a [`ModelRequest::schema`]) send no schema: the
//!   prompt the engine builds for them already ends with the schema and the instruction
//!   to reply with one JSON object, and the engine parses and checks the reply (and asks
//!   again once when it does not follow the schema). This works with every Messages API
//!   server: llama.cpp's ignores tools without `--jinja` and has no JSON-schema option on
//!   `/v1/messages`, and a forced tool would turn the reply into `tool_use` blocks that
//!   stream as `input_json_delta`s.
//! - **Errors**: 429 and 529 (`overloaded_error`, also as a stream's `error` event) are
//!   [`ModelError::RateLimited`], with `retry-after` honoured by the retry layer; 401/403
//!   [`ModelError::Auth`]; a prompt over the window [`ModelError::ContextTooLong`]
//!   (Anthropic's `prompt is too long: N tokens > M maximum`, llama.cpp's
//!   `exceed_context_size_error`). Each method makes exactly one HTTP attempt.
//! - **Exact budgets**: [`CountTokens`] counts prompts with the server's
//!   `/v1/messages/count_tokens` ([`AnthropicModel::use_server_counter`]); without it the
//!   engine counts with cl100k and calibrates from the usage the server reports.
//! - **Discovery**: llama.cpp's `/props` gives the window and slots; with
//!   [`AnthropicConfig::discover_model`], `GET {root}/v1/models` the model's name.

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use crate::backend::http::clock::ServedModel;
use crate::backend::http::errors::clip;
use crate::backend::http::reuse::{HintSet, Hints};
use crate::backend::http::server::parse_reply;
use crate::backend::http::verdict::Held;
use crate::backend::http::{HttpApi, HttpModel, key_headers};
use crate::model::{Completion, ModelError, ModelRequest};

mod config;
mod counter;
mod stream;
mod wire;

pub use config::{AnthropicConfig, AnthropicOptions};
pub use counter::CountTokens;
pub use secrecy::SecretString;

/// Anthropic's Messages API (`/v1/messages`), as Anthropic and llama.cpp serve it: the
/// [`HttpApi`] of [`AnthropicConfig`] and [`AnthropicModel`].
#[derive(Debug, Clone, Copy)]
pub enum Anthropic {}

/// A model behind Anthropic's Messages API: the [`HttpModel`] of the [`Anthropic`]
/// API. Implements [`LanguageModel`](crate::model::LanguageModel).
///
/// [`AnthropicModel::connect`] discovers what the config leaves open: the model from
/// `GET {root}/v1/models` (with `discover_model`), the window and the slots from
/// llama.cpp's `/props` (else the window from the listing, when it was asked for), and
/// (with `server_tokenizer`) the server's `/v1/messages/count_tokens` as the exact
/// prompt counter ([`CountTokens`]).
pub type AnthropicModel = HttpModel<Anthropic>;

impl HttpApi for Anthropic {
    const NAME: &'static str = "anthropic";
    const CONFIG_NAME: &'static str = "AnthropicConfig";
    const MODEL_NAME: &'static str = "AnthropicModel";
    const DEFAULT_BASE_URL: &'static str = "https://api.anthropic.com";
    const DEFAULT_MODEL: &'static str = "claude-haiku-4-5";
    const DEFAULT_KEY_VAR: &'static str = "ANTHROPIC_API_KEY";
    const BASE_URL_VAR: &'static str = "ANTHROPIC_BASE_URL";
    type Options = AnthropicOptions;
    type Counter = CountTokens;
    type StreamParser = stream::MessageParser;
    const MODELS_PATH: &'static str = "/v1/models";
    const WINDOW_FROM_LISTING: bool = false;
    const COUNTER_PATH: &'static str = "/v1/messages/count_tokens";

    /// `{root}/v1/messages`.
    fn endpoint(config: &AnthropicConfig) -> String {
        config.root_join("/v1/messages")
    }

    /// `{root}/v1/models`.
    fn models_url(config: &AnthropicConfig) -> String {
        config.root_join("/v1/models")
    }

    /// The key and the version must be valid header values.
    fn check(config: &AnthropicConfig) -> Result<(), ModelError> {
        api_headers(config).map(drop)
    }

    /// `x-api-key` (when there is a key) and `anthropic-version`.
    fn headers(config: &AnthropicConfig) -> Result<HeaderMap, ModelError> {
        api_headers(config)
    }

    fn body(config: &AnthropicConfig, request: &ModelRequest, stream: bool) -> Value {
        wire::request_body(request, config, stream)
    }

    /// A `cache_control` breakpoint at the end of the shared prefix, when the config
    /// asks for it and the prefix is long enough to be cached.
    fn write_hints(
        config: &AnthropicConfig,
        request: &ModelRequest,
        body: &mut Value,
        hints: &Hints<'_>,
    ) -> HintSet {
        let Some(prefix) = hints.prefix else {
            return HintSet::NONE;
        };
        let min = config.min_cached_tokens();
        let set_by_user = ["system", "messages"]
            .iter()
            .any(|f| config.extra_body.contains_key(*f));
        let wanted = config.api.cache_control && hints.allows(HintSet::CACHE_CONTROL);
        if wanted && !set_by_user && wire::mark_prefix(body, &request.prompt, prefix, min) {
            HintSet::CACHE_CONTROL
        } else {
            HintSet::NONE
        }
    }

    fn parse_reply(
        bytes: &[u8],
        key: Option<&SecretString>,
    ) -> Result<(Completion, Option<String>), ModelError> {
        parse_message(bytes, key)
    }

    fn stream_parser(key: Option<SecretString>, served: ServedModel) -> stream::MessageParser {
        stream::MessageParser::new(key, served)
    }

    /// The API version and the temperature.
    fn cache_params(config: &AnthropicConfig) -> String {
        format!(
            "version={} temperature={:?} ",
            config.api.version, config.sampling.temperature
        )
    }

    async fn probe_counter(config: &AnthropicConfig) -> Option<CountTokens> {
        CountTokens::probe(config).await
    }
}

/// The headers of every request: `x-api-key` (when there is a key) and
/// `anthropic-version`.
pub(crate) fn api_headers(config: &AnthropicConfig) -> Result<HeaderMap, ModelError> {
    let mut headers = key_headers(
        HeaderName::from_static("x-api-key"),
        "",
        config.transport.api_key.as_ref(),
    )?;
    let version = HeaderValue::from_str(&config.api.version).map_err(|_| {
        ModelError::Other(format!(
            "the anthropic-version `{}` is not a valid header value",
            config.api.version
        ))
    })?;
    headers.insert(HeaderName::from_static("anthropic-version"), version);
    Ok(headers)
}

/// Parses a non-streamed reply: the completion and the model the server named.
fn parse_message(
    bytes: &[u8],
    key: Option<&SecretString>,
) -> Result<(Completion, Option<String>), ModelError> {
    let (reply, text) = parse_reply(bytes, key, |r: &wire::Message| r.error.as_ref())?;
    if reply.content.is_none() {
        return Err(ModelError::Malformed(format!(
            "the reply has no content: {}",
            clip(text, key)
        )));
    }
    let mut held = Held::default();
    for block in reply.content.iter().flatten() {
        block.note(&mut held);
    }
    if let Some(reason) = reply.stop_reason.as_deref() {
        held.stop_reason(reason);
    }
    held.verdict()?;
    let completion = Completion {
        text: reply.text(),
        usage: reply.usage.map(Into::into),
        finish_reason: reply.stop_reason.as_deref().map(wire::finish_reason),
        thinking: reply.thinking(),
    };
    Ok((completion, reply.model_name().map(str::to_string)))
}

#[cfg(test)]
mod tests;
