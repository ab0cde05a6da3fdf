//! Choosing the model: the offline extractive backend, an OpenAI-compatible server or a
//! server of Anthropic's Messages API.
//!
//! `--llm` decides; without it, the backend is a server when `--base-url` (or
//! `SYNTHKIT_BASE_URL`, else `OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL` for anthropic) or
//! `--api anthropic` is given and `extractive` otherwise; `--api` (`SYNTHKIT_API`) says
//! which API the server speaks. The API key is read from the variable named by
//! `--api-key-env` (default `OPENAI_API_KEY`, `ANTHROPIC_API_KEY` for anthropic) into a
//! secret that the library never prints. Without `--model` (or `SYNTHKIT_MODEL`), a server given by URL is
//! asked which model it serves (`GET /models`).

use std::path::Path;

use anyhow::{Result, anyhow};
use synthkit::backend::connect::{ConnectError, Counting, ServerSettings};
use synthkit::layer::sharing::{CacheLocation, Sharing};
use synthkit_frontend::{ModelSetup, StackOptions};

use crate::flags::{LimitArgs, LlmKind, ModelArgs, SynthArgs};

/// The chosen model behind the library's model stack, with the tokenizers, slots and
/// server that go with it: the setup every front end builds ([`synthkit_frontend`]).
pub type Backend = synthkit_frontend::BuiltModel;

/// The server's base URL: `--base-url` (or `SYNTHKIT_BASE_URL`), else `OPENAI_BASE_URL`;
/// with the name of where it came from.
pub fn base_url(args: &SynthArgs) -> Option<(String, &'static str)> {
    args.model_args.base_url()
}

/// Builds the backend and its model stack (the library's order: adaptive concurrency,
/// rate budget, retries, cache). For a server this may ask it for its context window,
/// model and slots (and probe `/tokenize`); it never makes a model call. With `--cache
/// FILE` (not with `--plan`, which makes no call) the stack answers repeated calls from
/// the file; with `--redis-url`, the budget and the cache are Redis's.
pub async fn connect(args: &SynthArgs) -> Result<Backend> {
    connect_with(StackFlags::of(args)).await
}

/// The flags that build the backend and its stack: `ask`'s and `summarize`'s, or
/// `batch`'s (one stack for every synthesis of the batch).
#[derive(Debug, Clone, Copy)]
pub struct StackFlags<'a> {
    /// Which backend, where and which model.
    pub model_args: &'a ModelArgs,
    /// Rates, retries and sharing.
    pub limits: &'a LimitArgs,
    /// `--concurrency`: calls in flight of one synthesis.
    pub concurrency: Option<usize>,
    /// Syntheses run at once (1 but for `batch --jobs`): the stack lets each have its
    /// calls in flight.
    pub syntheses: usize,
    /// `--cache FILE`.
    pub cache: Option<&'a Path>,
    /// `--plan`: no model call will be made (no key needed, no cache or Redis opened).
    pub plan: bool,
}

impl<'a> StackFlags<'a> {
    /// The flags of `ask` and `summarize`.
    pub fn of(args: &'a SynthArgs) -> Self {
        Self {
            model_args: &args.model_args,
            limits: &args.limits,
            concurrency: args.concurrency,
            syntheses: 1,
            cache: args.cache.as_deref(),
            plan: args.dry_run.plan,
        }
    }

