//! Response synthesis for retrieval-augmented generation: a question and the text chunks a
//! retriever found go in, an answer written by a language model comes out, with the
//! strategies of LlamaIndex's response synthesizers and exact token budgets.
//!
//! This crate is the engine and nothing else: no file reading (`synthkit-documents`), no
//! offline answerer (`synthkit-extractive`), no HTTP service (`synthkit-serve`), no command
//! line (`synthkit-cli`). With its default features it adds an OpenAI-compatible HTTP
//! backend.
//!
//! `use synthkit::prelude::*;` brings what most programs need ([`prelude`]).
//!
//! # Concepts
//!
//! - A [`Node`] is one retrieved chunk: an id, its text, metadata and a score.
//! - A [`LanguageModel`](model::LanguageModel) answers a [`ModelRequest`](model::ModelRequest)
//!   (a rendered prompt plus options: an output schema, `max_tokens`) with a
//!   [`Completion`](model::Completion), whole or streamed. It is the only thing a backend
//!   implements. A [`Tokenizer`](text::Tokenizer) counts tokens as the model does, so that no
//!   prompt is larger than the window.
//! - A [`Synthesizer`] runs one [`ResponseMode`] over nodes: it packs chunks into prompts that
//!   fit the window exactly ([`prompt::PromptBudget`]), calls the model (at most
//!   [`Concurrency`] calls at once, answers kept in input order), and returns a [`Response`]
//!   (the answer, its sources, the usage, what was truncated, citations if asked).
//! - [`layer`] wraps a model in middleware, in one order that
//!   [`layer::stack::ModelStack`] owns: metering, adaptive concurrency against the server's
//!   slots, a rate budget (requests and tokens per minute, local or in Redis), retries (the
//!   only layer that sends again; every send is charged) and a response cache.
//! - [`observe`] reports what happened: one [`SynthEvent`] per call, step and truncation,
//!   and the [`UsageTotals`].
//! - [`steps`]: on request ([`SynthesizerBuilder::return_steps`]), the response carries one
//!   [`SynthStep`] per model call: where it stood, the nodes it read, its tokens, time,
//!   retries and reply (the crate `synthkit-report` draws them as an HTML page).
//! - [`telemetry`]: one `tracing` span per synthesis, step and model call, named with
//!   OpenTelemetry's GenAI conventions; feature `otel` exports them over OTLP/HTTP.
//!
//! The layers of the tree, each depending only on those above it: the plain types
//! ([`node`], [`text`], [`prompt`], [`observe`], [`options`], [`error`]), the model contract
//! ([`model`], [`schema`]), the backends ([`backend`]), the middleware ([`layer`]), the engine (private:
//! packing, fan-out without head-of-line blocking, corrections) and the modes (one file
//! each), then the front door ([`synth`]). What only a front end needs (a request as
//! JSON, a batch's lines, the benchmark harness, the model setup) is the
//! `synthkit-frontend` crate's.
//!
//! # The modes
//!
//! Every example below runs as written: it uses the scripted test model of
//! `synthkit::testing` (feature `testing`), which answers each call with the next text it was given and records
//! the requests, so the examples can show how many calls a mode makes.
//!
//! `compact` (the default): chunks packed into as few prompts as fit, the answer refined
//! from one prompt to the next.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), synthkit::SynthError> {
//! use synthkit::{Node, ResponseMode, Synthesizer, model::ModelInfo, testing::ScriptedModel};
//!
//! let model = std::sync::Arc::new(ScriptedModel::constant(ModelInfo::new("m"), "Every six months."));
//! let synth = Synthesizer::builder(model.clone()).mode(ResponseMode::Compact).build()?;
//! let nodes = vec![
//!     Node::new("a", "The mirror is cleaned every six months."),
//!     Node::new("b", "The dome opens at dusk."),
//! ];
//! let response = synth.synthesize("How often is the mirror cleaned?", nodes).await?;
//! assert_eq!(response.text, "Every six months.");
//! assert_eq!(model.requests().len(), 1); // both chunks fit one prompt
//! assert_eq!(response.source_nodes.len(), 2);
//! # Ok(()) }
//! ```
//!
//! `refine`: one call per chunk, each refining the answer so far.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), synthkit::SynthError> {
//! # use synthkit::{Node, ResponseMode, Synthesizer, model::ModelInfo, testing::ScriptedModel};
//! let answers = vec!["Monthly.".to_string(), "Every six months.".to_string()];
//! let model = std::sync::Arc::new(ScriptedModel::sequence(ModelInfo::new("m"), answers));
//! let synth = Synthesizer::builder(model.clone()).mode(ResponseMode::Refine).build()?;
//! let nodes = vec![Node::new("a", "Cleaned monthly, said the old manual."), Node::new("b", "Now every six months.")];
//! let response = synth.synthesize("How often is the mirror cleaned?", nodes).await?;
//! assert_eq!(model.requests().len(), 2); // one call per chunk
//! assert_eq!(response.text, "Every six months.");
//! # Ok(()) }
//! ```
//!
//! `tree_summarize`: packed chunks summarised, then the summaries, until one answer is
//! left; the calls of one level run at once (up to the concurrency).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), synthkit::SynthError> {
//! # use synthkit::{Node, ResponseMode, Synthesizer, model::ModelInfo, testing::ScriptedModel};
//! let model = std::sync::Arc::new(ScriptedModel::constant(ModelInfo::new("m"), "A telescope."));
//! let synth = Synthesizer::builder(model.clone()).mode(ResponseMode::TreeSummarize).build()?;
//! let nodes = vec![Node::new("a", "The mirror is cleaned."), Node::new("b", "The dome opens.")];
//! let response = synth.synthesize("What is this about?", nodes).await?;
//! assert_eq!(response.text, "A telescope.");
//! assert_eq!(model.requests().len(), 1); // everything fits one summary
//! # Ok(()) }
//! ```
//!
//! `simple_summarize`: everything in one prompt, cut to fit; what was cut is reported.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), synthkit::SynthError> {
//! # use synthkit::{Node, ResponseMode, Synthesizer, model::ModelInfo, testing::ScriptedModel};
//! let info = ModelInfo::new("m").with_context_window(400).with_num_output(64);
//! let model = std::sync::Arc::new(ScriptedModel::constant(info, "Mostly about mirrors."));
//! let synth = Synthesizer::builder(model.clone()).mode(ResponseMode::SimpleSummarize).build()?;
//! let long = "The mirror is cleaned with care. ".repeat(200);
//! let response = synth.synthesize("Summarise.", vec![Node::new("a", long)]).await?;
//! assert_eq!(model.requests().len(), 1);
//! assert!(response.truncation.is_some()); // the cut is reported, never silent
//! # Ok(()) }
//! ```
//!
//! `accumulate` and `compact_accumulate`: one answer per chunk (or per packed prompt),
//! numbered and joined in input order.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), synthkit::SynthError> {
//! # use synthkit::{Node, ResponseMode, Synthesizer, model::ModelInfo, testing::ScriptedModel};
//! for mode in [ResponseMode::Accumulate, ResponseMode::CompactAccumulate] {
//!     let model = std::sync::Arc::new(ScriptedModel::constant(ModelInfo::new("m"), "Yes."));
//!     let synth = Synthesizer::builder(model.clone()).mode(mode).build()?;
//!     let nodes = vec![Node::new("a", "The dome opens."), Node::new("b", "The dome closes.")];
//!     let response = synth.synthesize("Does the dome move?", nodes).await?;
//!     let calls = model.requests().len();
//!     assert_eq!(calls, if mode == ResponseMode::Accumulate { 2 } else { 1 });
//!     assert!(response.text.contains("Yes."));
//! }
//! # Ok(()) }
//! ```
//!
//! `generation` answers the question alone; `no_text` and `context_only` make no call
//! (the nodes become the sources, or the answer is the context itself).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), synthkit::SynthError> {
//! # use synthkit::{Node, ResponseMode, Synthesizer, model::ModelInfo, testing::ScriptedModel};
//! let nodes = || vec![Node::new("a", "The dome opens at dusk.")];
//! let model = std::sync::Arc::new(ScriptedModel::constant(ModelInfo::new("m"), "At dusk."));
//! let generation = Synthesizer::builder(model.clone()).mode(ResponseMode::Generation).build()?;
//! assert_eq!(generation.synthesize("When?", nodes()).await?.text, "At dusk.");
//!
//! let no_text = Synthesizer::builder(model.clone()).mode(ResponseMode::NoText).build()?;
//! let response = no_text.synthesize("When?", nodes()).await?;
//! assert_eq!((response.text.as_str(), response.source_nodes.len()), ("", 1));
//!
//! let context_only = Synthesizer::builder(model.clone()).mode(ResponseMode::ContextOnly).build()?;
//! let response = context_only.synthesize("When?", nodes()).await?;
//! assert!(response.text.contains("The dome opens at dusk."));
//! assert_eq!(model.requests().len(), 1); // only `generation` called the model
//! # Ok(()) }
//! ```
//!
//! # A real model
//!
//! With the `openai` feature, any OpenAI-compatible server (OpenAI, vLLM, llama.cpp's
//! `llama-server`, Ollama) behind the library's one stack of layers:
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use synthkit::backend::openai::{OpenAiConfig, OpenAiModel};
//! use synthkit::layer::{retry::RetryPolicy, stack::ModelStack};
//! use synthkit::{Node, ResponseMode, Synthesizer};
//!
//! let config = OpenAiConfig::new("my-model").with_base_url("http://127.0.0.1:8080/v1");
//! let stack = ModelStack::builder(OpenAiModel::new(config)?)
//!     .max_in_flight(8)
//!     .retry(RetryPolicy::new().with_max_attempts(4))
//!     .build();
//! let synth = Synthesizer::builder(stack.model()).mode(ResponseMode::TreeSummarize).build()?;
//! let response = synth.synthesize("What changed?", vec![Node::new("1", "...")]).await?;
//! println!("{}", response.text);
//! # Ok(()) }
//! ```
//!
//! # Features
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `openai` | yes | `backend::openai`: the OpenAI-compatible HTTP backend |
//! | `anthropic` | no | `backend::anthropic`: servers of Anthropic's Messages API |
//! | `preserve-order` | yes | node metadata shown to the model in insertion order, as the reference |
//! | `schema-validation` | no | structured replies checked against their JSON schema |
//! | `sqlite-cache` | no | a persistent response cache in one SQLite file |
//! | `redis` | no | a rate budget and response cache shared through Redis |
//! | `otel` | no | `telemetry::otel`: OTLP/HTTP export of the spans, `traceparent` continuation |
//! | `testing` | no | `synthkit::testing`: scripted, replayed and fixed models for your own tests |
#![cfg_attr(not(test), warn(clippy::indexing_slicing))]

