//! Escalation: a cheap synthesis over the best chunks first, and a wider one only when
//! the first does not answer.
//!
//! With [`crate::SynthesizerBuilder::escalate`], [`Synthesizer::synthesize`] runs its
//! mode (`compact`, say) over the first [`Escalation::first_nodes`] nodes as given (a
//! retriever gives its best first). When that answer abstains ("not in the sources") or
//! states facts found in no source shown ([`GroundingStatus::Unsupported`]), it runs
//! [`Escalation::then`] (`map_reduce` by default: each chunk read on its own) over every
//! node, and that is the answer. The first answer, why it was set aside, and what it
//! spent are in [`crate::Response::escalation`]; [`crate::Response::usage`] counts both.
//!
//! Both syntheses go through the same model stack, so the caps set there (calls, rate,
//! tokens) hold for the two together; [`Synthesizer::plan`] counts the first exactly and
//! the escalation as an upper bound (its rows are not exact: it may not happen). A
//! stream is not escalated: its answer is shown as it comes, before it can be judged.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), synthkit::SynthError> {
//! use std::sync::Arc;
//! use synthkit::{Escalation, Node, ResponseMode, Synthesizer};
//! use synthkit::{model::ModelInfo, testing::ScriptedModel};
//!
//! // Says the sources do not answer unless its prompt holds the mirror; map calls
//! // (structured) get a record.
//! let model = Arc::new(ScriptedModel::new(ModelInfo::new("m"), |r| {
//!     let seen = r.prompt.to_text().contains("mirror is cleaned");
//!     Ok(match (r.schema.is_some(), seen) {
//!         (true, _) => format!(
//!             r#"{{"information": "{}", "confidence": 4, "no_information": {}}}"#,
//!             if seen { "The mirror is cleaned every six months." } else { "" },
//!             !seen
//!         ),
//!         (false, true) => "Every six months.".into(),
//!         (false, false) => "The sources do not answer this question.".into(),
//!     })
//! }));
//! let synth = Synthesizer::builder(model.clone())
//!     .escalate(Escalation::new(1))
//!     .build()?;
//! let nodes = vec![
//!     Node::new("dome", "The dome opens at dusk."),
//!     Node::new("mirror", "The mirror is cleaned every six months."),
//! ];
//! let r = synth.synthesize("How often is the mirror cleaned?", nodes).await?;
//! let e = r.escalation.as_ref().unwrap();
//! assert!(e.escalated && e.to == ResponseMode::MapReduce);
//! assert_eq!((e.first_nodes, e.first_usage.calls), (1, 1));
//! assert_eq!(r.text, "Every six months.");
//! assert!(r.usage.calls > e.first_usage.calls);
//! # Ok(()) }
//! ```

use super::{SynthesisInput, Synthesizer};
use crate::error::SynthError;
use crate::grounding::GroundingStatus;
use crate::mode::ResponseMode;
use crate::response::Response;
pub use crate::response::{EscalationReason, EscalationReport};

/// The default [`Escalation::first_nodes`]: the first synthesis reads the best 5 nodes.
pub const DEFAULT_FIRST_NODES: usize = 5;

/// When and how a synthesis widens ([`crate::SynthesizerBuilder::escalate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Escalation {
    /// How many of the nodes, as given, the first synthesis reads (at least 1).
    pub first_nodes: usize,
    /// The mode run over every node when the first answer is set aside.
    pub then: ResponseMode,
}

impl Default for Escalation {
    fn default() -> Self {
        Self::new(DEFAULT_FIRST_NODES)
    }
}

impl Escalation {
    /// The first synthesis over `first_nodes` nodes (1 at least), then `map_reduce` over
    /// all of them.
    pub fn new(first_nodes: usize) -> Self {
        Escalation {
            first_nodes: first_nodes.max(1),
            then: ResponseMode::MapReduce,
        }
    }

    /// The mode of the wider synthesis.
    pub fn with_then(mut self, mode: ResponseMode) -> Self {
        self.then = mode;
        self
    }
}

impl Synthesizer {
    /// Whether this synthesizer escalates (its mode differs from the wider one's).
    pub fn escalation(&self) -> Option<Escalation> {
        self.s.escalation.filter(|e| e.then != self.s.mode)
    }

    /// The synthesizer of the wider synthesis: these settings in `e.then`, without
    /// escalation.
    pub(crate) fn wider(&self, e: Escalation) -> Result<Synthesizer, SynthError> {
        self.to_builder().mode(e.then).without_escalation().build()
    }

    /// Runs `input` with escalation `e`: the first synthesis over the first nodes, the
    /// wider one over all when the first answer is set aside.
    pub(crate) async fn run_escalating(
        &self,
        input: SynthesisInput,
        e: Escalation,
    ) -> Result<Response, SynthError> {
        let first_input = first_of(&input, e);
        let first_nodes = first_input.nodes.len();
        let first = self.run_to_end::<Response>(first_input).await?;
        let reason = set_aside(&first);
        let mut report = EscalationReport {
            escalated: false,
            reason,
            from: self.s.mode,
            to: e.then,
            first_nodes,
            first_answer: first.text.clone(),
            first_usage: first.usage,
        };
        if reason.is_none() {
            let mut first = first;
            first.escalation = Some(report);
            return Ok(first);
        }
        tracing::info!(
            target: "synthkit",
            reason = ?reason,
            from = self.s.mode.as_str(),
            to = e.then.as_str(),
            "the first answer was set aside; escalating over every node"
        );
        let mut wider = self.wider(e)?.run_to_end::<Response>(input).await?;
        wider.usage = first.usage.plus(wider.usage);
        if let (Some(mut steps), Some(more)) = (first.steps, wider.steps.take()) {
            steps.extend(more);
            wider.steps = Some(steps);
        }
        report.escalated = true;
        wider.escalation = Some(report);
        Ok(wider)
    }
}

/// `input` with its first `e.first_nodes` nodes only.
pub(crate) fn first_of(input: &SynthesisInput, e: Escalation) -> SynthesisInput {
    let mut first = SynthesisInput::new(
        input.query.clone(),
        input.nodes.iter().take(e.first_nodes).cloned().collect(),
    );
    first.additional_sources = input.additional_sources.clone();
    first.previous_response = input.previous_response.clone();
    first.variables = input.variables.clone();
    first
}

/// Why `first` is set aside, if it is.
fn set_aside(first: &Response) -> Option<EscalationReason> {
    if !first.answerable {
        return Some(EscalationReason::Abstained);
    }
    match &first.grounding {
        Some(g) if g.status == GroundingStatus::Unsupported => Some(EscalationReason::Unsupported),
        _ => None,
    }
}
