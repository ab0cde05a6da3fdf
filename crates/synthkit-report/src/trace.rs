//! Reading a `--trace` file (JSON lines) back into a [`RunRecord`].
//!
//! A trace holds one line per model call (`call`, `mode`, `step`, `level`, `index`,
//! `prompt`, `prompt_tokens`, `response`, `nodes`, `node_ids` (the first 100), ...)
//! and, when the run finished, a last line `{"run": {...}}` with the whole [`RunRecord`]
//! (the answer, the sources, the steps with their node ids). Without the run line (a run
//! killed, or one that failed) the report shows the calls alone, with the nodes each read,
//! and says the run did not finish: its last level is not taken for the final one.
//!
//! Bounds: the file is read a line at a time; a line over [`MAX_TRACE_LINE_BYTES`] is an
//! error, each call's reply is kept up to `synthkit::steps::MAX_STEP_REPLY_BYTES` and
//! its prompt is not kept.

use std::io::BufRead;

use serde_json::{Map, Value};
use synthkit::SynthStep;
use synthkit::steps::{MAX_STEP_REPLY_BYTES, cap_text};

use crate::record::{RunRecord, UsageRecord};

/// The longest trace line read (64 MiB).
pub const MAX_TRACE_LINE_BYTES: u64 = 64 * 1024 * 1024;

/// Why a trace could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    /// Reading failed.
    #[error("reading the trace failed: {0}")]
    Io(#[from] std::io::Error),
    /// A line is not what a trace holds.
    #[error("line {line} of the trace is not a trace line: {reason}")]
    Line {
        /// The line's number, from 1.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// A line is longer than [`MAX_TRACE_LINE_BYTES`].
    #[error("line {line} of the trace is longer than {MAX_TRACE_LINE_BYTES} bytes")]
    LineTooLong {
        /// The line's number, from 1.
        line: usize,
    },
    /// A plan's trace (`--plan`): its calls were not made.
    #[error(
        "this trace is a plan (--plan): its calls were not made, so there is nothing to report"
    )]
    DryRun,
    /// Nothing in it.
    #[error("the trace holds no call")]
    Empty,
}

/// Reads a trace.
pub fn read_trace(mut reader: impl BufRead) -> Result<RunRecord, TraceError> {
    let mut steps: Vec<SynthStep> = Vec::new();
    let mut run: Option<RunRecord> = None;
    let mut buf = Vec::new();
    let mut line = 0;
    loop {
        buf.clear();
        line += 1;
        let mut limited = std::io::Read::take(&mut reader, MAX_TRACE_LINE_BYTES + 1);
        let n = limited.read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        if n as u64 > MAX_TRACE_LINE_BYTES {
            return Err(TraceError::LineTooLong { line });
        }
        let text = String::from_utf8_lossy(&buf);
        if text.trim().is_empty() {
            continue;
        }
        let bad = |reason: String| TraceError::Line { line, reason };
        let value: Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
        let Value::Object(mut obj) = value else {
            return Err(bad("not a JSON object".into()));
        };
        if obj.get("dry_run") == Some(&Value::Bool(true)) {
            return Err(TraceError::DryRun);
        }
        if let Some(r) = obj.remove("run") {
            run = Some(serde_json::from_value(r).map_err(|e| bad(e.to_string()))?);
            continue;
        }
        steps.push(step_of(obj).map_err(bad)?);
    }
    match run {
        Some(r) => Ok(r),
        None if steps.is_empty() => Err(TraceError::Empty),
        None => {
            let usage = UsageRecord::of_steps(&steps);
            let mode = steps.first().map(|s| s.mode);
            steps.sort_by_key(|s| (s.level, s.index, s.call));
            Ok(RunRecord {
                mode,
                steps,
                usage,
                ..RunRecord::default()
            })
        }
    }
}

/// A call line as a step (its prompt dropped, its reply capped).
fn step_of(mut obj: Map<String, Value>) -> Result<SynthStep, String> {
    obj.remove("prompt");
    let reply = match obj.remove("response") {
        Some(Value::String(s)) => s,
        Some(_) => return Err("`response` is not text".into()),
        None => return Err("no `call` or `run` here".into()),
    };
    let (kept, cut) = cap_text(&reply, MAX_STEP_REPLY_BYTES);
    obj.insert("reply_bytes".into(), reply.len().into());
    obj.insert("reply_cut".into(), cut.into());
    obj.insert("reply".into(), kept.into());
    if let Some(Value::String(thinking)) = obj.get_mut("thinking") {
        let (kept, _) = cap_text(thinking, MAX_STEP_REPLY_BYTES);
        *thinking = kept.to_string();
    }
    obj.entry("max_tokens").or_insert(0.into());
    // `nodes` counts what `node_ids` lists at most 100 of.
    if let Some(n) = obj.remove("nodes").and_then(|n| n.as_u64()) {
        let listed = obj
            .get("node_ids")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        if n > listed as u64 {
            obj.insert("node_count".into(), n.into());
        }
    }
    if !obj.contains_key("counted_prompt_tokens") {
        let p = obj.get("prompt_tokens").cloned().unwrap_or(0.into());
        obj.insert("counted_prompt_tokens".into(), p);
    }
    serde_json::from_value(Value::Object(obj)).map_err(|e| e.to_string())
}
