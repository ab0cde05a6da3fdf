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

use crate::backend::http::discovery::{
    first_model_id, models_context_window, props_context_window, props_window_error, slots_in,
};
use crate::backend::http::errors::clip;
use crate::backend::http::server::{Server, http_model, parse_reply};
use crate::backend::http::verdict::Held;
use crate::backend::http::{HttpApi, key_headers};
use crate::model::{Completion, ModelError, ModelRequest};
use crate::secret::redact_url;

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

impl HttpApi for Anthropic {
    const NAME: &'static str = "anthropic";
    const CONFIG_NAME: &'static str = "AnthropicConfig";
    const DEFAULT_BASE_URL: &'static str = "https://api.anthropic.com";
    const DEFAULT_MODEL: &'static str = "claude-haiku-4-5";
    const DEFAULT_KEY_VAR: &'static str = "ANTHROPIC_API_KEY";
    const BASE_URL_VAR: &'static str = "ANTHROPIC_BASE_URL";
    type Options = AnthropicOptions;
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

/// A model behind Anthropic's Messages API. Implements [`LanguageModel`](crate::model::LanguageModel).
pub struct AnthropicModel {
    config: AnthropicConfig,
    server: Server,
    counter: Option<CountTokens>,
}

impl AnthropicModel {
    /// A model with `config`; makes no request. Fails only if the HTTP client cannot be
    /// built, or the key or version cannot be sent as headers.
    pub fn new(config: AnthropicConfig) -> Result<Self, ModelError> {
        api_headers(&config)?;
        Self::unconnected(config)
    }

    /// A model with `config`, then: the model name from `GET {root}/v1/models` when
    /// [`AnthropicConfig::discover_model`] is set; the window (unless the config sets
    /// it) and the slots from llama.cpp's `GET {root}/props`, else the window from the
    /// listing; the server's counter when [`AnthropicConfig::server_tokenizer`] is set.
    /// None of them failing is an error; a discovery request that times out skips the
    /// rest.
    pub async fn connect(config: AnthropicConfig) -> Result<Self, ModelError> {
        let mut model = Self::new(config)?;
        let mut listing = None;
        if model.config.discover_model {
            listing = model.get_json("/v1/models").await;
            match listing.as_ref().and_then(first_model_id) {
                Some(id) => {
                    tracing::info!(model = %id, "using the model the server lists first at /v1/models");
                    model.config.model = id;
                }
                None => tracing::info!(
                    model = %model.config.model,
                    "the server lists no model at /v1/models; sending the configured model name"
                ),
            }
        }
        let props = model.get_json("/props").await;
        model.server.discovered_slots = props.as_ref().and_then(slots_in);
        if model.config.context_window.is_none() {
            model.server.discovered_context_window =
                props.as_ref().and_then(props_context_window).or_else(|| {
                    let m = &model.config.model;
                    listing.as_ref().and_then(|l| models_context_window(l, m))
                });
            // A window the server got wrong is an error, unless another answer gave one.
            if model.server.discovered_context_window.is_none()
                && let Some(e) = props
                    .as_ref()
                    .and_then(|p| props_window_error(p, &model.config.root_join("/props")))
            {
                return Err(e);
            }
        }
        if model.config.server_tokenizer && !model.use_server_counter().await {
            tracing::warn!(
                root = %redact_url(model.config.root_url()),
                "the server has no usable /v1/messages/count_tokens; counting with the built-in tokenizer"
            );
        }
        Ok(model)
    }

    /// Probes the server's `/v1/messages/count_tokens` and, if it counts, uses it as the
    /// model's exact prompt counter ([`LanguageModel::counter`](crate::model::LanguageModel::counter)). Returns whether it
    /// does. Skipped (`false`) when a discovery request of this model timed out.
    pub async fn use_server_counter(&mut self) -> bool {
        if self.server.link.stalled() {
            return false;
        }
        self.counter = CountTokens::probe(&self.config).await;
        self.counter.is_some()
    }

    async fn get_json(&self, path: &str) -> Option<Value> {
        let url = self.config.root_join(path);
        let headers = self.request_headers().unwrap_or_default();
        self.server
            .link
            .discover(&self.config.transport, &url, headers)
            .await
    }

    /// The headers of every request ([`api_headers`]).
    fn request_headers(&self) -> Result<HeaderMap, ModelError> {
        api_headers(&self.config)
    }

    fn body(&self, request: &ModelRequest, stream: bool) -> Value {
        wire::request_body(request, &self.config, stream)
    }
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
    };
    Ok((completion, reply.model_name().map(str::to_string)))
}

http_model! {
    model: AnthropicModel,
    config: AnthropicConfig,
    counter: CountTokens,
    api: "anthropic",
    is_chat: |_| true,
    parse: parse_message,
    stream_parser: stream::MessageParser::new,
}

#[cfg(test)]
mod tests;
