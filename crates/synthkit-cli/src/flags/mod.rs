//! The command line (clap derive), as ripgrep's `flags`: every flag of every verb, one
//! file per group, with the flags' value parsers and defaults, the methods that turn flags
//! into settings (a retry policy, a server's config, the service's limits) and the usage
//! error of a flag the command cannot take. It imports nothing else of the command: the
//! verbs and the services read these structs.

use clap::{Parser, Subcommand};

mod answer;
mod batch;
mod cost;
mod eval;
mod limits;
mod model;
mod otel;
mod report;
#[cfg(feature = "serve")]
mod serve;
mod synth;
mod text;
mod values;

pub use answer::CheckArgs;
pub use batch::{BatchArgs, PathsArgs};
pub use cost::{CostArgs, PriceArgs};
pub use eval::EvalArgs;
pub use limits::LimitArgs;
pub use model::{LlmKind, ModelArgs, ReuseHints};
pub use otel::OtelArgs;
pub use report::ReportVerbArgs;
#[cfg(feature = "serve")]
pub use serve::ServeArgs;
pub use synth::{
    ASK_DEFAULT_MODE, AskArgs, DEFAULT_FOLDER_TOP_K, ImagesMode, IndexArgs, JsonFormat, PromptArgs,
    SUMMARIZE_DEFAULT_MODE, SummarizeArgs, SynthArgs, TruncationPolicy, WalkArgs, WindowArgs,
    default_overlap,
};
pub use text::{SplitArgs, TokensArgs};
pub use values::{TopK, UsageError, usage};

/// Answer questions over your files with LlamaIndex-style response synthesis.
///
/// Without a language model configured, answers come from the offline extractive backend,
/// which picks the most relevant sentences from your documents. Point `--base-url` (or
/// `SYNTHKIT_BASE_URL` or `OPENAI_BASE_URL`) at an OpenAI-compatible server to use a real
/// model.
#[derive(Debug, Parser)]
#[command(name = "synthkit", version, about, long_about = None)]
#[command(after_help = "Examples:\n  \
    synthkit ask \"How often is the mirror cleaned?\" docs/\n  \
    synthkit summarize --mode tree_summarize notes.md\n  \
    synthkit ask \"...\" docs/ --plan --base-url http://127.0.0.1:8080/v1\n  \
    synthkit split notes.md --chunk-size 256 --json\n  \
    synthkit tokens notes.md")]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// More log lines on standard error (-v, -vv).
    ///
    /// More log lines on standard error: -v for each call's retries, corrections and
    /// cache notes (info), -vv for debug. RUST_LOG overrides.
    #[arg(long, short, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

/// The verbs.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Count the tokens of a file or of standard input.
    Tokens(TokensArgs),
    /// Split a file or standard input into chunks of at most N tokens.
    Split(SplitArgs),
    /// Answer a question from files, folders, standard input or pre-retrieved nodes.
    Ask(AskArgs),
    /// Summarize files, folders, standard input or pre-retrieved nodes.
    Summarize(SummarizeArgs),
    /// Answer many requests: one synthesis per line of a JSON-lines file (the service's
    /// request shape plus an `id`), results appended to OUT as JSON lines; a stopped
    /// batch resumes where it stopped when run again.
    #[command(
        after_help = "Exit codes: 0 every line answered, 1 some lines are error lines (a summary on standard error), 2 usage errors (bad flags, unreadable IN).\n\nExample:\n  \
        echo '{\"id\": \"q1\", \"query\": \"When?\", \"nodes\": [\"The dome opens at dusk.\"]}' > in.jsonl\n  \
        synthkit batch in.jsonl -o out.jsonl --base-url http://127.0.0.1:8080/v1 --jobs 4 --cache replies.db"
    )]
    Batch(BatchArgs),
    /// Write the HTML report of a run from its trace (`ask --trace FILE`).
    #[command(after_help = "Example:\n  \
        synthkit ask \"How often is the mirror cleaned?\" docs/ --trace run.jsonl\n  \
        synthkit report run.jsonl -o run.html")]
    Report(ReportVerbArgs),
    /// Measure the answers: run each case of a benchmark in each mode (or score answers
    /// produced elsewhere) and print judge-free scores per mode.
    #[command(
        after_help = "Exit codes: 0 the evaluation ran (wrong answers are scores, not failures), 1 it could not finish, 2 usage errors (bad flags, a bad line in CASES or --answers).\n\nExamples:\n  \
        synthkit eval cases.jsonl --modes compact,refine,tree_summarize -o rows.jsonl --html eval.html\n  \
        synthkit eval cases.jsonl --answers llamaindex.jsonl --json"
    )]
    Eval(EvalArgs),
    /// Run the HTTP service: POST /v1/synthesize (JSON or server-sent events), /healthz,
    /// /readyz, /metrics, /openapi.json.
    #[cfg(feature = "serve")]
    Serve(ServeArgs),
    /// Run the HTTP service (not in this build: it was installed without the cargo feature
    /// `serve`).
    #[cfg(not(feature = "serve"))]
    #[command(disable_help_flag = true)]
    Serve(NoServeArgs),
}

