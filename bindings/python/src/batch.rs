//! `BatchFiles`: a batch's input and output files as `synthkit batch` reads and writes
//! them, for drivers written in Python (the Ray recipe, `examples/ray_batch.py`): the
//! library's one behaviour ([`synthkit_frontend::batch`]), not a copy of it.
//!
//! Opening reads OUT back (a cut last line removed; the last line of an id wins) and then
//! the whole input once: ids (a line's `id`, else its line number), duplicate ids refused
//! naming both lines, and what a resume does with each line (kept, retried, changed,
//! new). `pending()` then reads the input again and gives the lines to run; `append`
//! writes one result line in one write; `finish` compacts OUT to one line per id.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::Value;
use synthkit::ResponseMode;
use synthkit_frontend::batch::{
    self, Existing, HashDefaults, LineReader, Parsed, SeenIds, Verdict, line_id, parse_line,
};

use crate::nodes::from_json;
use crate::{InputError, SynthkitError};

/// The default `max_line_bytes`: `synthkit batch`'s `--max-line-bytes` (10 MiB).
const DEFAULT_MAX_LINE_BYTES: usize = 10 << 20;

/// What a resume does with the input's lines, counted when the files are opened.
#[derive(Default)]
struct Survey {
    kept: usize,
    kept_errors: BTreeMap<String, usize>,
    retry: BTreeMap<String, usize>,
    changed: usize,
    new: usize,
}

/// A batch's input (JSON lines of requests) and output (JSON lines of results), read and
/// written as `synthkit batch` does.
///
/// `BatchFiles(input, output, mode=None, max_prompt_tokens=None, retry_failed=True,
/// max_line_bytes=10 MiB)`: `mode` and `max_prompt_tokens` are the defaults of the lines
/// that set neither (they count in each line's request hash, as `--mode` and
/// `--max-prompt-tokens` do); `retry_failed=False` keeps transient error lines, as
/// `--no-retry-failed` does. Raises `InputError` when two lines share an id or a file
/// cannot be read.
#[pyclass(module = "synthkit_rs._synthkit")]
pub struct BatchFiles {
    input: PathBuf,
    output: PathBuf,
    out: Option<File>,
    existing: Arc<Existing>,
    defaults: HashDefaults,
    retry: bool,
    max_line: usize,
    survey: Survey,
}

/// An `InputError` for `what` on `path`.
fn io_error(what: &str, path: &std::path::Path, e: &std::io::Error) -> PyErr {
    InputError::new_err(format!("cannot {what} {}: {e}", path.display()))
}

#[pymethods]
impl BatchFiles {
    #[new]
    #[pyo3(signature = (input, output, mode = None, max_prompt_tokens = None, retry_failed = true, max_line_bytes = DEFAULT_MAX_LINE_BYTES))]
    fn new(
        py: Python<'_>,
        input: PathBuf,
        output: PathBuf,
        mode: Option<&str>,
        max_prompt_tokens: Option<usize>,
        retry_failed: bool,
        max_line_bytes: usize,
    ) -> PyResult<Self> {
        let mode = mode
            .map(|m| ResponseMode::from_str(m).map_err(|e| InputError::new_err(e.to_string())))
            .transpose()?;
        let defaults = HashDefaults::new(mode, max_prompt_tokens);
        py.detach(|| {
            let (out, existing) =
                batch::open_output(&output).map_err(|e| InputError::new_err(e.to_string()))?;
            let mut files = Self {
                input,
                output,
                out: Some(out),
                existing: Arc::new(existing),
                defaults,
                retry: retry_failed,
                max_line: max_line_bytes,
                survey: Survey::default(),
            };
            files.read_survey()?;
            Ok(files)
        })
    }

    /// What the opening found: `{"kept", "kept_errors": {kind: n}, "retry": {"kind:
    /// cause": n}, "changed", "new", "cut_bytes", "not_results": [line numbers of OUT]}`.
    #[getter]
    fn survey<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("kept", self.survey.kept)?;
        d.set_item("kept_errors", self.survey.kept_errors.clone())?;
        d.set_item("retry", self.survey.retry.clone())?;
        d.set_item("changed", self.survey.changed)?;
        d.set_item("new", self.survey.new)?;
        d.set_item("cut_bytes", self.existing.cut)?;
        d.set_item("not_results", self.existing.not_results.clone())?;
        Ok(d)
    }

    /// The lines to run, read from the input again, in input order: dicts `{"number",
    /// "id", "request_sha256", "request"}` (the line's fields but `id`), or `{"number",
    /// "id", "request_sha256", "error": {"kind", "message"}}` for a line that cannot run
    /// (its error line, ready to write). Kept lines are left out.
    fn pending(&self) -> PyResult<Pending> {
        let file = File::open(&self.input).map_err(|e| io_error("read", &self.input, &e))?;
        Ok(Pending {
            reader: LineReader::new(BufReader::with_capacity(1 << 16, file), self.max_line),
            input: self.input.clone(),
            existing: Arc::clone(&self.existing),
            defaults: self.defaults,
            retry: self.retry,
            max_line: self.max_line,
        })
    }

    /// Appends one result line (a JSON object's text, without its newline) in one write.
    fn append(&mut self, py: Python<'_>, line: String) -> PyResult<()> {
        let out = self
            .out
            .as_mut()
            .ok_or_else(|| SynthkitError::new_err("the batch's output is finished"))?;
        let path = &self.output;
        py.detach(|| batch::append_line(out, line).map_err(|e| io_error("write to", path, &e)))
    }

    /// Syncs OUT and rewrites it to one line per id (each id's last line, where its first
    /// was); returns `{"lines", "errors": {kind: n}}`: what OUT holds now.
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = self.out.take();
        let path = self.output.clone();
        let compacted = py.detach(|| {
            if let Some(out) = out {
                out.sync_all().map_err(|e| io_error("sync", &path, &e))?;
            }
            batch::compact(&path).map_err(|e| io_error("rewrite", &path, &e))
        })?;
        let d = PyDict::new(py);
        d.set_item("lines", compacted.lines)?;
        d.set_item("errors", compacted.errors)?;
        Ok(d)
    }
}

