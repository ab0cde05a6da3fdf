//! `synthkit eval CASES.jsonl`: measure the answers of synthkit's modes, or of any system's
//! answers file, on a benchmark of cases, with the judge-free scores of
//! [`synthkit::eval`].
//!
//! The cases are read whole first (every error names its line, a usage error). Then each
//! case runs in each `--modes` mode, `--jobs` syntheses at a time (default one), on one
//! model stack (limits, retries, cache), and each `--answers` line is scored. With
//! `-o ROWS` each scored row is appended as one JSON line as it is made, and the rows
//! already there (same case id, mode and system) are kept and not run again: a stopped
//! evaluation resumes. The results: a table on standard output, or `--json`, and
//! `--html FILE`.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Result, anyhow};
use serde_json::json;
use synthkit::eval::{
    AnswerLine, Case, CaseInput, Row, Totals, nodes_text, parse_answer_line, parse_case, run_case,
};
use synthkit::many::{Order, Window};
use synthkit::prompt::PromptBudget;
use synthkit::text::TokenTextSplitter;
use synthkit::{Concurrency, Node, ResponseMode, SynthesisOptions, Synthesizer};
use synthkit_report::RunRecord;

use crate::backend::{self, Backend, StackFlags};
use crate::error::usage;
use crate::flags::{EvalArgs, default_overlap};
use crate::observe::Fanout;
use crate::output::{note, warn};
use crate::pages::{BatchReports, batch_report_path};
use crate::progress::BatchProgress;
use crate::templates::CustomTemplates;
use synthkit::batch::{self as batch_io, LineReader, RawLine};

/// The longest line of a cases or answers file (bytes).
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// Reads a JSON-lines file with `parse` (each line's number given), a usage error naming
/// the file and line when a line is bad.
fn read_lines<T>(
    path: &Path,
    what: &str,
    mut parse: impl FnMut(&str, usize) -> Result<Option<T>, synthkit::eval::CaseError>,
) -> Result<Vec<T>> {
    let file = std::fs::File::open(path)
        .map_err(|e| usage(format!("cannot read the {what} {}: {e}", path.display())))?;
    let mut reader = LineReader::new(std::io::BufReader::new(file), MAX_LINE_BYTES);
    let mut out = Vec::new();
    while let Some((number, raw)) = reader
        .next_line()
        .map_err(|e| usage(format!("cannot read the {what} {}: {e}", path.display())))?
    {
        let text = match raw {
            RawLine::Text(t) => t,
            RawLine::TooLong(n) => {
                return Err(usage(format!(
                    "{}: line {number}: {n} bytes, more than the limit of {MAX_LINE_BYTES}",
                    path.display()
                )));
            }
            RawLine::NotUtf8 => {
                return Err(usage(format!(
                    "{}: line {number}: not UTF-8 text",
                    path.display()
                )));
            }
        };
        match parse(&text, number) {
            Ok(Some(item)) => out.push(item),
            Ok(None) => {}
            Err(e) => return Err(usage(format!("{}: {e}", path.display()))),
        }
    }
    Ok(out)
}

/// The cases, with unique ids and paths that exist.
fn read_cases(path: &Path) -> Result<(Vec<Case>, Vec<usize>)> {
    let mut lines = Vec::new();
    let cases = read_lines(path, "cases", |text, number| {
        let case = parse_case(text, number)?;
        if case.is_some() {
            lines.push(number);
        }
        Ok(case)
    })?;
    let mut first: HashMap<&str, usize> = HashMap::new();
    for (case, &line) in cases.iter().zip(&lines) {
        if let Some(earlier) = first.insert(case.id.as_str(), line) {
            return Err(usage(format!(
                "{}: line {line}: the id `{}` is already used by line {earlier}",
                path.display(),
                case.id
            )));
        }
        if let CaseInput::Paths(paths) = &case.input {
            for p in paths {
                let full = resolve(path, p);
                if !full.exists() {
                    return Err(usage(format!(
                        "{}: line {line}: the path `{p}` does not exist ({})",
                        path.display(),
                        full.display()
                    )));
                }
            }
        }
    }
    if cases.is_empty() {
        return Err(usage(format!("{}: no case in the file", path.display())));
    }
    Ok((cases, lines))
}

/// A case's path: absolute as is, relative from the cases file's folder.
fn resolve(cases_file: &Path, path: &str) -> PathBuf {
    let p = Path::new(path);
    if p.is_absolute() {
        return p.to_path_buf();
    }
    cases_file
        .parent()
        .map_or_else(|| p.to_path_buf(), |dir| dir.join(p))
}

/// The key of a row: case id, mode and system.
type Key = (String, String, String);

fn key(row: &Row) -> Key {
    (row.id.clone(), row.mode.clone(), row.system.clone())
}

