//! The flags of `ask` and `summarize`: where to read, how to split and rank, the
//! synthesis, the size guard, the prompts and the output; with their defaults.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use synthkit::ResponseMode;

use super::limits::LimitArgs;
use super::model::ModelArgs;
use super::otel::OtelArgs;
use super::report::ReportArgs;
use super::values::{
    DEFAULT_MAX_FILE_SIZE, FileSize, TopK, parse_mode, parse_question, parse_size, parse_top_k,
};

/// The default response mode of `ask`.
pub const ASK_DEFAULT_MODE: ResponseMode = ResponseMode::Compact;
/// The default response mode of `summarize`.
pub const SUMMARIZE_DEFAULT_MODE: ResponseMode = ResponseMode::TreeSummarize;
/// The default question of `summarize`.
pub const DEFAULT_SUMMARY_QUERY: &str = "Summarize the text.";
pub use synthkit_frontend::retrieval::{DEFAULT_CHUNK_SIZE, DEFAULT_FOLDER_TOP_K, default_overlap};
/// The default `--max-calls`: a run planning more model calls asks for `--yes` first.
pub const DEFAULT_MAX_CALLS: usize = 40;
/// The default `--max-total-prompt-tokens`: a run planning more prompt tokens (all its
/// calls together) asks for `--yes`.
pub const DEFAULT_MAX_TOTAL_PROMPT_TOKENS: usize = 200_000;

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

/// What to do with a model reply cut at the output limit (`finish_reason: length`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum TruncationPolicy {
    /// Keep the cut answer and print a warning after it.
    #[default]
    Warn,
    /// Fail with exit code 1.
    Error,
}

/// How answers cite their sources (`--cite[=STYLE]`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum CiteStyle {
    /// `[n]` markers.
    #[default]
    Markers,
    /// `[n] "exact words from source n"`: each quote checked against its source.
    Quotes,
}

impl CiteStyle {
    /// The library's style for `--cite[=STYLE]` and `--cite-quotes`.
    pub fn of(cite: Option<CiteStyle>, cite_quotes: bool) -> synthkit::CitationStyle {
        match (cite, cite_quotes) {
            (Some(CiteStyle::Quotes), _) | (_, true) => synthkit::CitationStyle::Quotes,
            _ => synthkit::CitationStyle::Markers,
        }
    }
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

impl SynthArgs {
    /// Whether `--cite` (any style) or `--cite-quotes` was given.
    pub fn cites(&self) -> bool {
        self.cite.is_some() || self.cite_quotes
    }

    /// The citation style asked for.
    pub fn citation_style(&self) -> synthkit::CitationStyle {
        CiteStyle::of(self.cite, self.cite_quotes)
    }
}

/// Options shared by `ask` and `summarize`.
#[derive(Debug, Args)]
pub struct SynthArgs {
    /// Files and folders to read (`-`: standard input).
    ///
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
    /// Pre-retrieved nodes: a JSON array or JSON lines (synthkit or LlamaIndex shapes).
    ///
    /// Pre-retrieved nodes: a JSON array or JSON lines of {id, text, metadata,
    /// excluded_llm_metadata_keys, score}, LlamaIndex TextNode objects (`id_`, ...) or
    /// NodeWithScore objects ({node, score}), mixed freely (`-`: standard input).
    #[arg(long, value_name = "FILE", help_heading = "Input")]
    pub nodes: Option<PathBuf>,
    /// Keep the N chunks most relevant to the query (`all`: every chunk).
    ///
    /// Keep only the N chunks most relevant to the query (BM25 over each chunk's text,
    /// file path and section), best first; `all` keeps every chunk. Default for `ask`
    /// when a folder is read: 20; otherwise all.
    #[arg(long, value_name = "N|all", value_parser = parse_top_k, help_heading = "Input")]
    pub top_k: Option<TopK>,
    /// The most tokens in a node when files are split.
    #[arg(hide_short_help = true, long, value_name = "N", default_value_t = DEFAULT_CHUNK_SIZE, help_heading = "Input")]
    pub chunk_size: usize,
    /// Tokens a node repeats from the previous node of the same file [default: 20, capped
    /// below the chunk size].
    #[arg(hide_short_help = true, long, value_name = "M", help_heading = "Input")]
    pub chunk_overlap: Option<usize>,

