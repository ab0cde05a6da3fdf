//! What every synthkit front end shares: the command (`ask`, `summarize`, `batch`,
//! `eval`, `serve`), the HTTP service and the Python package. The engine
//! (`synthkit`) answers a question from nodes; this crate holds what a front end adds
//! around it, once, so no front end writes it again:
//!
//! - [`setup`]: **which model answers** ([`ModelChoice`]: the offline extractive backend,
//!   a server with its API, transport, sampling and model facts, or a model of your own)
//!   and **the stack around it** ([`StackOptions`]), built by [`ModelSetup::build`] into a
//!   [`BuiltModel`] (the stack, calls in flight, slots, tokenizers, the connected server,
//!   a readiness probe).
//! - [`answer`]: the answer checks every front end offers, evidence first and what an
//!   unsupported answer does ([`AnswerChecks`]), with their defaults decided in one place.
//! - [`request`]: one synthesis request as JSON, the service's `POST /v1/synthesize`
//!   body and each line of a batch ([`request::SynthesizeRequest`]).
//! - [`batch`]: the job runner's rules for JSON lines (ids, hashes, resumes, compaction).
//! - [`eval`]: the benchmark harness (cases, answers of any system, judge-free scores,
//!   intervals and paired tests).
//! - [`retrieval`]: the retriever: files and folders read into chunks, ranked for a
//!   question with BM25, kept in an on-disk folder index; a request's `paths` read under
//!   a root.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), synthkit::backend::connect::ConnectError> {
//! use synthkit_frontend::{ModelSetup, StackOptions};
//!
//! let built = ModelSetup::extractive()
//!     .with_stack(StackOptions::default().with_calls_in_flight(Some(2)))
//!     .build()
//!     .await?;
//! assert_eq!(built.backend, "extractive");
//! assert_eq!(built.calls_in_flight, 2);
//! let model = built.model(); // for Synthesizer::builder
//! # let _ = model; Ok(()) }
//! ```

pub mod answer;
pub mod batch;
pub mod eval;
pub mod request;
pub mod retrieval;
pub mod setup;

pub use answer::{
    AnswerChecks, DEFAULT_EVIDENCE, DEFAULT_ON_UNSUPPORTED, EXTRACTIVE_EVIDENCE,
    EXTRACTIVE_ON_UNSUPPORTED,
};
pub use setup::{
    BuiltModel, EXTRACTIVE, ExtractiveChoice, ModelChoice, ModelSetup, ServerChoice, StackOptions,
};