/// The rows file: opened for appending (a cut last line removed), with its rows.
fn open_rows(path: &Path) -> Result<(std::fs::File, Vec<Row>)> {
    let (file, _) = crate::batch::open_output(path)?;
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("cannot read the rows {}: {e}", path.display())))?;
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Row>(line) {
            Ok(row) => rows.push(row),
            Err(e) => warn(&format!(
                "line {} of the rows {} is not a row ({e}): left out",
                i + 1,
                path.display()
            )),
        }
    }
    Ok((file, rows))
}

/// What every synthkit run shares.
struct Runner {
    args: EvalArgs,
    backend: Backend,
    progress: Arc<BatchProgress>,
    reports: Option<BatchReports>,
    splitter: TokenTextSplitter,
    templates: CustomTemplates,
}

impl Runner {
    /// A case's nodes: its own, or its paths read, split and ranked as `ask` does.
    fn nodes(&self, case: &Case) -> std::result::Result<Vec<Node>, String> {
        let paths = match &case.input {
            CaseInput::Nodes(nodes) => return Ok(nodes.clone()),
            CaseInput::Paths(paths) => paths,
            _ => return Err("this kind of case input is not supported".into()),
        };
        let paths: Vec<PathBuf> = paths.iter().map(|p| resolve(&self.args.cases, p)).collect();
        crate::input::nodes_from_paths(
            &paths,
            &case.query,
            case.top_k,
            self.args.top_k,
            &self.splitter,
            false,
        )
    }

    /// The synthesizer of one run, observed by the progress and `recorder`.
    fn synthesizer(
        &self,
        mode: ResponseMode,
        nodes: &[Node],
    ) -> Result<(Synthesizer, Option<Arc<synthkit::steps::StepRecorder>>)> {
        let info = self.backend.model().info();
        let budget = PromptBudget::new(info.context_window, info.num_output)
            .map_err(|e| usage(format!("{e} (see --context-window and --num-output)")))?
            .with_tokenizer(self.backend.budget_tokenizer.clone())
            .with_max_prompt_tokens(self.args.max_prompt_tokens)
            .map_err(|e| usage(format!("{e} (see --max-prompt-tokens)")))?;
        // The extractive backend always cites (it says which sentences it took); the
        // markers stay out of the answer without --cite.
        let citations = self.args.cites() || self.backend.is_extractive();
        let mut options = SynthesisOptions::default();
        options.mode = Some(mode);
        options.budget = Some(budget);
        options.concurrency = Some(Concurrency::for_server(
            self.args.concurrency,
            self.backend.server_slots,
        ));
        options.citations = Some(citations);
        options.citation_markers = Some(self.args.cites());
        options.citation_style = Some(self.args.citation_style());
        options.system_prompt = self.args.prompts.system_prompt.clone();
        options.templates = self.templates.list();
        // A case none of whose chunks is relevant (no nodes) is answered as `ask` answers it.
        let builder = options
            .apply(Synthesizer::builder(self.backend.model()))
            .empty_response(crate::synthesis::nothing_to_answer_from(None));
        let mut fanout = Fanout::default();
        fanout.push(self.progress.clone());
        let recorder = self
            .reports
            .as_ref()
            .map(|_| Arc::new(builder.step_recorder(nodes)));
        if let Some(r) = &recorder {
            fanout.push(r.clone());
        }
        let synth = builder
            .observer(Arc::new(fanout))
            .build()
            .map_err(|e| usage(e.to_string()))?;
        Ok((synth, recorder))
    }

    /// The scored row of `case` in `mode`: its nodes read, then run.
    async fn row(&self, case: &Case, mode: ResponseMode) -> Result<Row> {
        Ok(match self.nodes(case) {
            Ok(nodes) => {
                let (line, report) = self.run(case, mode, &nodes).await?;
                let text = nodes_text(&nodes);
                let mut row = synthkit::eval::score(case, &self.args.system, &line, Some(&text));
                row.report = report;
                row
            }
            Err(e) => {
                let mut line = AnswerLine::new(case.id.clone(), mode.as_str(), "");
                line.error = Some(format!("cannot read the case's paths: {e}"));
                synthkit::eval::score(case, &self.args.system, &line, None)
            }
        })
    }

