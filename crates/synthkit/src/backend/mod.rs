//! Backends: the models synthkit can talk to.
//!
//! - [`openai`] (cargo feature `openai`, on by default): any OpenAI-compatible server
//!   (OpenAI, vLLM, llama.cpp's `llama-server`, Ollama), with its exact prompt counter.
//!
//! The offline extractive answerer (no server, no download) is its own crate,
//! `synthkit-extractive`; any other model implements [`LanguageModel`](crate::model::LanguageModel).

#[cfg(feature = "openai")]
pub mod openai;