    /// The response mode (compact, refine, tree_summarize, map_reduce, ...).
    ///
    /// The response mode: refine, compact, tree_summarize, simple_summarize, accumulate,
    /// compact_accumulate, generation, no_text, context_only, map_reduce [default: compact
    /// for ask, tree_summarize for summarize].
    #[arg(long, value_name = "MODE", value_parser = parse_mode, help_heading = "Synthesis")]
    pub mode: Option<ResponseMode>,
    /// How each call uses the model's window.
    #[command(flatten)]
    pub window: WindowArgs,
    /// Model calls in flight at once (tree levels, accumulate); 0 means no limit.
    /// Default: 8, or the server's slots when it says fewer (llama.cpp /props). Against a
    /// server, the calls in flight are also halved when it is overloaded and grow back
    /// slowly.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "N",
        help_heading = "Synthesis"
    )]
    pub concurrency: Option<usize>,
    /// Requests and tokens per minute, retries.
    #[command(flatten)]
    pub limits: LimitArgs,
    /// Stop with the plan when a run plans more model calls than N (unless --yes).
    ///
    /// A run planning more model calls than N prints its plan and stops unless --yes is
    /// given (a language-model backend only; the extractive backend is free).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CALLS, help_heading = "Model")]
    pub max_calls: usize,
    /// A run planning more prompt tokens than N, all its calls together, prints its plan
    /// and stops unless --yes is given (a language-model backend only).
    #[arg(hide_short_help = true, long, value_name = "N", default_value_t = DEFAULT_MAX_TOTAL_PROMPT_TOKENS, help_heading = "Model")]
    pub max_total_prompt_tokens: usize,
    /// Prices and the cost cap.
    #[command(flatten)]
    pub cost: super::cost::CostArgs,
    /// Run even when the plan is over --max-calls or --max-total-prompt-tokens.
    #[arg(long, short = 'y', help_heading = "Model")]
    pub yes: bool,
    /// The prompt templates and the system prompt.
    #[command(flatten)]
    pub prompts: PromptArgs,
    /// The answer printed when the model says the sources do not answer (the default
    /// prompts ask it to reply "Not in the sources"; --json then says "answerable":
    /// false). Default: "The sources do not answer this question."
    #[arg(
        hide_short_help = true,
        long,
        value_name = "TEXT",
        help_heading = "Synthesis"
    )]
    pub not_in_sources: Option<String>,
    /// --escalate (shared with eval).
    #[command(flatten)]
    pub escalation: EscalateArgs,
    /// Refine/compact: each step says whether its context answered; others are ignored.
    #[arg(hide_short_help = true, long, help_heading = "Synthesis")]
    pub structured_filtering: bool,
    /// Number the sources and have the answer cite them (`--cite=quotes`: quoted).
    ///
    /// Number the sources in the prompts and have the answer cite them as `[n]`: markers
    /// are checked against the sources each call was shown (invalid ones are removed and
    /// reported), renumbered in order of first use, and the cited sources are listed
    /// first. The extractive backend cites exactly; without --cite it still lists only
    /// the sources its sentences came from. `--cite=quotes` asks for
    /// `[n] "exact words from source n"` and checks each quote against its source
    /// (verified, misattributed or not_found, with character offsets in --json), and flags
    /// numbers of cited sentences that their sources lack. The `=` is required: a bare
    /// `--cite` never takes the next argument.
    #[arg(long, value_enum, value_name = "STYLE", num_args = 0..=1, require_equals = true,
          default_missing_value = "markers", help_heading = "Synthesis")]
    pub cite: Option<CiteStyle>,
    /// The same as --cite=quotes.
    #[arg(hide_short_help = true, long, help_heading = "Synthesis")]
    pub cite_quotes: bool,
    /// A JSON Schema file: the answer is JSON that the model is asked for with the schema
    /// (the server enforces it where it can) and that is checked against it, as the
    /// service checks `output_schema` (the same cost limits; a reply that breaks it is an
    /// error naming the JSON path). At most 1 MiB; not with --cite or
    /// --structured-filtering.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "FILE",
        help_heading = "Synthesis"
    )]
    pub output_schema: Option<PathBuf>,

    /// The backend and the checks of its answers.
    #[command(flatten)]
    pub answering: AnsweringArgs,
    // --- cache (layer::cache): begin
    /// Keep every model reply in the SQLite file FILE and answer repeats from it.
    ///
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
    #[arg(hide_short_help = true, long, value_enum, value_name = "FORMAT", default_value_t = JsonFormat::Synthkit,
          requires_if("llamaindex", "json"), help_heading = "Output")]
    pub format: JsonFormat,
    /// Write one JSON line per model call (prompt, response, tokens, time) to FILE, and a
    /// last `run` line (answer, sources, steps) that `synthkit report` reads.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "FILE",
        help_heading = "Output"
    )]
    pub trace: Option<PathBuf>,
    /// `--steps` and `--report FILE`.
    #[command(flatten)]
    pub report: ReportArgs,
    /// OpenTelemetry export.
    #[command(flatten)]
    pub otel: OtelArgs,
    /// `--plan` and `--price-per-1k`.
    #[command(flatten)]
    pub dry_run: PlanArgs,
    /// No progress bar and no notes on standard error (warnings and errors still show).
    #[arg(long, short, help_heading = "Output")]
    pub quiet: bool,
}

