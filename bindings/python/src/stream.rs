//! A streamed synthesis: an iterator and an async iterator of text deltas.

use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt;
use pyo3::exceptions::{PyStopAsyncIteration, PyStopIteration};
use pyo3::prelude::*;
use synthkit::{StreamingResponse, SynthesisInput};

use crate::errors::to_py;
use crate::pyllm::bridge::Caller;
use crate::pyllm::scope::PerCaller;
use crate::response::Response;
use crate::truncation::TruncationPolicy;
use crate::{SynthkitError, block_on, runtime};

/// Where a stream stands.
enum State {
    /// Nothing sent yet.
    NotStarted(Box<(PerCaller, SynthesisInput)>),
    /// The final answer is streaming.
    Open(Box<StreamingResponse>),
    /// Drained: the full response.
    Finished(Box<synthkit::Response>),
    /// Failed, cancelled or closed.
    Dead(&'static str),
}

/// What the Python object and its pending awaitables share.
struct Shared {
    /// Whether the synthesis calls Python (and so needs its caller).
    needs_caller: bool,
    state: tokio::sync::Mutex<State>,
    /// The text received so far (readable without waiting for the state).
    text: Mutex<String>,
    /// Whether a reply cut at the output limit warns when the stream ends.
    on_truncation: TruncationPolicy,
}

impl Shared {
    /// The next delta; `None` at the end. The first call runs the synthesis up to its final
    /// answer (for compact and refine, every step before the last), for `caller` (a Python
    /// model's calls run where the caller that started the stream waits).
    async fn next(&self, caller: Option<Caller>) -> PyResult<Option<String>> {
        let mut state = self.state.lock().await;
        loop {
            // A cancelled wait leaves the stream dead: its calls were dropped with it.
            let current = std::mem::replace(&mut *state, State::Dead("the stream was cancelled"));
            match current {
                State::NotStarted(job) => {
                    let (per, input) = *job;
                    let synth = match caller.clone() {
                        Some(c) => per.for_caller(c),
                        None => Ok(per.built().clone()),
                    };
                    let started = match synth {
                        Ok(synth) => synth.stream_input(input).await,
                        Err(e) => Err(e),
                    };
                    match started {
                        Ok(s) => *state = State::Open(Box::new(s)),
                        Err(e) => {
                            *state = State::Dead("the stream failed");
                            return Err(to_py(e));
                        }
                    }
                }
                State::Open(mut s) => match s.next().await {
                    Some(Ok(delta)) => {
                        self.text
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push_str(&delta);
                        *state = State::Open(s);
                        return Ok(Some(delta));
                    }
                    Some(Err(e)) => {
                        *state = State::Dead("the stream failed");
                        return Err(to_py(e));
                    }
                    None => match s.finish().await {
                        Ok(r) => {
                            let warned = Python::attach(|py| self.on_truncation.check(py, &r));
                            *state = State::Finished(Box::new(r));
                            warned?;
                            return Ok(None);
                        }
                        Err(e) => {
                            *state = State::Dead("the stream failed");
                            return Err(to_py(e));
                        }
                    },
                },
                State::Finished(r) => {
                    *state = State::Finished(r);
                    return Ok(None);
                }
                State::Dead(why) => {
                    *state = State::Dead(why);
                    return Ok(None);
                }
            }
        }
    }

