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

use anyhow::Result;
use synthkit::layer::sharing::{CacheLocation, Sharing};

pub use crate::settings::StackFlags;

/// The chosen model behind the library's model stack, with the tokenizers, slots and
/// server that go with it: the setup every front end builds ([`synthkit_frontend`]).
pub type Backend = synthkit_frontend::BuiltModel;

/// Builds the backend and its model stack (the library's order: adaptive concurrency,
/// rate budget, retries, cache) from the flags of any verb. For a server this may ask it
/// for its context window, model and slots (and probe `/tokenize`); it never makes a model
/// call. With `--cache FILE` (not with `--plan`, which makes no call) the stack answers
/// repeated calls from the file; with `--redis-url`, the budget and the cache are Redis's.
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
    args.setup(sharing)?
        .build()
        .await
        .map_err(|e| crate::settings::connect_error(args.model_args, e, false))
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
