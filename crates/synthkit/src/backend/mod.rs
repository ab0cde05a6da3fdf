//! Backends: the models synthkit can talk to.
//!
//! - [`openai`] (cargo feature `openai`, on by default): any OpenAI-compatible server
//!   (OpenAI, vLLM, llama.cpp's `llama-server`, Ollama), with its exact prompt counter.
//! - [`extractive`]: an offline model that answers with sentences chosen from the context;
//!   no server, no download.

pub mod extractive;
#[cfg(feature = "openai")]
pub mod openai;