#[macro_use]
mod debug_fields;
#[macro_use]
mod setters;
pub mod backend;
pub mod citation;
pub mod cost;
pub(crate) mod engine;
pub mod error;
pub mod evidence;
pub mod filtering;
pub mod grounding;
pub mod layer;
pub mod many;
pub mod mode;
pub mod model;
pub(crate) mod modes;
pub mod node;
pub mod observe;
pub mod options;
pub mod plan;
pub mod prelude;
pub mod prompt;
pub mod response;
pub mod schema;
pub mod secret;
pub mod steps;
pub mod synth;
pub mod telemetry;
#[cfg(feature = "testing")]
pub mod testing;
pub mod text;
#[cfg(any(feature = "openai", feature = "anthropic", feature = "otel"))]
pub mod tls;

pub use citation::{Citation, CitationStyle, Citations, Quote, QuoteOrigin, QuoteStatus};
pub use error::SynthError;
pub use filtering::CallDoor;
pub use mode::{ResponseMode, Step};
pub use node::{Node, NodeJsonError};
pub use observe::{CallReport, Observer, OnTruncation, SynthEvent, UsageTotals};
pub use options::{Concurrency, Templates};
pub use plan::{Plan, PlanRow};
pub use response::{Response, StreamingResponse, Truncation};
pub use steps::SynthStep;
pub use synth::escalation::{Escalation, EscalationReason, EscalationReport};
pub use synth::{
    AnswerFiltering, SynthesisInput, SynthesisOptions, Synthesizer, SynthesizerBuilder,
};