impl BatchFiles {
    /// Reads the whole input once: duplicate ids refused, the resume's plan counted.
    fn read_survey(&mut self) -> PyResult<()> {
        let file = File::open(&self.input).map_err(|e| io_error("read", &self.input, &e))?;
        let mut reader = LineReader::new(BufReader::with_capacity(1 << 16, file), self.max_line);
        let mut seen = SeenIds::default();
        while let Some((number, raw)) = reader
            .next_line()
            .map_err(|e| io_error("read", &self.input, &e))?
        {
            let Some((id, hash)) = line_id(number, raw, self.max_line, self.defaults) else {
                continue;
            };
            seen.check(&id, number)
                .map_err(|e| InputError::new_err(e.to_string()))?;
            let key = batch::id_key(&id);
            match self.existing.verdict(&key, hash.as_deref(), self.retry) {
                Verdict::Keep(None) => self.survey.kept += 1,
                Verdict::Keep(Some(kind)) => {
                    self.survey.kept += 1;
                    *self.survey.kept_errors.entry(kind).or_default() += 1;
                }
                Verdict::Retry(why) => *self.survey.retry.entry(why).or_default() += 1,
                Verdict::Changed => self.survey.changed += 1,
                Verdict::New => self.survey.new += 1,
            }
        }
        Ok(())
    }
}

/// The iterator of [`BatchFiles::pending`].
#[pyclass(module = "synthkit_rs._synthkit")]
pub struct Pending {
    reader: LineReader<BufReader<File>>,
    input: PathBuf,
    existing: Arc<Existing>,
    defaults: HashDefaults,
    retry: bool,
    max_line: usize,
}

#[pymethods]
impl Pending {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        // Reading (and skipping kept lines, which may be many) runs without the GIL.
        let Some(next) = py.detach(|| self.next_pending())? else {
            return Ok(None);
        };
        let d = PyDict::new(py);
        d.set_item("number", next.number)?;
        d.set_item("id", from_json(py, &next.id)?)?;
        d.set_item("request_sha256", next.hash)?;
        d.set_item(next.kind, from_json(py, &next.value)?)?;
        Ok(Some(d))
    }
}

/// A line of the input to run (or its ready error line), before it becomes a dict.
struct NextLine {
    number: usize,
    id: Value,
    hash: Option<String>,
    kind: &'static str,
    value: Value,
}

impl Pending {
    /// The next line that is not kept, read from the input.
    fn next_pending(&mut self) -> PyResult<Option<NextLine>> {
        loop {
            let Some((number, raw)) = self
                .reader
                .next_line()
                .map_err(|e| io_error("read", &self.input, &e))?
            else {
                return Ok(None);
            };
            let text = match &raw {
                batch::RawLine::Text(t) => Some(t.clone()),
                _ => None,
            };
            let (id, item, hash) = match parse_line(number, raw, self.max_line, self.defaults) {
                Parsed::Blank => continue,
                Parsed::Bad(id, e, hash) => {
                    let error = serde_json::json!({"kind": e.kind, "message": e.message});
                    (id, ("error", error), hash)
                }
                Parsed::Request(id, _, hash) => {
                    // The line's own fields but `id`, as the synthesizer reads a request
                    // dict (the line parsed as a request already).
                    let mut fields = text
                        .as_deref()
                        .and_then(|t| {
                            serde_json::from_str::<serde_json::Map<String, Value>>(t).ok()
                        })
                        .unwrap_or_default();
                    fields.remove("id");
                    (id, ("request", Value::Object(fields)), Some(hash))
                }
            };
            let key = batch::id_key(&id);
            if let Verdict::Keep(_) = self.existing.verdict(&key, hash.as_deref(), self.retry) {
                continue;
            }
            return Ok(Some(NextLine {
                number,
                id,
                hash,
                kind: item.0,
                value: item.1,
            }));
        }
    }
}
