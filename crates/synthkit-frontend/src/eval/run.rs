//! Running one case with synthkit, and writing what the run did as an [`AnswerLine`], so
//! that every front end (`synthkit eval`, the Python package's `evaluate`) runs cases the
//! same way and its runs are scored as any other system's answers.
//!
//! - [`PromptCapture`]: an [`Observer`] keeping the text of every prompt sent (for
//!   `in_prompts`), up to [`DEFAULT_MAX_PROMPT_BYTES`] unless told otherwise.
//! - [`answer_line`]: one synthesis's outcome as an answer line: the answer without its
//!   `[n]` markers, calls, tokens, truncated calls, wall time, prompts, cited node ids,
//!   or the error of a failed run.
//! - [`run_case`]: both together: runs a case's query over its nodes with a synthesizer
//!   (whose own observer still hears everything) and returns the line and the outcome.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use std::sync::Arc;
//! use synthkit_frontend::eval::{parse_case, run_case, score};
//! use synthkit::{Synthesizer, model::ModelInfo, testing::ScriptedModel};
//!
//! let case = parse_case(
//!     r#"{"id": "q1", "query": "How often is the mirror cleaned?",
//!         "nodes": ["The mirror is cleaned every six months."], "answers": ["six months"]}"#,
//!     1,
//! )
//! .unwrap()
//! .unwrap();
//! let model = ScriptedModel::constant(ModelInfo::new("demo"), "Every six months.");
//! let synth = Synthesizer::builder(Arc::new(model)).build().unwrap();
//! let nodes = case.nodes().unwrap().to_vec();
//! let run = run_case(&synth, &case, nodes, false).await;
//! assert_eq!(run.line.calls, Some(1));
//! let row = score(&case, "synthkit", &run.line, None);
//! assert!(row.correct);
//! assert_eq!(row.in_prompts, Some(true));
//! # });
//! ```

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::answers::{AnswerLine, GuardCounts};
use super::case::{Case, CaseInput};
use synthkit::error::SynthError;
use synthkit::node::Node;
use synthkit::observe::{CallReport, Observer, SynthEvent};
use synthkit::response::Response;
use synthkit::synth::Synthesizer;

/// The most prompt text a [`PromptCapture`] keeps by default (bytes, 64 MiB): past it the
/// prompts of the run are unknown (`in_prompts` is then not scored).
pub const DEFAULT_MAX_PROMPT_BYTES: usize = 64 << 20;

/// An [`Observer`] keeping the text of every prompt sent, in the order the calls finish,
/// up to a cap on their total size ([`DEFAULT_MAX_PROMPT_BYTES`] unless
/// [`PromptCapture::with_max_bytes`] says otherwise). Past the cap the calls are still
/// counted, and [`PromptCapture::take`] says the prompts are unknown.
#[derive(Debug)]
pub struct PromptCapture {
    max_bytes: usize,
    state: Mutex<CaptureState>,
}

#[derive(Debug, Default)]
struct CaptureState {
    prompts: Vec<String>,
    bytes: usize,
    over: bool,
    guards: GuardCounts,
}

/// What a [`PromptCapture`] saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CapturedPrompts {
    /// The calls that finished.
    pub calls: usize,
    /// Each call's prompt text, in order; `None` when together they passed the cap.
    pub prompts: Option<Vec<String>>,
    /// How often the answer guards acted.
    pub guards: GuardCounts,
}

impl Default for PromptCapture {
    fn default() -> Self {
        Self::new()
    }
}

impl PromptCapture {
    /// A capture keeping at most [`DEFAULT_MAX_PROMPT_BYTES`] of prompt text.
    pub fn new() -> Self {
        Self::with_max_bytes(DEFAULT_MAX_PROMPT_BYTES)
    }

    /// A capture keeping at most `max_bytes` of prompt text.
    pub fn with_max_bytes(max_bytes: usize) -> Self {
        Self {
            max_bytes,
            state: Mutex::new(CaptureState::default()),
        }
    }

    /// The calls and prompts seen so far; the capture starts again empty.
    pub fn take(&self) -> CapturedPrompts {
        let mut g = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let state = std::mem::take(&mut *g);
        CapturedPrompts {
            calls: state.prompts.len(),
            prompts: (!state.over).then_some(state.prompts),
            guards: state.guards,
        }
    }
}

impl Observer for PromptCapture {
    fn call_finished(&self, report: &CallReport<'_>) {
        let text = report.request.prompt.to_text();
        let mut g = self.state.lock().unwrap_or_else(|p| p.into_inner());
        g.bytes = g.bytes.saturating_add(text.len());
        if g.bytes > self.max_bytes {
            // Counted, not kept: the prompts are unknown from now on.
            g.over = true;
            g.prompts.push(String::new());
        } else {
            g.prompts.push(text);
        }
    }

