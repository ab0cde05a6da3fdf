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
//!   send `response_format: json_schema` (strict) when [`OpenAiConfig::json_schema`] is
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

use reqwest::header::{AUTHORIZATION, HeaderMap};
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

impl HttpApi for OpenAi {
    const NAME: &'static str = "openai";
    const CONFIG_NAME: &'static str = "OpenAiConfig";
    const DEFAULT_BASE_URL: &'static str = "https://api.openai.com/v1";
    const DEFAULT_MODEL: &'static str = "gpt-4o-mini";
    const DEFAULT_KEY_VAR: &'static str = "OPENAI_API_KEY";
    const BASE_URL_VAR: &'static str = "OPENAI_BASE_URL";
    type Options = OpenAiOptions;
}

/// An OpenAI-compatible model over HTTP. Implements [`LanguageModel`](crate::model::LanguageModel).
pub struct OpenAiModel {
    config: OpenAiConfig,
    server: Server,
    counter: Option<ServerCounter>,
}

impl OpenAiModel {
    /// A model with `config`; makes no request. Fails only if the HTTP client cannot be
    /// built (TLS initialisation).
    pub fn new(config: OpenAiConfig) -> Result<Self, ModelError> {
        Self::unconnected(config)
    }

    /// A model with `config`, then, when [`OpenAiConfig::discover_model`] is set,
    /// [`OpenAiModel::discover_model`], then [`OpenAiModel::discover`] (unless the config
    /// sets the context window) and, when [`OpenAiConfig::server_tokenizer`] is set,
    /// [`OpenAiModel::use_server_counter`]. None of them failing is an error. A discovery
    /// request that times out (the server accepts connections but does not answer) skips
    /// the rest, so a hanging server costs one discovery timeout (at most 10 s) before
    /// the first call.
    pub async fn connect(config: OpenAiConfig) -> Result<Self, ModelError> {
        let mut model = Self::new(config)?;
        let mut listing = None;
        if model.config.discover_model {
            listing = model.get_json(&model.models_url()).await;
            model.use_listed_model(listing.as_ref());
        }
        // One `/props` answers both the window and the slots (llama.cpp).
        let props = model.get_json(&model.props_url()).await;
        model.server.discovered_slots = props.as_ref().and_then(slots_in);
        if model.config.context_window.is_none() {
            let found = model
                .context_window_from(props.as_ref(), listing.as_ref())
                .await;
            // A window the server got wrong is an error, unless another answer gave one.
            if found.is_none()
                && let Some(e) = props
                    .as_ref()
                    .and_then(|p| props_window_error(p, &model.props_url()))
            {
                return Err(e);
            }
            if found.is_some() {
                model.server.discovered_context_window = found;
            }
        }
        if model.config.server_tokenizer && !model.use_server_counter().await {
            tracing::warn!(
                root = %redact_url(model.config.root_url()),
                "the server has no usable /tokenize; counting with the built-in tokenizer"
            );
        }
        Ok(model)
    }

    /// Asks the server which models it serves (`GET {base}/models`, answered by
    /// llama.cpp, vLLM, Ollama, LM Studio and OpenAI) and uses the first one's `id` as the
    /// model name in requests and in [`LanguageModel::info`](crate::model::LanguageModel::info). Returns that id; `None`
    /// (no usable listing) keeps [`OpenAiConfig::model`]. Never fails.
    pub async fn discover_model(&mut self) -> Option<String> {
        let listing = self.get_json(&self.models_url()).await;
        self.use_listed_model(listing.as_ref())
    }

    fn models_url(&self) -> String {
        self.config.api_url("/models")
    }

    /// Takes the model name from a `/models` listing, if it names one.
    fn use_listed_model(&mut self, listing: Option<&Value>) -> Option<String> {
        match listing.and_then(first_model_id) {
            Some(id) => {
                tracing::info!(model = %id, "using the model the server lists first at /models");
                self.config.model = id.clone();
                Some(id)
            }
            // A server that did not answer discovery was warned about already.
            None if self.server.link.stalled() => None,
            None => {
                tracing::info!(
                    base = %redact_url(self.config.base()),
                    model = %self.config.model,
                    "the server lists no model at /models; sending the configured model name"
                );
                None
            }
        }
    }

