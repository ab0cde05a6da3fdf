//! `synthkit batch IN.jsonl -o OUT.jsonl`: one synthesis per input line, on one model
//! stack (limits, retries, cache) for the whole batch.
//!
//! Each input line is a request in the service's shape ([`synthkit_frontend::request`]) plus an
//! optional `id` (default: the line number); each output line is `{"id", "response"}`
//! (the response exactly as the service answers it) or `{"id", "error": {"kind",
//! "message"}}`. The input is read a line at a time and at most `--jobs` syntheses are in
//! flight; in input order, finished results wait only for the earlier ones still in
//! flight, so memory is bounded by `--jobs`, not by the input. Each result is appended as
//! one write, and the file is synced at the end: a killed run loses only the syntheses in
//! flight, and the next run skips the ids already in the output (see
//! [`synthkit_frontend::batch::open_output`]). Reading, ids, hashes and the resume's bookkeeping
//! are the library's ([`synthkit_frontend::batch`]), shared with the Python package.

mod plan;

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Result, anyhow};
use serde::Serialize;
use serde_json::Value;
use synthkit::cost::Prices;
use synthkit::layer::cost::CostCapped;
use synthkit::many::Window;
use synthkit::model::LanguageModel;
use synthkit::{Concurrency, Observer, Response, ResponseMode, SynthError};
use synthkit_frontend::batch::{
    self as batch_io, Existing, HashDefaults, LineReader, LineRequest, Parsed, SeenIds, Verdict,
    line_id, parse_line, transient_cause,
};
use synthkit_frontend::request::{ErrorDetail, RequestDefaults, error_kind};
use synthkit_frontend::retrieval::paths::{PathsReader, PathsRoot};
use synthkit_report::RunRecord;

use crate::backend::{self, Backend};
use crate::error::usage;
use crate::output::{Stderr, note};
use crate::pages::BatchReports;
use crate::progress::BatchProgress;
use crate::settings::batch::{BatchRun, LinePaths};

/// Opens IN (a usage error when it cannot be read).
fn open_input(path: &Path) -> Result<Box<dyn std::io::BufRead + Send>> {
    if path == Path::new("-") {
        return Ok(Box::new(std::io::BufReader::new(std::io::stdin())));
    }
    let file = std::fs::File::open(path)
        .map_err(|e| usage(format!("cannot read the input {}: {e}", path.display())))?;
    Ok(Box::new(std::io::BufReader::with_capacity(1 << 16, file)))
}

/// One output line.
#[derive(Serialize)]
struct ResultLine<'a> {
    id: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_sha256: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response: Option<&'a Response>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorLine<'a>>,
}

/// An error line's `error`: the service's error, and for a failure that may pass when
/// the request is sent again, its cause (`transport`, `timeout`, `rate_limited`,
/// `server_error`): a resumed batch runs those lines again.
#[derive(Serialize)]
struct ErrorLine<'a> {
    kind: &'a str,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    transient: Option<&'static str>,
}

/// A failed line: what the service would answer, and its transient cause if any.
struct Failure {
    detail: ErrorDetail,
    transient: Option<&'static str>,
}

impl From<ErrorDetail> for Failure {
    fn from(detail: ErrorDetail) -> Self {
        Self {
            detail,
            transient: None,
        }
    }
}

/// A finished line: its JSON text, whether it is an error line, and whether it replaces
/// a line already in the output (a retried or changed line).
struct Finished {
    text: String,
    failed: bool,
    replaces: bool,
    /// What the line's calls cost, at the prices given.
    cost_usd: Option<f64>,
}