    fn event(&self, event: &SynthEvent) {
        let mut g = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match event {
            SynthEvent::ReplyNotUsed { kept_previous, .. } => {
                g.guards.set_aside += 1;
                g.guards.kept_previous += u64::from(*kept_previous);
            }
            SynthEvent::OutputBounded { .. } => g.guards.bounded += 1,
            _ => {}
        }
    }
}

/// One synthesis's outcome as the answer line of case `case_id` in `mode`: the answer
/// (without its `[n]` markers), the usage, `wall`, the prompts `captured`, and with `cite`
/// the ids of the nodes the answer cites (none when it has no citations); a failed run
/// gets its error and the calls `captured` instead.
pub fn answer_line(
    case_id: &str,
    mode: &str,
    outcome: &Result<Response, SynthError>,
    wall: Duration,
    captured: CapturedPrompts,
    cite: bool,
) -> AnswerLine {
    let mut line = AnswerLine::new(case_id, mode, "");
    line.wall_ms = Some(wall.as_secs_f64() * 1000.0);
    line.prompts = captured.prompts;
    line.guards = (!captured.guards.is_zero()).then_some(captured.guards);
    match outcome {
        Ok(response) => {
            line.answer = response.text_without_markers();
            line.calls = Some(response.usage.calls);
            line.prompt_tokens = Some(response.usage.prompt_tokens);
            line.completion_tokens = Some(response.usage.completion_tokens);
            line.cached_prompt_tokens = (response.usage.cached_prompt_tokens > 0)
                .then_some(response.usage.cached_prompt_tokens);
            line.truncated_calls = Some(response.usage.truncated_calls);
            // The engine's own reading: the model said the sources do not answer.
            line.abstained = Some(!response.answerable);
            line.grounding = response.grounding.as_ref().map(|g| g.status);
            if cite {
                line.citations = Some(response.citations.as_ref().map_or_else(Vec::new, |c| {
                    c.cited_node_ids().into_iter().map(str::to_string).collect()
                }));
                line.quotes = response
                    .citations
                    .as_ref()
                    .filter(|c| !c.quotes.is_empty())
                    .map(|c| c.quote_counts());
            }
        }
        Err(e) => {
            line.error = Some(e.to_string());
            line.calls = Some(captured.calls as u64);
        }
    }
    line
}

/// A case run by [`run_case`].
#[derive(Debug)]
#[non_exhaustive]
pub struct CaseRun {
    /// What the run answered, as an answer line (its `mode`: the synthesizer's mode).
    pub line: AnswerLine,
    /// The synthesis's outcome (for a report of the run).
    pub outcome: Result<Response, SynthError>,
}

/// Runs `case`'s query over `nodes` with `synth` and returns its [`answer_line`]: the
/// prompts are kept by a [`PromptCapture`] (default cap) heard beside `synth`'s own
/// observer; with `cite` the cited node ids are recorded. The wall time is the
/// synthesis's.
pub async fn run_case(synth: &Synthesizer, case: &Case, nodes: Vec<Node>, cite: bool) -> CaseRun {
    let capture = Arc::new(PromptCapture::new());
    let watched = synth
        .to_builder()
        .wrap_observer(|user| {
            Arc::new(Beside {
                user,
                capture: Arc::clone(&capture),
            })
        })
        .build();
    let start = Instant::now();
    let outcome = match watched {
        Ok(s) => s.synthesize(&case.query, nodes).await,
        Err(e) => Err(e),
    };
    let wall = start.elapsed();
    let line = answer_line(
        &case.id,
        synth.mode().as_str(),
        &outcome,
        wall,
        capture.take(),
        cite,
    );
    CaseRun { line, outcome }
}

