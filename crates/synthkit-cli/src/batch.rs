//! `synthkit batch IN.jsonl -o OUT.jsonl`: one synthesis per input line, on one model
//! stack (limits, retries, cache) for the whole batch.
//!
//! Each input line is a request in the service's shape ([`synthkit::request`]) plus an
//! optional `id` (default: the line number); each output line is `{"id", "response"}`
//! (the response exactly as the service answers it) or `{"id", "error": {"kind",
//! "message"}}`. The input is read a line at a time and at most `--jobs` syntheses are in
//! flight; in input order, finished results wait only for the earlier ones still in
//! flight, so memory is bounded by `--jobs`, not by the input. Each result is appended as
//! one write, and the file is synced at the end: a killed run loses only the syntheses in
//! flight, and the next run skips the ids already in the output (see
//! [`crate::batch_io::open_output`]).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Result, anyhow};
use clap::Args;
use futures::StreamExt;
use futures::stream::{FuturesOrdered, FuturesUnordered};
use serde::Serialize;
use serde_json::{Map, Value};
use synthkit::request::{ErrorDetail, RequestDefaults, SynthesizeRequest, error_kind};
use synthkit::{Concurrency, Observer, Response, ResponseMode};
use synthkit_report::RunRecord;

use crate::args::{FileSize, LimitArgs, ModelArgs, concurrency_for, parse_mode, parse_size};
use crate::backend::{self, Backend, StackFlags};
use crate::batch_io::{self, IdVerdict, LineReader, RawLine};
use crate::error::usage;
use crate::output::note;
use crate::progress::BatchProgress;
use crate::report::BatchReports;

/// The default `--max-line-bytes`: the service's default body limit, 10 MiB.
pub const DEFAULT_MAX_LINE_BYTES: &str = "10M";
/// The default `--jobs`.
pub const DEFAULT_JOBS: u32 = 4;

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
    /// plus an optional `id` (a string or a number; default: the line number). Blank
    /// lines are skipped.
    #[arg(value_name = "IN")]
    pub input: PathBuf,
    /// The results, one JSON line per input line: {"id", "response"} or {"id", "error":
    /// {"kind", "message"}}. Appended to: the ids already in it are skipped, so running
    /// the same command again resumes a stopped batch (a cut last line is rewritten).
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
    /// The longest input line: bytes, or with K, M or G; `none` for no limit. A longer
    /// line becomes an error line (it is never held whole).
    #[arg(long, value_name = "SIZE", default_value = DEFAULT_MAX_LINE_BYTES,
          value_parser = parse_size, help_heading = "Batch")]
    pub max_line_bytes: FileSize,
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
    /// The backend and how to reach and sample the model.
    #[command(flatten)]
    pub model_args: ModelArgs,
    /// OpenTelemetry export.
    #[command(flatten)]
    pub otel: crate::otel_args::OtelArgs,
    /// Keep every model reply in the SQLite file FILE and answer repeated calls from it:
    /// a resumed batch repeats no model call that had finished. Ignored with --plan.
    #[arg(long, value_name = "FILE", help_heading = "Model")]
    pub cache: Option<PathBuf>,
    /// `--plan` (over the whole batch) and `--price-per-1k`.
    #[command(flatten)]
    pub dry_run: crate::plan::PlanArgs,
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

/// An input line, read.
pub(crate) enum Parsed {
    /// A blank line: skipped.
    Blank,
    /// A line that cannot run: its id (the line number when it has none) and why.
    Bad(Value, ErrorDetail),
    /// A request and its id.
    Request(Value, Box<SynthesizeRequest>),
}

/// An `invalid_request` error naming line `number`.
fn invalid(number: usize, message: impl std::fmt::Display) -> ErrorDetail {
    ErrorDetail {
        kind: "invalid_request".into(),
        message: format!("line {number}: {message}"),
    }
}

