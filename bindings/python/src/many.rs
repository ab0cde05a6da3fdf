//! `Synthesizer.synthesize_many` and `asynthesize_many`: many syntheses on one model stack,
//! at most `jobs` at once, the results in input order.
//!
//! A request is a `(query, nodes)` pair, or a dict in the shape of the service's
//! `POST /v1/synthesize` body and of a `synthkit batch` input line
//! ([`synthkit_frontend::request::SynthesizeRequest`]: `query`, `nodes`, `mode`, `templates`,
//! `citations`, `citation_markers`, `output_schema`, `concurrency`, `system_prompt`, plus
//! an optional `id`). What a dict leaves out is the synthesizer's (its mode, templates,
//! system prompt, budget, citations); its `concurrency` is capped at the synthesizer's.
//! Nodes take every shape `synthesize` takes.
//!
//! A dict may name files and folders to read instead of `nodes` (`paths`, and `top_k`, as
//! a `synthkit batch` line does) when `paths_root=` says the folder they are read under
//! ([`crate::paths`]).
//!
//! A dict with `"plan": true` is planned, as the service plans it: its slot holds the plan
//! (`Synthesizer.plan`'s dict: the calls and prompt tokens by step and level) and no model
//! is called.
//!
//! The requests are read lazily from any iterable, one as a slot frees up, so a generator
//! is never held whole; a result waits only for the earlier ones still running, so at
//! most `jobs` finished results wait in Rust. A request that fails gets a
//! [`FailedRequest`] in its slot; an exception raised by the iterable itself, or a
//! `KeyboardInterrupt`, stops the whole call (and cancels the syntheses in flight).

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyIterator, PyList, PyString, PyTuple};
use serde_json::Value;
use synthkit::many::{Order, Window};
use synthkit::{Concurrency, SynthesisInput};
use synthkit_frontend::batch::take_paths;
use synthkit_frontend::request::{RequestDefaults, RequestError, SynthesizeRequest, error_kind};
use synthkit_frontend::retrieval::paths::PathsReader;

use crate::errors::to_py;
use crate::nodes::{from_json, nodes_from, to_json};
use crate::paths::{PythonLogging, reader_of};
use crate::response::Response;
use crate::synthesizer::Synthesizer;
use crate::truncation::TruncationPolicy;
use crate::{InputError, SynthkitError, block_on, runtime};

/// The most syntheses `jobs` may ask for at once.
const MAX_JOBS: usize = 4096;

/// A request that did not give a response: where it was, and why.
///
/// `kind` is the stable name `synthkit batch` and the service use (`invalid_request`,
/// `invalid_option`, `model_error`, `model_timeout`, `model_rate_limited`, `truncated`,
/// `schema_mismatch`, `synthesis_failed`); `message` says what to change; `error` is the
/// exception `synthesize` would have raised (an `InputError` or `ModelError`, with the
/// LLM's own exception as its `__cause__`).
#[pyclass(module = "synthkit_rs._synthkit", frozen, get_all)]
pub struct FailedRequest {
    /// The request's position in `requests` (0-based).
    index: usize,
    /// The dict request's `id`, else `None`.
    id: Py<PyAny>,
    /// The stable machine-readable name of the failure.
    kind: String,
    /// What went wrong.
    message: String,
    /// The exception `synthesize` would have raised.
    error: Py<PyAny>,
    /// Why sending the request again may succeed (`transport`, `timeout`,
    /// `rate_limited`, `server_error`), else `None`: `synthkit batch`'s
    /// `error.transient`.
    transient: Option<&'static str>,
}

#[pymethods]
impl FailedRequest {
    /// `{"kind", "message"}`, and `"transient"` when the failure may pass: the `error`
    /// object of a `synthkit batch` output line.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("kind", &self.kind)?;
        d.set_item("message", &self.message)?;
        if let Some(cause) = self.transient {
            d.set_item("transient", cause)?;
        }
        Ok(d)
    }

    fn __repr__(&self) -> String {
        format!(
            "FailedRequest(index={}, kind={:?}, message={:?})",
            self.index, self.kind, self.message
        )
    }
}

