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

/// One HTTP API: its defaults and its own options (the settings) and how it is spoken
/// (the endpoint, headers, bodies, replies, streams, discovery and exact prompt
/// counter). Implemented by the backends of this crate.
pub trait HttpApi: Sized + Send + Sync + 'static {
    /// The API's name: the model's provider in
    /// [`ModelInfo`](crate::model::ModelInfo) and the start of its cache identity
    /// (`openai`, `anthropic`).
    const NAME: &'static str;
    /// The name of the config type in `Debug` output (`OpenAiConfig`).
    const CONFIG_NAME: &'static str;
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
}