/// Reads line `number`; the id is read first, so that a bad line's error line carries it.
pub(crate) fn parse_line(number: usize, raw: RawLine, max: usize) -> Parsed {
    let text = match raw {
        RawLine::Text(t) if t.trim().is_empty() => return Parsed::Blank,
        RawLine::Text(t) => t,
        RawLine::TooLong(n) => {
            let why = format!("{n} bytes, more than --max-line-bytes {max}");
            return Parsed::Bad(Value::from(number), invalid(number, why));
        }
        RawLine::NotUtf8 => {
            return Parsed::Bad(Value::from(number), invalid(number, "not UTF-8 text"));
        }
    };
    let mut fields: Map<String, Value> = match serde_json::from_str(&text) {
        Ok(Value::Object(fields)) => fields,
        Ok(_) => {
            let why = "expected a JSON object (a synthesis request)";
            return Parsed::Bad(Value::from(number), invalid(number, why));
        }
        Err(e) => {
            let why = format!("not JSON: {e}");
            return Parsed::Bad(Value::from(number), invalid(number, why));
        }
    };
    let id = match fields.remove("id") {
        None | Some(Value::Null) => Value::from(number),
        Some(id @ (Value::String(_) | Value::Number(_))) => id,
        Some(_) => {
            let why = "`id` must be a string or a number";
            return Parsed::Bad(Value::from(number), invalid(number, why));
        }
    };
    match serde_json::from_value::<SynthesizeRequest>(Value::Object(fields)) {
        Ok(request) => Parsed::Request(id, Box::new(request)),
        Err(e) => {
            let why = format!("not a synthesis request: {e}");
            Parsed::Bad(id, invalid(number, why))
        }
    }
}

/// One output line.
#[derive(Serialize)]
struct ResultLine<'a> {
    id: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    response: Option<&'a Response>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a ErrorDetail>,
}

/// A finished line: its JSON text and whether it is an error line.
struct Finished {
    text: String,
    failed: bool,
}

impl Finished {
    fn of(id: &Value, outcome: Result<&Response, &ErrorDetail>) -> Self {
        let line = ResultLine {
            id,
            response: outcome.ok(),
            error: outcome.err(),
        };
        let text = serde_json::to_string(&line).unwrap_or_else(|e| {
            let detail = ErrorDetail {
                kind: "synthesis_failed".into(),
                message: format!("the response could not be written as JSON: {e}"),
            };
            let line = ResultLine {
                id,
                response: None,
                error: Some(&detail),
            };
            serde_json::to_string(&line).unwrap_or_default()
        });
        Self {
            text,
            failed: outcome.is_err(),
        }
    }
}

type Pending = Pin<Box<dyn Future<Output = Finished> + Send>>;

/// The syntheses in flight: in input order, or as they finish.
enum Window {
    Ordered(FuturesOrdered<Pending>),
    Unordered(FuturesUnordered<Pending>),
}

impl Window {
    fn push(&mut self, f: Pending) {
        match self {
            Window::Ordered(q) => q.push_back(f),
            Window::Unordered(q) => q.push(f),
        }
    }

    fn len(&self) -> usize {
        match self {
            Window::Ordered(q) => q.len(),
            Window::Unordered(q) => q.len(),
        }
    }

    async fn next(&mut self) -> Option<Finished> {
        match self {
            Window::Ordered(q) => q.next().await,
            Window::Unordered(q) => q.next().await,
        }
    }
}

/// Counts for the summary.
#[derive(Debug, Default)]
struct Tally {
    answered: usize,
    failed: usize,
    skipped: usize,
}

/// Opens IN (a usage error when it cannot be read).
fn open_input(path: &Path) -> Result<Box<dyn std::io::BufRead + Send>> {
    if path == Path::new("-") {
        return Ok(Box::new(std::io::BufReader::new(std::io::stdin())));
    }
    let file = std::fs::File::open(path)
        .map_err(|e| usage(format!("cannot read the input {}: {e}", path.display())))?;
    Ok(Box::new(std::io::BufReader::with_capacity(1 << 16, file)))
}

