//! The OpenAI-compatible HTTP backend: OpenAI, vLLM, llama.cpp's `llama-server`, Ollama,
//! LM Studio and anything else that serves `/v1/chat/completions` or `/v1/completions`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), synthkit::model::ModelError> {
//! use synthkit::model::LanguageModel;
//! use synthkit::backend::openai::{OpenAiConfig, OpenAiModel};
//!
//! // A local llama.cpp server: no key; the context window is read from `/props` and
//! // token counts come from the server's `/tokenize`.
//! let config = OpenAiConfig::new("local")
//!     .with_base_url("http://127.0.0.1:8080/v1")
//!     .with_server_tokenizer(true);
//! let model = OpenAiModel::connect(config).await?;
//! println!("{:?}", model.info());
//! # Ok(()) }
//! ```
//!
//! What it does:
//! - **Chat** (`is_chat`, the default) sends `RenderedPrompt::Chat` messages as they are and
//!   a `RenderedPrompt::Text` as one user message; **completion** mode sends
//!   [`RenderedPrompt::to_text`](crate::prompt::RenderedPrompt::to_text) as `prompt`. The request's prompt is sent as is: the
//!   synthesizer has already added the system prompt that [`LanguageModel::info`](crate::model::LanguageModel::info) reports.
//! - `max_tokens` is the request's `max_tokens`; `temperature`, `top_p`, `seed` and the
//!   extra body fields come from the config.
//! - **Timeouts** fit local inference: opening the connection is bounded by
//!   [`Transport::connect_timeout`](crate::backend::http::Transport::connect_timeout) (10 s); a non-streamed call by the request timeout
//!   [`Transport::timeout`](crate::backend::http::Transport::timeout) (600 s); a stream by the request timeout until its first
//!   event, then by [`Transport::idle_timeout`](crate::backend::http::Transport::idle_timeout) (120 s) between events, never by a total.
//!   A [`ModelError::Timeout`] says which fired and how long the call had waited.
//! - **Streaming** uses SSE with `stream_options.include_usage`; see [`LanguageModel::stream`](crate::model::LanguageModel::stream)
//!   for the guarantees (deltas, then exactly one `Done`; a cut stream is an error).
//! - **Structured** calls (a request with a [`ModelRequest::schema`], plain or streamed)
//!   send `response_format: json_schema` (strict) when [`OpenAiOptions::json_schema`] is
//!   set; the engine parses and checks the reply.
//! - **Reply size** is capped by [`Transport::max_reply_bytes`](crate::backend::http::Transport::max_reply_bytes) (8 MiB): bodies and
//!   streams are read chunk by chunk and refused with [`ModelError::ReplyTooLarge`] as
//!   soon as they pass it, never held whole.
//! - **Errors** are split by what the caller must do ([`ModelError`]); bodies are cut to
//!   2 KB and the API key is redacted from everything, as is the user-info of the base
//!   URL ([`crate::secret`]). There are no retries here: retries
//!   are a layer around any [`LanguageModel`](crate::model::LanguageModel) driven by [`ModelError::is_transient`] and
//!   `RateLimited::retry_after`; each method below makes exactly one HTTP attempt.
//! - **Discovery** ([`OpenAiModel::discover`]) reads the context window from llama.cpp's
//!   `/props` or a `/models` listing (vLLM's `max_model_len`);
//!   [`OpenAiModel::discover_model`] takes the model name from `/models`, and
//!   [`OpenAiModel::served_model`] is the name the server gave in its latest reply.
//! - **Server counter** ([`ServerCounter`]) counts prompts with the server's own vocabulary.

use serde_json::Value;

use crate::backend::http::clock::ServedModel;
use crate::backend::http::errors::clip;
use crate::backend::http::reuse::{HintSet, Hints, put};
use crate::backend::http::server::parse_reply;
use crate::backend::http::verdict::Held;
use crate::backend::http::{HttpApi, HttpModel};
use crate::model::{Completion, ModelError, ModelRequest};

mod config;
mod slots;
mod stream;
mod tokenizer;
mod wire;

pub use config::{OpenAiConfig, OpenAiOptions};
pub use secrecy::SecretString;
pub use slots::server_slots;
pub use tokenizer::{ServerCounter, TokenizeDialect};

/// The OpenAI API (`/v1/chat/completions`, `/v1/completions`), as OpenAI, vLLM,
/// llama.cpp, Ollama and LM Studio serve it: the [`HttpApi`] of [`OpenAiConfig`] and
/// [`OpenAiModel`].
#[derive(Debug, Clone, Copy)]
pub enum OpenAi {}

/// An OpenAI-compatible model over HTTP: the [`HttpModel`] of the [`OpenAi`] API.
/// Implements [`LanguageModel`](crate::model::LanguageModel).
///
/// [`OpenAiModel::connect`] discovers what the config leaves open: the model from
/// `GET {base}/models` (with `discover_model`), the window from llama.cpp's `/props` or
/// the `/models` listing (vLLM's `max_model_len`), the slots from `/props`, and (with
/// `server_tokenizer`) the server's `/tokenize` as the exact prompt counter
/// ([`ServerCounter`]).
pub type OpenAiModel = HttpModel<OpenAi>;

