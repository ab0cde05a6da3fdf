//! `synthkit_rs.evaluate`: the judge-free scores of [`synthkit_frontend::eval`] from Python, on the
//! same cases and answer lines as `synthkit eval`, scored by the same code.
//!
//! The cases and answers come as a JSON-lines file's path or as a list of dicts (or of
//! JSON texts); every error names the case or answer (its line in a file, its number and
//! index in a list). Each synthesizer given runs on every case, `jobs` syntheses at a
//! time, through the library's [`synthkit_frontend::eval::run_case`] (its prompts, calls, tokens and,
//! when it cites, its citations recorded) with the GIL released; Ctrl-C cancels the model
//! calls in flight.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};
use synthkit::many::{Order, Window};
use synthkit_frontend::eval::{
    AnswerLine, Case, CaseError, CaseInput, Paired, RegexBudget, Row, Totals, nodes_text, paired,
    parse_answer_line, parse_case_within, run_case, score, table, totals,
};
use synthkit_frontend::retrieval::paths::PathsReader;

use crate::nodes::{from_json, to_json, type_name};
use crate::synthesizer::Synthesizer;
use crate::{InputError, SynthkitError, block_on, runtime};

/// The longest line of a cases or answers file (bytes), as `synthkit eval`'s.
const MAX_LINE_BYTES: usize = 64 << 20;

/// The scores of an evaluation: `rows` (one dict per case, mode and system), `totals`
/// (one dict per system and mode), and `table()` (what `synthkit eval` prints, also
/// `str(result)`).
#[pyclass(module = "synthkit_rs._synthkit", frozen)]
pub struct EvalResult {
    rows: Vec<Row>,
    totals: Vec<Totals>,
    paired: Vec<Paired>,
}

#[pymethods]
impl EvalResult {
    /// One dict per case, mode and system, in case order (`id`, `system`, `mode`,
    /// `answer`, `error`, `answerable`, `correct`, `f1`, `abstained`, `in_nodes`,
    /// `in_prompts`, `cite_precision`, `cite_recall`, `calls`, `prompt_tokens`,
    /// `completion_tokens`, `truncated_calls`, `wall_ms`, `report`, `tags`).
    #[getter]
    fn rows<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        as_list(py, self.rows.iter().map(serde_json::to_value))
    }

    /// One dict per system and mode, in the order each first appears (`system`, `mode`,
    /// `cases`, `correct`, `correct_rate`, `correct_interval` (its 95 % bootstrap interval,
    /// low and high), `answerable`, `answerable_correct`,
    /// `unanswerable`, `abstained_right`, `false_abstentions`, `errors`, `f1_mean`,
    /// `lost_in_retrieval`, `lost_in_packing`, `lost_in_synthesis`, `cite_precision`,
    /// `cite_recall`, `calls`, `prompt_tokens`, `completion_tokens`, `truncated_calls`,
    /// `wall_ms`).
    #[getter]
    fn totals<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        as_list(py, self.totals.iter().map(serde_json::to_value))
    }

    /// Every two systems in one mode, and every two modes of one system, on the cases both
    /// answered: one dict each (`a`, `b` as `system/mode`, `cases`, `both`, `only_a`,
    /// `only_b`, `neither`, and `p_value`, the exact sign test of `only_a` against
    /// `only_b`).
    #[getter]
    fn paired<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        as_list(py, self.paired.iter().map(serde_json::to_value))
    }

    /// `{"rows": [...], "totals": [...], "paired": [...]}`, as `synthkit eval --json`
    /// prints it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("rows", self.rows(py)?)?;
        d.set_item("totals", self.totals(py)?)?;
        d.set_item("paired", self.paired(py)?)?;
        Ok(d)
    }

    /// The totals as a plain-text table, one line per system and mode, with the headings
    /// of `synthkit eval`'s table, then one line per paired comparison.
    fn table(&self) -> String {
        table(&self.totals, &self.paired)
    }

    fn __str__(&self) -> String {
        self.table()
    }

    fn __repr__(&self) -> String {
        let groups: Vec<String> = self
            .totals
            .iter()
            .map(|t| format!("{}/{}: {}/{} correct", t.system, t.mode, t.correct, t.cases))
            .collect();
        format!(
            "EvalResult(rows={}, totals=[{}])",
            self.rows.len(),
            groups.join(", ")
        )
    }
}

