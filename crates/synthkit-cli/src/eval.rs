//! `synthkit eval CASES.jsonl`: measure the answers of synthkit's modes, or of any system's
//! answers file, on a benchmark of cases, with the judge-free scores of
//! [`synthkit_frontend::eval`].
//!
//! The cases are read whole first (every error names its line, a usage error). Then each
//! case runs in each `--modes` mode, `--jobs` syntheses at a time (default one), on one
//! model stack (limits, retries, cache), and each `--answers` line is scored (a line
//! without `system` is named after its file; two lines for one case, mode and system, or
//! a line named as synthkit's own runs, are refused). With `-o ROWS` each scored row is
//! appended as one JSON line as it is made, and the rows already there (same case id,
//! mode and system, and the same case and answers line: each row keeps their hashes) are
//! kept and not run again: a stopped evaluation resumes, and an edited case or answers
//! line is run or scored again. `paths` are read under `--paths-root`
//! ([`synthkit_frontend::retrieval::paths`]). The results: a table on standard output, or `--json`, and
//! `--html FILE`.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Result, anyhow};
use serde_json::json;
use synthkit::many::{Order, Window};
use synthkit::{Node, ResponseMode, Synthesizer};
use synthkit_frontend::eval::{
    AnswerLine, Case, CaseInput, RegexBudget, Row, nodes_text, parse_answer_line,
    parse_case_within, run_case,
};
use synthkit_frontend::retrieval::paths::{PathsReader, PathsRoot};
use synthkit_report::RunRecord;

use crate::backend::{self, Backend};
use crate::error::usage;
use crate::observe::Fanout;
use crate::output::{Stderr, note, warn};
use crate::pages::{BatchReports, batch_report_path};
use crate::progress::BatchProgress;
use crate::settings::eval::{CaseRuns, EvalRun};
use synthkit_frontend::batch::{self as batch_io, LineReader, RawLine};

/// The longest line of a cases or answers file (bytes).
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// Reads a JSON-lines file with `parse` (each line's number given), a usage error naming
/// the file and line when a line is bad; each item with its line number.
fn read_lines<T>(
    path: &Path,
    what: &str,
    mut parse: impl FnMut(&str, usize) -> Result<Option<T>, synthkit_frontend::eval::CaseError>,
) -> Result<Vec<(usize, T)>> {
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
            Ok(Some(item)) => out.push((number, item)),
            Ok(None) => {}
            Err(e) => return Err(usage(format!("{}: {e}", path.display()))),
        }
    }
    Ok(out)
}

/// The cases (their answer regexes bounded together: [`RegexBudget`]), with unique ids
/// and `paths` that exist under `root`.
fn read_cases(path: &Path, root: &PathsRoot) -> Result<Vec<Case>> {
    let mut budget = RegexBudget::default();
    let cases = read_lines(path, "cases", |text, number| {
        parse_case_within(text, number, &mut budget)
    })?;
    let mut first: HashMap<&str, usize> = HashMap::new();
    for (line, case) in &cases {
        if let Some(earlier) = first.insert(case.id.as_str(), *line) {
            return Err(usage(format!(
                "{}: line {line}: the id `{}` is already used by line {earlier}",
                path.display(),
                case.id
            )));
        }
        if let CaseInput::Paths(paths) = &case.input {
            for p in paths {
                root.resolve(p)
                    .map_err(|e| usage(format!("{}: line {line}: {e}", path.display())))?;
            }
        }
    }
    if cases.is_empty() {
        return Err(usage(format!("{}: no case in the file", path.display())));
    }
    Ok(cases.into_iter().map(|(_, case)| case).collect())
}

/// The lines of one `--answers` file, each with its line number, and the system a line
/// without `system` is named (the file's name without its extension).
struct AnswerFile {
    path: PathBuf,
    lines: Vec<(usize, AnswerLine)>,
}

/// The system of an answers file's lines that name none: its file name without the
/// extension (`runs/ref.jsonl`: `ref`), so that they never take synthkit's name.
fn file_system(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "answers".to_string())
}

