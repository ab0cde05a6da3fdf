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
use std::sync::Arc;

use anyhow::{Result, anyhow};
use synthkit::backend::connect::{
    Connect, ConnectError, ConnectedServer, Counting, ServerSettings,
};
use synthkit::layer::cache::SqliteCache;
use synthkit::layer::stack::ModelStack;
use synthkit::model::LanguageModel;
use synthkit::text::{BpeTokenizer, SharedTokenizer};
use synthkit_extractive::ExtractiveModel;

use crate::args::{LimitArgs, LlmKind, ModelArgs, SynthArgs, calls_in_flight};
use crate::error::usage;

/// The chosen model, behind the library's model stack, and the tokenizers that go with it.
pub struct Backend {
    /// The model with every layer (the stack's model).
    pub model: Arc<dyn LanguageModel>,
    /// The stack: calls in flight, attempts, retries, cache hits.
    pub stack: ModelStack,
    /// Which backend it is.
    pub kind: LlmKind,
    /// Counts prompts for the budget: the model's own tokenizer when it has one, else
    /// `--tokenizer`, else `cl100k_base`.
    pub budget_tokenizer: SharedTokenizer,
    /// Splits files into nodes: `--tokenizer`, else `cl100k_base` (local, fast).
    pub split_tokenizer: SharedTokenizer,
    /// Requests the server runs at once, when it says (llama.cpp `/props`).
    pub server_slots: Option<usize>,
    /// The server's connection, for what only it knows (the model the server says
    /// answered); none for the extractive backend.
    pub server: Option<ConnectedServer>,
}

impl Backend {
    /// The backend's name in reports: `extractive`, `openai` or `anthropic`.
    pub fn name(&self) -> &'static str {
        match self.kind {
            LlmKind::Extractive => "extractive",
            LlmKind::Openai => "openai",
            LlmKind::Anthropic => "anthropic",
        }
    }

    /// The model's name in reports: the one the server gave in its latest reply, else the
    /// configured (or discovered) name.
    pub fn model_name(&self) -> String {
        self.server
            .as_ref()
            .and_then(ConnectedServer::served_model)
            .unwrap_or_else(|| self.model.info().name)
    }
}

/// The variable read for the base URL when neither `--base-url` nor `SYNTHKIT_BASE_URL`
/// is set (as OpenAI's SDKs read it).
pub const OPENAI_BASE_URL_VAR: &str = "OPENAI_BASE_URL";

/// The server's base URL: `--base-url` (or `SYNTHKIT_BASE_URL`), else `OPENAI_BASE_URL`;
/// with the name of where it came from.
pub fn base_url(args: &SynthArgs) -> Option<(String, &'static str)> {
    args.model_args.base_url()
}

/// Builds the backend and its model stack (the library's order: adaptive concurrency,
/// rate budget, retries, cache). For `openai` this may ask the server for its context
/// window, model and slots (and probe `/tokenize`); it never makes a model call. With
/// `--cache FILE` (not with `--plan`, which makes no call) the stack answers repeated
/// calls from the file.
pub async fn connect(args: &SynthArgs) -> Result<Backend> {
    connect_with(StackFlags::of(args)).await
}

/// The flags that build the backend and its stack: `ask`'s and `summarize`'s, or
/// `batch`'s (one stack for every synthesis of the batch).
#[derive(Debug, Clone, Copy)]
pub struct StackFlags<'a> {
    /// Which backend, where and which model.
    pub model_args: &'a ModelArgs,
    /// Rates and retries.
    pub limits: &'a LimitArgs,
    /// `--concurrency`: calls in flight of one synthesis.
    pub concurrency: Option<usize>,
    /// Syntheses run at once (1 but for `batch --jobs`): the stack lets each have its
    /// calls in flight.
    pub syntheses: usize,
    /// `--cache FILE`.
    pub cache: Option<&'a Path>,
    /// `--plan`: no model call will be made (no key needed, no cache opened).
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
}

/// [`connect`] with the flags of any verb.
pub async fn connect_with(args: StackFlags<'_>) -> Result<Backend> {
    let kind = args.model_args.kind();
    let split_tokenizer: SharedTokenizer = args
        .model_args
        .tokenizer
        .unwrap_or_else(BpeTokenizer::cl100k_base)
        .shared();
    let (model, identity, budget_tokenizer, server): (Arc<dyn LanguageModel>, _, _, _) = match kind
    {
        LlmKind::Extractive => {
            let mut model = ExtractiveModel::new().with_tokenizer(split_tokenizer.clone());
            if let Some(w) = args.model_args.context_window {
                model = model.with_context_window(w);
            }
            if let Some(n) = args.model_args.num_output {
                model = model.with_num_output(n);
            }
            if let Some(name) = &args.model_args.model {
                model = model.with_name(name.clone());
            }
            let identity = model.cache_identity();
            (Arc::new(model), identity, split_tokenizer.clone(), None)
        }
        LlmKind::Openai | LlmKind::Anthropic => {
            let server = connect_server(&args).await?;
            let budget = server
                .model
                .tokenizer()
                .unwrap_or_else(|| split_tokenizer.clone());
            let model = Arc::clone(&server.model);
            (model, server.identity.clone(), budget, Some(server))
        }
    };
    let server_slots = server.as_ref().and_then(|s| s.server_slots);
    // Calls in flight start at --concurrency (by default at most the server's slots),
    // halve while the server is overloaded and grow back.
    let per_synthesis = calls_in_flight(args.concurrency, server_slots);
    let mut builder = ModelStack::builder_arc(model)
        .max_in_flight(per_synthesis.saturating_mul(args.syntheses.max(1)))
        .server_slots(server_slots);
    builder = args.limits.apply(builder, false)?;
    let cache_file = args.cache.filter(|_| !args.plan);
    if let Some(path) = cache_file {
        let store = SqliteCache::open(path).map_err(|e| usage(format!("{e} (--cache)")))?;
        builder = builder.cache(Arc::new(store), identity);
    }
    let stack = builder.build();
    Ok(Backend {
        model: stack.model(),
        stack,
        kind,
        budget_tokenizer,
        split_tokenizer,
        server_slots,
        server,
    })
}

/// Connects to the server the flags name (`--api`): refuses the API's own server without
/// a key (but for `--plan`), connects (discovery), and counts with `--tokenizer`, else
/// with the server where it can count (llama.cpp's `/tokenize`, vLLM's, `count_tokens`:
/// budgets match the model best), quietly keeping ours where it cannot; with
/// `--server-tokenizer` the config's own probe warns, with `--no-server-tokenizer` the
/// server is not asked.
async fn connect_server(args: &StackFlags<'_>) -> Result<ConnectedServer> {
    let flags = args.model_args;
    let settings: ServerSettings = match flags.kind() {
        LlmKind::Anthropic => flags.anthropic_config()?.into(),
        _ => flags.openai_config()?.into(),
    };
    let counting = match flags.tokenizer {
        Some(t) => Counting::Tokenizer(t.shared()),
        None if !flags.server_tokenizer && !flags.no_server_tokenizer => {
            Counting::ServerWhereAvailable
        }
        None => Counting::AsConfigured,
    };
    Connect::new(settings)
        .counting(counting)
        .require_key(!args.plan)
        .connect()
        .await
        .map_err(|e| match e {
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
