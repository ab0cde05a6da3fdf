//! [`HttpApi`]: what one HTTP API (OpenAI's, Anthropic's Messages API, ...) adds to the
//! machinery every HTTP backend shares.
//!
//! An API is a type that implements [`HttpApi`] (an empty enum: it is never a value).
//! [`HttpConfig<A>`](super::HttpConfig) holds the settings every API has, and the API's
//! own options in its `api` field; [`HttpModel<A>`](super::HttpModel) is the model.
//! The backends name them: `OpenAiConfig` is `HttpConfig<OpenAi>`, `AnthropicModel` is
//! `HttpModel<Anthropic>`. A new API is one module that implements this trait, plus its
//! arm in [`ServerSettings`](crate::backend::connect::ServerSettings).

use std::fmt;
use std::future::Future;

use reqwest::header::{AUTHORIZATION, HeaderMap};
use secrecy::SecretString;
use serde_json::Value;

use super::clock::ServedModel;
use super::reuse::{HintSet, Hints};
use super::sse::EventParser;
use super::{HttpConfig, key_headers};
use crate::model::{Completion, ModelError, ModelRequest, PromptCounter};

/// One HTTP API: its defaults and its own options (the settings) and how it is spoken
/// (the endpoint, headers, bodies, replies, streams, discovery and exact prompt
/// counter). Implemented by the backends of this crate (its stream parsing is the
/// crate's own).
///
/// Everything else is the same for every API and written once: the config's defaults,
/// builders and constructors ([`HttpConfig`]); the call sent once under the transport's
/// timeouts and reply cap, errors mapped and keys redacted, streams read under the idle
/// timeout, discovery (the listed model, llama.cpp's `/props` window and slots) and the
/// counter's probe ([`HttpModel`](super::HttpModel)).
pub trait HttpApi: Sized + Send + Sync + 'static {
    /// The API's name: the model's provider in
    /// [`ModelInfo`](crate::model::ModelInfo) and the start of its cache identity
    /// (`openai`, `anthropic`).
    const NAME: &'static str;
    /// The name of the config type in `Debug` output (`OpenAiConfig`).
    const CONFIG_NAME: &'static str;
    /// The name of the model type in `Debug` output (`OpenAiModel`).
    const MODEL_NAME: &'static str;
    /// The API's own server.
    const DEFAULT_BASE_URL: &'static str;
    /// The model used when none is named.
    const DEFAULT_MODEL: &'static str;
    /// The environment variable read for the API key by `from_env`.
    const DEFAULT_KEY_VAR: &'static str;
    /// The environment variable read for the base URL after `SYNTHKIT_BASE_URL`.
    const BASE_URL_VAR: &'static str;

    /// The API's own settings, the `api` field of its config (OpenAI's chat or
    /// completion endpoint, Anthropic's version header, ...); `Default` gives the API's
    /// defaults.
    type Options: Clone + fmt::Debug + Default + Send + Sync + 'static;

    /// The API's exact prompt counter (the server's own tokenizer).
    type Counter: PromptCounter + Clone + fmt::Debug + 'static;
    /// Reads one streamed reply's SSE events.
    type StreamParser: EventParser;

    /// The path of the server's models listing, as discovery names it in its messages
    /// (`/models`, `/v1/models`).
    const MODELS_PATH: &'static str;
    /// Whether discovery reads the context window from the models listing when
    /// llama.cpp's `/props` gives none (asking for the listing when model discovery did
    /// not).
    const WINDOW_FROM_LISTING: bool;
    /// The path of the server's exact prompt counter, as the warning names it when the
    /// config asks for it and the server has none (`/tokenize`).
    const COUNTER_PATH: &'static str;

    /// Where model calls go (`{base}/chat/completions`, `{root}/v1/messages`).
    fn endpoint(config: &HttpConfig<Self>) -> String;

    /// Where the server lists its models ([`Self::MODELS_PATH`] as a URL): by default
    /// the path under the base URL ([`HttpConfig::api_url`]).
    fn models_url(config: &HttpConfig<Self>) -> String {
        config.api_url(Self::MODELS_PATH)
    }

    /// Refuses, before any request, a config whose API options cannot be sent (none by
    /// default).
    fn check(config: &HttpConfig<Self>) -> Result<(), ModelError> {
        let _ = config;
        Ok(())
    }

    /// The headers of every request: the key as the API carries it (a secret header)
    /// and the API's own; by default the `Authorization: Bearer` header when there is a
    /// key.
    fn headers(config: &HttpConfig<Self>) -> Result<HeaderMap, ModelError> {
        key_headers(AUTHORIZATION, "Bearer ", config.transport.api_key.as_ref())
    }

    /// The JSON body of one model call, streamed or not (the config's extra body fields
    /// added last).
    fn body(config: &HttpConfig<Self>, request: &ModelRequest, stream: bool) -> Value;

    /// Whether calls carry llama.cpp's `id_slot` when the server reported its slots
    /// (its `/props` `total_slots`); false by default.
    fn slot_affinity(config: &HttpConfig<Self>) -> bool {
        let _ = config;
        false
    }

    /// Writes into `body` (of `request`) the hints that help the server reuse what it read of the
    /// prompt's shared prefix ([`Hints`]: the slot leased, the prefix, what the server
    /// refused) and returns which it wrote; none by default. A field the extra body
    /// fields set already is left as they set it.
    fn write_hints(
        config: &HttpConfig<Self>,
        request: &ModelRequest,
        body: &mut Value,
        hints: &Hints<'_>,
    ) -> HintSet {
        let _ = (config, request, body, hints);
        HintSet::NONE
    }

    /// Parses a whole (non-streamed) reply: the completion and the model the server
    /// named. `key` is redacted from every error.
    fn parse_reply(
        bytes: &[u8],
        key: Option<&SecretString>,
    ) -> Result<(Completion, Option<String>), ModelError>;

    /// The parser of one streamed reply, which redacts `key` from errors and records
    /// the model the events name in `served`.
    fn stream_parser(key: Option<SecretString>, served: ServedModel) -> Self::StreamParser;

    /// Whether the model takes chat prompts ([`ModelInfo::is_chat`](crate::model::ModelInfo::is_chat));
    /// true by default.
    fn is_chat(config: &HttpConfig<Self>) -> bool {
        let _ = config;
        true
    }

    /// The API's own part of the cache identity's parameters
    /// ([`HttpConfig::cache_identity`]): the options replies depend on, as `name=value`
    /// pairs each followed by a space (`version=2023-06-01 `), in front of the extra
    /// body fields and the sampling parameters every API has; none by default.
    fn cache_params(config: &HttpConfig<Self>) -> String {
        let _ = config;
        String::new()
    }

    /// Asks the server whether its exact prompt counter works; `None` when it does not.
    fn probe_counter(
        config: &HttpConfig<Self>,
    ) -> impl Future<Output = Option<Self::Counter>> + Send;
}
