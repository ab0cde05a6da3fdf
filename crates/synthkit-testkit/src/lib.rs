//! Test support for synthkit's suites, in one place: every fake model server the tests
//! talk to over loopback, and the launcher of a real llama.cpp `llama-server`.
//!
//! - [`server::Server`]: any axum app on `127.0.0.1`, on a thread and runtime of its own
//!   (a blocking client in the test cannot starve it); dropping it stops it at once.
//! - [`openai::FakeOpenAi`]: an OpenAI-compatible model (chat, streaming, `/models`) whose
//!   reply, delay, status and finish reason the test sets, and which records what reached
//!   it (arrival times, charges, bodies).
//! - [`gated::GatedOpenAi`]: a model that holds every completion until the test opens its
//!   gate, so "a request in flight" needs no guessed delay.
//! - [`hostile::HostilePeer`]: a server answering what the test says on any path, recording
//!   each request target; with replies no good server sends (endless bodies, streams
//!   without tokens, any headers).
//! - [`here::serve`]: an app served by the calling runtime, for tests that must share it.
//! - [`scripted::ScriptedLlama`]: a llama.cpp-like model with its own tokenizer and chat
//!   template (`/tokenize`, `/apply-template`, `/props`) whose replies vary in length.
//! - [`slots::SlotServer`]: a llama.cpp-like server with slots (`/props` `total_slots`)
//!   that records each call's `id_slot` and messages, and can refuse a field with a 400.
//! - [`llamaindex`]: LlamaIndex's JSON shapes (a `TextNode`, an `ImageNode`), as fixtures.
//! - [`png`]: small PNG images of any size, written here (no image files in the repository).
//! - [`redis::RedisServer`]: a real `redis-server` on a free loopback port.
//! - [`llama`]: a real `llama-server` (tiny random model, its vision pair, or SmolLM2) for
//!   end-to-end tests, skipped with a message outside CI when it cannot be built, failing
//!   under `CI`.
//!
//! In-process model doubles (no HTTP) live in `synthkit::testing`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod anthropic;
pub mod gated;
pub mod here;
pub mod hostile;
pub mod llama;
pub mod llamaindex;
pub mod openai;
pub mod png;
pub mod record;
pub mod redis;
pub mod scripted;
pub mod server;
pub mod slots;

pub use openai::{FakeConfig, FakeOpenAi, Seen};
pub use server::Server;
