//! Choosing the model: the offline extractive backend or an OpenAI-compatible server.
//!
//! `--llm` decides; without it, the backend is `openai` when `--base-url` (or
//! `SYNTHKIT_BASE_URL`, else `OPENAI_BASE_URL`) is given and `extractive` otherwise. The
//! API key is read from the variable named by `--api-key-env` into a secret that the
//! library never prints. Without `--model` (or `SYNTHKIT_MODEL`), a server given by URL is
//! asked which model it serves (`GET /models`).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, anyhow};
use synthkit::backend::extractive::ExtractiveModel;
use synthkit::backend::openai::{OpenAiConfig, OpenAiModel};
use synthkit::layer::adaptive::{AdaptiveLimit, AdaptiveModel};
use synthkit::model::LanguageModel;
use synthkit::text::{BpeTokenizer, SharedTokenizer};

use crate::args::{LlmKind, SynthArgs};
use crate::error::usage;

/// The chosen model and the tokenizers that go with it.
pub struct Backend {
    /// The model.
    pub model: Arc<dyn LanguageModel>,
    /// Which backend it is.
    pub kind: LlmKind,
    /// Counts prompts for the budget: the model's own tokenizer when it has one, else
    /// `--tokenizer`, else `cl100k_base`.
    pub budget_tokenizer: SharedTokenizer,
    /// Splits files into nodes: `--tokenizer`, else `cl100k_base` (local, fast).
    pub split_tokenizer: SharedTokenizer,
    /// Requests the server runs at once, when it says (llama.cpp `/props`).
    pub server_slots: Option<usize>,
    /// The adaptive limit on calls in flight to the server (openai backend).
    pub adaptive: Option<synthkit::layer::adaptive::AdaptiveLimit>,
    /// The OpenAI-compatible model under the layers, for what only it knows (the model the
    /// server says answered).
    pub openai: Option<Arc<OpenAiModel>>,
}

impl Backend {
    /// The backend's name in reports: `extractive` or `openai`.
    pub fn name(&self) -> &'static str {
        match self.kind {
            LlmKind::Extractive => "extractive",
            LlmKind::Openai => "openai",
        }
    }

    /// The model's name in reports: the one the server gave in its latest reply, else the
    /// configured (or discovered) name.
    pub fn model_name(&self) -> String {
        self.openai
            .as_ref()
            .and_then(|m| m.served_model())
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

/// The backend `args` ask for.
pub fn kind(args: &SynthArgs) -> LlmKind {
    args.model_args.kind()
}

/// Builds the backend. For `openai` this may ask the server for its context window (and
/// probe `/tokenize` with `--server-tokenizer`); it never makes a model call.
pub async fn connect(args: &SynthArgs) -> Result<Backend> {
    let kind = kind(args);
    let split_tokenizer: SharedTokenizer = args
        .model_args
        .tokenizer
        .unwrap_or_else(BpeTokenizer::cl100k_base)
        .shared();
    match kind {
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
            Ok(Backend {
                model: limited(Arc::new(model), args),
                kind,
                budget_tokenizer: split_tokenizer.clone(),
                split_tokenizer,
                server_slots: None,
                adaptive: None,
                openai: None,
            })
        }
        LlmKind::Openai => {
            let config = args.model_args.openai_config()?;
            if config.api_key.is_none()
                && config.base() == OpenAiConfig::DEFAULT_BASE_URL
                && !args.plan
            {
                return Err(anyhow!(
                    "no API key for {}: set the environment variable {} (or name another one with --api-key-env), or point --base-url at a local server",
                    OpenAiConfig::DEFAULT_BASE_URL,
                    args.model_args.api_key_env
                ));
            }
            let mut model = OpenAiModel::connect(config)
                .await
                .map_err(|e| anyhow!("cannot set up the model client: {e}"))?;
            if let Some(t) = args.model_args.tokenizer {
                model = model.with_tokenizer(t.shared());
            } else if !args.model_args.server_tokenizer && !args.model_args.no_server_tokenizer {
                // Budgets match the model best when the server counts: use its /tokenize
                // where it has one (llama.cpp, vLLM), quietly keep ours where it has none.
                model.use_server_counter().await;
            }
            let budget_tokenizer = model.tokenizer().unwrap_or_else(|| split_tokenizer.clone());
            // Calls in flight start at --concurrency (by default at most the server's
            // slots), halve when the server is overloaded and grow back slowly.
            let server_slots = model.server_slots();
            let ceiling = match args.concurrency_for(server_slots) {
                0 => UNLIMITED_IN_FLIGHT,
                n => n,
            };
            let adaptive = AdaptiveLimit::new(ceiling);
            let model = Arc::new(model);
            let openai = Some(Arc::clone(&model));
            let model = Arc::new(AdaptiveModel::new(model, adaptive.clone()));
            Ok(Backend {
                model: retried(limited(model, args), args),
                kind,
                budget_tokenizer,
                split_tokenizer,
                server_slots,
                adaptive: Some(adaptive),
                openai,
            })
        }
    }
}

/// The adaptive ceiling for `--concurrency 0` (no limit).
const UNLIMITED_IN_FLIGHT: usize = 4096;