/// The request defaults of the batch: `--mode`, `--concurrency` (else the default capped
/// at the server's slots) as each synthesis's calls in flight, and `--max-prompt-tokens`.
fn defaults(args: &BatchArgs, backend: &Backend) -> RequestDefaults {
    RequestDefaults {
        mode: args.mode.unwrap_or(ResponseMode::Compact),
        concurrency: match concurrency_for(args.concurrency, backend.server_slots) {
            0 => Concurrency::Unlimited,
            n => Concurrency::limit(n),
        },
        max_prompt_tokens: args.max_prompt_tokens,
    }
}

/// Runs `synthkit batch`.
pub async fn run(args: &BatchArgs) -> Result<()> {
    let start = Instant::now();
    let max_line = args
        .max_line_bytes
        .0
        .map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
    let mut reader = LineReader::new(open_input(&args.input)?, max_line);
    let flags = StackFlags {
        model_args: &args.model_args,
        limits: &args.limits,
        concurrency: args.concurrency,
        syntheses: args.jobs as usize,
        cache: args.cache.as_deref(),
        plan: args.dry_run.plan,
    };
    if args.dry_run.plan {
        let backend = backend::connect_with(flags).await?;
        return crate::batch_plan::run(args, &backend, defaults(args, &backend), reader).await;
    }
    let output = args
        .output
        .as_deref()
        .ok_or_else(|| usage("give the output file with -o OUT"))?;
    let (mut out, mut ids) =
        batch_io::open_output(output).map_err(|e| usage(crate::error::message(&e)))?;
    let backend = backend::connect_with(flags).await?;
    let defaults = defaults(args, &backend);
    let reports = match &args.report_dir {
        Some(dir) => Some(Arc::new(BatchReports::create(dir, &backend)?)),
        None => None,
    };
    let total = (args.input != Path::new("-"))
        .then(|| batch_io::count_lines(&args.input))
        .flatten();
    let progress = Arc::new(BatchProgress::new(!args.quiet, total));
    let observer: Arc<dyn Observer> = progress.clone();
    if ids.done() > 0 {
        note(
            args.quiet,
            &format!(
                "resuming: {} results already in {}",
                ids.done(),
                output.display()
            ),
        );
    }

    let mut window = if args.unordered {
        Window::Unordered(FuturesUnordered::new())
    } else {
        Window::Ordered(FuturesOrdered::new())
    };
    let jobs = args.jobs as usize;
    let mut tally = Tally::default();
    let mut eof = false;
    loop {
        while !eof && window.len() < jobs {
            let Some((number, raw)) = reader
                .next_line()
                .map_err(|e| anyhow!("cannot read the input at line {}: {e}", tally.total()))?
            else {
                eof = true;
                break;
            };
            let (id, request) = match parse_line(number, raw, max_line) {
                Parsed::Blank => {
                    progress.line_done();
                    continue;
                }
                Parsed::Bad(id, e) => (id, Err(e)),
                Parsed::Request(id, r) => (id, Ok(*r)),
            };
            let request = match ids.classify(batch_io::id_key(&id)) {
                IdVerdict::Done => {
                    tally.skipped += 1;
                    progress.line_done();
                    continue;
                }
                IdVerdict::Duplicate => Err(invalid(
                    number,
                    format!("the id {id} is already used by an earlier line"),
                )),
                IdVerdict::Run => request,
            };
            window.push(start_line(
                number,
                id,
                request,
                &backend,
                defaults,
                &observer,
                reports.clone(),
            ));
        }
        let Some(finished) = window.next().await else {
            break;
        };
        batch_io::append_line(&mut out, finished.text)
            .map_err(|e| anyhow!("cannot write to {}: {e}", output.display()))?;
        if finished.failed {
            tally.failed += 1;
        } else {
            tally.answered += 1;
        }
        progress.line_done();
    }
    out.sync_all()
        .map_err(|e| anyhow!("cannot sync {}: {e}", output.display()))?;
    progress.clear();
    let (calls, tokens) = progress.totals();
    eprintln!(
        "batch: {} lines: {} answered, {} failed, {} already in {}; {calls} model calls, {tokens} tokens; {:.1} s",
        tally.total(),
        tally.answered,
        tally.failed,
        tally.skipped,
        output.display(),
        start.elapsed().as_secs_f64()
    );
    if let Some(n) = backend::cache_note(&backend) {
        note(args.quiet, &n);
    }
    if tally.failed > 0 {
        return Err(anyhow!(
            "{} of {} lines failed: their error lines in {} say why (delete them and run again to retry)",
            tally.failed,
            tally.total(),
            output.display()
        ));
    }
    Ok(())
}

