//! Command-line arguments (clap derive).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use synthkit::ResponseMode;
use synthkit::text::BpeTokenizer;

mod limits;
mod model;
mod otel;

pub use limits::LimitArgs;
pub use model::ModelArgs;
pub(crate) use model::positive_seconds;
pub use otel::OtelArgs;

/// The default response mode of `ask`.
pub const ASK_DEFAULT_MODE: ResponseMode = ResponseMode::Compact;
/// The default response mode of `summarize`.
pub const SUMMARIZE_DEFAULT_MODE: ResponseMode = ResponseMode::TreeSummarize;
/// The default question of `summarize`.
pub const DEFAULT_SUMMARY_QUERY: &str = "Summarize the text.";
/// The default chunk size (tokens) when files are split into nodes.
pub const DEFAULT_CHUNK_SIZE: usize = 1024;
/// The default overlap (tokens) between the chunks of one file.
pub const DEFAULT_CHUNK_OVERLAP: usize = 20;
/// The default `--max-file-size`: the library's limit, 64 MiB.
pub const DEFAULT_MAX_FILE_SIZE: &str = "64M";
/// `ask`'s default `--top-k` when a folder is read: the chunks most relevant to the
/// question (BM25). Chosen on the 33-question trial of issue 23 (README, "The command
/// line"): the answer's chunk is among the best 20 for 28 of the 33 questions (40 add one
/// more), and 20 chunks take one call of about 5,000 prompt tokens at an 8k window.
pub const DEFAULT_FOLDER_TOP_K: usize = 20;
/// The default `--max-calls`: a run planning more model calls asks for `--yes` first.
pub const DEFAULT_MAX_CALLS: usize = 40;
/// The default `--max-total-prompt-tokens`: a run planning more prompt tokens (all its
/// calls together) asks for `--yes`.
pub const DEFAULT_MAX_TOTAL_PROMPT_TOKENS: usize = 200_000;

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
    Batch(crate::batch::BatchArgs),
    /// Write the HTML report of a run from its trace (`ask --trace FILE`).
    #[command(after_help = "Example:\n  \
        synthkit ask \"How often is the mirror cleaned?\" docs/ --trace run.jsonl\n  \
        synthkit report run.jsonl -o run.html")]
    Report(crate::report::ReportVerbArgs),
    /// Measure the answers: run each case of a benchmark in each mode (or score answers
    /// produced elsewhere) and print judge-free scores per mode.
    #[command(
        after_help = "Exit codes: 0 the evaluation ran (wrong answers are scores, not failures), 1 it could not finish, 2 usage errors (bad flags, a bad line in CASES or --answers).\n\nExamples:\n  \
        synthkit eval cases.jsonl --modes compact,refine,tree_summarize -o rows.jsonl --html eval.html\n  \
        synthkit eval cases.jsonl --answers llamaindex.jsonl --json"
    )]
    Eval(crate::eval::EvalArgs),
    /// Run the HTTP service: POST /v1/synthesize (JSON or server-sent events), /healthz,
    /// /readyz, /metrics, /openapi.json.
    #[cfg(feature = "serve")]
    Serve(crate::serve::ServeArgs),
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
    pub fn otel(&self) -> Option<&crate::flags::OtelArgs> {
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

/// `synthkit tokens`.
#[derive(Debug, Args)]
pub struct TokensArgs {
    /// The file to count (`-` or nothing: standard input), read as `ask` reads it: `.gz`
    /// unpacked, HTML and PDF as text, binary files refused.
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// The largest file read (and `.gz` unpacked): bytes, or with K, M or G (KiB, MiB,
    /// GiB); `none` for no limit.
    #[arg(long, value_name = "SIZE", default_value = DEFAULT_MAX_FILE_SIZE, value_parser = parse_size)]
    pub max_file_size: FileSize,
    /// The tokenizer: cl100k_base or o200k_base.
    #[arg(long, value_name = "NAME", default_value = "cl100k_base", value_parser = parse_tokenizer)]
    pub tokenizer: BpeTokenizer,
}

/// `synthkit split`.
#[derive(Debug, Args)]
pub struct SplitArgs {
    /// The file to split (`-` or nothing: standard input), read as `ask` reads it: `.gz`
    /// unpacked, HTML and PDF as text, binary files refused.
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// The largest file read (and `.gz` unpacked): bytes, or with K, M or G (KiB, MiB,
    /// GiB); `none` for no limit.
    #[arg(long, value_name = "SIZE", default_value = DEFAULT_MAX_FILE_SIZE, value_parser = parse_size)]
    pub max_file_size: FileSize,
    /// The most tokens in a chunk.
    #[arg(long, value_name = "N")]
    pub chunk_size: usize,
    /// Tokens a chunk repeats from the previous one [default: 20, capped below the chunk size].
    #[arg(long, value_name = "M")]
    pub overlap: Option<usize>,
    /// The tokenizer: cl100k_base or o200k_base.
    #[arg(long, value_name = "NAME", default_value = "cl100k_base", value_parser = parse_tokenizer)]
    pub tokenizer: BpeTokenizer,
    /// Print a JSON array of the chunk texts.
    #[arg(long)]
    pub json: bool,
}

/// `synthkit ask`.
#[derive(Debug, Args)]
pub struct AskArgs {
    /// The question (not empty).
    #[arg(value_name = "QUESTION", value_parser = parse_question)]
    pub question: String,
    /// Where to read, what to do and how to print.
    #[command(flatten)]
    pub synth: SynthArgs,
}

/// `synthkit summarize`.
#[derive(Debug, Args)]
pub struct SummarizeArgs {
    /// The instruction sent as the query.
    #[arg(long, value_name = "TEXT", default_value = DEFAULT_SUMMARY_QUERY)]
    pub query: String,
    /// Where to read, what to do and how to print.
    #[command(flatten)]
    pub synth: SynthArgs,
}

/// Which backend answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LlmKind {
    /// Offline: sentences selected from your documents, no language model.
    Extractive,
    /// A model server: OpenAI-compatible (OpenAI, vLLM, llama.cpp, Ollama, ...), or
    /// Anthropic's Messages API with --api anthropic.
    Openai,
    /// A server of Anthropic's Messages API (chosen with --api anthropic, not --llm).
    #[value(skip)]
    Anthropic,
}