// --- limits (layer::limit): begin
/// The model behind one shared limiter when `--rpm` or `--tpm` is given (calls in flight
/// are then also capped at `--concurrency`, 0 meaning no cap).
fn limited(model: Arc<dyn LanguageModel>, args: &SynthArgs) -> Arc<dyn LanguageModel> {
    use synthkit::layer::limit::{LimitedModel, Limiter, Limits};
    if args.rpm.is_none() && args.tpm.is_none() {
        return model;
    }
    let limits = Limits::default()
        .with_max_in_flight(args.concurrency_for(None))
        .with_requests_per_minute(args.rpm.unwrap_or(0))
        .with_tokens_per_minute(args.tpm.unwrap_or(0));
    Arc::new(LimitedModel::new(model, Limiter::new(limits)))
}
// --- limits: end

/// The model behind the retry layer (outside the limiter, so every attempt is charged).
fn retried(model: Arc<dyn LanguageModel>, args: &SynthArgs) -> Arc<dyn LanguageModel> {
    use synthkit::layer::retry::{RetryModel, RetryPolicy};
    if args.retries <= 1 {
        return model;
    }
    let secs = if args.retry_max_secs.is_finite() {
        args.retry_max_secs.clamp(0.0, 86_400.0)
    } else {
        120.0
    };
    let total = Duration::from_secs_f64(secs);
    let policy = RetryPolicy::default()
        .with_max_attempts(args.retries)
        .with_max_elapsed(total);
    Arc::new(RetryModel::new(model, policy))
}

// --- cache (layer::cache): begin
/// Puts the backend's model behind a persistent response cache when `--cache FILE` is
/// given (not with `--plan`, which makes no call), and returns the cache's counters.
/// Call it after [`connect`]: the cache is then the outermost layer, so a hit waits for no
/// rate limit. Keys cover the backend (kind and endpoint), the model's name and the
/// parameters that change replies (temperature, top_p and seed when set, JSON-schema mode,
/// extra body fields; the tokenizer for extractive), besides the request itself.
pub fn cached(
    mut backend: Backend,
    args: &SynthArgs,
) -> Result<(Backend, Option<synthkit::layer::cache::CacheCounters>)> {
    use synthkit::layer::cache::{CachedModel, SqliteCache};
    let Some(path) = args.cache.as_deref().filter(|_| !args.plan) else {
        return Ok((backend, None));
    };
    let store = SqliteCache::open(path).map_err(|e| usage(format!("{e} (--cache)")))?;
    let (identity, params) = match backend.kind {
        LlmKind::Extractive => (
            "extractive".to_string(),
            format!("tokenizer={}", backend.split_tokenizer.name()),
        ),
        LlmKind::Openai => {
            let config = args.model_args.openai_config()?;
            let mut params = format!(
                "temperature={:?} json_schema={} extra_body={}",
                config.temperature,
                config.json_schema,
                serde_json::Value::Object(config.extra_body.clone())
            );
            // Only when set, so the keys of runs without them stay as they were.
            if let Some(p) = config.top_p {
                params.push_str(&format!(" top_p={p:?}"));
            }
            if let Some(seed) = config.seed {
                params.push_str(&format!(" seed={seed}"));
            }
            (format!("openai {}", config.endpoint()), params)
        }
    };
    let model = CachedModel::new(
        Arc::clone(&backend.model),
        Arc::new(store),
        identity,
        params,
    );
    let counters = model.counters();
    backend.model = Arc::new(model);
    Ok((backend, Some(counters)))
}

/// The note on standard error after a cached run: `N cached, M new calls`.
pub fn cache_note(cache: &synthkit::layer::cache::CacheCounters) -> String {
    let s = cache.snapshot();
    format!("response cache: {} cached, {} new calls", s.hits, s.misses)
}

/// Adds `cached_calls` and `new_calls` to the `usage` of a JSON report.
pub fn report_cache(
    report: &mut serde_json::Value,
    cache: Option<&synthkit::layer::cache::CacheCounters>,
) {
    let Some(s) = cache.map(|c| c.snapshot()) else {
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

/// Adds `concurrency` to a JSON report: the server's slots (when it said), the calls in
/// flight allowed at the start, now, and at most, and how often overloads lowered them.
pub fn report_concurrency(report: &mut serde_json::Value, backend: &Backend) {
    let Some(stats) = backend.adaptive.as_ref().map(|a| a.stats()) else {
        return;
    };
    if let Some(obj) = report.as_object_mut() {
        obj.insert(
            "concurrency".into(),
            serde_json::json!({
                "server_slots": backend.server_slots,
                "start": stats.ceiling,
                "final": stats.limit,
                "peak": stats.peak,
                "lowered": stats.lowered,
                "resent": stats.resent,
            }),
        );
    }
}

/// The note on standard error when the server's overloads lowered the calls in flight.
pub fn concurrency_note(backend: &Backend) -> Option<String> {
    let stats = backend.adaptive.as_ref()?.stats();
    (stats.lowered > 0).then(|| {
        format!(
            "the server was overloaded {} time(s): calls in flight went from {} down and ended at {} ({} calls sent again)",
            stats.lowered, stats.ceiling, stats.limit, stats.resent
        )
    })
}