    /// The setup the flags ask for: the backend (`--llm`, `--api`, the server's flags),
    /// how prompts are counted (`--tokenizer`, else the server where it can count:
    /// llama.cpp's `/tokenize`, vLLM's, `count_tokens`, quietly keeping ours where it
    /// cannot; with `--server-tokenizer` the config's own probe warns, with
    /// `--no-server-tokenizer` the server is not asked), and the stack.
    pub fn setup(&self, sharing: Sharing) -> Result<ModelSetup> {
        let flags = self.model_args;
        let setup = match flags.kind() {
            LlmKind::Extractive => ModelSetup::extractive()
                .with_window(flags.context_window, flags.num_output)
                .with_name(flags.model.clone()),
            LlmKind::Openai | LlmKind::Anthropic => {
                let settings: ServerSettings = match flags.kind() {
                    LlmKind::Anthropic => flags.anthropic_config()?.into(),
                    _ => flags.openai_config()?.into(),
                };
                let counting = if flags.server_tokenizer || flags.no_server_tokenizer {
                    Counting::AsConfigured
                } else {
                    Counting::ServerWhereAvailable
                };
                ModelSetup::server(settings)
                    .with_counting(counting)
                    .require_key(!self.plan)
            }
        };
        // `--tokenizer` counts and splits; without it, the extractive backend and the
        // splitter use cl100k_base, a server counts as chosen above.
        let setup = match flags.tokenizer {
            Some(t) => setup.with_tokenizer(t.shared()),
            None => setup,
        };
        let stack = StackOptions::default()
            .with_calls_in_flight(self.concurrency)
            .with_syntheses(self.syntheses)
            .with_retry(self.limits.retry_policy()?)
            .with_sharing(sharing);
        Ok(setup.with_stack(stack))
    }
}

/// [`connect`] with the flags of any verb.
pub async fn connect_with(args: StackFlags<'_>) -> Result<Backend> {
    let sharing = if args.plan {
        Sharing::default()
    } else {
        let local = match args.cache {
            Some(path) => CacheLocation::Sqlite(path.to_path_buf()),
            None => CacheLocation::None,
        };
        args.limits.open_sharing(local).await?
    };
    let flags = args.model_args;
    args.setup(sharing)?.build().await.map_err(|e| match e {
        ConnectError::NoKey { url } => anyhow!(flags.no_key(url)),
        other => anyhow!(other),
    })
}

/// The note on standard error after a cached run: `N cached, M new calls`.
pub fn cache_note(backend: &Backend) -> Option<String> {
    let s = backend.stack.cache_stats()?;
    Some(format!(
        "response cache: {} cached, {} new calls",
        s.hits, s.misses
    ))
}

/// Adds `cached_calls` and `new_calls` to the `usage` of a JSON report.
pub fn report_cache(report: &mut serde_json::Value, backend: &Backend) {
    let Some(s) = backend.stack.cache_stats() else {
        return;
    };
    if let Some(usage) = report
        .get_mut("usage")
        .and_then(serde_json::Value::as_object_mut)
    {
        usage.insert("cached_calls".into(), s.hits.into());
        usage.insert("new_calls".into(), s.misses.into());
    }
}
// --- cache: end

/// Adds `concurrency` to a JSON report (the server's slots when it said, the calls in
/// flight allowed at the start, now and at most, how often overloads lowered them) and
/// `attempts` (sends to the model, failures, retries).
pub fn report_concurrency(report: &mut serde_json::Value, backend: &Backend) {
    let stats = backend.stack.adaptive();
    let sends = backend.stack.stats();
    if let Some(obj) = report.as_object_mut() {
        obj.insert(
            "concurrency".into(),
            serde_json::json!({
                "server_slots": backend.server_slots,
                "start": stats.ceiling,
                "final": stats.limit,
                "peak": stats.peak,
                "lowered": stats.lowered,
                "overloads": stats.overloads,
            }),
        );
        obj.insert(
            "attempts".into(),
            serde_json::json!({
                "sent": sends.attempts,
                "failed": sends.failures,
                "retries": sends.retries,
            }),
        );
    }
}

/// The note on standard error when the server's overloads lowered the calls in flight.
pub fn concurrency_note(backend: &Backend) -> Option<String> {
    let stats = backend.stack.adaptive();
    let sends = backend.stack.stats();
    (stats.lowered > 0).then(|| {
        format!(
            "the server was overloaded {} time(s): calls in flight went from {} down and ended at {} ({} sends in all, {} of them retries)",
            stats.overloads, stats.ceiling, stats.limit, sends.attempts, sends.retries
        )
    })
}