/// `synthkit serve` in a build without the service: takes any arguments, to say so.
#[cfg(not(feature = "serve"))]
#[derive(Debug, clap::Args)]
pub struct NoServeArgs {
    /// Ignored.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub rest: Vec<String>,
}

/// What `synthkit serve` says in a build without the service.
#[cfg(not(feature = "serve"))]
pub const NO_SERVE: &str = "this synthkit was built without the HTTP service (cargo feature `serve`): reinstall with `cargo install synthkit-cli` (default features) or `--features serve`";

impl Command {
    /// The OpenTelemetry flags (the synthesis verbs and serve have them).
    pub fn otel(&self) -> Option<&OtelArgs> {
        match self {
            Command::Ask(a) => Some(&a.synth.otel),
            Command::Summarize(a) => Some(&a.synth.otel),
            Command::Batch(a) => Some(&a.otel),
            #[cfg(feature = "serve")]
            Command::Serve(a) => Some(&a.otel),
            _ => None,
        }
    }

    /// Whether `-q` was given (only the synthesis verbs have it).
    pub fn quiet(&self) -> bool {
        match self {
            Command::Ask(a) => a.synth.quiet,
            Command::Summarize(a) => a.synth.quiet,
            Command::Batch(a) => a.quiet,
            Command::Eval(a) => a.quiet,
            Command::Tokens(_) | Command::Split(_) | Command::Serve(_) | Command::Report(_) => {
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::values::{FileSize, parse_size, parse_top_k};
    use super::*;
    use clap::CommandFactory;
    use synthkit::ResponseMode;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn modes_parse() {
        let cli =
            Cli::try_parse_from(["synthkit", "ask", "q", "--mode", "tree-summarize"]).unwrap();
        let Command::Ask(a) = cli.command else {
            panic!("not ask")
        };
        assert_eq!(a.synth.mode, Some(ResponseMode::TreeSummarize));
        assert!(Cli::try_parse_from(["synthkit", "ask", "q", "--mode", "nope"]).is_err());
    }

    #[test]
    fn sizes_top_k_and_questions() {
        assert_eq!(parse_size("64M"), Ok(FileSize(Some(64 << 20))));
        assert_eq!(parse_size("100mb"), Ok(FileSize(Some(100 << 20))));
        assert_eq!(parse_size("1GiB"), Ok(FileSize(Some(1 << 30))));
        assert_eq!(parse_size("4096"), Ok(FileSize(Some(4096))));
        assert_eq!(parse_size("none"), Ok(FileSize(None)));
        assert!(parse_size("0").is_err() && parse_size("12Q").is_err() && parse_size("M").is_err());
        assert_eq!(parse_top_k("all"), Ok(TopK::All));
        assert_eq!(parse_top_k("5"), Ok(TopK::Best(5)));
        assert!(parse_top_k("0").is_err());
        assert!(Cli::try_parse_from(["synthkit", "ask", "  "]).is_err());
    }
}