/// The nodes' text, one node a line: what `in_nodes` is scored on
/// ([`crate::eval::score()`]'s `nodes_text`).
pub fn nodes_text(nodes: &[Node]) -> String {
    nodes
        .iter()
        .map(|n| n.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

impl Case {
    /// The case's own nodes; `None` when it gives `paths` to read.
    pub fn nodes(&self) -> Option<&[Node]> {
        match &self.input {
            CaseInput::Nodes(nodes) => Some(nodes),
            _ => None,
        }
    }
}

/// The synthesizer's own observer, and the capture beside it.
struct Beside {
    user: Option<Arc<dyn Observer>>,
    capture: Arc<PromptCapture>,
}

impl Observer for Beside {
    fn calls_planned(&self, total: usize) {
        if let Some(u) = &self.user {
            u.calls_planned(total);
        }
    }
    fn call_finished(&self, report: &CallReport<'_>) {
        self.capture.call_finished(report);
        if let Some(u) = &self.user {
            u.call_finished(report);
        }
    }
    fn event(&self, event: &SynthEvent) {
        self.capture.event(event);
        if let Some(u) = &self.user {
            u.event(event);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::eval::{parse_case, score};
    use synthkit::mode::ResponseMode;
    use synthkit::model::ModelInfo;
    use synthkit::testing::ScriptedModel;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    fn case() -> Case {
        parse_case(
            r#"{"id": "q1", "query": "How often is the mirror cleaned?",
                "nodes": [{"id": "m", "text": "The mirror is cleaned every six months."},
                          {"id": "d", "text": "The dome opens at dusk."}],
                "answers": ["six months"], "evidence": ["m"]}"#,
            1,
        )
        .unwrap()
        .unwrap()
    }

    /// Counts the calls it hears (the synthesizer's own observer).
    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Observer for Count {
        fn call_finished(&self, _: &CallReport<'_>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_run_records_its_prompts_and_usage_and_the_own_observer_still_hears() {
        let case = case();
        let model = ScriptedModel::sequence(
            ModelInfo::new("m"),
            vec!["Every six months.".into(), "Every six months, yes.".into()],
        );
        let own = Arc::new(Count::default());
        let synth = Synthesizer::builder(Arc::new(model))
            .mode(ResponseMode::Refine)
            .observer(own.clone())
            .build()
            .unwrap();
        let run = block_on(run_case(
            &synth,
            &case,
            case.nodes().unwrap().to_vec(),
            false,
        ));
        let line = &run.line;
        assert_eq!((line.id.as_str(), line.mode.as_str()), ("q1", "refine"));
        assert_eq!(line.answer, "Every six months, yes.");
        assert_eq!(line.calls, Some(2));
        assert!(line.prompt_tokens.unwrap() > 0);
        assert_eq!(line.truncated_calls, Some(0));
        assert!(line.wall_ms.is_some() && line.error.is_none());
        assert_eq!(line.citations, None);
        let prompts = line.prompts.as_ref().unwrap();
        assert_eq!(prompts.len(), 2);
        assert!(prompts[0].contains("every six months") && prompts[0].contains("mirror"));
        assert!(prompts[1].contains("dome"));
        assert_eq!(own.0.load(Ordering::SeqCst), 2);
        let row = score(&case, "s", line, Some(&nodes_text(case.nodes().unwrap())));
        assert!(row.correct);
        assert_eq!((row.in_nodes, row.in_prompts), (Some(true), Some(true)));
    }

    #[test]
    fn guard_counts_reach_the_row_and_the_table() {
        let case = case();
        // Refine's last reply talks about the previous answer: it is set aside and the
        // previous answer kept.
        let model = ScriptedModel::sequence(
            ModelInfo::new("m"),
            vec![
                "Every six months.".into(),
                "The original answer remains appropriate.".into(),
            ],
        );
        let synth = Synthesizer::builder(Arc::new(model))
            .mode(ResponseMode::Refine)
            .build()
            .unwrap();
        let nodes = case.nodes().unwrap().to_vec();
        let run = block_on(run_case(&synth, &case, nodes, false));
        assert_eq!(run.line.answer, "Every six months.");
        let guards = run.line.guards.unwrap();
        assert_eq!((guards.set_aside, guards.kept_previous), (1, 1));
        let row = score(&case, "s", &run.line, None);
        assert_eq!(row.guards, Some(guards));
        let json = serde_json::to_value(&row).unwrap();
        assert_eq!(json["guards"]["set_aside"], 1, "{json}");
        let totals = crate::eval::totals(&[row.clone(), row]);
        assert_eq!(totals[0].guards.map(|g| g.kept_previous), Some(2));
        let table = crate::eval::table(&totals, &[]);
        let mut lines = table.lines();
        assert!(
            lines
                .next()
                .unwrap()
                .contains(crate::eval::table::GUARDS_HEADING),
            "{table}"
        );
        assert!(lines.next().unwrap().contains(" 2/2/0 "), "{table}");
    }

    #[test]
    fn quote_mode_rows_count_quote_statuses_and_the_table_shows_them() {
        let case = case();
        let answer = "Every six months [1] \"cleaned every six months\" [2] \"at dusk\" \
                      [1] \"every week\".";
        let model = ScriptedModel::constant(ModelInfo::new("m"), answer);
        let synth = Synthesizer::builder(Arc::new(model))
            .citations(true)
            .citation_style(synthkit::CitationStyle::Quotes)
            .build()
            .unwrap();
        let nodes = case.nodes().unwrap().to_vec();
        let run = block_on(run_case(&synth, &case, nodes, true));
        let counts = run.line.quotes.unwrap();
        assert_eq!(
            (counts.verified, counts.misattributed, counts.not_found),
            (2, 0, 1)
        );
        let row = score(&case, "s", &run.line, None);
        assert_eq!(row.quotes, Some(counts));
        let table = crate::eval::table(&crate::eval::totals(&[row]), &[]);
        assert!(
            table.lines().next().unwrap().contains("quotes v/m/nf"),
            "{table}"
        );
        assert!(table.lines().nth(1).unwrap().contains(" 2/0/1 "), "{table}");
    }

    #[test]
    fn citations_are_the_cited_ids_and_the_answer_loses_its_markers() {
        let case = case();
        let model = ScriptedModel::constant(ModelInfo::new("m"), "Every six months [1].");
        let synth = Synthesizer::builder(Arc::new(model))
            .citations(true)
            .build()
            .unwrap();
        let nodes = case.nodes().unwrap().to_vec();
        let run = block_on(run_case(&synth, &case, nodes.clone(), true));
        assert_eq!(run.line.answer, "Every six months.");
        assert_eq!(run.line.citations, Some(vec!["m".to_string()]));
        let row = score(&case, "s", &run.line, None);
        assert_eq!(
            (row.cite_precision, row.cite_recall),
            (Some(1.0), Some(1.0))
        );
        // Without `cite` no citations are recorded, even when the answer has them.
        let run = block_on(run_case(&synth, &case, nodes, false));
        assert_eq!(run.line.citations, None);
        assert!(run.outcome.unwrap().citations.is_some());
    }

    #[test]
    fn a_failed_run_gets_its_error_and_the_calls_made() {
        let case = case();
        let model = ScriptedModel::new(ModelInfo::new("m"), |_| {
            Err(synthkit::model::ModelError::Other(
                "the server is down".into(),
            ))
        });
        let synth = Synthesizer::builder(Arc::new(model)).build().unwrap();
        let run = block_on(run_case(
            &synth,
            &case,
            case.nodes().unwrap().to_vec(),
            true,
        ));
        assert!(run.outcome.is_err());
        let line = &run.line;
        assert!(
            line.error
                .as_deref()
                .unwrap()
                .contains("the server is down"),
            "{line:?}"
        );
        assert_eq!(line.answer, "");
        assert_eq!(line.citations, None);
        assert_eq!(
            line.calls,
            Some(line.prompts.as_ref().unwrap().len() as u64)
        );
        assert!(!score(&case, "s", line, None).correct);
    }

    #[test]
    fn past_the_cap_the_prompts_are_unknown_but_the_calls_counted() {
        let model = ScriptedModel::constant(ModelInfo::new("m"), "Six months.");
        let capture = Arc::new(PromptCapture::with_max_bytes(40));
        let synth = Synthesizer::builder(Arc::new(model))
            .observer(capture.clone())
            .build()
            .unwrap();
        let nodes = case().nodes().unwrap().to_vec();
        block_on(synth.synthesize("How often?", nodes.clone())).unwrap();
        let seen = capture.take();
        assert_eq!((seen.calls, seen.prompts), (1, None));
        // Taken: the capture starts again, and a roomy one keeps the prompt.
        let again = capture.take();
        assert_eq!((again.calls, again.prompts), (0, Some(vec![])));
        let model = ScriptedModel::constant(ModelInfo::new("m"), "Six months.");
        let capture = Arc::new(PromptCapture::new());
        let synth = Synthesizer::builder(Arc::new(model))
            .observer(capture.clone())
            .build()
            .unwrap();
        block_on(synth.synthesize("How often?", nodes)).unwrap();
        let seen = capture.take();
        assert_eq!(seen.calls, 1);
        assert!(seen.prompts.unwrap()[0].contains("How often?"));
    }

    #[test]
    fn answer_lines_of_outcomes() {
        let message = SynthError::InvalidOption("bad".into()).to_string();
        let err: Result<Response, SynthError> = Err(SynthError::InvalidOption("bad".into()));
        let captured = CapturedPrompts {
            calls: 3,
            prompts: Some(vec!["a".into()]),
            guards: GuardCounts::default(),
        };
        let line = answer_line(
            "7",
            "compact",
            &err,
            Duration::from_millis(1500),
            captured,
            true,
        );
        assert_eq!(line.error, Some(message));
        assert_eq!(line.calls, Some(3));
        assert_eq!(line.wall_ms, Some(1500.0));
        assert_eq!(line.prompts, Some(vec!["a".to_string()]));
        assert_eq!(line.citations, None);
        assert_eq!(
            nodes_text(&[Node::new("1", "a"), Node::new("2", "b")]),
            "a\nb"
        );
        let paths = parse_case(
            r#"{"id": "p", "query": "Q", "paths": ["x"], "answerable": false}"#,
            1,
        )
        .unwrap()
        .unwrap();
        assert!(paths.nodes().is_none());
    }
}