/// How folders are walked: hidden and ignored files, globs, what is left out, file sizes.
#[derive(Debug, Args)]
#[command(next_help_heading = "Input")]
pub struct WalkArgs {
    /// Read hidden files and folders too (names starting with `.`).
    #[arg(hide_short_help = true, long)]
    pub hidden: bool,
    /// Read files that .gitignore, .ignore or git's excludes leave out.
    #[arg(hide_short_help = true, long)]
    pub no_ignore: bool,
    /// In folders, read only files matching GLOB (`*.md`); repeatable.
    ///
    /// In folders, read only files matching GLOB (gitignore syntax, relative to the folder:
    /// `*.md`, `guide/**/*.html`); repeatable.
    #[arg(long, value_name = "GLOB")]
    pub include: Vec<String>,
    /// In folders, never read files or folders matching GLOB; repeatable.
    ///
    /// In folders, never read files or enter folders matching GLOB (`*.js`, `/vendor`);
    /// repeatable.
    #[arg(long, value_name = "GLOB")]
    pub exclude: Vec<String>,
    /// In folders, read what is left out by default as not prose for a question:
    /// stylesheets, scripts, SVG images, JSON data, redirect pages, and copies (files
    /// whose text is at least 80% in other files read, such as mdBook's print.html or a
    /// page both as Markdown and HTML). -v names every file left out.
    #[arg(hide_short_help = true, long)]
    pub keep_all: bool,
    /// The largest file read (and `.gz` unpacked): bytes, or with K, M or G (KiB, MiB,
    /// GiB); `none` for no limit. Larger files are skipped and named; a larger --nodes
    /// file or standard input is an error.
    #[arg(hide_short_help = true, long, value_name = "SIZE", default_value = DEFAULT_MAX_FILE_SIZE, value_parser = parse_size)]
    pub max_file_size: FileSize,
    /// Image files (PNG, JPEG, WebP, GIF: known by their first bytes and their name) in
    /// folders and arguments: `auto` sends each as an image node when the model takes
    /// images (its server says so, or --vision), else skips them with a note; `on` sends
    /// them (a model known to take none is an error before any call); `off` skips them.
    #[arg(hide_short_help = true, long, value_enum, value_name = "WHEN", default_value_t = ImagesMode::Auto)]
    pub images: ImagesMode,
    /// The largest image file sent: bytes, or with K, M or G, at most 20M (the default:
    /// the most OpenAI's API takes for one image). Larger images are skipped and named.
    #[arg(hide_short_help = true, long, value_name = "SIZE", default_value = "20M", value_parser = parse_image_size)]
    pub max_image_bytes: usize,
    /// The folder index.
    #[command(flatten)]
    pub index: IndexArgs,
}

/// The folder index: whether folders read are kept on disk, and where.
#[derive(Debug, Clone, Args)]
pub struct IndexArgs {
    /// Read folders afresh, without the folder index (nothing is kept on disk).
    ///
    /// Read folders afresh, without the folder index: nothing is looked up or kept on disk.
    /// By default what a folder read, split and ranked is kept in an index, so that asking
    /// again reads only the files that changed (by path, size and modification time).
    #[arg(hide_short_help = true, long)]
    pub no_index: bool,
    /// Where folder indexes are kept.
    ///
    /// Where folder indexes are kept: one SQLite file per set of folders and reading
    /// options, at most 2 GiB in all (the least recently used removed first, and any
    /// unused for 30 days). Default: $XDG_CACHE_HOME/synthkit/index, else
    /// ~/.cache/synthkit/index.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "DIR",
        env = "SYNTHKIT_INDEX_DIR"
    )]
    pub index_dir: Option<PathBuf>,
}

/// `--images`: whether image files are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ImagesMode {
    /// When the model takes images (known from its server, or --vision).
    Auto,
    /// Always (an error with a model that takes none).
    On,
    /// Never.
    Off,
}

/// `--max-image-bytes`: a size as `--max-file-size` takes, but never `none`.
fn parse_image_size(s: &str) -> Result<usize, String> {
    match parse_size(s)? {
        FileSize(Some(n)) if n <= synthkit::node::DEFAULT_MAX_IMAGE_BYTES as u64 => {
            usize::try_from(n).map_err(|_| format!("`{s}` is too large"))
        }
        FileSize(Some(_)) => Err(format!(
            "`{s}` is more than 20M, the most an image may hold: give 20M or less"
        )),
        FileSize(None) => Err("images have a size limit: give a size such as 20M".into()),
    }
}