    /// Runs `case` in `mode` over `nodes` ([`run_case`]: the prompts kept up to
    /// [`synthkit::eval::DEFAULT_MAX_PROMPT_BYTES`], past which `in_prompts` is unknown):
    /// its answer line and report.
    async fn run(
        &self,
        case: &Case,
        mode: ResponseMode,
        nodes: &[Node],
    ) -> Result<(AnswerLine, Option<String>)> {
        let (synth, recorder) = self.synthesizer(mode, nodes)?;
        let run = run_case(&synth, case, nodes.to_vec(), self.args.cites()).await;
        let (line, outcome) = (run.line, run.outcome);
        let report = match (&self.reports, &recorder, &self.args.report_dir) {
            (Some(reports), Some(recorder), Some(dir)) => {
                let error = line.error.clone().unwrap_or_default();
                let ended = match &outcome {
                    Ok(r) => Ok(r),
                    Err(_) => Err(error.as_str()),
                };
                let record = RunRecord::of_outcome(&case.query, mode, nodes, ended, recorder);
                let name = json!(format!("{}.{}", case.id, mode.as_str()));
                reports.write(&name, &synth, record);
                Some(batch_report_path(dir, &name).display().to_string())
            }
            _ => None,
        };
        Ok((line, report))
    }
}

