//! `batch --plan`: every line planned as `ask --plan` plans one synthesis
//! ([`synthkit::Synthesizer::plan`], no model call), the plans summed by step and level.

use std::io::{self, BufRead, Write};
use std::sync::Arc;

use anyhow::{Result, anyhow};
use synthkit::Plan;
use synthkit_frontend::request::RequestDefaults;

use synthkit_frontend::batch::{LineReader, Parsed, parse_line};

use crate::backend::Backend;
use crate::output::Stderr;
use crate::plan::TextPlan;
use crate::settings::batch::BatchRun;

/// Plans every line of the input and prints the batch's plan; lines that cannot run are
/// named on standard error (and make the exit code 1).
pub async fn run<R: BufRead>(
    args: &BatchRun<'_>,
    backend: &Backend,
    defaults: RequestDefaults,
    mut reader: LineReader<R>,
    prices: Option<synthkit::cost::Prices>,
) -> Result<()> {
    let info = backend.model().info();
    let mut total = Plan::default();
    let (mut planned, mut bad) = (0usize, 0usize);
    let (max_line, hash_defaults) = (args.max_line, args.hash_defaults);
    let files = super::line_files(&args.paths, &args.input, backend)?;
    while let Some((number, raw)) = reader.next_line()? {
        let request = match parse_line(number, raw, max_line, hash_defaults) {
            Parsed::Blank => continue,
            Parsed::Bad(_, e, _) => Err(e.message),
            Parsed::Request(_, r, _) => Ok(*r),
        };
        let outcome = match request {
            Ok(line) => match line
                .request
                .prepare(backend.model(), defaults.clone(), |b| b)
            {
                Ok(mut run) => {
                    let read = match line.paths {
                        Some(paths) => {
                            let query = run.input.query.clone();
                            files
                                .read(paths, query, line.top_k, Arc::new(Stderr))
                                .await
                                .map(|nodes| run.input.nodes = nodes)
                                .map_err(|why| format!("line {number}: cannot read `paths`: {why}"))
                        }
                        None => Ok(()),
                    };
                    match read {
                        Ok(()) => run
                            .synthesizer
                            .plan_input(&run.input)
                            .await
                            .map_err(|e| format!("line {number}: {e}")),
                        Err(e) => Err(e),
                    }
                }
                Err(e) => Err(format!("line {number}: {e}")),
            },
            Err(message) => Err(message),
        };
        // A failed plan's calls are not part of the batch.
        match outcome {
            Ok(plan) => {
                planned += 1;
                total.merge(plan);
            }
            Err(message) => {
                bad += 1;
                eprintln!("error: {message}");
            }
        }
    }
    let subject = format!("{planned} request{}", if planned == 1 { "" } else { "s" });
    let plan = TextPlan {
        subject: &subject,
        rows: &total.rows,
        price_per_1k: args.price_per_1k,
        prices,
        max_completion_tokens: total.max_completion_tokens,
        without_calls: "no model call is needed",
    };
    let stdout = io::stdout();
    let mut out = stdout.lock();
    plan.write(&mut out, backend, &info)?;
    out.flush()?;
    if bad > 0 {
        return Err(anyhow!(
            "{bad} line{} cannot run (named above); the plan leaves {} out",
            if bad == 1 { "" } else { "s" },
            if bad == 1 { "it" } else { "them" }
        ));
    }
    Ok(())
}