/// The API a model server speaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum Api {
    /// OpenAI's: `/v1/chat/completions` (or `/v1/completions`), `Authorization: Bearer`.
    #[default]
    Openai,
    /// Anthropic's Messages API: `/v1/messages`, `x-api-key`.
    Anthropic,
}

/// What to do with a model reply cut at the output limit (`finish_reason: length`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum TruncationPolicy {
    /// Keep the cut answer and print a warning after it.
    #[default]
    Warn,
    /// Fail with exit code 1.
    Error,
}

/// The shape of the `--json` report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum JsonFormat {
    /// synthkit's report: answer, sources, usage, timings.
    #[default]
    Synthkit,
    /// LlamaIndex's `Response`: response, source_nodes (NodeWithScore), metadata.
    Llamaindex,
}

/// Options shared by `ask` and `summarize`.
#[derive(Debug, Args)]
pub struct SynthArgs {
    /// Files and folders to read (`-`: standard input; nothing: standard input when it is
    /// not a terminal). Folders are read recursively like ripgrep does (.gitignore, .ignore
    /// and hidden files respected, symbolic links followed) and every file whose content is
    /// text is read, whatever its name: plain text, Markdown, HTML (as Markdown), PDF text,
    /// .gz; binary files are skipped and named (-v names every one).
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    // --- documents (walking folders): begin
    /// Which files of the folders are read, and how large.
    #[command(flatten)]
    pub walk: WalkArgs,
    // --- documents: end
    /// Pre-retrieved nodes: a JSON array or JSON lines of {id, text, metadata,
    /// excluded_llm_metadata_keys, score}, LlamaIndex TextNode objects (`id_`, ...) or
    /// NodeWithScore objects ({node, score}), mixed freely (`-`: standard input).
    #[arg(long, value_name = "FILE", help_heading = "Input")]
    pub nodes: Option<PathBuf>,
    /// Keep only the N chunks most relevant to the query (BM25 over each chunk's text,
    /// file path and section), best first; `all` keeps every chunk. Default for `ask`
    /// when a folder is read: 20; otherwise all.
    #[arg(long, value_name = "N|all", value_parser = parse_top_k, help_heading = "Input")]
    pub top_k: Option<TopK>,
    /// The most tokens in a node when files are split.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_CHUNK_SIZE, help_heading = "Input")]
    pub chunk_size: usize,
    /// Tokens a node repeats from the previous node of the same file [default: 20, capped
    /// below the chunk size].
    #[arg(long, value_name = "M", help_heading = "Input")]
    pub chunk_overlap: Option<usize>,

