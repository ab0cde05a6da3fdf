//! `synthkit_rs._synthkit`: the Python extension module behind the `synthkit_rs` package.
//!
//! One shared multi-threaded tokio runtime runs every synthesis. Blocking calls release
//! the GIL while they wait and check for signals every 50 ms, so Ctrl-C interrupts them
//! (the synthesis task is aborted, which cancels its model calls). Awaitable calls are
//! bridged to asyncio by `pyo3-async-runtimes`.

use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

use pyo3::exceptions::PyException;
use pyo3::prelude::*;

mod backend;
mod batch;
mod call_events;
mod errors;
mod eval;
mod many;
mod nodes;
mod paths;
mod pyllm;
mod response;
mod sharing;
mod stream;
mod structured;
mod synthesizer;
mod templates;
mod truncation;

pyo3::create_exception!(
    synthkit_rs,
    SynthkitError,
    PyException,
    "Every error synthkit raises: the message is synthkit's own, saying what to change."
);
pyo3::create_exception!(
    synthkit_rs,
    InputError,
    SynthkitError,
    "Bad input or options: an unknown mode, a node without text, a template without its variables, a budget that cannot hold the prompt."
);
pyo3::create_exception!(
    synthkit_rs,
    ModelError,
    SynthkitError,
    "A model call failed (connection, HTTP status, timeout, a reply cut at the output limit, an exception the `llm` raised: then it is the `__cause__`)."
);
pyo3::create_exception!(
    synthkit_rs,
    RefusalError,
    ModelError,
    "The model refused to answer (a refusal, a reply stopped by the server's content filter) or its reply held no text (only tool calls or reasoning). Never retried: rephrase the question or use another model."
);

pyo3::create_exception!(
    synthkit_rs,
    TruncationWarning,
    pyo3::exceptions::PyUserWarning,
    "A model reply was cut at the output limit (`num_output`): the answer may be incomplete. Raised as a warning with on_truncation=\"warn\" (the default)."
);

/// How often a blocking call wakes to let Python handle signals (Ctrl-C).
const SIGNAL_POLL: Duration = Duration::from_millis(50);

static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();

/// The shared runtime, built on first use and handed to `pyo3-async-runtimes` so that
/// awaitables and blocking calls run on the same one.
pub(crate) fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt);
    }
    let built = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("synthkit")
        .build()
        .map_err(|e| SynthkitError::new_err(format!("cannot start the async runtime: {e}")))?;
    // Another thread may have won the race: use whichever was stored.
    let rt = RUNTIME.get_or_init(|| built);
    // Fails only when it was set already, to this same runtime.
    let _ = pyo3_async_runtimes::tokio::init_with_runtime(rt);
    Ok(rt)
}

/// Runs `fut` to completion on the shared runtime with the GIL released, waking every
/// 50 ms to check for signals; a pending `KeyboardInterrupt` (or any signal handler's
/// exception) aborts `fut`, cancelling its model calls, and is raised.
///
/// `fut` runs on the runtime's worker threads, never on the calling thread: the Python
/// code it runs (an LLM's calls, a hook) is then never where CPython raises a signal's
/// exception (the main thread), so Ctrl-C always arrives here, as the caller's
/// `KeyboardInterrupt`, and never half-way through a call's own steps.
pub(crate) fn block_on<F, T>(py: Python<'_>, fut: F) -> PyResult<T>
where
    F: Future<Output = PyResult<T>> + Send + 'static,
    T: Send + 'static,
{
    let rt = runtime()?;
    let mut task = synthkit::many::OwnedTask::from_handle(rt.spawn(fut));
    py.detach(|| {
        rt.block_on(async move {
            let mut tick = tokio::time::interval(SIGNAL_POLL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    out = &mut task => {
                        return out.map_err(|e| match e {
                            synthkit::SynthError::Task { source } => SynthkitError::new_err(
                                format!("the synthesis task failed: {source}"),
                            ),
                            other => SynthkitError::new_err(other.to_string()),
                        })?;
                    }
                    _ = tick.tick() => Python::attach(|py| py.check_signals())?,
                }
            }
        })
    })
}

/// The extension module.
#[pymodule]
fn _synthkit(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("SynthkitError", py.get_type::<SynthkitError>())?;
    m.add("InputError", py.get_type::<InputError>())?;
    m.add("ModelError", py.get_type::<ModelError>())?;
    m.add("RefusalError", py.get_type::<RefusalError>())?;
    m.add("TruncationWarning", py.get_type::<TruncationWarning>())?;
    m.add_class::<synthesizer::Synthesizer>()?;
    m.add_class::<response::Response>()?;
    m.add_class::<response::SourceNode>()?;
    m.add_class::<stream::ResponseStream>()?;
    m.add_class::<many::FailedRequest>()?;
    m.add_class::<batch::BatchFiles>()?;
    m.add_class::<batch::Pending>()?;
    m.add_class::<eval::EvalResult>()?;
    m.add_function(wrap_pyfunction!(eval::evaluate, m)?)?;
    m.add_function(wrap_pyfunction!(eval::aevaluate, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MODES", synthesizer::mode_names())?;
    Ok(())
}
