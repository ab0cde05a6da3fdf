//! `synthkit report TRACE -o FILE`: the HTML page of a run from its trace (`ask --trace`).

use std::io::BufReader;

use anyhow::Result;

use crate::error::usage;
use crate::pages;
use crate::settings::text::ReportRun;

/// `synthkit report TRACE -o FILE`.
pub fn run(args: &ReportRun) -> Result<()> {
    let file = std::fs::File::open(&args.trace).map_err(|e| {
        usage(format!(
            "cannot read the trace {}: {e}",
            args.trace.display()
        ))
    })?;
    let run = synthkit_report::read_trace(BufReader::new(file))
        .map_err(|e| usage(format!("{}: {e}", args.trace.display())))?;
    pages::write(&args.output, &run)?;
    if let Some(error) = &run.error {
        eprintln!(
            "note: the run of {} failed ({error}): the report shows its calls up to the failure",
            args.trace.display()
        );
    } else if run.answer.is_none() {
        eprintln!(
            "note: {} holds the calls but not the run's end (the run failed or was stopped): the report shows the calls alone",
            args.trace.display()
        );
    }
    Ok(())
}