    /// The response mode: refine, compact, tree_summarize, simple_summarize, accumulate,
    /// compact_accumulate, generation, no_text, context_only [default: compact for ask,
    /// tree_summarize for summarize].
    #[arg(long, value_name = "MODE", value_parser = parse_mode, help_heading = "Synthesis")]
    pub mode: Option<ResponseMode>,
    /// Tokens of overlap between packed chunks, as a fraction of the chunk (0 to 1).
    #[arg(
        long,
        value_name = "RATIO",
        default_value_t = 0.1,
        help_heading = "Synthesis"
    )]
    pub overlap: f64,
    /// Model calls in flight at once (tree levels, accumulate); 0 means no limit.
    /// Default: 8, or the server's slots when it says fewer (llama.cpp /props). Against a
    /// server, the calls in flight are also halved when it is overloaded and grow back
    /// slowly.
    #[arg(long, value_name = "N", help_heading = "Synthesis")]
    pub concurrency: Option<usize>,
    /// Requests and tokens per minute, retries.
    #[command(flatten)]
    pub limits: LimitArgs,
    /// A run planning more model calls than N prints its plan and stops unless --yes is
    /// given (a language-model backend only; the extractive backend is free).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CALLS, help_heading = "Model")]
    pub max_calls: usize,
    /// A run planning more prompt tokens than N, all its calls together, prints its plan
    /// and stops unless --yes is given (a language-model backend only).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_TOTAL_PROMPT_TOKENS, help_heading = "Model")]
    pub max_total_prompt_tokens: usize,
    /// Run even when the plan is over --max-calls or --max-total-prompt-tokens.
    #[arg(long, short = 'y', help_heading = "Model")]
    pub yes: bool,
    /// The prompt templates and the system prompt.
    #[command(flatten)]
    pub prompts: PromptArgs,
    /// The most tokens one prompt may have, below the model's window (system prompt and
    /// template included): less context in each call, more calls. For cost, or for a
    /// model that answers worse with long prompts. Default: a prompt may fill the window
    /// less --num-output.
    #[arg(long, value_name = "N", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..), help_heading = "Synthesis")]
    pub max_prompt_tokens: Option<usize>,
    /// Refine/compact: each step says whether its context answered; others are ignored.
    #[arg(long, help_heading = "Synthesis")]
    pub structured_filtering: bool,
    /// Number the sources in the prompts and have the answer cite them as `[n]`: markers
    /// are checked against the sources each call was shown (invalid ones are removed and
    /// reported), renumbered in order of first use, and the cited sources are listed
    /// first. The extractive backend cites exactly; without --cite it still lists only
    /// the sources its sentences came from.
    #[arg(long, help_heading = "Synthesis")]
    pub cite: bool,
    /// What to do when a model reply is cut at the output limit (--num-output): warn keeps
    /// the answer and prints a warning (--json counts them in usage.truncated_calls);
    /// error fails with exit code 1.
    #[arg(
        long,
        value_enum,
        value_name = "POLICY",
        default_value_t = TruncationPolicy::Warn,
        help_heading = "Synthesis"
    )]
    pub on_truncation: TruncationPolicy,

    /// The backend and how to reach and sample the model.
    #[command(flatten)]
    pub model_args: ModelArgs,
    // --- cache (layer::cache): begin
    /// Keep every model reply in the SQLite file FILE (created if missing) and answer
    /// repeated calls from it: a run that was stopped, rerun, only makes the calls it had
    /// not finished. Ignored with --plan.
    #[arg(long, value_name = "FILE", help_heading = "Model")]
    pub cache: Option<PathBuf>,
    // --- cache: end
    /// Print the answer as it is generated.
    #[arg(long, conflicts_with_all = ["json", "plan"], help_heading = "Output")]
    pub stream: bool,
    /// Print one JSON object (answer, sources, usage, timings).
    #[arg(long, help_heading = "Output")]
    pub json: bool,
    /// The shape of --json: `llamaindex` prints LlamaIndex's Response ({response,
    /// source_nodes: [{node: TextNode, score}], metadata}), whose source_nodes --nodes reads
    /// back. `--format llamaindex` needs --json (a usage error without it) and no --plan.
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = JsonFormat::Synthkit,
          requires_if("llamaindex", "json"), help_heading = "Output")]
    pub format: JsonFormat,
    /// Write one JSON line per model call (prompt, response, tokens, time) to FILE, and a
    /// last `run` line (answer, sources, steps) that `synthkit report` reads.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub trace: Option<PathBuf>,
    /// `--steps` and `--report FILE`.
    #[command(flatten)]
    pub report: crate::report::ReportArgs,
    /// OpenTelemetry export.
    #[command(flatten)]
    pub otel: crate::flags::OtelArgs,
    /// `--plan` and `--price-per-1k`.
    #[command(flatten)]
    pub dry_run: crate::plan::PlanArgs,
    /// No progress bar and no notes on standard error (warnings and errors still show).
    #[arg(long, short, help_heading = "Output")]
    pub quiet: bool,
}