/// Values as a list of dicts (their JSON).
fn as_list<'py>(
    py: Python<'py>,
    values: impl Iterator<Item = serde_json::Result<serde_json::Value>>,
) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for value in values {
        let value =
            value.map_err(|e| SynthkitError::new_err(format!("cannot write the scores: {e}")))?;
        list.append(from_json(py, &value)?)?;
    }
    Ok(list)
}

/// Scores answers to a benchmark's cases without a judge, as `synthkit eval` does.
///
/// `cases`: a `CASES.jsonl` file's path, or a list of case dicts in the same shape
/// (`id`, `query`, `nodes` or `paths`, `top_k`, `answers`, `evidence`, `answerable`,
/// `tags`; or their JSON texts). `answers`: an `ANSWERS.jsonl` file's path, or a list of
/// answer dicts (`id`, `mode`, `answer`, and optionally `system`, `error`, `abstained`,
/// `calls`, `prompt_tokens`, `completion_tokens`, `truncated_calls`, `wall_ms`, `prompts`,
/// `citations`) that any system produced, e.g. a LlamaIndex query engine.
/// `synthesizers`: a dict `{name: Synthesizer}` or a list of Synthesizers (named by their
/// modes): each runs on every case with the GIL released, `jobs` syntheses in flight at
/// once (default one; above one they share the server, so a row's wall time includes
/// waiting for the others), and its answers are scored with their calls, tokens, prompts and, when it was built with
/// `citations=True`, the node ids it cites; `name` is the rows' `mode`. `system` names the
/// results' column of synthesizers' runs and of answers that name none.
///
/// A case's `paths` are read as `synthkit eval` reads them, under the cases file's folder
/// or `paths_root=DIR` (required when `cases` is a list), with `allow_paths_outside`,
/// `chunk_size`, `top_k` and `index_dir` as `synthesize_many` takes them; a case whose
/// files cannot be read is a row with its `error`. Returns an `EvalResult`:
/// `rows` and `totals` as lists of dicts, `table()` (also `str()`). Raises `InputError`
/// for a bad case or answer (naming its line, or its number and index in the list), a
/// repeated case id, an answer to an unknown case, or the same case, mode and system
/// scored twice; a failed synthesis is a row with its `error`, scored wrong.
#[pyfunction]
#[pyo3(signature = (cases, answers = None, *, synthesizers = None, system = "synthkit", jobs = 1, **paths))]
pub(crate) fn evaluate(
    py: Python<'_>,
    cases: &Bound<'_, PyAny>,
    answers: Option<&Bound<'_, PyAny>>,
    synthesizers: Option<&Bound<'_, PyAny>>,
    system: &str,
    jobs: usize,
    paths: Option<&Bound<'_, PyDict>>,
) -> PyResult<EvalResult> {
    let reader = paths_reader(cases, paths, "evaluate")?;
    let plan =
        Plan::read(py, cases, answers, synthesizers, system, jobs, false)?.reading(reader)?;
    let runs = plan.runs();
    let lines = block_on(py, runs.run())?;
    plan.finish(lines)
}

/// Like `evaluate`, as an awaitable (asyncio): the synthesizers' runs go on while the
/// event loop does other work; cancelling the awaiting task cancels the model calls in
/// flight.
#[pyfunction]
#[pyo3(signature = (cases, answers = None, *, synthesizers = None, system = "synthkit", jobs = 1, **paths))]
pub(crate) fn aevaluate<'py>(
    py: Python<'py>,
    cases: &Bound<'py, PyAny>,
    answers: Option<&Bound<'py, PyAny>>,
    synthesizers: Option<&Bound<'py, PyAny>>,
    system: &str,
    jobs: usize,
    paths: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyAny>> {
    let reader = paths_reader(cases, paths, "aevaluate")?;
    let plan = Plan::read(py, cases, answers, synthesizers, system, jobs, true)?.reading(reader)?;
    runtime()?;
    pyo3_async_runtimes::tokio::future_into_py(py, async move {
        let lines = plan.runs().run().await?;
        plan.finish(lines)
    })
}