    /// Asks the server for its context window and remembers it: llama.cpp's
    /// `GET {root}/props` (`default_generation_settings.n_ctx`, the per-slot context, else
    /// a top-level `n_ctx`), else `GET {base}/models` (vLLM's `max_model_len`, llama.cpp's
    /// `meta.n_ctx`, `context_length`). Returns what it found; `None` leaves the config's
    /// window or [`ModelInfo::DEFAULT_CONTEXT_WINDOW`](crate::model::ModelInfo::DEFAULT_CONTEXT_WINDOW) in force. Never fails.
    pub async fn discover(&mut self) -> Option<usize> {
        let props = self.get_json(&self.props_url()).await;
        self.server.discovered_slots = props.as_ref().and_then(slots_in);
        let found = self.context_window_from(props.as_ref(), None).await;
        if found.is_some() {
            self.server.discovered_context_window = found;
        }
        found
    }

    fn props_url(&self) -> String {
        self.config.root_join("/props")
    }

    /// The context window from a `/props` answer, else from the `/models` listing
    /// (`listing` when it was fetched already).
    async fn context_window_from(
        &self,
        props: Option<&Value>,
        listing: Option<&Value>,
    ) -> Option<usize> {
        if let Some(n) = props.and_then(props_context_window) {
            return Some(n);
        }
        let fetched;
        let models = match listing {
            Some(l) => Some(l),
            None => {
                fetched = self.get_json(&self.models_url()).await;
                fetched.as_ref()
            }
        };
        models.and_then(|m| models_context_window(m, &self.config.model))
    }

    async fn get_json(&self, url: &str) -> Option<Value> {
        let headers = self.request_headers().unwrap_or_default();
        self.server
            .link
            .discover(&self.config.transport, url, headers)
            .await
    }

    /// Probes the server's `/tokenize` and, if it works, uses it as the model's exact
    /// prompt counter ([`LanguageModel::counter`](crate::model::LanguageModel::counter)). Returns whether it does. Skipped
    /// (`false`) when a discovery request of this model timed out.
    pub async fn use_server_counter(&mut self) -> bool {
        if self.server.link.stalled() {
            tracing::debug!("the server did not answer discovery; not probing /tokenize");
            return false;
        }
        match ServerCounter::probe(&self.config).await {
            Some(c) => {
                self.counter = Some(c);
                true
            }
            None => false,
        }
    }

    /// The `Authorization: Bearer` header when there is a key.
    fn request_headers(&self) -> Result<HeaderMap, ModelError> {
        key_headers(
            AUTHORIZATION,
            "Bearer ",
            self.config.transport.api_key.as_ref(),
        )
    }

    fn body(&self, request: &ModelRequest, stream: bool) -> Value {
        let schema = if self.config.api.json_schema {
            request.schema.as_deref()
        } else {
            None
        };
        wire::request_body(
            request,
            &wire::BodyOptions {
                model: &self.config.model,
                chat: self.config.api.is_chat,
                sampling: &self.config.sampling,
                stream,
                stream_usage: self.config.api.stream_usage,
                schema,
                extra: &self.config.extra_body,
            },
        )
    }
}

/// Parses a non-streamed reply body: the completion and the model the server named.
fn parse_completion(
    bytes: &[u8],
    key: Option<&secrecy::SecretString>,
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
        usage: reply.usage.map(Into::into),
        finish_reason: choice.finish_reason.as_deref().map(wire::finish_reason),
    };
    Ok((completion, reply.model_name().map(str::to_string)))
}

http_model! {
    model: OpenAiModel,
    config: OpenAiConfig,
    counter: ServerCounter,
    api: "openai",
    is_chat: |config| config.api.is_chat,
    parse: parse_completion,
    stream_parser: stream::ChunkParser::new,
}

#[cfg(test)]
mod tests;
