//! What one `batch` runs, built from its flags once: [`BatchRun`]. The verb reads these
//! built things and never a flag, as `ask` reads [`super::SynthRun`].

use std::path::PathBuf;

use anyhow::Result;
use synthkit::ResponseMode;
use synthkit::many::Order;
use synthkit_frontend::batch::HashDefaults;

use super::checks::CheckSettings;
use super::cost::CostSettings;
use super::model::StackFlags;
use synthkit_frontend::retrieval::paths::PathsSettings;

use crate::flags::{BatchArgs, PathsArgs, TopK};

/// One `synthkit batch`, as its flags ask for it.
#[derive(Debug, Clone)]
pub struct BatchRun<'a> {
    /// IN (`-` for standard input).
    pub input: PathBuf,
    /// `-o OUT`: the results file appended to and resumed from.
    pub output: Option<PathBuf>,
    /// `--max-line-bytes`: the longest input line read (`usize::MAX`: no limit).
    pub max_line: usize,
    /// What a line's request hash takes from the flags.
    pub hash_defaults: HashDefaults,
    /// The requests' defaults for lines that set none.
    pub requests: RequestFlags,
    /// A question's checks, with the flags.
    pub checks: CheckSettings,
    /// The prices and the cost cap, when prices are given.
    pub cost: Option<CostSettings>,
    /// `--plan`: plan every line, make no model call.
    pub plan: bool,
    /// `--price-per-1k`: the plan's rough price.
    pub price_per_1k: Option<f64>,
    /// Whether failed lines in OUT are run again (not `--no-retry-failed`).
    pub retry_failed: bool,
    /// The order results are written in (`--unordered`: as they finish).
    pub order: Order,
    /// `--jobs`: lines in flight at once.
    pub jobs: usize,
    /// How a line's `paths` are read.
    pub paths: LinePaths,
    /// `--report-dir DIR`: each line's report.
    pub report_dir: Option<PathBuf>,
    /// `--quiet`.
    pub quiet: bool,
    /// What builds the model and its stack (one for the whole batch).
    pub stack: StackFlags<'a>,
}

/// The request defaults the flags give the lines that set none.
#[derive(Debug, Clone, Copy)]
pub struct RequestFlags {
    /// `--mode`.
    pub mode: Option<ResponseMode>,
    /// `--concurrency`: calls in flight of each line's synthesis.
    pub concurrency: Option<usize>,
    /// `--max-prompt-tokens`.
    pub max_prompt_tokens: Option<usize>,
    /// `--escalate[=N]`.
    pub escalate: Option<u32>,
}

/// How the `paths` of a line (or an eval case) are read: `--chunk-size` (with the default
/// overlap for it), `--top-k`, `--paths-root` and `--allow-paths-outside`, alike for `batch` and
/// `eval`.
#[derive(Debug, Clone)]
pub struct LinePaths {
    /// `--chunk-size`.
    pub chunk_size: usize,
    /// `--top-k`, for lines that set no `top_k`.
    pub top_k: Option<TopK>,
    /// `--paths-root`.
    pub paths_root: Option<PathBuf>,
    /// `--allow-paths-outside`.
    pub allow_paths_outside: bool,
    /// Where folder indexes are kept (`--index-dir`); `None`: `--no-index`.
    pub index_dir: Option<PathBuf>,
}

impl LinePaths {
    /// The reading `paths` asks for.
    pub fn of(paths: &PathsArgs) -> Self {
        Self {
            chunk_size: paths.chunk_size,
            top_k: paths.top_k,
            paths_root: paths.paths_root.clone(),
            allow_paths_outside: paths.allow_paths_outside,
            index_dir: super::run::index_dir(&paths.index),
        }
    }

    /// What the retriever reads `paths` with (the root is made from the input's folder).
    pub fn reading(&self) -> PathsSettings {
        PathsSettings::default()
            .with_chunk_size(self.chunk_size)
            .with_top_k(self.top_k)
            .with_index_dir(self.index_dir.clone())
    }
}

impl<'a> BatchRun<'a> {
    /// The batch `args` ask for; an unreadable price file refused.
    pub fn of(args: &'a BatchArgs) -> Result<Self> {
        let max_line = args
            .max_line_bytes
            .0
            .map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
        Ok(Self {
            input: args.input.clone(),
            output: args.output.clone(),
            max_line,
            hash_defaults: HashDefaults::new(args.mode, args.max_prompt_tokens),
            requests: RequestFlags {
                mode: args.mode,
                concurrency: args.concurrency,
                max_prompt_tokens: args.max_prompt_tokens,
                escalate: args.escalation.escalate,
            },
            checks: CheckSettings::for_questions(&args.checks),
            cost: CostSettings::of(&args.cost)?,
            plan: args.dry_run.plan,
            price_per_1k: args.dry_run.price_per_1k,
            retry_failed: !args.no_retry_failed,
            order: if args.unordered {
                Order::Finished
            } else {
                Order::Input
            },
            jobs: args.jobs as usize,
            paths: LinePaths::of(&args.paths),
            report_dir: args.report_dir.clone(),
            quiet: args.quiet,
            stack: StackFlags {
                model_args: &args.model_args,
                limits: &args.limits,
                concurrency: args.concurrency,
                syntheses: args.jobs as usize,
                cache: args.cache.as_deref(),
                plan: args.dry_run.plan,
            },
        })
    }
}