impl Tally {
    fn total(&self) -> usize {
        self.answered + self.failed + self.skipped
    }
}

/// The future of one line: its synthesis on its own task (so that the batch uses every
/// worker thread), or its error line at once.
fn start_line(
    number: usize,
    id: Value,
    request: Result<SynthesizeRequest, ErrorDetail>,
    backend: &Backend,
    defaults: RequestDefaults,
    observer: &Arc<dyn Observer>,
    reports: Option<Arc<BatchReports>>,
) -> Pending {
    let observer = Arc::clone(observer);
    let prepared = request.and_then(|mut r| {
        if r.plan {
            // A line that asks for its plan is never run for real.
            return Err(ErrorDetail {
                kind: "invalid_request".into(),
                message: format!(
                    "line {number}: `plan` asks the service for a plan; plan a batch with --plan"
                ),
            });
        }
        // With reports, the request keeps a recorder of its calls (for failed lines too).
        r.report = reports.is_some();
        r.prepare(Arc::clone(&backend.model), defaults, |b| {
            b.observer(observer)
        })
        .map_err(|e| ErrorDetail {
            kind: e.kind().into(),
            message: format!("line {number}: {e}"),
        })
    });
    let run = match prepared {
        Ok(run) => run,
        Err(e) => return Box::pin(std::future::ready(Finished::of(&id, Err(&e)))),
    };
    let id_again = id.clone();
    let task = tokio::spawn(async move {
        // What the line's report needs once the input has gone to the synthesis.
        let report = reports
            .zip(run.steps.clone())
            .map(|(r, steps)| (r, steps, run.input.query.clone(), run.input.nodes.clone()));
        let outcome = run.synthesizer.synthesize_input(run.input).await;
        let mode = run.synthesizer.mode();
        match outcome {
            Ok(mut response) => {
                if let Some((reports, steps, query, nodes)) = report {
                    let record = RunRecord::of_outcome(&query, mode, &nodes, Ok(&response), &steps);
                    reports.write(&id, &run.synthesizer, record);
                }
                if !run.return_steps {
                    response.steps = None;
                }
                Finished::of(&id, Ok(&response))
            }
            Err(e) => {
                let detail = ErrorDetail {
                    kind: error_kind(&e).into(),
                    message: format!("line {number}: {e}"),
                };
                if let Some((reports, steps, query, nodes)) = report {
                    let outcome = Err(detail.message.as_str());
                    let record = RunRecord::of_outcome(&query, mode, &nodes, outcome, &steps);
                    reports.write(&id, &run.synthesizer, record);
                }
                Finished::of(&id, Err(&detail))
            }
        }
    });
    Box::pin(async move {
        task.await.unwrap_or_else(|e| {
            let detail = ErrorDetail {
                kind: "synthesis_failed".into(),
                message: format!("line {number}: the synthesis stopped: {e}"),
            };
            Finished::of(&id_again, Err(&detail))
        })
    })
}