impl Finished {
    fn of(id: &Value, hash: Option<&str>, outcome: Result<&Response, &Failure>) -> Self {
        let line = ResultLine {
            id,
            request_sha256: hash,
            response: outcome.ok(),
            error: outcome.err().map(|f| ErrorLine {
                kind: &f.detail.kind,
                message: &f.detail.message,
                transient: f.transient,
            }),
        };
        let text = serde_json::to_string(&line).unwrap_or_else(|e| {
            let message = format!("the response could not be written as JSON: {e}");
            let line = ResultLine {
                id,
                request_sha256: hash,
                response: None,
                error: Some(ErrorLine {
                    kind: "synthesis_failed",
                    message: &message,
                    transient: None,
                }),
            };
            serde_json::to_string(&line).unwrap_or_default()
        });
        Self {
            text,
            failed: outcome.is_err(),
            replaces: false,
            cost_usd: outcome.ok().and_then(|r| r.usage.cost_usd),
        }
    }
}

/// Counts for the summary.
#[derive(Debug, Default)]
struct Tally {
    answered: usize,
    failed: usize,
    skipped: usize,
    /// What the answered lines cost, at the prices given.
    cost_usd: Option<f64>,
}

impl Tally {
    fn total(&self) -> usize {
        self.answered + self.failed + self.skipped
    }
}

/// The request defaults of the batch: `--mode`, `--concurrency` (else the default capped
/// at the server's slots) as each synthesis's calls in flight, `--max-prompt-tokens` and
/// `--escalate`.
fn defaults(args: &BatchRun<'_>, backend: &Backend) -> RequestDefaults {
    let flags = args.requests;
    let defaults = RequestDefaults {
        mode: flags.mode.unwrap_or(ResponseMode::Compact),
        concurrency: Concurrency::for_server(flags.concurrency, backend.server_slots),
        max_prompt_tokens: flags.max_prompt_tokens,
        escalation: flags
            .escalate
            .map(|n| synthkit::Escalation::new(n as usize)),
        ..RequestDefaults::default()
    };
    defaults.with_checks(&args.checks.for_backend(backend.backend))
}

/// What a resumed batch will do with the lines of its input.
#[derive(Debug, Default)]
struct Survey {
    kept: usize,
    kept_errors: std::collections::BTreeMap<String, usize>,
    retry: std::collections::BTreeMap<String, usize>,
    changed: usize,
    new: usize,
}

impl Survey {
    fn add(&mut self, verdict: Verdict) {
        match verdict {
            Verdict::Keep(None) => self.kept += 1,
            Verdict::Keep(Some(kind)) => {
                self.kept += 1;
                *self.kept_errors.entry(kind).or_default() += 1;
            }
            Verdict::Retry(why) => *self.retry.entry(why).or_default() += 1,
            Verdict::Changed => self.changed += 1,
            Verdict::New => self.new += 1,
        }
    }

