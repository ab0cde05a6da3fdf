//! What one `ask` or `summarize` runs, built from its flags once: [`SynthRun`]. The verb
//! reads these built things and never a flag, so that a flag's meaning is written here
//! and nowhere else.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Result;
use synthkit::ResponseMode;
use synthkit_documents::ReadOptions;

use super::checks::CheckSettings;
use super::cost::CostSettings;
use super::model::StackFlags;
use super::synthesis::SynthesisSettings;
use super::templates::CustomTemplates;
use crate::flags::{
    ASK_DEFAULT_MODE, AskArgs, DEFAULT_FOLDER_TOP_K, ImagesMode, IndexArgs, JsonFormat,
    SUMMARIZE_DEFAULT_MODE, SummarizeArgs, SynthArgs, TopK, WalkArgs, default_overlap, usage,
};

/// One `ask` or `summarize`, as its flags ask for it.
#[derive(Debug, Clone)]
pub struct SynthRun<'a> {
    /// The question (or summarize's query).
    pub query: &'a str,
    /// The response mode (`--mode`, else the verb's).
    pub mode: ResponseMode,
    /// Where the nodes come from and how they are cut and ranked.
    pub sources: SourceSettings,
    /// The options of the synthesis.
    pub synthesis: SynthesisSettings,
    /// The template files, read.
    pub templates: CustomTemplates,
    /// The answer's checks (the verb's defaults, then the flags).
    pub checks: CheckSettings,
    /// The prices and the cost cap, when prices are given.
    pub cost: Option<CostSettings>,
    /// `--max-calls`, `--max-total-prompt-tokens` and `--yes`.
    pub guards: SizeGuards,
    /// How the answer (or the plan) is shown.
    pub output: OutputSettings,
    /// `--plan`: plan, make no model call.
    pub plan: bool,
    /// What builds the model and its stack.
    pub stack: StackFlags<'a>,
    /// The server's base URL and where it came from, for the hint of a failed connection.
    pub base_url: Option<(String, &'static str)>,
}

impl<'a> SynthRun<'a> {
    /// The run of `ask`: compact by default, a folder ranked to its best
    /// [`DEFAULT_FOLDER_TOP_K`] chunks, a question's checks.
    pub fn ask(args: &'a AskArgs) -> Result<Self> {
        Self::of(
            &args.question,
            ASK_DEFAULT_MODE,
            Some(DEFAULT_FOLDER_TOP_K),
            CheckSettings::for_questions(&args.synth.answering.checks),
            &args.synth,
        )
    }

    /// The run of `summarize`: tree_summarize by default, every chunk read, a summary's
    /// checks; `--escalate` refused (it answers from the best chunks first).
    pub fn summarize(args: &'a SummarizeArgs) -> Result<Self> {
        if args.synth.escalation.escalate.is_some() {
            return Err(usage(
                "--escalate answers a question from the best chunks first, and a summary reads \
                 every chunk: use `ask --escalate`, or drop --escalate",
            ));
        }
        Self::of(
            &args.query,
            SUMMARIZE_DEFAULT_MODE,
            None,
            CheckSettings::for_summaries(&args.synth.answering.checks),
            &args.synth,
        )
    }

    fn of(
        query: &'a str,
        default_mode: ResponseMode,
        folder_top_k: Option<usize>,
        checks: CheckSettings,
        args: &'a SynthArgs,
    ) -> Result<Self> {
        let output = OutputSettings::of(args);
        if args.dry_run.plan && output.format == JsonFormat::Llamaindex {
            return Err(usage(
                "--format llamaindex shapes an answer; --plan makes no answer (leave one out)",
            ));
        }
        Ok(Self {
            query,
            mode: args.mode.unwrap_or(default_mode),
            sources: SourceSettings::of(args, folder_top_k)?,
            synthesis: SynthesisSettings::of_synth(args)?,
            templates: CustomTemplates::read(&args.prompts)?,
            checks,
            cost: CostSettings::of(&args.cost)?,
            guards: SizeGuards {
                max_calls: args.max_calls,
                max_total_prompt_tokens: args.max_total_prompt_tokens,
                yes: args.yes,
            },
            output,
            plan: args.dry_run.plan,
            stack: StackFlags::of(args),
            base_url: args.answering.model_args.base_url(),
        })
    }
}