/// Reads the `--answers` files: every line names a case of `index`, lines without
/// `system` get their file's name, and no two lines (in any of the files) answer one case
/// in one mode for one system, nor a line one that synthkit runs here (`system` in
/// `modes`).
fn read_answers(
    args: &EvalRun<'_>,
    index: &HashMap<&str, usize>,
    modes: &[ResponseMode],
) -> Result<Vec<AnswerFile>> {
    let mut files = Vec::new();
    let mut seen: HashMap<Key, (usize, usize)> = HashMap::new();
    for (f, path) in args.answers.iter().enumerate() {
        let default = file_system(path);
        let mut lines = read_lines(path, "answers", parse_answer_line)?;
        for (number, line) in &mut lines {
            if !index.contains_key(line.id.as_str()) {
                return Err(usage(format!(
                    "{}: line {number}: the answer names the case `{}`, which is not in {}",
                    path.display(),
                    line.id,
                    args.cases.display()
                )));
            }
            let system = line.system.get_or_insert_with(|| default.clone()).clone();
            if system == args.runs.system && modes.iter().any(|m| m.as_str() == line.mode) {
                return Err(usage(format!(
                    "{}: line {number}: the answer to `{}` in mode `{}` is named `{system}`, as \
                     synthkit's own runs are: give the line another `system` (a line without \
                     one is named after its file), or synthkit's runs another --system",
                    path.display(),
                    line.id,
                    line.mode
                )));
            }
            let key = (line.id.clone(), line.mode.clone(), system);
            if let Some((g, earlier)) = seen.insert(key, (f, *number)) {
                let other = args.answers.get(g).unwrap_or(path);
                return Err(usage(format!(
                    "{}: line {number}: the answer to `{}` in mode `{}` for the system `{}` is \
                     given twice ({} line {earlier} has one): each case, mode and system is \
                     scored once; remove one, or name their systems apart",
                    path.display(),
                    line.id,
                    line.mode,
                    line.system.as_deref().unwrap_or_default(),
                    other.display()
                )));
            }
        }
        files.push(AnswerFile {
            path: path.clone(),
            lines,
        });
    }
    Ok(files)
}

/// The key of a row: case id, mode and system.
type Key = (String, String, String);

fn key(row: &Row) -> Key {
    (row.id.clone(), row.mode.clone(), row.system.clone())
}

/// The key of the row an answers line (its `system` filled in) is scored into.
fn answer_key(line: &AnswerLine) -> Key {
    (
        line.id.clone(),
        line.mode.clone(),
        line.system.clone().unwrap_or_default(),
    )
}

/// The rows file: opened for appending (a cut last line removed), with its rows.
fn open_rows(path: &Path) -> Result<(std::fs::File, Vec<Row>)> {
    let (file, _) = crate::output::open_results(path)?;
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("cannot read the rows {}: {e}", path.display())))?;
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        // An editor's byte-order mark before a line is not part of it.
        let line = line.strip_prefix('\u{feff}').unwrap_or(line);
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
    runs: CaseRuns,
    backend: Backend,
    progress: Arc<BatchProgress>,
    reports: Option<BatchReports>,
    /// How `paths` cases are read.
    paths: PathsReader,
}

impl Runner {
    /// A case's nodes: its own, or its paths read (on a blocking thread, never a
    /// runtime's), split and ranked as `ask` does, under the root.
    async fn nodes(&self, case: &Case) -> std::result::Result<Vec<Node>, String> {
        let paths = match &case.input {
            CaseInput::Nodes(nodes) => return Ok(nodes.clone()),
            CaseInput::Paths(paths) => paths.clone(),
            _ => return Err("this kind of case input is not supported".into()),
        };
        self.paths
            .read(paths, case.query.clone(), case.top_k, Arc::new(Stderr))
            .await
    }

    /// The synthesizer of one run, observed by the progress and `recorder`.
    fn synthesizer(
        &self,
        mode: ResponseMode,
        nodes: &[Node],
    ) -> Result<(Synthesizer, Option<Arc<synthkit::steps::StepRecorder>>)> {
        let checks = self.runs.checks.for_backend(self.backend.backend);
        // A case none of whose chunks is relevant (no nodes) is answered as every front
        // end answers it (the checks set it).
        let options = self.runs.synthesis.options(
            &self.backend,
            &self.backend.model().info(),
            mode,
            self.runs.templates.list(),
            &checks,
        )?;
        let builder = options.apply(Synthesizer::builder(self.backend.model()));
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
        Ok(match self.nodes(case).await {
            Ok(nodes) => {
                let (line, report) = self.run(case, mode, &nodes).await?;
                let text = nodes_text(&nodes);
                let mut row =
                    synthkit_frontend::eval::score(case, &self.runs.system, &line, Some(&text));
                row.report = report;
                let unknown =
                    row.check_evidence(&case.evidence, nodes.iter().map(|n| n.id.as_str()));
                if !unknown.is_empty() && matches!(case.input, CaseInput::Paths(_)) {
                    warn(&format!(
                        "case `{}`: its evidence {} names no node read from its `paths` (their \
                         ids are PATH#N, PATH as written in the case)",
                        case.id,
                        unknown.join(", ")
                    ));
                }
                row
            }
            Err(e) => {
                let mut line = AnswerLine::new(case.id.clone(), mode.as_str(), "");
                line.error = Some(format!("cannot read the case's paths: {e}"));
                synthkit_frontend::eval::score(case, &self.runs.system, &line, None)
            }
        })
    }