impl HttpApi for OpenAi {
    const NAME: &'static str = "openai";
    const CONFIG_NAME: &'static str = "OpenAiConfig";
    const MODEL_NAME: &'static str = "OpenAiModel";
    const DEFAULT_BASE_URL: &'static str = "https://api.openai.com/v1";
    const DEFAULT_MODEL: &'static str = "gpt-4o-mini";
    const DEFAULT_KEY_VAR: &'static str = "OPENAI_API_KEY";
    const BASE_URL_VAR: &'static str = "OPENAI_BASE_URL";
    type Options = OpenAiOptions;
    type Counter = ServerCounter;
    type StreamParser = stream::ChunkParser;
    /// `{base}/models` (llama.cpp, vLLM, Ollama, LM Studio and OpenAI answer it); the
    /// key goes in the default `Authorization: Bearer` header.
    const MODELS_PATH: &'static str = "/models";
    const WINDOW_FROM_LISTING: bool = true;
    const COUNTER_PATH: &'static str = "/tokenize";

    /// `{base}/chat/completions`, or `{base}/completions` for a completion model.
    fn endpoint(config: &OpenAiConfig) -> String {
        if config.api.is_chat {
            config.api_url("/chat/completions")
        } else {
            config.api_url("/completions")
        }
    }

    fn body(config: &OpenAiConfig, request: &ModelRequest, stream: bool) -> Value {
        let schema = if config.api.json_schema {
            request.schema.as_deref()
        } else {
            None
        };
        wire::request_body(
            request,
            &wire::BodyOptions {
                model: &config.model,
                chat: config.api.is_chat,
                sampling: &config.sampling,
                stream,
                stream_usage: config.api.stream_usage,
                schema,
                extra: &config.extra_body,
            },
        )
    }

    fn slot_affinity(config: &OpenAiConfig) -> bool {
        config.api.slot_affinity
    }

    /// `id_slot` (the slot leased for the call) and, where the config asks for it,
    /// `prompt_cache_key` (the shared prefix's key).
    fn write_hints(
        config: &OpenAiConfig,
        _request: &ModelRequest,
        body: &mut Value,
        hints: &Hints<'_>,
    ) -> HintSet {
        let mut sent = HintSet::NONE;
        if let Some(slot) = hints.slot.filter(|_| hints.allows(HintSet::ID_SLOT)) {
            sent = sent.with(put(body, "id_slot", Value::from(slot), HintSet::ID_SLOT));
        }
        let wanted = config
            .api
            .prompt_cache_key
            .unwrap_or(config.is_api_server());
        if let Some(prefix) = hints.prefix
            && wanted
            && hints.allows(HintSet::PROMPT_CACHE_KEY)
        {
            let key = Value::from(prefix.key.hex());
            sent = sent.with(put(
                body,
                "prompt_cache_key",
                key,
                HintSet::PROMPT_CACHE_KEY,
            ));
        }
        sent
    }

    fn parse_reply(
        bytes: &[u8],
        key: Option<&SecretString>,
    ) -> Result<(Completion, Option<String>), ModelError> {
        parse_completion(bytes, key)
    }

    fn stream_parser(key: Option<SecretString>, served: ServedModel) -> stream::ChunkParser {
        stream::ChunkParser::new(key, served)
    }

    fn is_chat(config: &OpenAiConfig) -> bool {
        config.api.is_chat
    }

    /// The temperature and the schema mode.
    fn cache_params(config: &OpenAiConfig) -> String {
        format!(
            "temperature={:?} json_schema={} ",
            config.sampling.temperature, config.api.json_schema
        )
    }

    async fn probe_counter(config: &OpenAiConfig) -> Option<ServerCounter> {
        ServerCounter::probe(config).await
    }
}

/// Parses a non-streamed reply body: the completion and the model the server named.
fn parse_completion(
    bytes: &[u8],
    key: Option<&SecretString>,
) -> Result<(Completion, Option<String>), ModelError> {
    let (reply, text) = parse_reply(bytes, key, |r: &wire::Response| r.error.as_ref())?;
    let choice = reply
        .choices
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|c| c.is_first())
        .ok_or_else(|| {
            ModelError::Malformed(format!("the reply has no choices: {}", clip(text, key)))
        })?;
    let text = choice.content().unwrap_or_default();
    let mut held = Held::default();
    held.text(text);
    if let Some(m) = choice.message() {
        m.note(&mut held);
    }
    if let Some(reason) = choice.finish_reason.as_deref() {
        held.stop_reason(reason);
    }
    held.verdict()?;
    let completion = Completion {
        text: text.to_string(),
        usage: reply.usage_reported(),
        finish_reason: choice.finish_reason.as_deref().map(wire::finish_reason),
        thinking: choice
            .message()
            .and_then(wire::Message::reasoning_text)
            .map(|t| crate::text::cap_text(t, crate::text::thinking::MAX_THINKING_BYTES).0)
            .unwrap_or_default()
            .to_string(),
    };
    Ok((completion, reply.model_name().map(str::to_string)))
}

#[cfg(test)]
mod tests;
