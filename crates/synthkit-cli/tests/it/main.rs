//! The `synthkit` binary's integration tests, in one test binary (one link, one run):
//! each module is one concern's suite, `common` holds what they share. Loopback fakes come
//! from `synthkit-testkit`; the tests against a real llama-server start it through
//! `synthkit_testkit::llama`; those against SmolLM2 hold [`common::heavy`], so they run
//! one at a time and beside no other llama-server test.
//!
//! Everything stays on 127.0.0.1; every wait is bounded.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

mod anthropic_cli;
mod ask_inputs;
mod ask_offline;
mod bad_input;
mod bad_nodes;
mod batch;
mod batch_common;
mod batch_limits;
mod batch_resume;
mod browser;
mod cite_quotes;
mod cost;
mod declined;
mod docs;
mod escalate;
mod eval;
mod eval_answers;
mod eval_common;
mod eval_page;
mod eval_resume;
#[cfg(unix)]
mod folder_index;
mod folders;
mod hints;
mod hostile_peers;
mod images;
mod limits;
mod llama_cli;
mod llamaindex;
mod logging;
mod many_nodes;
mod openai_loopback;
mod openai_settings;
mod otel;
mod plan_bounds;
mod prompt_cache;
#[cfg(unix)]
mod reading;
mod report;
mod resume;
mod reuse_hints;
mod secrets;
mod serve;
mod sharing;
mod smollm2_cli;
mod thinking;
mod tokens_split;
mod truncation;