    /// Drains what is left and returns the full response.
    async fn finish(&self, caller: Option<Caller>) -> PyResult<Response> {
        while self.next(caller.clone()).await?.is_some() {}
        match &*self.state.lock().await {
            State::Finished(r) => Ok(Response::new((**r).clone())),
            State::Dead(why) => Err(SynthkitError::new_err(format!(
                "{why}, so there is no complete response"
            ))),
            State::NotStarted(_) | State::Open(_) => Err(SynthkitError::new_err(
                "the stream ended without a response",
            )),
        }
    }
}

/// A streamed answer: `for delta in stream` or `async for delta in stream` yields text
/// deltas; once drained, `.response` is the full `Response` (`.get_response()` drains what
/// is left first). Nothing is sent before the first delta is asked for; `close()` (or
/// dropping it) cancels the model calls in flight.
#[pyclass(module = "synthkit_rs._synthkit", frozen)]
pub struct ResponseStream {
    shared: Arc<Shared>,
}

impl ResponseStream {
    /// A stream that will run `input` through `synth`.
    pub(crate) fn new(
        synth: PerCaller,
        input: SynthesisInput,
        on_truncation: TruncationPolicy,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                on_truncation,
                needs_caller: synth.needs_caller(),
                state: tokio::sync::Mutex::new(State::NotStarted(Box::new((synth, input)))),
                text: Mutex::new(String::new()),
            }),
        }
    }

    /// The caller starting the stream, when it has not started and its model calls
    /// Python: a coroutine (`asyncio`) or a blocking call on this thread.
    fn caller(&self, py: Python<'_>, asyncio: bool) -> PyResult<Option<Caller>> {
        let started = !matches!(
            self.shared.state.try_lock().as_deref(),
            Ok(State::NotStarted(_)) | Err(_)
        );
        if !self.shared.needs_caller || started {
            return Ok(None);
        }
        Ok(Some(if asyncio {
            Caller::asyncio(py)?
        } else {
            Caller::blocking(py)?
        }))
    }
}

#[pymethods]
impl ResponseStream {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<String> {
        let shared = Arc::clone(&self.shared);
        let caller = self.caller(py, false)?;
        match block_on(py, async move { shared.next(caller).await })? {
            Some(delta) => Ok(delta),
            None => Err(PyStopIteration::new_err(())),
        }
    }

    fn __aiter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __anext__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let shared = Arc::clone(&self.shared);
        let caller = self.caller(py, true)?;
        runtime()?;
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            match shared.next(caller).await? {
                Some(delta) => Ok(delta),
                None => Err(PyStopAsyncIteration::new_err(())),
            }
        })
    }

    /// The text received so far (all of it once drained).
    #[getter]
    fn text(&self) -> String {
        self.shared
            .text
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether the stream has ended (drained, failed or closed).
    #[getter]
    fn done(&self) -> bool {
        matches!(
            self.shared.state.try_lock().as_deref(),
            Ok(State::Finished(_) | State::Dead(_))
        )
    }

    /// The full `Response` once the stream is drained, else `None`.
    #[getter(response)]
    fn final_response(&self) -> Option<Response> {
        match self.shared.state.try_lock().as_deref() {
            Ok(State::Finished(r)) => Some(Response::new((**r).clone())),
            _ => None,
        }
    }

    /// Drains the deltas not read yet (blocking) and returns the full `Response`. A
    /// failure raises its error: a partial answer is never returned as complete.
    fn get_response(&self, py: Python<'_>) -> PyResult<Response> {
        let shared = Arc::clone(&self.shared);
        let caller = self.caller(py, false)?;
        block_on(py, async move { shared.finish(caller).await })
    }

    /// Like `get_response`, as an awaitable.
    fn aget_response<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let shared = Arc::clone(&self.shared);
        let caller = self.caller(py, true)?;
        runtime()?;
        pyo3_async_runtimes::tokio::future_into_py(py, async move { shared.finish(caller).await })
    }

    /// Stops the stream and cancels its model calls in flight (no-op once it has ended).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let shared = Arc::clone(&self.shared);
        block_on(py, async move {
            let mut state = shared.state.lock().await;
            if matches!(*state, State::NotStarted(_) | State::Open(_)) {
                *state = State::Dead("the stream was closed");
            }
            Ok(())
        })
    }

    fn __repr__(&self) -> String {
        let state = match self.shared.state.try_lock().as_deref() {
            Ok(State::NotStarted(_)) => "not started",
            Ok(State::Open(_)) => "streaming",
            Ok(State::Finished(_)) => "finished",
            Ok(State::Dead(why)) => why,
            Err(_) => "busy",
        };
        format!("ResponseStream({state})")
    }
}