/// How the cases' `paths` are read: as `paths` (the keyword arguments) say, under the
/// cases file's folder unless `paths_root` names another; `None` for a list of cases
/// without `paths_root`.
fn paths_reader(
    cases: &Bound<'_, PyAny>,
    paths: Option<&Bound<'_, PyDict>>,
    function: &str,
) -> PyResult<Option<PathsReader>> {
    let folder = as_path(cases)?.map(|file| match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    });
    crate::paths::reader_of(paths, function, folder)
}

/// The most runs `jobs` may put in flight (as `synthkit eval --jobs`).
const MAX_JOBS: usize = 256;

/// What an evaluation scores: the cases, the answers given, and the synthesizers to run.
struct Plan {
    cases: Arc<Vec<Case>>,
    system: String,
    /// The answers given, each with where it came from.
    answers: Vec<(String, AnswerLine)>,
    /// Each synthesizer's name (the rows' mode), its synthesizer and whether it cites.
    runners: Arc<Vec<(String, synthkit::Synthesizer, bool)>>,
    jobs: usize,
    /// How cases' `paths` are read (`None`: a case with `paths` is not run).
    reader: Option<PathsReader>,
}

/// The synthesizers' runs of a plan, owned so they can move into a task.
struct Runs {
    cases: Arc<Vec<Case>>,
    runners: Arc<Vec<(String, synthkit::Synthesizer, bool)>>,
    jobs: usize,
    reader: Option<PathsReader>,
}

/// A run's answer line, with the text of the nodes it was given (what its answer is
/// scored against) when they were read from the case's `paths`.
type RunLine = (usize, AnswerLine, Option<String>);

impl Plan {
    /// Reads and checks the arguments; `asyncio`: the runs will be awaited from a
    /// coroutine (a Python `llm` is then called the asyncio way).
    fn read(
        py: Python<'_>,
        cases: &Bound<'_, PyAny>,
        answers: Option<&Bound<'_, PyAny>>,
        synthesizers: Option<&Bound<'_, PyAny>>,
        system: &str,
        jobs: usize,
        asyncio: bool,
    ) -> PyResult<Plan> {
        if system.trim().is_empty() {
            return Err(InputError::new_err(
                "system must name the system (the results' column), not be empty",
            ));
        }
        if !(1..=MAX_JOBS).contains(&jobs) {
            return Err(InputError::new_err(format!(
                "jobs must be 1 to {MAX_JOBS} (runs in flight at once), got {jobs}"
            )));
        }
        let cases = read_cases(cases)?;
        let answers = {
            let index = case_index(&cases);
            match answers.filter(|a| !a.is_none()) {
                Some(a) => read_answers(a, &index)?,
                None => Vec::new(),
            }
        };
        let named = match synthesizers.filter(|s| !s.is_none()) {
            Some(s) => read_synthesizers(s)?,
            None => Vec::new(),
        };
        if answers.is_empty() && named.is_empty() {
            return Err(InputError::new_err(
                "nothing to score: give answers (a path or a list of answer dicts) and/or synthesizers",
            ));
        }
        let mut runners = Vec::new();
        for (label, synth) in &named {
            let synth = synth.bind(py).borrow();
            runners.push((
                label.clone(),
                synth.for_caller(py, asyncio)?,
                synth.citations(),
            ));
        }
        Ok(Plan {
            cases: Arc::new(cases),
            system: system.to_string(),
            answers,
            runners: Arc::new(runners),
            jobs,
            reader: None,
        })
    }

    /// The plan with its cases' `paths` read by `reader`; an error when a case to run
    /// gives `paths` and there is no reader.
    fn reading(self, reader: Option<PathsReader>) -> PyResult<Plan> {
        if !self.runners.is_empty()
            && reader.is_none()
            && let Some((n, case)) = self
                .cases
                .iter()
                .enumerate()
                .find(|(_, c)| c.nodes().is_none())
        {
            return Err(InputError::new_err(format!(
                "case {} (`{}`) gives `paths`: give paths_root= (the folder they are read under; a cases file's own folder is the default) or the case's `nodes`",
                n + 1,
                case.id
            )));
        }
        Ok(Plan { reader, ..self })
    }

    fn runs(&self) -> Runs {
        Runs {
            cases: self.cases.clone(),
            runners: self.runners.clone(),
            jobs: self.jobs,
            reader: self.reader.clone(),
        }
    }

