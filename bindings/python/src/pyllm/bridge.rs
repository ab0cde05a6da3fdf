//! Running Python calls from the engine's tasks: a coroutine on an event loop, or a
//! function on a worker thread; the GIL is held only while Python code runs, never while
//! waiting.

use std::sync::{Arc, Mutex, PoisonError};

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use pyo3_async_runtimes::TaskLocals;
use tokio::sync::oneshot;

use crate::SynthkitError;

/// The Python module with the adapters and the helpers used here.
pub(crate) fn helpers(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    py.import("synthkit_rs._llm")
}

/// Who waits for a synthesis, which says where its Python calls run.
#[derive(Clone)]
pub(crate) enum Caller {
    /// An asyncio task (`asynthesize`, `async for`): coroutines run on its event loop, in
    /// a copy of its context (its contextvars: LlamaIndex's active span, say).
    Asyncio(TaskLocals),
    /// A blocking call (`synthesize`, `for`): functions run on worker threads, in a copy of
    /// the caller's context; coroutine functions on synthkit's private event loop.
    Blocking(Option<Arc<Py<PyAny>>>),
}

impl Caller {
    /// The asyncio task running on this thread (its loop and a copy of its context).
    pub(crate) fn asyncio(py: Python<'_>) -> PyResult<Self> {
        Ok(Caller::Asyncio(
            TaskLocals::with_running_loop(py)?.copy_context(py)?,
        ))
    }

    /// A blocking call on this thread, with a copy of its context.
    pub(crate) fn blocking(py: Python<'_>) -> PyResult<Self> {
        let context = py.import("contextvars")?.call_method0("copy_context")?;
        Ok(Caller::Blocking(Some(Arc::new(context.unbind()))))
    }

    /// The caller's context (a copy of its contextvars), if it has one.
    pub(crate) fn context(&self, py: Python<'_>) -> Option<Arc<Py<PyAny>>> {
        match self {
            Caller::Asyncio(locals) => Some(Arc::new(locals.context(py).unbind())),
            Caller::Blocking(context) => context.clone(),
        }
    }

    /// Where a call runs for a model that has the blocking and/or the async form: the
    /// caller's kind of call when the model has it, else the other one.
    pub(crate) fn runner(&self, has_sync: bool, has_async: bool) -> PyResult<Runner> {
        Python::attach(|py| match self {
            Caller::Asyncio(locals) if has_async || !has_sync => Ok(Runner::Loop {
                event_loop: Arc::new(locals.event_loop(py).unbind()),
                context: Some(Arc::new(locals.context(py).unbind())),
            }),
            Caller::Asyncio(locals) => Ok(Runner::Thread {
                context: Some(Arc::new(locals.context(py).unbind())),
            }),
            Caller::Blocking(context) if has_sync || !has_async => Ok(Runner::Thread {
                context: context.clone(),
            }),
            Caller::Blocking(context) => Ok(Runner::Loop {
                event_loop: Arc::new(helpers(py)?.call_method0("private_loop")?.unbind()),
                context: context.clone(),
            }),
        })
    }
}

/// Where one model call's Python work runs.
#[derive(Clone)]
pub(crate) enum Runner {
    /// Coroutines, on this event loop.
    Loop {
        event_loop: Arc<Py<PyAny>>,
        context: Option<Arc<Py<PyAny>>>,
    },
    /// Blocking functions, on tokio's blocking threads.
    Thread { context: Option<Arc<Py<PyAny>>> },
}

/// A Python callable and its arguments, built with the GIL held.
pub(crate) type Target<'py> = (Bound<'py, PyAny>, Bound<'py, PyTuple>);

impl Runner {
    /// Whether calls run as coroutines (the adapter's `acall`) rather than functions.
    pub(crate) fn is_async(&self) -> bool {
        matches!(self, Runner::Loop { .. })
    }

    /// Calls what `target` builds: `f(*args)` awaited on the loop (it must return a
    /// coroutine), or `f(*args)` on a worker thread. Waits without the GIL; dropping the
    /// returned future cancels the coroutine (a function already running on its thread
    /// runs to its end, and its result is dropped).
    pub(crate) async fn run<F>(&self, target: F) -> PyResult<Py<PyAny>>
    where
        F: for<'py> FnOnce(Python<'py>) -> PyResult<Target<'py>> + Send + 'static,
    {
        match self {
            Runner::Loop {
                event_loop,
                context,
            } => {
                let (tx, rx) = oneshot::channel();
                let pending = Python::attach(|py| -> PyResult<Py<PyAny>> {
                    let (f, args) = target(py)?;
                    let coro = f.call1(args)?;
                    let context = context.as_ref().map(|c| c.bind(py).clone());
                    let future = helpers(py)?
                        .call_method1("submit", (event_loop.bind(py), context, coro))?;
                    let notify = Notify {
                        tx: Mutex::new(Some(tx)),
                    };
                    if let Err(e) = future.call_method1("add_done_callback", (notify,)) {
                        // Scheduled but unwatched (Ctrl-C can land here, on a blocking
                        // caller's thread): cancel it rather than leave it running.
                        let _ = future.call_method0("cancel");
                        return Err(e);
                    }
                    Ok(future.unbind())
                })?;
                let mut guard = CancelOnDrop(Some(pending));
                let out = rx.await;
                guard.0 = None;
                out.unwrap_or_else(|_| {
                    Err(SynthkitError::new_err(
                        "the event loop dropped the LLM call before it finished",
                    ))
                })
            }
            Runner::Thread { context } => {
                let context = context.clone();
                let work = move || {
                    Python::attach(|py| -> PyResult<Py<PyAny>> {
                        let (f, args) = target(py)?;
                        let context = context.as_ref().map(|c| c.bind(py).clone());
                        let mut all = vec![context.into_pyobject(py)?.into_any(), f];
                        all.extend(args.iter());
                        let out = helpers(py)?
                            .getattr("run_in")?
                            .call1(PyTuple::new(py, all)?)?;
                        Ok(out.unbind())
                    })
                };
                tokio::task::spawn_blocking(work).await.map_err(|e| {
                    SynthkitError::new_err(format!("the LLM call's worker thread failed: {e}"))
                })?
            }
        }
    }
}

/// The done-callback of a scheduled coroutine: hands its result (or exception) to the
/// waiting Rust future.
#[pyclass(module = "synthkit_rs._synthkit")]
struct Notify {
    tx: Mutex<Option<oneshot::Sender<PyResult<Py<PyAny>>>>>,
}

#[pymethods]
impl Notify {
    fn __call__(&self, future: &Bound<'_, PyAny>) {
        let out = future.call_method0("result").map(Bound::unbind);
        let tx = self
            .tx
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(tx) = tx {
            // The receiver is gone when the call was cancelled: nothing waits for it.
            let _ = tx.send(out);
        }
    }
}

/// Cancels a scheduled coroutine when its Rust future is dropped before it finished
/// (asyncio cancellation, Ctrl-C, a stream closed, a sibling call failed).
struct CancelOnDrop(Option<Py<PyAny>>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(future) = self.0.take() {
            // `cancel` is thread-safe: the task is cancelled on its own loop. At
            // interpreter exit there is nothing left to cancel.
            let _ = Python::try_attach(|py| future.call_method0(py, "cancel"));
        }
    }
}
