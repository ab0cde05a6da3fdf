//! Backends: the models synthkit can talk to.
//!
//! - [`openai`] (cargo feature `openai`, on by default): any OpenAI-compatible server
//!   (OpenAI, vLLM, llama.cpp's `llama-server`, Ollama), with its exact prompt counter.
//! - `anthropic` (cargo feature `anthropic`): Anthropic's Messages API
//!   (`POST /v1/messages`: Anthropic, and llama.cpp's `llama-server`, which serves it too),
//!   with its exact prompt counter (`/v1/messages/count_tokens`).
//! - [`http`]: what both share: [`http::Transport`] (where the server is, the key, the
//!   timeouts, the client) and [`http::Sampling`].
//! - [`connect`]: one way from either API's config to a connected model (the key check,
//!   discovery, how prompts are counted) and the stack's builder over it, which the CLI,
//!   the service and the Python bindings all use.
//!
//! The offline extractive answerer (no server, no download) is its own crate,
//! `synthkit-extractive`; any other model implements [`LanguageModel`](crate::model::LanguageModel).

#[cfg(feature = "anthropic")]
pub mod anthropic;
#[cfg(any(feature = "openai", feature = "anthropic"))]
pub mod connect;
#[cfg(all(test, any(feature = "openai", feature = "anthropic")))]
pub(crate) mod echo;
#[cfg(any(feature = "openai", feature = "anthropic"))]
pub mod http;
#[cfg(feature = "openai")]
pub mod openai;
#[cfg(any(feature = "openai", feature = "anthropic"))]
pub mod probe;