    /// Scores the answers given and the runs' lines (each with its case's index).
    fn finish(&self, lines: Vec<RunLine>) -> PyResult<EvalResult> {
        let cases = &self.cases;
        let index = case_index(cases);
        let mut rows: Vec<Row> = Vec::new();
        let mut seen: HashMap<(String, String, String), String> = HashMap::new();
        let mut add = |row: Row, from: String| -> PyResult<()> {
            let key = (row.id.clone(), row.mode.clone(), row.system.clone());
            if let Some(earlier) = seen.get(&key) {
                return Err(InputError::new_err(format!(
                    "{from} answers case `{}` in mode `{}` for system `{}`, as {earlier} does: each case, mode and system is scored once (name the systems or modes apart)",
                    key.0, key.1, key.2
                )));
            }
            seen.insert(key, from);
            rows.push(row);
            Ok(())
        };
        for (from, line) in &self.answers {
            let case = &cases[index.get(line.id.as_str()).copied().unwrap_or_default()];
            let nodes = case.nodes().map(nodes_text);
            add(
                score(case, &self.system, line, nodes.as_deref()),
                from.clone(),
            )?;
        }
        for (i, line, read) in lines {
            let case = &cases[i];
            let text = read.or_else(|| case.nodes().map(nodes_text));
            let from = format!("synthesizer `{}`", line.mode);
            add(score(case, &self.system, &line, text.as_deref()), from)?;
        }
        // In case order, each case's rows in the order they were made (as `synthkit eval`).
        rows.sort_by_key(|r| index.get(r.id.as_str()).copied().unwrap_or(usize::MAX));
        let totals = totals(&rows);
        let paired = paired(&rows);
        Ok(EvalResult {
            rows,
            totals,
            paired,
        })
    }
}

impl Runs {
    /// Every synthesizer on every case in the library's window of runs (at most `jobs`
    /// in flight, each on its own task, all aborted when the evaluation is dropped), the
    /// lines in case order (each case's in the synthesizers' order), each with its case's
    /// index. A run whose task is lost is a line with its error, scored wrong.
    async fn run(self) -> PyResult<Vec<RunLine>> {
        let Runs {
            cases,
            runners,
            jobs,
            reader,
        } = self;
        let mut todo = (0..cases.len()).flat_map(|i| (0..runners.len()).map(move |r| (i, r)));
        let mut window = Window::new(jobs, Order::Input);
        let mut out = Vec::with_capacity(cases.len() * runners.len());
        loop {
            while window.has_room() {
                let Some((i, r)) = todo.next() else { break };
                let case = cases[i].clone();
                let (label, synth, cite) = runners[r].clone();
                let lost = AnswerLine::new(case.id.clone(), label.clone(), "");
                let reader = reader.clone();
                window.spawn(
                    async move {
                        let (nodes, read) = match case_nodes(&case, reader.as_ref()).await {
                            Ok(nodes) => nodes,
                            Err(e) => {
                                let mut line = AnswerLine::new(case.id.clone(), label, "");
                                line.error = Some(e);
                                return (i, line, None);
                            }
                        };
                        let mut run = run_case(&synth, &case, nodes, cite).await;
                        run.line.mode = label;
                        (i, run.line, read)
                    },
                    move |e| {
                        let mut line = lost;
                        line.error = Some(format!("the run was lost: {e}"));
                        (i, line, None)
                    },
                );
            }
            match window.next().await {
                Some(line) => out.push(line),
                None => break,
            }
        }
        Ok(out)
    }
}

/// A case's nodes: its own, or its `paths` read by `reader` (on a blocking thread) with
/// their text, what the answer is scored against.
async fn case_nodes(
    case: &Case,
    reader: Option<&PathsReader>,
) -> Result<(Vec<synthkit::Node>, Option<String>), String> {
    match (&case.input, reader) {
        (CaseInput::Paths(paths), Some(reader)) => {
            let nodes = reader
                .read(
                    paths.clone(),
                    case.query.clone(),
                    case.top_k,
                    Arc::new(crate::paths::PythonLogging),
                )
                .await?;
            let text = nodes_text(&nodes);
            Ok((nodes, Some(text)))
        }
        _ => Ok((case.nodes().unwrap_or_default().to_vec(), None)),
    }
}

/// Each case's id and its index.
fn case_index(cases: &[Case]) -> HashMap<&str, usize> {
    cases
        .iter()
        .enumerate()
        .map(|(i, c)| (c.id.as_str(), i))
        .collect()
}

