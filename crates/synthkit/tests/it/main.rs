//! synthkit's integration tests, in one binary (one link, one process: `cargo test -p
//! synthkit` builds this and runs every module's tests on one thread pool).
//!
//! Modules share helpers through [`common`]; fake model servers come from
//! `synthkit_testkit`, in-process model doubles from `synthkit::testing`. Data stays
//! beside the code: `snapshots/` (insta, named `it__MODULE__NAME.snap`), the proptest
//! regression files beside their modules, and the conformance traces in
//! `tests/conformance/traces`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

mod abstention;
#[cfg(feature = "anthropic")]
mod anthropic;
mod bpe_equivalence;
mod cache;
mod cache_race;
mod citation_quotes;
mod citations;
mod citations_many;
mod conformance;
mod default_prompts;
#[cfg(feature = "openai")]
mod engine;
mod escalation;
#[cfg(feature = "openai")]
mod faults;
mod fuzz_props;
#[cfg(all(feature = "openai", feature = "anthropic"))]
mod hostile_peers;
mod images;
mod limit;
#[cfg(feature = "openai")]
mod llama_server;
mod map_reduce;
mod memory_cache;
mod modes;
mod modes_common;
mod modes_concurrency;
mod modes_filtering;
mod modes_templates;
mod node_json;
#[cfg(feature = "openai")]
mod openai_loopback;
mod overflow;
mod overflow_props;
mod prompt_limit;
#[cfg(all(feature = "openai", feature = "anthropic"))]
mod prompt_reuse;
#[cfg(feature = "openai")]
mod reply_cap;
mod scheduling;
mod sharing;
#[cfg(feature = "openai")]
mod smollm2;
mod spans;
mod splitter_props;
mod stack;
mod steps;
mod thinking;
mod truncation;
#[cfg(feature = "openai")]
mod url_secrets;
#[cfg(feature = "openai")]
mod vision_server;
