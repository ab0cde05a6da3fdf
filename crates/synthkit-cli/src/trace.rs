//! `--trace FILE`: one JSON line per model call, written (and flushed) as each call
//! finishes.
//!
//! Each line holds `call` (1, 2, ... in finishing order), `mode`, `step`, `level`, `index`,
//! `kind` (template kind), `prompt` (the full prompt text), `prompt_tokens`,
//! `counted_prompt_tokens` (ours), `max_tokens`, `response`, `completion_tokens`,
//! `usage_reported` (whether the server counted the tokens), `ms`, `retries` and
//! `truncated` (the reply was cut at the output limit), `thinking` and `reasoning_tokens`
//! (a reasoning model's thinking, never part of `response`; only when it thought), `nodes` (how many nodes the prompt
//! held; above a tree's first level, the nodes under the summaries it read) and
//! `node_ids` (the first 100 of their ids, as a call's span lists them; a report rebuilt
//! from a killed run's trace still says what each call read). When the run succeeds, a last line
//! `{"run": {...}}` holds the report's record (answer, citations, sources, the steps with
//! their node ids): `synthkit report TRACE -o FILE.html` draws it.
//! With `--plan` the lines describe the planned calls and carry `"dry_run": true`.
//! The API key is never part of a request, so it never reaches the trace.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;

use anyhow::{Result, anyhow};
use serde_json::json;
use synthkit::Observer;
use synthkit::observe::CallReport;
use synthkit::telemetry::MAX_NODE_IDS;

use crate::error::usage;

struct State {
    out: BufWriter<File>,
    calls: u64,
    error: Option<String>,
}

/// The trace writer.
pub struct Trace {
    path: String,
    dry_run: bool,
    state: Mutex<State>,
}

impl Trace {
    /// Creates (or truncates) the trace file.
    pub fn create(path: &Path, dry_run: bool) -> Result<Self> {
        let file = File::create(path).map_err(|e| {
            usage(format!(
                "cannot create the trace file `{}`: {e}",
                path.display()
            ))
        })?;
        Ok(Self {
            path: path.display().to_string(),
            dry_run,
            state: Mutex::new(State {
                out: BufWriter::new(file),
                calls: 0,
                error: None,
            }),
        })
    }

    /// The first write error, if any (the trace is then incomplete).
    pub fn finish(&self) -> Result<()> {
        let mut state = self
            .state
            .lock()
            .map_err(|_| anyhow!("the trace writer failed"))?;
        if let Err(e) = state.out.flush() {
            state.error.get_or_insert(e.to_string());
        }
        match &state.error {
            Some(e) => Err(anyhow!("writing the trace file {} failed: {e}", self.path)),
            None => Ok(()),
        }
    }
}

impl Observer for Trace {
    fn call_finished(&self, report: &CallReport<'_>) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        if state.error.is_some() {
            return;
        }
        state.calls += 1;
        let request = report.request;
        let mode = request.step().mode;
        let mut line = json!({
            "call": state.calls,
            "mode": mode.as_str(),
            "step": request.step().step.as_str(),
            "level": request.step().level,
            "index": request.step().index,
            "kind": request.source().map_or("custom", |s| s.kind.as_str()),
            "prompt": request.prompt.to_text(),
            "prompt_tokens": report.usage.prompt_tokens,
            "counted_prompt_tokens": request.prompt_tokens,
            "response": report.response,
            "completion_tokens": report.usage.completion_tokens,
            "usage_reported": report.usage_reported,
            "ms": crate::output::round_ms(report.elapsed.as_secs_f64() * 1000.0),
            "max_tokens": request.max_tokens,
            "retries": report.retries,
            "truncated": report.truncated,
        });
        let ids = report.node_ids();
        let nodes = ids.len();
        if nodes > 0
            && let Some(obj) = line.as_object_mut()
        {
            let listed: Vec<&str> = ids.take(MAX_NODE_IDS).collect();
            obj.insert("nodes".into(), nodes.into());
            obj.insert("node_ids".into(), listed.into());
        }
        // A reasoning model's thinking, apart from its reply (never in `response`).
        if !report.thinking.is_empty()
            && let Some(obj) = line.as_object_mut()
        {
            obj.insert("thinking".into(), report.thinking.into());
            obj.insert(
                "reasoning_tokens".into(),
                report.usage.reasoning_tokens.into(),
            );
        }
        if self.dry_run
            && let Some(obj) = line.as_object_mut()
        {
            obj.insert("dry_run".into(), true.into());
        }
        state.write(&line);
    }
}

impl State {
    /// Writes `line` and a newline, and flushes; keeps the first error.
    fn write(&mut self, line: &impl serde::Serialize) {
        let written = serde_json::to_writer(&mut self.out, line)
            .map_err(|e| e.to_string())
            .and_then(|()| self.out.write_all(b"\n").map_err(|e| e.to_string()))
            .and_then(|()| self.out.flush().map_err(|e| e.to_string()));
        if let Err(e) = written {
            self.error.get_or_insert(e);
        }
    }
}

impl Trace {
    /// Writes the last line, `{"run": ...}`: what `synthkit report` draws.
    pub fn write_run(&self, run: &synthkit_report::RunRecord) {
        if let Ok(mut state) = self.state.lock()
            && state.error.is_none()
        {
            state.write(&json!({ "run": run }));
        }
    }
}