#[pymethods]
impl Response {
    /// The response as the service answers it and `synthkit batch` writes it (`text`,
    /// `structured`, `source_nodes`, `metadata`, `usage`, `truncation`, `citations`), as
    /// plain dicts and lists (`json.dumps` takes it).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let value = serde_json::to_value(self.inner())
            .map_err(|e| SynthkitError::new_err(format!("cannot write the response: {e}")))?;
        from_json(py, &value)
    }
}

#[pymethods]
impl Synthesizer {
    /// Answers every request of `requests` (an iterable of `(query, nodes)` pairs or
    /// request dicts), at most `jobs` at once, and returns a list in input order: a
    /// `Response`, or a `FailedRequest` where that request failed. Blocks with the GIL
    /// released; Ctrl-C cancels the model calls in flight. `paths_root=DIR` (with
    /// `allow_paths_outside`, `chunk_size`, `top_k`, `index_dir`) reads the `paths` a
    /// request dict names, as `synthkit batch` does.
    #[pyo3(signature = (requests, jobs = 4, **paths))]
    fn synthesize_many(
        &self,
        py: Python<'_>,
        requests: &Bound<'_, PyAny>,
        jobs: usize,
        paths: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyList>> {
        let reader = reader_of(paths, "synthesize_many", None)?;
        let run = Many::new(self, requests, jobs, false, reader)?;
        let outcomes = block_on(py, run.drive())?;
        warn_truncated(py, self.truncation_policy(), &outcomes)?;
        outcomes_to_list(py, outcomes)
    }

    /// Like `synthesize_many`, as an awaitable (asyncio). Cancelling the awaiting task
    /// cancels the syntheses in flight.
    #[pyo3(signature = (requests, jobs = 4, **paths))]
    fn asynthesize_many<'py>(
        &self,
        py: Python<'py>,
        requests: &Bound<'py, PyAny>,
        jobs: usize,
        paths: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let reader = reader_of(paths, "asynthesize_many", None)?;
        let run = Many::new(self, requests, jobs, true, reader)?;
        let policy = self.truncation_policy();
        runtime()?;
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            let outcomes = run.drive().await?;
            Python::attach(|py| {
                warn_truncated(py, policy, &outcomes)?;
                outcomes_to_list(py, outcomes)
            })
        })
    }
}

/// One `TruncationWarning` for the results of a batch whose answers hold cut replies.
fn warn_truncated(py: Python<'_>, policy: TruncationPolicy, outcomes: &[Outcome]) -> PyResult<()> {
    let cut = outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Answered(r) if r.usage.truncated_calls > 0))
        .count();
    policy.check_many(py, cut, outcomes.len())
}

/// One batch: the requests still to read, and how to run them.
struct Many {
    requests: Py<PyIterator>,
    base: synthkit::Synthesizer,
    defaults: RequestDefaults,
    /// The synthesizer's `citations=`, as a request's `citations`.
    citations: Value,
    jobs: usize,
    /// How requests' `paths` are read (`paths_root=`); `None`: they are refused.
    paths: Option<PathsReader>,
}

/// A request's result, before it becomes a Python object.
enum Outcome {
    Answered(Box<synthkit::Response>),
    /// A `"plan": true` request's plan.
    Planned(Box<synthkit::Plan>),
    Failed(Failure),
}

/// A failed request, before it becomes a [`FailedRequest`].
struct Failure {
    index: usize,
    id: Option<Value>,
    kind: &'static str,
    error: PyErr,
    transient: Option<&'static str>,
}

/// A read request, ready to run (or already failed).
enum Started {
    Run(synthkit::Synthesizer, SynthesisInput, Option<Value>),
    /// A `"plan": true` request: planned, never run.
    Plan(synthkit::Synthesizer, SynthesisInput, Option<Value>),
    /// A request whose `paths` are read first, then run or planned.
    Read(Box<ToRead>),
    Failed(Failure),
}

/// A request with `paths`: the files to read into its nodes, then its synthesis.
struct ToRead {
    synth: synthkit::Synthesizer,
    input: SynthesisInput,
    id: Option<Value>,
    paths: Vec<String>,
    top_k: Option<usize>,
    plan: bool,
    reader: PathsReader,
}