/// How folders are walked: hidden and ignored files, globs, what is left out, file sizes.
#[derive(Debug, Args)]
#[command(next_help_heading = "Input")]
pub struct WalkArgs {
    /// Read hidden files and folders too (names starting with `.`).
    #[arg(long)]
    pub hidden: bool,
    /// Read files that .gitignore, .ignore or git's excludes leave out.
    #[arg(long)]
    pub no_ignore: bool,
    /// In folders, read only files matching GLOB (gitignore syntax, relative to the folder:
    /// `*.md`, `guide/**/*.html`); repeatable.
    #[arg(long, value_name = "GLOB")]
    pub include: Vec<String>,
    /// In folders, never read files or enter folders matching GLOB (`*.js`, `/vendor`);
    /// repeatable.
    #[arg(long, value_name = "GLOB")]
    pub exclude: Vec<String>,
    /// In folders, read what is left out by default as not prose for a question:
    /// stylesheets, scripts, SVG images, JSON data, redirect pages, and copies (files
    /// whose text is at least 80% in other files read, such as mdBook's print.html or a
    /// page both as Markdown and HTML). -v names every file left out.
    #[arg(long)]
    pub keep_all: bool,
    /// The largest file read (and `.gz` unpacked): bytes, or with K, M or G (KiB, MiB,
    /// GiB); `none` for no limit. Larger files are skipped and named; a larger --nodes
    /// file or standard input is an error.
    #[arg(long, value_name = "SIZE", default_value = DEFAULT_MAX_FILE_SIZE, value_parser = parse_size)]
    pub max_file_size: FileSize,
}