    /// Runs `case` in `mode` over `nodes` ([`run_case`]: the prompts kept up to
    /// [`synthkit_frontend::eval::DEFAULT_MAX_PROMPT_BYTES`], past which `in_prompts` is unknown):
    /// its answer line and report.
    async fn run(
        &self,
        case: &Case,
        mode: ResponseMode,
        nodes: &[Node],
    ) -> Result<(AnswerLine, Option<String>)> {
        let (synth, recorder) = self.synthesizer(mode, nodes)?;
        let run = run_case(&synth, case, nodes.to_vec(), self.runs.cites).await;
        let (line, outcome) = (run.line, run.outcome);
        let report = match (&self.reports, &recorder, &self.runs.report_dir) {
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
pub async fn run(args: EvalRun<'_>) -> Result<()> {
    let start = Instant::now();
    let root = Arc::new(PathsRoot::for_input(
        &args.cases,
        args.paths.paths_root.as_deref(),
        args.paths.allow_paths_outside,
    )?);
    // Shared with the runs' tasks, never copied.
    let cases = Arc::new(read_cases(&args.cases, &root)?);
    let index: HashMap<&str, usize> = cases
        .iter()
        .enumerate()
        .map(|(i, c)| (c.id.as_str(), i))
        .collect();
    let modes = &args.modes;
    let answer_files = read_answers(&args, &index, modes)?;

    let (mut out, mut rows) = match &args.rows {
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
    // A row scored on another version of its case (edited since) is stale: run or scored
    // again. Rows written before the hashes were kept are trusted as they are.
    let (mut stale, mut unhashed) = (0usize, 0usize);
    rows.retain(|r| {
        let case = index.get(r.id.as_str()).and_then(|&i| cases.get(i));
        match (&r.case_sha256, case) {
            (Some(hash), Some(case)) if *hash != case.sha256 => {
                stale += 1;
                false
            }
            (None, _) => {
                unhashed += 1;
                true
            }
            _ => true,
        }
    });
    if stale > 0 {
        note(
            args.quiet,
            &format!(
                "{stale} rows of the output were scored on an earlier version of their case \
                 (edited since): run or scored again (--cache FILE spares a run's calls)"
            ),
        );
    }
    if unhashed > 0 {
        note(
            args.quiet,
            &format!(
                "{unhashed} rows of the output were written before rows kept their case's \
                 hash: trusted as they are (remove them from the output to run them again)"
            ),
        );
    }
    // synthkit's own failed runs (an outage, a timeout) are run again, unless told not to.
    if args.retry_failed {
        let before = rows.len();
        rows.retain(|r| {
            !(r.error.is_some()
                && r.system == args.runs.system
                && r.answer_sha256.is_none()
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
    // An answers line named as synthkit's own runs already in the output would replace
    // one of them.
    let own: HashSet<Key> = rows
        .iter()
        .filter(|r| r.system == args.runs.system && r.answer_sha256.is_none())
        .map(key)
        .collect();
    for file in &answer_files {
        for (number, line) in &file.lines {
            let k = answer_key(line);
            if own.contains(&k) {
                return Err(usage(format!(
                    "{}: line {number}: the answer to `{}` in mode `{}` is named `{}`, as \
                     synthkit's own run of it in {}: give the line another `system`",
                    file.path.display(),
                    line.id,
                    line.mode,
                    k.2,
                    args.rows
                        .as_deref()
                        .unwrap_or(Path::new("the output"))
                        .display()
                )));
            }
        }
    }
    // Each key, and the answers line its row scored (`None`: a run made here).
    let mut done: HashMap<Key, Option<String>> = rows
        .iter()
        .map(|r| (key(r), r.answer_sha256.clone()))
        .collect();
    if !rows.is_empty() {
        note(
            args.quiet,
            &format!("resuming: {} rows already scored", rows.len()),
        );
    }
    // Every system's rows priced alike (those resumed from the output too).
    let prices = args.prices;
    let mut append = |mut row: Row, rows: &mut Vec<Row>| -> Result<()> {
        if let Some(p) = &prices {
            row.price(p);
        }
        if let (Some(file), Some(path)) = (out.as_mut(), &args.rows) {
            let text = serde_json::to_string(&row)
                .map_err(|e| anyhow!("cannot write a row as JSON: {e}"))?;
            batch_io::append_line(file, text)
                .map_err(|e| anyhow!("cannot write to {}: {e}", path.display()))?;
        }
        rows.push(row);
        Ok(())
    };

    // Answers produced elsewhere: a line already scored as it is now is kept; a new or
    // changed line is scored (its new row replaces the old).
    let mut fresh = Vec::new();
    let mut replaced: HashSet<Key> = HashSet::new();
    for file in answer_files {
        let (mut scored, mut changed) = (0usize, 0usize);
        for (_, line) in file.lines {
            let Some(&i) = index.get(line.id.as_str()) else {
                continue;
            };
            let k = answer_key(&line);
            match done.get(&k) {
                Some(hash) if *hash == line.sha256 => continue,
                Some(_) => {
                    changed += 1;
                    replaced.insert(k.clone());
                }
                None => {}
            }
            let case = &cases[i];
            let nodes = case.nodes().map(nodes_text);
            let row =
                synthkit_frontend::eval::score(case, &args.runs.system, &line, nodes.as_deref());
            done.insert(k, line.sha256.clone());
            append(row, &mut fresh)?;
            scored += 1;
        }
        let changed = if changed > 0 {
            format!(" ({changed} changed since they were scored)")
        } else {
            String::new()
        };
        note(
            args.quiet,
            &format!(
                "scored {scored} new answers of {}{changed}",
                file.path.display()
            ),
        );
    }
    rows.retain(|r| !replaced.contains(&key(r)));
    rows.extend(fresh);

    // synthkit's own runs.
    let todo: Vec<(usize, ResponseMode)> = cases
        .iter()
        .enumerate()
        .flat_map(|(i, c)| modes.iter().map(move |m| (i, *m, c)))
        .filter(|(_, m, c)| {
            !done.contains_key(&(
                c.id.clone(),
                m.as_str().to_string(),
                args.runs.system.clone(),
            ))
        })
        .map(|(i, m, _)| (i, m))
        .collect();
    let mut runs = 0usize;
    if !todo.is_empty() {
        let backend = backend::connect_with(args.stack).await?;
        let paths = PathsReader::new(
            &args.paths.reading(),
            Arc::clone(&root),
            backend.split_tokenizer.clone(),
        )?;
        let reports = match &args.runs.report_dir {
            Some(dir) => Some(BatchReports::create(dir, &backend)?),
            None => None,
        };
        let progress = Arc::new(BatchProgress::new(!args.quiet, Some(todo.len() as u64)));
        let jobs = args.jobs;
        let runner = Arc::new(Runner {
            runs: args.runs.clone(),
            backend,
            progress: progress.clone(),
            reports,
            paths,
        });
        // At most --jobs runs in flight, each on its own task (aborted if this is
        // dropped), their rows taken in case order.
        let mut window: Window<Result<Row>> = Window::new(jobs, Order::Input);
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
    if let Some(p) = &prices {
        rows.iter_mut().for_each(|r| r.price(p));
    }
    let totals = synthkit_frontend::eval::totals(&rows);
    let paired = synthkit_frontend::eval::paired(&rows);
    if args.json {
        let value = json!({"rows": rows, "totals": totals, "paired": paired});
        crate::output::write_json(&mut std::io::stdout().lock(), &value)?;
    } else {
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(synthkit_frontend::eval::table(&totals, &paired).as_bytes())?;
        stdout.flush()?;
    }
    if let Some(path) = &args.html {
        let page = crate::pages::eval_page(path, &cases, &rows, &totals);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_files_name_their_lines_after_themselves() {
        assert_eq!(file_system(Path::new("runs/ref.jsonl")), "ref");
        assert_eq!(file_system(Path::new("llamaindex")), "llamaindex");
        assert_eq!(file_system(Path::new("/")), "answers");
    }
}