/// Runs `synthkit eval`.
pub async fn run(args: &EvalArgs) -> Result<()> {
    let start = Instant::now();
    // Shared with the runs' tasks, never copied.
    let cases = Arc::new(read_cases(&args.cases)?.0);
    let index: HashMap<&str, usize> = cases
        .iter()
        .enumerate()
        .map(|(i, c)| (c.id.as_str(), i))
        .collect();
    let mut answer_files = Vec::new();
    for path in &args.answers {
        let lines = read_lines(path, "answers", parse_answer_line)?;
        for (n, line) in lines.iter().enumerate() {
            if !index.contains_key(line.id.as_str()) {
                return Err(usage(format!(
                    "{}: answer {} names the case `{}`, which is not in {}",
                    path.display(),
                    n + 1,
                    line.id,
                    args.cases.display()
                )));
            }
        }
        answer_files.push(lines);
    }
    let modes: Vec<ResponseMode> = if args.modes.is_empty() && args.answers.is_empty() {
        vec![ResponseMode::Compact]
    } else {
        args.modes.clone()
    };

    let (mut out, mut rows) = match &args.output {
        Some(path) => {
            let (file, rows) = open_rows(path)?;
            (Some(file), rows)
        }
        None => (None, Vec::new()),
    };
    let before = rows.len();
    rows.retain(|r| index.contains_key(r.id.as_str()));
    if rows.len() < before {
        note(
            args.quiet,
            &format!(
                "{} rows of the output name cases not in {}: left out of the results",
                before - rows.len(),
                args.cases.display()
            ),
        );
    }
    // A run made again after a failure is appended: the last row of a key is the one that
    // counts.
    let mut last: HashMap<Key, usize> = HashMap::new();
    for (i, r) in rows.iter().enumerate() {
        last.insert(key(r), i);
    }
    let mut i = 0;
    rows.retain(|r| {
        let keep = last.get(&key(r)) == Some(&i);
        i += 1;
        keep
    });
    // synthkit's own failed runs (an outage, a timeout) are run again, unless told not to.
    if !args.no_retry_failed {
        let before = rows.len();
        rows.retain(|r| {
            !(r.error.is_some()
                && r.system == args.system
                && modes.iter().any(|m| m.as_str() == r.mode))
        });
        if rows.len() < before {
            note(
                args.quiet,
                &format!(
                    "{} failed runs in the output are run again (--no-retry-failed keeps them)",
                    before - rows.len()
                ),
            );
        }
    }
    let mut done: HashSet<Key> = rows.iter().map(key).collect();
    if !rows.is_empty() {
        note(
            args.quiet,
            &format!("resuming: {} rows already scored", rows.len()),
        );
    }
    let mut append = |row: Row, rows: &mut Vec<Row>| -> Result<()> {
        if let (Some(file), Some(path)) = (out.as_mut(), &args.output) {
            let text = serde_json::to_string(&row)
                .map_err(|e| anyhow!("cannot write a row as JSON: {e}"))?;
            batch_io::append_line(file, text)
                .map_err(|e| anyhow!("cannot write to {}: {e}", path.display()))?;
        }
        rows.push(row);
        Ok(())
    };

    // Answers produced elsewhere.
    for (path, lines) in args.answers.iter().zip(answer_files) {
        let mut scored = 0usize;
        for line in lines {
            let Some(&i) = index.get(line.id.as_str()) else {
                continue;
            };
            let case = &cases[i];
            let nodes = case.nodes().map(nodes_text);
            let row = synthkit::eval::score(case, &args.system, &line, nodes.as_deref());
            if done.insert(key(&row)) {
                append(row, &mut rows)?;
                scored += 1;
            }
        }
        note(
            args.quiet,
            &format!("scored {scored} new answers of {}", path.display()),
        );
    }

    // synthkit's own runs.
    let todo: Vec<(usize, ResponseMode)> = cases
        .iter()
        .enumerate()
        .flat_map(|(i, c)| modes.iter().map(move |m| (i, *m, c)))
        .filter(|(_, m, c)| {
            !done.contains(&(c.id.clone(), m.as_str().to_string(), args.system.clone()))
        })
        .map(|(i, m, _)| (i, m))
        .collect();
    let mut runs = 0usize;
    if !todo.is_empty() {
        let overlap = default_overlap(args.chunk_size);
        let flags = StackFlags {
            model_args: &args.model_args,
            limits: &args.limits,
            concurrency: args.concurrency,
            syntheses: args.jobs as usize,
            cache: args.cache.as_deref(),
            plan: false,
        };
        let backend = backend::connect_with(flags).await?;
        let splitter =
            TokenTextSplitter::new(args.chunk_size, overlap, backend.split_tokenizer.clone())
                .map_err(|e| usage(format!("{e} (see --chunk-size)")))?;
        let reports = match &args.report_dir {
            Some(dir) => Some(BatchReports::create(dir, &backend)?),
            None => None,
        };
        let templates = CustomTemplates::read(&args.prompts)?;
        let progress = Arc::new(BatchProgress::new(!args.quiet, Some(todo.len() as u64)));
        let runner = Arc::new(Runner {
            args: args.clone(),
            backend,
            progress: progress.clone(),
            reports,
            splitter,
            templates,
        });
        // At most --jobs runs in flight, each on its own task (aborted if this is
        // dropped), their rows taken in case order.
        let mut window: Window<Result<Row>> = Window::new(args.jobs as usize, Order::Input);
        let mut todo = todo.into_iter();
        loop {
            while window.has_room() {
                let Some((i, mode)) = todo.next() else { break };
                let (runner, cases) = (Arc::clone(&runner), Arc::clone(&cases));
                window.spawn(async move { runner.row(&cases[i], mode).await }, |e| {
                    Err(anyhow!("a run was lost: {e}"))
                });
            }
            let Some(row) = window.next().await else {
                break;
            };
            append(row?, &mut rows)?;
            runs += 1;
            progress.line_done();
        }
        progress.clear();
        if let Some(n) = backend::cache_note(&runner.backend) {
            note(args.quiet, &n);
        }
    }
    if let Some(file) = &out {
        file.sync_all()
            .map_err(|e| anyhow!("cannot sync the rows: {e}"))?;
    }

    // In case order, each case's rows in the order they were made.
    rows.sort_by_key(|r| index.get(r.id.as_str()).copied().unwrap_or(usize::MAX));
    let totals = synthkit::eval::totals(&rows);
    let paired = synthkit::eval::paired(&rows);
    if args.json {
        let value = json!({"rows": rows, "totals": totals, "paired": paired});
        crate::output::write_json(&mut std::io::stdout().lock(), &value)?;
    } else {
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(synthkit::eval::table(&totals, &paired).as_bytes())?;
        stdout.flush()?;
    }
    if let Some(path) = &args.html {
        let page = html_page(path, &cases, &rows, &totals);
        std::fs::write(path, page)
            .map_err(|e| anyhow!("cannot write the page {}: {e}", path.display()))?;
        note(
            args.quiet,
            &format!("results written to {}", path.display()),
        );
    }
    note(
        args.quiet,
        &format!(
            "eval: {} cases, {} rows ({runs} new runs); {:.1} s",
            cases.len(),
            rows.len(),
            start.elapsed().as_secs_f64()
        ),
    );
    Ok(())
}

/// The page: report links made relative to the page's folder where they can be.
fn html_page(path: &Path, cases: &[Case], rows: &[Row], totals: &[Totals]) -> String {
    let page_dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .and_then(|p| p.canonicalize().ok());
    let rows: Vec<Row> = rows
        .iter()
        .cloned()
        .map(|mut r| {
            r.report = r.report.map(|rep| link(&rep, page_dir.as_deref()));
            r
        })
        .collect();
    let queries: Vec<(&str, &str)> = cases
        .iter()
        .map(|c| (c.id.as_str(), c.query.as_str()))
        .collect();
    synthkit_report::render_eval(&queries, &rows, totals)
}

/// `report` as a link from a page in `page_dir` (the current folder when `None`).
fn link(report: &str, page_dir: Option<&Path>) -> String {
    let full = Path::new(report).canonicalize();
    let base = match page_dir {
        Some(d) => Some(d.to_path_buf()),
        None => std::env::current_dir().ok(),
    };
    match (full, base) {
        (Ok(full), Some(base)) => full
            .strip_prefix(&base)
            .map(|rel| rel.display().to_string())
            .unwrap_or_else(|_| full.display().to_string()),
        _ => report.to_string(),
    }
}