/// Where an item came from, for errors: a file's line, or a list's item.
enum Place<'a> {
    Line(&'a Path, usize),
    Item(&'a str, &'a str, usize),
}

impl std::fmt::Display for Place<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Place::Line(path, n) => write!(f, "{}: line {n}", path.display()),
            Place::Item(what, list, i) => write!(f, "{what} {} ({list}[{i}])", i + 1),
        }
    }
}

/// A file's path: a `str` or an `os.PathLike`; `None` for anything else.
fn as_path(value: &Bound<'_, PyAny>) -> PyResult<Option<PathBuf>> {
    if value.is_instance_of::<PyString>() || value.hasattr("__fspath__")? {
        return value
            .extract::<PathBuf>()
            .map(Some)
            .map_err(|e| InputError::new_err(format!("not a usable path: {e}")));
    }
    Ok(None)
}

/// The items of `value`: a file's lines (each with its place), or a list's items as JSON
/// text. `what`: `case` or `answer`; `list`: the argument's name.
fn items(value: &Bound<'_, PyAny>, what: &str, list: &str) -> PyResult<Items> {
    if let Some(path) = as_path(value)? {
        return Ok(Items::File(path.clone(), read_lines(&path, list)?));
    }
    if value.is_instance_of::<PyDict>() || value.is_instance_of::<PyBytes>() {
        return Err(InputError::new_err(format!(
            "{list} must be a JSON-lines file's path or a list of {what} dicts, not a single {}",
            type_name(value)
        )));
    }
    let iter = value.try_iter().map_err(|_| {
        InputError::new_err(format!(
            "{list} must be a JSON-lines file's path or a list of {what} dicts, got {}",
            type_name(value)
        ))
    })?;
    let mut out = Vec::new();
    for (i, item) in iter.enumerate() {
        let item = item?;
        let text = if let Ok(s) = item.cast::<PyString>() {
            s.to_cow()?.into_owned()
        } else if item.is_instance_of::<PyDict>() {
            to_json(&item, 0)?.to_string()
        } else {
            return Err(InputError::new_err(format!(
                "{}: must be a dict (or its JSON text), got {}",
                Place::Item(what, list, i),
                type_name(&item)
            )));
        };
        if text.trim().is_empty() {
            return Err(InputError::new_err(format!(
                "{}: is empty",
                Place::Item(what, list, i)
            )));
        }
        out.push(text);
    }
    Ok(Items::List(out))
}

/// A file's lines (1-based numbers), or a list's items.
enum Items {
    File(PathBuf, Vec<(usize, String)>),
    List(Vec<String>),
}

impl Items {
    /// Parses every item with `parse` (blank lines skipped): each with its place.
    fn parse<T>(
        &self,
        what: &str,
        list: &str,
        mut parse: impl FnMut(&str, usize) -> Result<Option<T>, CaseError>,
    ) -> PyResult<Vec<(String, T)>> {
        let error = |place: Place<'_>, e: CaseError| {
            let message = match e {
                CaseError::Invalid { message, .. } => message,
                other => other.to_string(),
            };
            InputError::new_err(format!("{place}: {message}"))
        };
        let mut out = Vec::new();
        match self {
            Items::File(path, lines) => {
                for (n, text) in lines {
                    let place = Place::Line(path, *n);
                    match parse(text, *n) {
                        Ok(Some(item)) => out.push((place.to_string(), item)),
                        Ok(None) => {}
                        Err(e) => return Err(error(place, e)),
                    }
                }
            }
            Items::List(texts) => {
                for (i, text) in texts.iter().enumerate() {
                    let place = Place::Item(what, list, i);
                    match parse(text, i + 1) {
                        Ok(Some(item)) => out.push((place.to_string(), item)),
                        Ok(None) => {}
                        Err(e) => return Err(error(place, e)),
                    }
                }
            }
        }
        Ok(out)
    }
}

/// The cases, with unique ids.
fn read_cases(value: &Bound<'_, PyAny>) -> PyResult<Vec<Case>> {
    // One budget for the answer regexes of all the cases.
    let mut budget = RegexBudget::default();
    let parsed = items(value, "case", "cases")?.parse("case", "cases", |text, n| {
        parse_case_within(text, n, &mut budget)
    })?;
    if parsed.is_empty() {
        return Err(InputError::new_err("no case given: cases is empty"));
    }
    let mut first: HashMap<&str, &str> = HashMap::new();
    for (place, case) in &parsed {
        if let Some(earlier) = first.insert(case.id.as_str(), place.as_str()) {
            return Err(InputError::new_err(format!(
                "{place}: the id `{}` is already used by {earlier}",
                case.id
            )));
        }
    }
    Ok(parsed.into_iter().map(|(_, c)| c).collect())
}