/// The prompts of a synthesis: the template files and the system prompt.
#[derive(Debug, Args)]
#[command(next_help_heading = "Synthesis")]
pub struct PromptArgs {
    /// A completion template file for question answering ({context_str}, {query_str}).
    #[arg(long, value_name = "FILE")]
    pub qa_template: Option<PathBuf>,
    /// A completion template file for refining ({query_str}, {existing_answer}, {context_msg}).
    #[arg(long, value_name = "FILE")]
    pub refine_template: Option<PathBuf>,
    /// A completion template file for tree summaries ({context_str}, {query_str}).
    #[arg(long, value_name = "FILE")]
    pub summary_template: Option<PathBuf>,
    /// A system prompt added to every call.
    #[arg(long, value_name = "TEXT")]
    pub system_prompt: Option<String>,
}

/// `--top-k`: a number of chunks, or all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopK {
    /// Keep every chunk.
    All,
    /// Keep the N best.
    Best(usize),
}

/// `--max-file-size`: a limit in bytes, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileSize(pub Option<u64>);

pub(crate) fn parse_top_k(s: &str) -> Result<TopK, String> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("all") {
        return Ok(TopK::All);
    }
    match s.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(TopK::Best(n)),
        _ => Err(format!(
            "expected a number of 1 or more, or `all`, got `{s}`"
        )),
    }
}

/// `65536`, `64K`, `64M`, `1G` (powers of 1024, an optional `B`/`iB`), or `none`.
pub(crate) fn parse_size(s: &str) -> Result<FileSize, String> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("none") {
        return Ok(FileSize(None));
    }
    let lower = t.to_ascii_lowercase();
    let lower = lower
        .strip_suffix("ib")
        .or_else(|| lower.strip_suffix('b'))
        .unwrap_or(&lower);
    let (digits, unit) = match lower.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (lower.get(..i).unwrap_or(""), Some(c)),
        _ => (lower, None),
    };
    let shift = match unit {
        None => 0,
        Some('k') => 10,
        Some('m') => 20,
        Some('g') => 30,
        Some(_) => {
            return Err(format!(
                "expected bytes, or a size such as 64M or 1G, got `{s}`"
            ));
        }
    };
    digits
        .trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1u64 << shift))
        .filter(|&n| n > 0)
        .map(|n| FileSize(Some(n)))
        .ok_or_else(|| format!("expected bytes, or a size such as 64M or 1G, got `{s}`"))
}

fn parse_question(s: &str) -> Result<String, String> {
    if s.trim().is_empty() {
        return Err(
            "the question is empty: ask something, such as \"How often is the mirror cleaned?\""
                .into(),
        );
    }
    Ok(s.to_string())
}

pub(crate) fn parse_tokenizer(s: &str) -> Result<BpeTokenizer, String> {
    BpeTokenizer::by_name(s).map_err(|e| e.to_string())
}

pub(crate) fn parse_temperature(s: &str) -> Result<f32, String> {
    match s.trim().parse::<f32>() {
        Ok(t) if t.is_finite() && t >= 0.0 => Ok(t),
        _ => Err(format!("expected a number of 0 or more, got `{s}`")),
    }
}

pub(crate) fn parse_top_p(s: &str) -> Result<f32, String> {
    match s.trim().parse::<f32>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err(format!("expected a number from 0 to 1, got `{s}`")),
    }
}

pub(crate) fn parse_extra_body(
    s: &str,
) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    match serde_json::from_str::<serde_json::Value>(s) {
        Ok(serde_json::Value::Object(fields)) => {
            synthkit::backend::http::check_extra_body(&fields)?;
            Ok(fields)
        }
        Ok(other) => Err(format!(
            "expected a JSON object such as '{{\"top_k\": 40}}', got {}",
            json_kind(&other)
        )),
        Err(e) => Err(format!("not valid JSON ({e})")),
    }
}

/// `an array`, `a string`, ... for messages.
fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

pub(crate) fn parse_mode(s: &str) -> Result<ResponseMode, String> {
    s.parse::<ResponseMode>().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

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
