//! Choosing the model: the offline extractive backend or an OpenAI-compatible server.
//!
//! `--llm` decides; without it, the backend is `openai` when `--base-url` (or
//! `SYNTHKIT_BASE_URL`) is given and `extractive` otherwise. The API key is read from the
//! variable named by `--api-key-env` into a secret that the library never prints.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, anyhow};
use synthkit::backend::extractive::ExtractiveModel;
use synthkit::backend::openai::{OpenAiConfig, OpenAiModel};
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
}

impl Backend {
    /// The backend's name in reports: `extractive` or `openai`.
    pub fn name(&self) -> &'static str {
        match self.kind {
            LlmKind::Extractive => "extractive",
            LlmKind::Openai => "openai",
        }
    }
}

/// The backend `args` ask for.
pub fn kind(args: &SynthArgs) -> LlmKind {
    let has_url = args
        .base_url
        .as_deref()
        .is_some_and(|u| !u.trim().is_empty());
    args.llm.unwrap_or(if has_url {
        LlmKind::Openai
    } else {
        LlmKind::Extractive
    })
}

/// Builds the backend. For `openai` this may ask the server for its context window (and
/// probe `/tokenize` with `--server-tokenizer`); it never makes a model call.
pub async fn connect(args: &SynthArgs) -> Result<Backend> {
    let kind = kind(args);
    let split_tokenizer: SharedTokenizer = args
        .tokenizer
        .unwrap_or_else(BpeTokenizer::cl100k_base)
        .shared();
    match kind {
        LlmKind::Extractive => {
            let mut model = ExtractiveModel::new().with_tokenizer(split_tokenizer.clone());
            if let Some(w) = args.context_window {
                model = model.with_context_window(w);
            }
            if let Some(n) = args.num_output {
                model = model.with_num_output(n);
            }
            if let Some(name) = &args.model {
                model = model.with_name(name.clone());
            }
            Ok(Backend {
                model: limited(Arc::new(model), args),
                kind,
                budget_tokenizer: split_tokenizer.clone(),
                split_tokenizer,
            })
        }
        LlmKind::Openai => {
            let config = openai_config(args)?;
            if config.api_key.is_none()
                && config.base() == OpenAiConfig::DEFAULT_BASE_URL
                && !args.plan
            {
                return Err(anyhow!(
                    "no API key for {}: set the environment variable {} (or name another one with --api-key-env), or point --base-url at a local server",
                    OpenAiConfig::DEFAULT_BASE_URL,
                    args.api_key_env
                ));
            }
            let mut model = OpenAiModel::connect(config)
                .await
                .map_err(|e| anyhow!("cannot set up the model client: {e}"))?;
            if let Some(t) = args.tokenizer {
                model = model.with_tokenizer(t.shared());
            } else if !args.server_tokenizer && !args.no_server_tokenizer {
                // Budgets match the model best when the server counts: use its /tokenize
                // where it has one (llama.cpp, vLLM), quietly keep ours where it has none.
                model.use_server_counter().await;
            }
            let budget_tokenizer = model.tokenizer().unwrap_or_else(|| split_tokenizer.clone());
            Ok(Backend {
                model: retried(limited(Arc::new(model), args), args),
                kind,
                budget_tokenizer,
                split_tokenizer,
            })
        }
    }
}

// --- limits (layer::limit): begin
/// The model behind one shared limiter when `--rpm` or `--tpm` is given (calls in flight
/// are then also capped at `--concurrency`, 0 meaning no cap).
fn limited(model: Arc<dyn LanguageModel>, args: &SynthArgs) -> Arc<dyn LanguageModel> {
    use synthkit::layer::limit::{LimitedModel, Limiter, Limits};
    if args.rpm.is_none() && args.tpm.is_none() {
        return model;
    }
    let limits = Limits::default()
        .with_max_in_flight(args.concurrency)
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

/// The OpenAI-compatible config from the environment and the flags.
fn openai_config(args: &SynthArgs) -> Result<OpenAiConfig> {
    let mut config = OpenAiConfig::from_env_with_key_var(&args.api_key_env);
    if let Some(url) = args
        .base_url
        .as_deref()
        .map(str::trim)
        .filter(|u| !u.is_empty())
    {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(usage(format!(
                "--base-url must start with http:// or https://, got `{url}`"
            )));
        }
        config = config.with_base_url(url);
    }
    if let Some(m) = &args.model {
        config = config.with_model(m.clone());
    }
    if let Some(w) = args.context_window {
        config = config.with_context_window(w);
    }
    if let Some(n) = args.num_output {
        config = config.with_num_output(n);
    }
    if let Some(secs) = args.timeout {
        let t = Duration::try_from_secs_f64(secs)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| {
                usage(format!(
                    "--timeout must be a positive number of seconds, got {secs}"
                ))
            })?;
        config = config.with_timeout(t);
    }
    Ok(config
        .with_chat(!args.completion_api)
        .with_server_tokenizer(args.server_tokenizer))
}

// --- cache (layer::cache): begin
/// Puts the backend's model behind a persistent response cache when `--cache FILE` is
/// given (not with `--plan`, which makes no call), and returns the cache's counters.
/// Call it after [`connect`]: the cache is then the outermost layer, so a hit waits for no
/// rate limit. Keys cover the backend (kind and endpoint), the model's name and the
/// parameters that change replies (temperature, JSON-schema mode, extra body fields; the
/// tokenizer for extractive), besides the request itself.
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
            let config = openai_config(args)?;
            (
                format!("openai {}", config.endpoint()),
                format!(
                    "temperature={:?} json_schema={} extra_body={}",
                    config.temperature,
                    config.json_schema,
                    serde_json::Value::Object(config.extra_body.clone())
                ),
            )
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
