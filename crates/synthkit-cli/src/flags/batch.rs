//! The flags of `batch`.

use std::path::PathBuf;

use clap::Args;
use synthkit::ResponseMode;

use super::limits::LimitArgs;
use super::model::ModelArgs;
use super::otel::OtelArgs;
use super::synth::{DEFAULT_CHUNK_SIZE, PlanArgs};
use super::values::{FileSize, TopK, parse_mode, parse_size, parse_top_k};

/// The default `--max-line-bytes`: the service's default body limit, 10 MiB.
pub const DEFAULT_MAX_LINE_BYTES: &str = "10M";
/// The default `--jobs`.
pub const DEFAULT_JOBS: u32 = 4;

/// Where `paths` (of `batch` lines and `eval` cases) may be read.
#[derive(Debug, Clone, Args)]
pub struct PathsArgs {
    /// With `paths` lines (eval: cases) that set no `top_k`: keep the N chunks most
    /// relevant to the query; `all` keeps every chunk [default: 20 when a folder is read,
    /// else all].
    #[arg(long, value_name = "N|all", value_parser = parse_top_k, help_heading = "Input")]
    pub top_k: Option<TopK>,
    /// The most tokens in a node when `paths` are split.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_CHUNK_SIZE, help_heading = "Input")]
    pub chunk_size: usize,
    /// The folder `paths` are read under: relative paths are read from it, and nothing
    /// outside it is read (an absolute path, `..`, or a symbolic link out of it is an
    /// error) [default: the folder of the input file (the cases file for eval); the
    /// current folder for standard input].
    #[arg(long, value_name = "DIR", help_heading = "Input")]
    pub paths_root: Option<PathBuf>,
    /// Read `paths` outside --paths-root too: absolute paths, `..` and symbolic links out
    /// of it (only for input you trust: a path can name any file the command can read,
    /// and its text is sent to the model and returned in `source_nodes`).
    #[arg(long, help_heading = "Input")]
    pub allow_paths_outside: bool,
    /// The folder index, for the folders of `paths`.
    #[command(flatten)]
    pub index: super::synth::IndexArgs,
}

/// `synthkit batch`.
#[derive(Debug, Args)]
#[command(mut_arg("plan", |plan| plan.help(
    "Dry run: make no model call; print the calls and prompt tokens of the whole batch \
     (every line of IN), and name the lines that cannot run"
)))]
pub struct BatchArgs {
    /// The requests, one JSON object per line (`-`: standard input): the body of the
    /// service's POST /v1/synthesize (query, nodes, mode, templates, citations,
    /// output_schema, concurrency, system_prompt, citation_markers, max_prompt_tokens)
    /// plus an optional `id` (a string or a number; default: the line number). Instead of
    /// `nodes`, a line may give `paths` (files and folders under --paths-root, by default
    /// IN's folder, read as `ask` reads them) and `top_k`. Blank lines are skipped.
    #[arg(value_name = "IN")]
    pub input: PathBuf,
    /// The results, one JSON line per input line: {"id", "request_sha256", "response"}
    /// or {"id", "request_sha256", "error": {"kind", "message", "transient"?}}. Running
    /// the same command again resumes a stopped batch: results whose request is
    /// unchanged are kept, failed lines with a transient cause and lines whose request
    /// changed run again, and OUT ends with one line per id.
    #[arg(
        long,
        short = 'o',
        value_name = "OUT",
        required_unless_present = "plan",
        help_heading = "Batch"
    )]
    pub output: Option<PathBuf>,
    /// Syntheses run at once, each with up to --concurrency calls in flight.
    #[arg(long, short = 'j', value_name = "N", default_value_t = DEFAULT_JOBS,
          value_parser = clap::value_parser!(u32).range(1..=4096), help_heading = "Batch")]
    pub jobs: u32,
    /// Write each result as it finishes instead of in input order.
    #[arg(long, help_heading = "Batch")]
    pub unordered: bool,
    /// On a resume, keep the error lines already in OUT, even those whose failure was
    /// transient (connection, timeout, rate limit, 5xx), instead of running them again.
    #[arg(long, help_heading = "Batch")]
    pub no_retry_failed: bool,
    /// The longest input line: bytes, or with K, M or G; `none` for no limit. A longer
    /// line becomes an error line (it is never held whole).
    #[arg(long, value_name = "SIZE", default_value = DEFAULT_MAX_LINE_BYTES,
          value_parser = parse_size, help_heading = "Batch")]
    pub max_line_bytes: FileSize,
    /// Where `paths` may be read.
    #[command(flatten)]
    pub paths: PathsArgs,
    /// The mode of a line that names none [default: compact].
    #[arg(long, value_name = "MODE", value_parser = parse_mode, help_heading = "Synthesis")]
    pub mode: Option<ResponseMode>,
    /// Model calls in flight of each synthesis, and the most a line's `concurrency` may
    /// ask for; 0 means no limit. Default: 8, or the server's slots when it says fewer.
    #[arg(long, value_name = "N", help_heading = "Synthesis")]
    pub concurrency: Option<usize>,
    /// The most tokens one prompt may have, below the model's window, for the lines that
    /// set no `max_prompt_tokens`: smaller prompts, more calls.
    #[arg(long, value_name = "N", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..), help_heading = "Synthesis")]
    pub max_prompt_tokens: Option<usize>,
    /// Requests and tokens per minute, retries: one budget for the whole batch.
    #[command(flatten)]
    pub limits: LimitArgs,
    /// Prices (each result line's usage says what it cost) and --max-cost: one cap for
    /// the whole run of the command (a line whose call could pass it fails as `cost_cap`,
    /// and a resumed batch runs it again under a new cap).
    #[command(flatten)]
    pub cost: super::cost::CostArgs,

    /// Evidence first and the grounding check.
    #[command(flatten)]
    pub checks: super::answer::CheckArgs,
    /// --escalate, for the lines that say nothing of `escalate`.
    #[command(flatten)]
    pub escalation: super::synth::EscalateArgs,
    /// The backend and how to reach and sample the model.
    #[command(flatten)]
    pub model_args: ModelArgs,
    /// OpenTelemetry export.
    #[command(flatten)]
    pub otel: OtelArgs,
    /// Keep every model reply in the SQLite file FILE and answer repeated calls from it:
    /// a resumed batch repeats no model call that had finished. Ignored with --plan.
    #[arg(long, value_name = "FILE", help_heading = "Model")]
    pub cache: Option<PathBuf>,
    /// `--plan` (over the whole batch) and `--price-per-1k`.
    #[command(flatten)]
    pub dry_run: PlanArgs,
    /// No progress bar and no notes on standard error (the summary line still shows).
    #[arg(long, short, help_heading = "Output")]
    pub quiet: bool,
    /// Write one HTML report per answered line into DIR (created if missing), named
    /// after the line's id (`q1.html`; an id that is not a plain file name gets its plain
    /// characters and a hash).
    #[arg(
        long,
        value_name = "DIR",
        conflicts_with = "plan",
        help_heading = "Output"
    )]
    pub report_dir: Option<PathBuf>,
}