impl Many {
    fn new(
        synth: &Synthesizer,
        requests: &Bound<'_, PyAny>,
        jobs: usize,
        asyncio: bool,
        paths: Option<PathsReader>,
    ) -> PyResult<Self> {
        if !(1..=MAX_JOBS).contains(&jobs) {
            return Err(InputError::new_err(format!(
                "jobs must be between 1 and {MAX_JOBS}, got {jobs}"
            )));
        }
        if requests.is_instance_of::<PyString>() || requests.is_instance_of::<PyDict>() {
            return Err(InputError::new_err(
                "requests must be an iterable of requests ((query, nodes) pairs or dicts), not a single string or dict",
            ));
        }
        let iter = requests.try_iter().map_err(|_| {
            InputError::new_err("requests must be an iterable of (query, nodes) pairs or dicts")
        })?;
        let base = synth.for_caller(requests.py(), asyncio)?;
        let concurrency = match synth.concurrency() {
            0 => Concurrency::Unlimited,
            n => Concurrency::limit(n),
        };
        Ok(Self {
            requests: iter.unbind(),
            defaults: RequestDefaults {
                mode: base.mode(),
                concurrency,
                // The base synthesizer's budget already has its prompt limit.
                ..RequestDefaults::default()
            }
            .with_checks(&synth.checks),
            citations: synth.citations_value(),
            base,
            jobs,
            paths,
        })
    }

    /// Runs every request, `jobs` at a time (the library's window), and gives the
    /// outcomes in input order.
    async fn drive(self) -> PyResult<Vec<Outcome>> {
        let mut window = Window::new(self.jobs, Order::Input);
        let mut outcomes = Vec::new();
        let mut index = 0usize;
        let mut exhausted = false;
        loop {
            while !exhausted && window.has_room() {
                match Python::attach(|py| self.read(py, index))? {
                    None => exhausted = true,
                    Some(started) => {
                        start(&mut window, index, started);
                        index += 1;
                    }
                }
            }
            match window.next().await {
                Some(Done::Ready(outcome)) => outcomes.push(outcome),
                Some(Done::Planned(index, id, result)) => outcomes.push(match result {
                    Ok(plan) => Outcome::Planned(plan),
                    Err(e) => Outcome::Failed(failure(index, id, error_kind(&e), to_py(e))),
                }),
                Some(Done::Ran(index, id, result)) => outcomes.push(match result {
                    Ok(response) => Outcome::Answered(response),
                    Err(Lost::Synthesis(e)) => {
                        let transient = synthkit_frontend::batch::transient_cause(&e);
                        let mut f = failure(index, id, error_kind(&e), to_py(e));
                        f.transient = transient;
                        Outcome::Failed(f)
                    }
                    Err(Lost::Task(e)) => Outcome::Failed(failure(
                        index,
                        id,
                        "synthesis_failed",
                        SynthkitError::new_err(format!(
                            "requests[{index}]: the synthesis stopped: {e}"
                        )),
                    )),
                }),
                None => return Ok(outcomes),
            }
        }
    }

    /// Reads request `index`: `None` at the end; an error only when the iterable raised.
    fn read(&self, py: Python<'_>, index: usize) -> PyResult<Option<Started>> {
        let Some(item) = self.requests.bind(py).clone().next() else {
            return Ok(None);
        };
        let item = item?;
        let started = if let Ok(d) = item.cast::<PyDict>() {
            self.dict(d, index)
        } else if item.is_instance_of::<PyTuple>() || item.is_instance_of::<PyList>() {
            self.pair(&item, index)
        } else {
            let type_name = item
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default();
            Err(Box::new(failure(
                index,
                None,
                "invalid_request",
                InputError::new_err(format!(
                    "requests[{index}]: a request is a (query, nodes) pair or a dict, got {type_name}"
                )),
            )))
        };
        Ok(Some(started.unwrap_or_else(|f| Started::Failed(*f))))
    }

    /// A `(query, nodes)` pair, on the synthesizer's own settings.
    fn pair(&self, item: &Bound<'_, PyAny>, index: usize) -> Result<Started, Box<Failure>> {
        let invalid = |message: String| {
            Box::new(failure(
                index,
                None,
                "invalid_request",
                InputError::new_err(format!("requests[{index}]: {message}")),
            ))
        };
        if item.len().ok() != Some(2) {
            return Err(invalid("a pair is (query, nodes)".into()));
        }
        let query: String = item
            .get_item(0)
            .and_then(|q| q.extract())
            .map_err(|_| invalid("the query must be a string".into()))?;
        let nodes = item
            .get_item(1)
            .and_then(|n| nodes_from(&n))
            .map_err(|e| invalid(message_of(item.py(), &e)))?;
        Ok(Started::Run(
            self.base.clone(),
            SynthesisInput::new(query, nodes),
            None,
        ))
    }