/// Where the nodes of a run come from: files and folders, `--nodes`, and how they are
/// split, ranked and which images go with them.
#[derive(Debug, Clone)]
pub struct SourceSettings {
    /// The files and folders (`-` for standard input); none reads standard input.
    pub paths: Vec<PathBuf>,
    /// `--nodes FILE` (`-` for standard input).
    pub nodes: Option<PathBuf>,
    /// How folders are walked and files read.
    pub read: ReadOptions,
    /// `--max-file-size` (also the cap of a `--nodes` file).
    pub max_file_size: Option<u64>,
    /// What becomes of the image files found.
    pub images: ImageSettings,
    /// `--chunk-size`.
    pub chunk_size: usize,
    /// `--chunk-overlap`, else the default for the chunk size.
    pub chunk_overlap: usize,
    /// How many chunks are kept, best first.
    pub top_k: TopKRule,
    /// `--quiet`.
    pub quiet: bool,
    /// Where the folder index is kept (`--index-dir`, else the user's cache folder);
    /// `None`: `--no-index`, or no cache folder known.
    pub index_dir: Option<PathBuf>,
}

impl SourceSettings {
    /// The sources of `ask` or `summarize`; a path that names a citation style (`--cite
    /// quotes` written without `=`), or `-` for both the documents and `--nodes`, refused.
    pub fn of(args: &SynthArgs, folder_top_k: Option<usize>) -> Result<Self> {
        if let Some(style) = style_read_as_path(args) {
            return Err(usage(format!(
                "`{style}` was read as a file to read, and there is none: the citation style goes after `=` (`--cite={style}`); a bare `--cite` asks for `[n]` markers and never takes the next argument"
            )));
        }
        let nodes_from_stdin = args.nodes.as_deref().is_some_and(|p| p == Path::new("-"));
        if nodes_from_stdin && args.paths.iter().any(|p| p == Path::new("-")) {
            return Err(usage(
                "standard input cannot hold both --nodes and documents: give one of them a file",
            ));
        }
        Ok(Self {
            paths: args.paths.clone(),
            nodes: args.nodes.clone(),
            read: read_options(&args.walk),
            max_file_size: args.walk.max_file_size.0,
            images: ImageSettings::of(&args.walk, args.answering.model_args.vision_override()),
            chunk_size: args.chunk_size,
            chunk_overlap: args
                .chunk_overlap
                .unwrap_or_else(|| default_overlap(args.chunk_size)),
            top_k: TopKRule {
                given: args.top_k,
                folder: folder_top_k,
            },
            quiet: args.quiet,
            index_dir: index_dir(&args.walk.index),
        })
    }

    /// Whether the nodes include files read (paths given, or standard input without
    /// `--nodes`).
    pub fn reads_files(&self) -> bool {
        !self.paths.is_empty() || self.nodes.is_none()
    }
}

/// Where folder indexes are kept: `--index-dir` (or `SYNTHKIT_INDEX_DIR`), else
/// `$XDG_CACHE_HOME/synthkit/index`, else `~/.cache/synthkit/index`; none with
/// `--no-index`.
pub fn index_dir(index: &IndexArgs) -> Option<PathBuf> {
    if index.no_index {
        return None;
    }
    if let Some(dir) = &index.index_dir {
        return Some(dir.clone());
    }
    let nonempty = |var: &str| std::env::var_os(var).filter(|v| !v.is_empty());
    nonempty("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| nonempty("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|cache| cache.join("synthkit").join("index"))
}

