//! The model setup from the flags: which backend, how its prompts are counted, whether a
//! key is required, and the stack around it. `ask`, `summarize`, `batch`, `eval` and
//! `serve` build theirs here, so that one flag means one thing in all of them.

use std::path::Path;

use anyhow::{Result, anyhow};
use synthkit::backend::connect::{ConnectError, Counting, ServerSettings};
use synthkit::backend::http::reuse::ReuseHints as Hints;
use synthkit::layer::sharing::Sharing;
use synthkit_frontend::{ModelSetup, StackOptions};

use crate::flags::{LimitArgs, LlmKind, ModelArgs, ReuseHints, SynthArgs, usage};

/// The model the flags ask for: the backend (`--llm`, `--api`, the server's flags) and how
/// prompts are counted: `--tokenizer`, else the server where it can count (llama.cpp's
/// `/tokenize`, vLLM's, `count_tokens`, quietly keeping ours where it cannot); with
/// `--server-tokenizer` the config's own probe warns, with `--no-server-tokenizer` the
/// server is not asked; `--reuse-hints`, which prompt-reuse hints calls carry.
/// `require_key`: refuse the API's own server without a key (a plan,
/// which makes no call, goes without).
pub fn model_setup(flags: &ModelArgs, require_key: bool) -> Result<ModelSetup> {
    let setup = match flags.kind() {
        LlmKind::Extractive => ModelSetup::extractive()
            .with_window(flags.context_window, flags.num_output)
            .with_name(flags.model.clone()),
        LlmKind::Openai | LlmKind::Anthropic => {
            let hints = match flags.reuse_hints {
                ReuseHints::Auto => Hints::Auto,
                ReuseHints::All => Hints::All,
                ReuseHints::None => Hints::None,
            };
            let settings: ServerSettings = match flags.kind() {
                LlmKind::Anthropic => flags.anthropic_config()?.with_reuse_hints(hints).into(),
                _ => flags.openai_config()?.with_reuse_hints(hints).into(),
            };
            let counting = if flags.server_tokenizer || flags.no_server_tokenizer {
                Counting::AsConfigured
            } else {
                Counting::ServerWhereAvailable
            };
            ModelSetup::server(settings)
                .with_counting(counting)
                .require_key(require_key)
        }
    };
    // `--tokenizer` counts and splits; without it, the extractive backend and the splitter
    // use cl100k_base, a server counts as chosen above.
    Ok(match flags.tokenizer {
        Some(t) => setup.with_tokenizer(t.shared()),
        None => setup,
    })
}

/// Refuses, before anything is served, a setup whose server needs a key it lacks (the
/// API's own URL without one), with what to set.
pub fn check_key(flags: &ModelArgs, setup: &ModelSetup) -> Result<()> {
    if let synthkit_frontend::ModelChoice::Server(s) = &setup.choice
        && s.require_key
    {
        s.settings
            .check_key()
            .map_err(|e| connect_error(flags, e, true))?;
    }
    Ok(())
}

/// A connection's error as the flags' user reads it: a missing key says which variable to
/// set (a usage error when `usage_error`).
pub fn connect_error(flags: &ModelArgs, e: ConnectError, usage_error: bool) -> anyhow::Error {
    match e {
        ConnectError::NoKey { url } if usage_error => usage(flags.no_key(url)),
        ConnectError::NoKey { url } => anyhow!(flags.no_key(url)),
        other => anyhow!(other),
    }
}

/// The stack around the model: calls in flight of one synthesis (`--concurrency`), the
/// syntheses run at once, the retry flags and the sharing (budget and cache).
pub fn stack_options(
    limits: &LimitArgs,
    calls_in_flight: Option<usize>,
    syntheses: usize,
    sharing: Sharing,
) -> Result<StackOptions> {
    Ok(StackOptions::default()
        .with_calls_in_flight(calls_in_flight)
        .with_syntheses(syntheses)
        .with_retry(limits.retry_policy()?)
        .with_sharing(sharing))
}

/// The flags that build the backend and its stack: `ask`'s and `summarize`'s, `batch`'s
/// or `eval`'s (one stack for every synthesis of the job).
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
            model_args: &args.answering.model_args,
            limits: &args.limits,
            concurrency: args.concurrency,
            syntheses: 1,
            cache: args.cache.as_deref(),
            plan: args.dry_run.plan,
        }
    }

    /// The setup the flags ask for ([`model_setup`]) with its stack over `sharing`.
    pub fn setup(&self, sharing: Sharing) -> Result<ModelSetup> {
        let stack = stack_options(self.limits, self.concurrency, self.syntheses, sharing)?;
        Ok(model_setup(self.model_args, !self.plan)?.with_stack(stack))
    }
}
