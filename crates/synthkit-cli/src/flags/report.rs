//! The report flags: `--steps` and `--report FILE` of `ask` and `summarize`, and
//! `synthkit report`'s own.

use std::path::PathBuf;

use clap::Args;

/// `--steps` and `--report`.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Output")]
pub struct ReportArgs {
    /// With --json: add `steps`, one object per model call (step, level, index, node ids,
    /// tokens, time, retries, corrections, truncation, the reply up to 16 KiB).
    #[arg(hide_short_help = true, long, requires = "json")]
    pub steps: bool,
    /// Write an HTML report of the run to FILE.
    ///
    /// Write an HTML report of the run to FILE: the answer and its citations, every model
    /// call as a box (click for its nodes and reply), the budget, the sources. One file,
    /// nothing fetched; open it in a browser.
    #[arg(long, value_name = "FILE", conflicts_with = "plan")]
    pub report: Option<PathBuf>,
}

/// `synthkit report`.
#[derive(Debug, Args)]
pub struct ReportVerbArgs {
    /// The trace written by `ask --trace` or `summarize --trace` (JSON lines).
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,
    /// The HTML file to write.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: PathBuf,
}