    /// `resuming: 18 results kept, 2 failed lines to retry (model_error: transport)`.
    fn note(&self, output: &Path) -> String {
        let mut text = format!(
            "resuming {}: {} result{} kept",
            output.display(),
            self.kept,
            plural(self.kept)
        );
        if !self.kept_errors.is_empty() {
            let n: usize = self.kept_errors.values().sum();
            let which = match n {
                1 if self.kept == 1 => "an error line".to_string(),
                1 => "1 of them an error line".to_string(),
                n => format!("{n} of them error lines"),
            };
            text.push_str(&format!(
                " ({which}, not retried: {})",
                counts(&self.kept_errors)
            ));
        }
        let retry: usize = self.retry.values().sum();
        if retry > 0 {
            let why = if self.retry.len() == 1 {
                self.retry.keys().next().cloned().unwrap_or_default()
            } else {
                counts(&self.retry)
            };
            text.push_str(&format!(
                ", {retry} failed line{} to retry ({why})",
                plural(retry)
            ));
        }
        if self.changed > 0 {
            text.push_str(&format!(
                ", {} line{} whose request changed since its result to run again",
                self.changed,
                plural(self.changed)
            ));
        }
        if self.new > 0 {
            text.push_str(&format!(", {} new line{}", self.new, plural(self.new)));
        }
        text
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// `2 model_error, 1 invalid_request`.
fn counts(by: &std::collections::BTreeMap<String, usize>) -> String {
    by.iter()
        .map(|(k, n)| format!("{n} {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Reads the whole input once before a run: refuses duplicate ids (naming both lines)
/// and counts what the run will keep, retry and run.
fn survey(
    path: &Path,
    max_line: usize,
    hash_defaults: HashDefaults,
    existing: &Existing,
    retry: bool,
) -> Result<Survey> {
    let mut reader = LineReader::new(open_input(path)?, max_line);
    let mut seen = SeenIds::default();
    let mut survey = Survey::default();
    while let Some((number, raw)) = reader
        .next_line()
        .map_err(|e| anyhow!("cannot read the input {}: {e}", path.display()))?
    {
        let Some((id, hash)) = line_id(number, raw, max_line, hash_defaults) else {
            continue;
        };
        seen.check(&id, number).map_err(|e| usage(e.to_string()))?;
        survey.add(existing.verdict(&batch_io::id_key(&id), hash.as_deref(), retry));
    }
    Ok(survey)
}

/// Runs `synthkit batch`.
pub async fn run(args: &BatchRun<'_>) -> Result<()> {
    let start = Instant::now();
    let (max_line, hash_defaults) = (args.max_line, args.hash_defaults);
    let cost = args.cost;
    if args.plan {
        let reader = LineReader::new(open_input(&args.input)?, max_line);
        let backend = backend::connect_with(args.stack).await?;
        let prices = cost.filter(|_| !backend.is_extractive()).map(|c| c.prices);
        return plan::run(args, &backend, defaults(args, &backend), reader, prices).await;
    }
    let output = args
        .output
        .as_deref()
        .ok_or_else(|| usage("give the output file with -o OUT"))?;
    let retry = args.retry_failed;
    let from_stdin = args.input == Path::new("-");
    let (mut out, existing) = crate::output::open_results(output)?;
    // A file's ids are checked before any call; standard input's as they come.
    let planned = if from_stdin {
        None
    } else {
        Some(survey(
            &args.input,
            max_line,
            hash_defaults,
            &existing,
            retry,
        )?)
    };
    let mut reader = LineReader::new(open_input(&args.input)?, max_line);
    let backend = backend::connect_with(args.stack).await?;
    let defaults = defaults(args, &backend);
    let files = line_files(&args.paths, &args.input, &backend)?;
    // The extractive backend is free; with --max-cost, one ledger holds every call of
    // the batch to the cap.
    let cost = cost.filter(|_| !backend.is_extractive());
    let lines = LineModel {
        model: match cost.and_then(|c| c.ledger()) {
            Some(ledger) => Arc::new(CostCapped::new(backend.model(), ledger)),
            None => backend.model(),
        },
        prices: cost.map(|c| c.prices),
    };
    let reports = match &args.report_dir {
        Some(dir) => Some(Arc::new(BatchReports::create(dir, &backend)?)),
        None => None,
    };
    let total = (!from_stdin)
        .then(|| batch_io::count_lines(&args.input))
        .flatten();
    let progress = Arc::new(BatchProgress::new(!args.quiet, total));
    let observer: Arc<dyn Observer> = progress.clone();
    if existing.done() > 0 {
        let text = match &planned {
            Some(survey) => survey.note(output),
            None => format!(
                "resuming: {} results already in {}",
                existing.done(),
                output.display()
            ),
        };
        note(args.quiet, &text);
    }

    let mut window = Window::new(args.jobs, args.order);
    let mut tally = Tally::default();
    let mut seen = SeenIds::default();
    // Error lines of OUT that this run replaces, and whether a line was replaced.
    let (mut replaced_errors, mut replaced) = (0usize, false);
    let mut eof = false;
    loop {
        while !eof && window.has_room() {
            let Some((number, raw)) = reader
                .next_line()
                .map_err(|e| anyhow!("cannot read the input at line {}: {e}", tally.total()))?
            else {
                eof = true;
                break;
            };
            let (id, request, hash) = match parse_line(number, raw, max_line, hash_defaults) {
                Parsed::Blank => {
                    progress.line_done();
                    continue;
                }
                Parsed::Bad(id, e, hash) => (id, Err(e), hash),
                Parsed::Request(id, r, hash) => (id, Ok(*r), Some(hash)),
            };
            seen.check(&id, number).map_err(|e| usage(e.to_string()))?;
            let key = batch_io::id_key(&id);
            let replaces = match existing.verdict(&key, hash.as_deref(), retry) {
                Verdict::Keep(_) => {
                    tally.skipped += 1;
                    progress.line_done();
                    continue;
                }
                Verdict::Retry(_) | Verdict::Changed => {
                    replaced_errors += usize::from(existing.is_error(&key));
                    true
                }
                Verdict::New => false,
            };
            start_line(
                &mut window,
                Line {
                    number,
                    id,
                    hash,
                    request,
                    replaces,
                },
                &lines,
                defaults.clone(),
                &observer,
                reports.clone(),
                &files,
            );
        }
        let Some(finished) = window.next().await else {
            break;
        };
        batch_io::append_line(&mut out, finished.text)
            .map_err(|e| anyhow!("cannot write to {}: {e}", output.display()))?;
        replaced |= finished.replaces;
        if let Some(c) = finished.cost_usd {
            tally.cost_usd = Some(tally.cost_usd.unwrap_or(0.0) + c);
        }
        if finished.failed {
            tally.failed += 1;
        } else {
            tally.answered += 1;
        }
        progress.line_done();
    }
    out.sync_all()
        .map_err(|e| anyhow!("cannot sync {}: {e}", output.display()))?;
    drop(out);
    // OUT ends with one line per id: a replaced line's old result goes.
    let errors = if replaced || existing.superseded > 0 {
        let compacted = batch_io::compact(output)
            .map_err(|e| anyhow!("cannot rewrite {}: {e}", output.display()))?;
        compacted.errors.values().sum()
    } else {
        existing.errors() - replaced_errors.min(existing.errors()) + tally.failed
    };
    progress.clear();
    let (calls, tokens) = progress.totals();
    let cost = match tally.cost_usd {
        Some(c) => format!(", ${c:.6}"),
        None => String::new(),
    };
    eprintln!(
        "batch: {} lines: {} answered, {} failed, {} already in {}; {calls} model calls, {tokens} tokens{cost}; {:.1} s",
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
    if errors > 0 {
        let retry_hint = if retry {
            "run the same command again to retry those that failed for a transient cause \
             (connection, timeout, rate limit, server error, cost cap); fix the input for the others"
        } else {
            "run again without --no-retry-failed to retry those that failed for a transient \
             cause (connection, timeout, rate limit, server error, cost cap)"
        };
        return Err(anyhow!(
            "{errors} line{} of {} {} ({} failed in this run): they say why; {retry_hint}",
            plural(errors),
            output.display(),
            if errors == 1 {
                "is an error line"
            } else {
                "are error lines"
            },
            tally.failed
        ));
    }
    Ok(())
}

/// How the `paths` of a line are read ([`PathsReader`]), under `--paths-root` (by default
/// IN's folder: [`synthkit_frontend::retrieval::paths`]).
fn line_files(settings: &LinePaths, input: &Path, backend: &Backend) -> Result<PathsReader> {
    let root = PathsRoot::for_input(
        input,
        settings.paths_root.as_deref(),
        settings.allow_paths_outside,
    )?;
    PathsReader::new(
        &settings.reading(),
        Arc::new(root),
        backend.split_tokenizer.clone(),
    )
}

/// An input line to run: its number, id, request hash, request (or why it cannot run),
/// and whether its result replaces one in OUT.
struct Line {
    number: usize,
    id: Value,
    hash: Option<String>,
    request: Result<LineRequest, ErrorDetail>,
    replaces: bool,
}

/// The model every line's synthesis calls (the backend's, held to `--max-cost` when it is
/// given) and the prices its usage is priced at.
struct LineModel {
    model: Arc<dyn LanguageModel>,
    prices: Option<Prices>,
}

/// Starts one line in `window`: its synthesis on its own task (so that the batch uses
/// every worker thread), or its error line at once.
fn start_line(
    window: &mut Window<Finished>,
    line: Line,
    lines: &LineModel,
    defaults: RequestDefaults,
    observer: &Arc<dyn Observer>,
    reports: Option<Arc<BatchReports>>,
    files: &PathsReader,
) {
    let Line {
        number,
        id,
        hash,
        request,
        replaces,
    } = line;
    let observer = Arc::clone(observer);
    let mut paths = None;
    let prepared = request.and_then(|line| {
        let LineRequest {
            request: mut r,
            paths: line_paths,
            top_k,
            ..
        } = line;
        paths = line_paths.map(|p| (p, top_k));
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
        r.prepare(Arc::clone(&lines.model), defaults, |b| b.observer(observer))
            .map_err(|e| ErrorDetail {
                kind: e.kind().into(),
                message: format!("line {number}: {e}"),
            })
    });
    let run = match prepared {
        Ok(run) => run,
        Err(e) => {
            let mut finished = Finished::of(&id, hash.as_deref(), Err(&Failure::from(e)));
            finished.replaces = replaces;
            window.ready(finished);
            return;
        }
    };
    let (id_again, hash_again) = (id.clone(), hash.clone());
    let files = files.clone();
    let prices = lines.prices;
    let run = async move {
        let mut run = run;
        if let Some((paths, top_k)) = paths {
            let query = run.input.query.clone();
            match files.read(paths, query, top_k, Arc::new(Stderr)).await {
                Ok(nodes) => run.input.nodes = nodes,
                Err(why) => {
                    let failure = Failure::from(ErrorDetail {
                        kind: "invalid_request".into(),
                        message: format!("line {number}: cannot read `paths`: {why}"),
                    });
                    return Finished::of(&id, hash.as_deref(), Err(&failure));
                }
            }
        }
        // What the line's report needs once the input has gone to the synthesis.
        let report = reports
            .zip(run.steps.clone())
            .map(|(r, steps)| (r, steps, run.input.query.clone(), run.input.nodes.clone()));
        let outcome = run.synthesizer.synthesize_input(run.input).await;
        let mode = run.synthesizer.mode();
        match outcome {
            Ok(mut response) => {
                if let Some(p) = &prices {
                    p.price(&mut response.usage);
                }
                if let Some((reports, steps, query, nodes)) = report {
                    let record = RunRecord::of_outcome(&query, mode, &nodes, Ok(&response), &steps);
                    reports.write(&id, &run.synthesizer, record);
                }
                if !run.return_steps {
                    response.steps = None;
                }
                Finished::of(&id, hash.as_deref(), Ok(&response))
            }
            Err(e) => {
                let failure = Failure {
                    detail: ErrorDetail {
                        kind: error_kind(&e).into(),
                        message: format!("line {number}: {e}"),
                    },
                    transient: transient_cause(&e),
                };
                if let Some((reports, steps, query, nodes)) = report {
                    let outcome = Err(failure.detail.message.as_str());
                    let record = RunRecord::of_outcome(&query, mode, &nodes, outcome, &steps);
                    reports.write(&id, &run.synthesizer, record);
                }
                Finished::of(&id, hash.as_deref(), Err(&failure))
            }
        }
    };
    let lost = move |e: SynthError| {
        let failure = Failure::from(ErrorDetail {
            kind: "synthesis_failed".into(),
            message: format!("line {number}: the synthesis stopped: {e}"),
        });
        let mut finished = Finished::of(&id_again, hash_again.as_deref(), Err(&failure));
        finished.replaces = replaces;
        finished
    };
    let run = async move {
        let mut finished = run.await;
        finished.replaces = replaces;
        finished
    };
    window.spawn(run, lost);
}