/// The reading options `walk` asks for.
pub fn read_options(walk: &WalkArgs) -> ReadOptions {
    let mut options = ReadOptions::new()
        .hidden(walk.hidden)
        .no_ignore(walk.no_ignore)
        .keep_all(walk.keep_all)
        .max_file_size(walk.max_file_size.0);
    for glob in &walk.include {
        options = options.include(glob.clone());
    }
    for glob in &walk.exclude {
        options = options.exclude(glob.clone());
    }
    options
}

/// A path that names a citation style when `--cite` was written without `=` before it
/// (`--cite quotes`) and no such file exists.
fn style_read_as_path(args: &SynthArgs) -> Option<&str> {
    args.cite?;
    args.paths.iter().filter_map(|p| p.to_str()).find(|p| {
        matches!(*p, "quotes" | "quote" | "markers" | "marker") && fs::symlink_metadata(p).is_err()
    })
}

/// How many chunks a run keeps: `--top-k`, else the verb's number when a folder was read.
#[derive(Debug, Clone, Copy)]
pub struct TopKRule {
    /// `--top-k N` or `--top-k all`.
    pub given: Option<TopK>,
    /// The verb's number for a folder read without `--top-k` (`ask`: 20).
    pub folder: Option<usize>,
}

impl TopKRule {
    /// The chunks kept (`None`: all), given whether a folder was read.
    pub fn keep(&self, from_folder: bool) -> Option<usize> {
        match self.given {
            Some(TopK::All) => None,
            Some(TopK::Best(k)) => Some(k),
            None => self.folder.filter(|_| from_folder),
        }
    }

    /// Whether `--top-k` was given (then the chunks are ranked even when few).
    pub fn given(&self) -> bool {
        self.given.is_some()
    }
}

/// What becomes of the image files a read finds.
#[derive(Debug, Clone, Copy)]
pub struct ImageSettings {
    /// `--images`.
    pub mode: ImagesMode,
    /// `--max-image-bytes`.
    pub max_bytes: usize,
    /// `--vision` / `--no-vision`: whether the model takes images, when the user says.
    pub vision: Option<bool>,
}

impl ImageSettings {
    /// The image settings of `walk`, with `--vision`/`--no-vision`.
    pub fn of(walk: &WalkArgs, vision: Option<bool>) -> Self {
        Self {
            mode: walk.images,
            max_bytes: walk.max_image_bytes,
            vision,
        }
    }
}

/// The size checks of a run with a model: over either, the run needs `--yes`.
#[derive(Debug, Clone, Copy)]
pub struct SizeGuards {
    /// `--max-calls`.
    pub max_calls: usize,
    /// `--max-total-prompt-tokens`.
    pub max_total_prompt_tokens: usize,
    /// `--yes`: run whatever the size.
    pub yes: bool,
}

/// How a run shows its answer, its plan and what it kept.
#[derive(Debug, Clone)]
pub struct OutputSettings {
    /// `--json`.
    pub json: bool,
    /// `--format`.
    pub format: JsonFormat,
    /// `--stream`.
    pub stream: bool,
    /// `--quiet`.
    pub quiet: bool,
    /// `--cite` or `--cite-quotes`: the answer shows its markers.
    pub cites: bool,
    /// `--steps`: the steps in `--json` and the report.
    pub steps: bool,
    /// `--report FILE`.
    pub report: Option<PathBuf>,
    /// `--trace FILE`.
    pub trace: Option<PathBuf>,
    /// `--price-per-1k`: `--plan`'s rough prompt cost.
    pub price_per_1k: Option<f64>,
}

impl OutputSettings {
    fn of(args: &SynthArgs) -> Self {
        Self {
            json: args.json,
            format: args.format,
            stream: args.stream,
            quiet: args.quiet,
            cites: args.cites(),
            steps: args.report.steps,
            report: args.report.report.clone(),
            trace: args.trace.clone(),
            price_per_1k: args.dry_run.price_per_1k,
        }
    }
}
