//! What one `eval` runs, built from its flags once: [`EvalRun`]. The verb reads these
//! built things and never a flag, as `ask` reads [`super::SynthRun`].

use std::path::PathBuf;

use anyhow::Result;
use synthkit::ResponseMode;
use synthkit::cost::Prices;

use super::batch::LinePaths;
use super::checks::CheckSettings;
use super::model::StackFlags;
use super::synthesis::SynthesisSettings;
use super::templates::CustomTemplates;
use crate::flags::EvalArgs;

/// One `synthkit eval`, as its flags ask for it.
#[derive(Debug, Clone)]
pub struct EvalRun<'a> {
    /// The cases file.
    pub cases: PathBuf,
    /// How the cases' `paths` are read, as `batch` reads a line's (the root by default
    /// the cases' folder).
    pub paths: LinePaths,
    /// The modes synthkit runs each case in: `--modes`, else compact unless answers
    /// produced elsewhere are scored.
    pub modes: Vec<ResponseMode>,
    /// `--answers`: answers produced elsewhere, scored.
    pub answers: Vec<PathBuf>,
    /// `-o ROWS`: the rows file appended to and resumed from.
    pub rows: Option<PathBuf>,
    /// Whether synthkit's failed runs in the rows are run again (not `--no-retry-failed`).
    pub retry_failed: bool,
    /// `--jobs`: runs in flight at once.
    pub jobs: usize,
    /// How each of synthkit's runs of a case is made.
    pub runs: CaseRuns,
    /// The prices every system's rows are priced at, when given.
    pub prices: Option<Prices>,
    /// `--json`: the results as one JSON object.
    pub json: bool,
    /// `--html FILE`: the results page.
    pub html: Option<PathBuf>,
    /// `--quiet`.
    pub quiet: bool,
    /// What builds the model and its stack (one for the whole evaluation).
    pub stack: StackFlags<'a>,
}

/// How each of synthkit's runs of a case is made: owned, so that the runs' tasks share it.
#[derive(Debug, Clone)]
pub struct CaseRuns {
    /// `--system`: the name of synthkit's runs.
    pub system: String,
    /// Whether the answers cite their sources (`--cite`, `--cite-quotes`).
    pub cites: bool,
    /// The options of each synthesis.
    pub synthesis: SynthesisSettings,
    /// The template files, read.
    pub templates: CustomTemplates,
    /// A question's checks, with the flags.
    pub checks: CheckSettings,
    /// `--report-dir DIR`: each run's report.
    pub report_dir: Option<PathBuf>,
}

impl<'a> EvalRun<'a> {
    /// The evaluation `args` ask for; unreadable template or price files refused.
    pub fn of(args: &'a EvalArgs) -> Result<Self> {
        let modes = if args.modes.is_empty() && args.answers.is_empty() {
            vec![ResponseMode::Compact]
        } else {
            args.modes.clone()
        };
        Ok(Self {
            cases: args.cases.clone(),
            paths: LinePaths::of(&args.paths),
            modes,
            answers: args.answers.clone(),
            rows: args.output.clone(),
            retry_failed: !args.no_retry_failed,
            jobs: args.jobs as usize,
            runs: CaseRuns {
                system: args.system.clone(),
                cites: args.cites(),
                synthesis: SynthesisSettings::of_eval(args),
                templates: CustomTemplates::read(&args.prompts)?,
                checks: CheckSettings::for_questions(&args.answering.checks),
                report_dir: args.report_dir.clone(),
            },
            prices: super::cost::prices(&args.prices)?,
            json: args.json,
            html: args.html.clone(),
            quiet: args.quiet,
            stack: StackFlags {
                model_args: &args.answering.model_args,
                limits: &args.limits,
                concurrency: args.concurrency,
                syntheses: args.jobs as usize,
                cache: args.cache.as_deref(),
                plan: false,
            },
        })
    }
}