/// The model that answers and the checks of its answers: evidence first, the grounding
/// check, the backend and how to reach and sample it; shared by `ask`, `summarize` and
/// `eval`, so that eval measures what `ask` runs.
#[derive(Debug, Clone, Args)]
pub struct AnsweringArgs {
    /// Evidence first and the grounding check.
    #[command(flatten)]
    pub checks: super::answer::CheckArgs,
    /// The backend and how to reach and sample the model.
    #[command(flatten)]
    pub model_args: ModelArgs,
}

/// How each call uses the model's window: the overlap of packed chunks, the cap on one
/// prompt, the thinking reserve, and what a reply cut at the output limit does; shared by
/// `ask`, `summarize` and `eval`, so that eval measures what `ask` runs.
#[derive(Debug, Clone, Args)]
pub struct WindowArgs {
    /// Tokens of overlap between packed chunks, as a fraction of the chunk (0 to 1).
    #[arg(
        hide_short_help = true,
        long,
        value_name = "RATIO",
        default_value_t = 0.1,
        help_heading = "Synthesis"
    )]
    pub overlap: f64,
    /// The most tokens one prompt may have, below the model's window (system prompt and
    /// template included): less context in each call, more calls. For cost, or for a
    /// model that answers worse with long prompts. Default: a prompt may fill the window
    /// less --num-output.
    #[arg(hide_short_help = true, long, value_name = "N", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..), help_heading = "Synthesis")]
    pub max_prompt_tokens: Option<usize>,
    /// Reasoning models (Qwen3, DeepSeek-R1, ...): extra output tokens for thinking on
    /// every call, on top of --num-output and taken off the prompt room, so a model that
    /// thinks before it answers is not cut while thinking. Thinking never goes into a
    /// prompt or the answer either way.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "N",
        default_value_t = 0,
        help_heading = "Synthesis"
    )]
    pub thinking_reserve: usize,
    /// What to do when a model reply is cut at the output limit (--num-output): warn keeps
    /// the answer and prints a warning (--json counts them in usage.truncated_calls);
    /// error fails with exit code 1.
    #[arg(
        hide_short_help = true,
        long,
        value_enum,
        value_name = "POLICY",
        default_value_t = TruncationPolicy::Warn,
        help_heading = "Synthesis"
    )]
    pub on_truncation: TruncationPolicy,
}

/// The prompts of a synthesis: the template files and the system prompt.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Synthesis")]
pub struct PromptArgs {
    /// A completion template file for question answering ({context_str}, {query_str}).
    #[arg(hide_short_help = true, long, value_name = "FILE")]
    pub qa_template: Option<PathBuf>,
    /// A completion template file for refining ({query_str}, {existing_answer}, {context_msg}).
    #[arg(hide_short_help = true, long, value_name = "FILE")]
    pub refine_template: Option<PathBuf>,
    /// A completion template file for tree summaries ({context_str}, {query_str}).
    #[arg(hide_short_help = true, long, value_name = "FILE")]
    pub summary_template: Option<PathBuf>,
    /// A system prompt added to every call.
    #[arg(hide_short_help = true, long, value_name = "TEXT")]
    pub system_prompt: Option<String>,
}

/// `--plan` and `--price-per-1k`, shared by `ask`, `summarize` and `batch` (whose
/// `--plan` help names the whole batch).
#[derive(Debug, Clone, Copy, Args)]
pub struct PlanArgs {
    /// Dry run: make no model call; print the calls and prompt tokens each step needs.
    #[arg(long, help_heading = "Output")]
    pub plan: bool,
    /// With --plan: the price of 1,000 prompt tokens in USD, to estimate the cost.
    #[arg(hide_short_help = true, long, value_name = "USD", requires = "plan", help_heading = "Output",
          conflicts_with_all = ["price_input", "prices"])]
    pub price_per_1k: Option<f64>,
}

/// `--escalate[=N]`, on `ask`, `batch` and `eval`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct EscalateArgs {
    /// Answer from the first N chunks, then map_reduce over all when that fails.
    ///
    /// Escalate: answer from the first N chunks first (5 when N is not given), and when
    /// that answer says the sources do not answer, or states facts found in no chunk
    /// shown, answer again with map_reduce over every chunk (each read on its own).
    /// --json's "escalation" says what happened; usage counts both. The plan counts the
    /// escalation as an upper bound. Not with --stream.
    #[arg(
        long,
        value_name = "N",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "5",
        value_parser = clap::value_parser!(u32).range(1..),
        help_heading = "Synthesis"
    )]
    pub escalate: Option<u32>,
}
