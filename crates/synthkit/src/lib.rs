//! # synthkit
//!
//! Response synthesis for retrieval-augmented generation: turn a question and retrieved text
//! chunks into an answer with a language model, using the strategies of LlamaIndex's
//! response synthesizers (`refine`, `compact`, `tree_summarize`, ...) with exact token
//! budgets, bounded concurrency and streaming.
#![cfg_attr(not(test), warn(clippy::indexing_slicing))]

pub mod error;
pub mod model;
pub mod node;
pub mod prompt;
pub mod text;

pub use error::SynthError;
pub use node::Node;