    /// A request dict: its options over the synthesizer's.
    fn dict(&self, d: &Bound<'_, PyDict>, index: usize) -> Result<Started, Box<Failure>> {
        let py = d.py();
        let id = d
            .get_item("id")
            .ok()
            .flatten()
            .and_then(|v| to_json(&v, 0).ok());
        let invalid = |message: String| {
            Box::new(failure(
                index,
                id.clone(),
                "invalid_request",
                InputError::new_err(format!("requests[{index}]: {message}")),
            ))
        };
        let mut body = serde_json::Map::new();
        let mut nodes = Vec::new();
        for (key, value) in d.iter() {
            let key: String = key
                .extract()
                .map_err(|_| invalid("request keys must be strings".into()))?;
            match key.as_str() {
                "id" => {}
                "nodes" => {
                    nodes = nodes_from(&value).map_err(|e| invalid(message_of(py, &e)))?;
                }
                _ => {
                    let json = to_json(&value, 0).map_err(|e| invalid(message_of(py, &e)))?;
                    body.insert(key, json);
                }
            }
        }
        let has_nodes = d.contains("nodes").unwrap_or(false);
        let (paths, top_k) = take_paths(&mut body, has_nodes).map_err(|why| invalid(why.into()))?;
        let reader = match (&paths, &self.paths) {
            (Some(_), None) => {
                return Err(invalid(
                    "`paths` names files to read: give synthesize_many(..., paths_root=DIR), \
                     the folder they are read under, or give `nodes`"
                        .into(),
                ));
            }
            (_, reader) => reader.clone(),
        };
        body.entry("citations")
            .or_insert_with(|| self.citations.clone());
        let request: SynthesizeRequest =
            serde_json::from_value(Value::Object(body)).map_err(|e| invalid(e.to_string()))?;
        let plan = request.plan;
        let prepared = request
            .prepare_from(&self.base, self.defaults.clone())
            .map_err(|e| {
                let kind = e.kind();
                let error = match e {
                    RequestError::Options(e) => to_py(e),
                    other => InputError::new_err(other.to_string()),
                };
                Box::new(failure(index, id.clone(), kind, prefixed(py, index, error)))
            })?;
        let mut input = prepared.input;
        input.nodes = nodes;
        if let (Some(paths), Some(reader)) = (paths, reader) {
            return Ok(Started::Read(Box::new(ToRead {
                synth: prepared.synthesizer,
                input,
                id,
                paths,
                top_k,
                plan,
                reader,
            })));
        }
        Ok(if plan {
            Started::Plan(prepared.synthesizer, input, id)
        } else {
            Started::Run(prepared.synthesizer, input, id)
        })
    }
}

/// What the window gives back: a request that failed before it ran, or one that ran (its
/// index and id, and its response or why there is none). Errors become Python exceptions
/// on the driving task, not on the synthesis's.
enum Done {
    Ready(Outcome),
    Ran(usize, Option<Value>, Result<Box<synthkit::Response>, Lost>),
    Planned(
        usize,
        Option<Value>,
        Result<Box<synthkit::Plan>, synthkit::SynthError>,
    ),
}

/// Why a request that ran has no response.
enum Lost {
    /// The synthesis failed.
    Synthesis(synthkit::SynthError),
    /// Its task panicked or was aborted.
    Task(synthkit::SynthError),
}

/// Starts one request in `window`: its synthesis on its own task (so that a batch uses
/// every worker thread), or its failure at once.
fn start(window: &mut Window<Done>, index: usize, started: Started) {
    let (synth, input, id) = match started {
        Started::Run(synth, input, id) => (synth, input, id),
        Started::Plan(synth, input, id) => return start_plan(window, index, synth, input, id),
        Started::Read(read) => return start_read(window, index, *read),
        Started::Failed(f) => return window.ready(Done::Ready(Outcome::Failed(f))),
    };
    let id_again = id.clone();
    window.spawn(
        async move {
            let result = synth.synthesize_input(input).await;
            Done::Ran(index, id, result.map(Box::new).map_err(Lost::Synthesis))
        },
        move |e| Done::Ran(index, id_again, Err(Lost::Task(e))),
    );
}

