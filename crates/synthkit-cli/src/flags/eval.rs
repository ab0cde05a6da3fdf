//! The flags of `eval`.

use std::path::PathBuf;

use clap::Args;
use synthkit::ResponseMode;

use super::batch::PathsArgs;
use super::limits::LimitArgs;
use super::synth::{AnsweringArgs, CiteStyle, PromptArgs, WindowArgs};
use super::values::parse_mode;

impl EvalArgs {
    /// Whether `--cite` (any style) or `--cite-quotes` was given.
    pub fn cites(&self) -> bool {
        self.cite.is_some() || self.cite_quotes
    }

    /// The citation style asked for.
    pub fn citation_style(&self) -> synthkit::CitationStyle {
        CiteStyle::of(self.cite, self.cite_quotes)
    }
}

/// `synthkit eval`.
#[derive(Debug, Clone, Args)]
pub struct EvalArgs {
    /// The cases, one JSON object per line: {"id", "query", "nodes" | "paths", "top_k",
    /// "answers", "evidence", "answerable", "tags"} (docs/evaluation.md).
    /// `paths` are read under --paths-root, by default the cases file's folder.
    #[arg(value_name = "CASES")]
    pub cases: PathBuf,
    /// Run synthkit in these response modes, comma-separated [default: compact, unless
    /// --answers is given].
    #[arg(long, value_name = "MODES", value_delimiter = ',', value_parser = parse_mode,
          help_heading = "Eval")]
    pub modes: Vec<ResponseMode>,
    /// Score answers produced elsewhere: JSON lines {"id", "mode", "system", "answer",
    /// "error", "abstained", "calls", "prompt_tokens", "completion_tokens",
    /// "truncated_calls", "wall_ms", "prompts", "citations"}; repeatable. A line without
    /// `system` is named after its file (`ref.jsonl`: `ref`); two lines for one case,
    /// mode and system, or a line named as synthkit's own runs in a mode they run, are
    /// refused.
    #[arg(long, value_name = "FILE", help_heading = "Eval")]
    pub answers: Vec<PathBuf>,
    /// The name of synthkit's runs in the results.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "synthkit",
        help_heading = "Eval"
    )]
    pub system: String,
    /// Append each scored row to ROWS (JSON lines); rows already there (same id, mode and
    /// system, scored on the same case and answers line: each row keeps their hashes)
    /// are kept and not run again, so running the same command again resumes.
    #[arg(long, short = 'o', value_name = "ROWS", help_heading = "Eval")]
    pub output: Option<PathBuf>,
    /// Runs (case and mode) in flight at once, each with up to --concurrency calls in
    /// flight; rows are written in case order. Above 1 the runs share the server, so each
    /// row's wall time includes waiting for the others: compare calls and tokens then.
    #[arg(long, short = 'j', value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=256), help_heading = "Eval")]
    pub jobs: u32,
    /// On a resume, keep synthkit's failed runs already in ROWS (a connection refused, a
    /// timeout, an error reply) instead of running them again.
    #[arg(long, help_heading = "Eval")]
    pub no_retry_failed: bool,
    /// Where `paths` may be read.
    #[command(flatten)]
    pub paths: PathsArgs,
    /// Number the sources and have the answers cite them: scores citation precision and
    /// recall against each case's `evidence`. `--cite=quotes` asks for quoted citations
    /// and records, per row, how many quotes were verified, misattributed or not found
    /// (the `=` is required: a bare `--cite` never takes the next argument).
    #[arg(long, value_enum, value_name = "STYLE", num_args = 0..=1, require_equals = true,
          default_missing_value = "markers", help_heading = "Synthesis")]
    pub cite: Option<CiteStyle>,
    /// The same as --cite=quotes.
    #[arg(long, help_heading = "Synthesis")]
    pub cite_quotes: bool,
    /// --escalate, as `ask` has it: each case's mode over its first N nodes, then
    /// map_reduce over all of them when that answer abstains or is found in no source.
    #[command(flatten)]
    pub escalation: super::synth::EscalateArgs,
    /// Model calls in flight of each synthesis; 0 means no limit. Default: 8, or the
    /// server's slots when it says fewer.
    #[arg(long, value_name = "N", help_heading = "Synthesis")]
    pub concurrency: Option<usize>,
    /// How each call uses the window, as `ask` has it.
    #[command(flatten)]
    pub window: WindowArgs,
    /// Other prompts than the defaults (to measure a prompt before making it one).
    #[command(flatten)]
    pub prompts: PromptArgs,
    /// Requests and tokens per minute, retries: one budget for the whole evaluation.
    #[command(flatten)]
    pub limits: LimitArgs,

    /// Prices: each row (every system's, alike) says what its tokens cost, and the table
    /// has a cost column.
    #[command(flatten)]
    pub prices: super::cost::PriceArgs,

    /// The backend and the checks of its answers, as `ask` has them.
    #[command(flatten)]
    pub answering: AnsweringArgs,
    /// Keep every model reply in the SQLite file FILE and answer repeated calls from it.
    #[arg(long, value_name = "FILE", help_heading = "Model")]
    pub cache: Option<PathBuf>,
    /// Print one JSON object: {"rows": [...], "totals": [...]} instead of the table.
    #[arg(long, help_heading = "Output")]
    pub json: bool,
    /// Write an HTML page of the results to FILE: the totals, then each case with the
    /// answers of every system and mode side by side.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub html: Option<PathBuf>,
    /// Write the HTML report of each synthkit run into DIR (`ID.MODE.html`), linked from
    /// the --html page.
    #[arg(long, value_name = "DIR", help_heading = "Output")]
    pub report_dir: Option<PathBuf>,
    /// No progress bar and no notes on standard error.
    #[arg(long, short, help_heading = "Output")]
    pub quiet: bool,
}