/// The answer lines (each with its place), every one naming a case in `index`.
fn read_answers(
    value: &Bound<'_, PyAny>,
    index: &HashMap<&str, usize>,
) -> PyResult<Vec<(String, AnswerLine)>> {
    let parsed =
        items(value, "answer", "answers")?.parse("answer", "answers", parse_answer_line)?;
    for (place, line) in &parsed {
        if !index.contains_key(line.id.as_str()) {
            return Err(InputError::new_err(format!(
                "{place} names the case `{}`, which is not among the cases",
                line.id
            )));
        }
    }
    Ok(parsed)
}

/// The synthesizers to run, each with its name (the rows' mode): a dict of names to
/// synthesizers, or a list of synthesizers named by their modes.
fn read_synthesizers(value: &Bound<'_, PyAny>) -> PyResult<Vec<(String, Py<Synthesizer>)>> {
    let shape = "synthesizers must be a dict {name: Synthesizer} or a list of Synthesizers";
    let mut out: Vec<(String, Py<Synthesizer>)> = Vec::new();
    let synth = |v: &Bound<'_, PyAny>, at: &str| -> PyResult<Py<Synthesizer>> {
        v.cast::<Synthesizer>()
            .map(|s| s.clone().unbind())
            .map_err(|_| {
                InputError::new_err(format!(
                    "{at} must be a synthkit_rs.Synthesizer, got {}",
                    type_name(v)
                ))
            })
    };
    if let Ok(d) = value.cast::<PyDict>() {
        for (k, v) in d.iter() {
            let name = k
                .cast::<PyString>()
                .map_err(|_| InputError::new_err(format!("{shape}: its keys must be strings")))?
                .to_cow()?
                .into_owned();
            if name.trim().is_empty() {
                return Err(InputError::new_err(format!("{shape}: a name is empty")));
            }
            let s = synth(&v, &format!("synthesizers[{name:?}]"))?;
            out.push((name, s));
        }
        return Ok(out);
    }
    if value.is_instance_of::<PyString>() {
        return Err(InputError::new_err(shape));
    }
    let iter = value
        .try_iter()
        .map_err(|_| InputError::new_err(format!("{shape}, got {}", type_name(value))))?;
    let mut names = HashSet::new();
    for (i, v) in iter.enumerate() {
        let v = v?;
        let s = synth(&v, &format!("synthesizers[{i}]"))?;
        let name: String = v.getattr("mode")?.extract()?;
        if !names.insert(name.clone()) {
            return Err(InputError::new_err(format!(
                "synthesizers[{i}] is a second synthesizer in mode `{name}`: give a dict {{name: Synthesizer}} to name them apart"
            )));
        }
        out.push((name, s));
    }
    Ok(out)
}

/// A JSON-lines file's lines, each at most [`MAX_LINE_BYTES`], as UTF-8 text, with
/// their numbers (1-based).
fn read_lines(path: &Path, list: &str) -> PyResult<Vec<(usize, String)>> {
    let cannot = |e: std::io::Error| {
        InputError::new_err(format!(
            "cannot read the {list} file {}: {e}",
            path.display()
        ))
    };
    let file = std::fs::File::open(path).map_err(cannot)?;
    let mut reader = BufReader::new(file);
    let mut out = Vec::new();
    let mut number = 0usize;
    loop {
        number += 1;
        let mut buf = Vec::new();
        let n = (&mut reader)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(cannot)?;
        if n == 0 {
            break;
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
        } else if buf.len() > MAX_LINE_BYTES {
            return Err(InputError::new_err(format!(
                "{}: line {number} is longer than the limit of {MAX_LINE_BYTES} bytes",
                path.display()
            )));
        }
        let text = String::from_utf8(buf).map_err(|_| {
            InputError::new_err(format!(
                "{}: line {number} is not UTF-8 text",
                path.display()
            ))
        })?;
        out.push((number, text));
    }
    Ok(out)
}