/// Starts the plan of a `"plan": true` request in `window`: no model call.
fn start_plan(
    window: &mut Window<Done>,
    index: usize,
    synth: synthkit::Synthesizer,
    input: SynthesisInput,
    id: Option<Value>,
) {
    let id_again = id.clone();
    window.spawn(
        async move {
            let plan = synth.plan_input(&input).await.map(Box::new);
            Done::Planned(index, id, plan)
        },
        move |e| Done::Planned(index, id_again, Err(e)),
    );
}

/// Starts a request with `paths` in `window`: its files read on a blocking thread (what
/// the read warns of goes to Python's logging), then its synthesis or plan; a read that
/// gives nothing fails the request as `synthkit batch` fails the line.
fn start_read(window: &mut Window<Done>, index: usize, read: ToRead) {
    let (id_again, plan) = (read.id.clone(), read.plan);
    window.spawn(
        async move {
            let ToRead {
                synth,
                mut input,
                id,
                paths,
                top_k,
                plan,
                reader,
            } = read;
            let query = input.query.clone();
            match reader
                .read(paths, query, top_k, Arc::new(PythonLogging))
                .await
            {
                Err(why) => Done::Ready(Outcome::Failed(failure(
                    index,
                    id,
                    "invalid_request",
                    InputError::new_err(format!("requests[{index}]: cannot read `paths`: {why}")),
                ))),
                Ok(nodes) if plan => {
                    input.nodes = nodes;
                    Done::Planned(index, id, synth.plan_input(&input).await.map(Box::new))
                }
                Ok(nodes) => {
                    input.nodes = nodes;
                    let result = synth.synthesize_input(input).await;
                    Done::Ran(index, id, result.map(Box::new).map_err(Lost::Synthesis))
                }
            }
        },
        move |e| {
            if plan {
                Done::Planned(index, id_again, Err(e))
            } else {
                Done::Ran(index, id_again, Err(Lost::Task(e)))
            }
        },
    );
}

fn failure(index: usize, id: Option<Value>, kind: &'static str, error: PyErr) -> Failure {
    Failure {
        index,
        id,
        kind,
        error,
        transient: None,
    }
}

/// `error` with `requests[index]: ` before its message (same class, same cause).
fn prefixed(py: Python<'_>, index: usize, error: PyErr) -> PyErr {
    let message = format!("requests[{index}]: {}", message_of(py, &error));
    let new = if error.is_instance_of::<crate::ModelError>(py) {
        crate::ModelError::new_err(message)
    } else if error.is_instance_of::<InputError>(py) {
        InputError::new_err(message)
    } else {
        SynthkitError::new_err(message)
    };
    if let Some(cause) = error.cause(py) {
        new.set_cause(py, Some(cause));
    }
    new
}

/// An exception's message (its `str()`).
fn message_of(py: Python<'_>, e: &PyErr) -> String {
    e.value(py)
        .str()
        .map(|s| s.to_string())
        .unwrap_or_else(|_| "an error without a message".into())
}

/// The outcomes as a Python list of `Response` and `FailedRequest`.
fn outcomes_to_list(py: Python<'_>, outcomes: Vec<Outcome>) -> PyResult<Py<PyList>> {
    let list = PyList::empty(py);
    for outcome in outcomes {
        match outcome {
            Outcome::Answered(r) => list.append(Py::new(py, Response::new(*r))?)?,
            Outcome::Planned(plan) => {
                let value = serde_json::to_value(&plan)
                    .map_err(|e| SynthkitError::new_err(format!("cannot write the plan: {e}")))?;
                list.append(from_json(py, &value)?)?;
            }
            Outcome::Failed(f) => {
                let id = match &f.id {
                    Some(v) => from_json(py, v)?.unbind(),
                    None => py.None(),
                };
                let failed = FailedRequest {
                    index: f.index,
                    id,
                    kind: f.kind.to_string(),
                    message: message_of(py, &f.error),
                    error: f.error.value(py).clone().into_any().unbind(),
                    transient: f.transient,
                };
                list.append(Py::new(py, failed)?)?;
            }
        }
    }
    Ok(list.unbind())
}
