//! Responses: the answer, its sources, usage and what truncation dropped.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;
use futures::stream::BoxStream;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::citation::{Citations, strip_markers};
use crate::error::SynthError;
use crate::mode::ResponseMode;
use crate::node::Node;
use crate::observe::{UsageSource, UsageTotals};
use crate::steps::{StepRecorder, SynthStep};

/// What `simple_summarize` cut to fit one prompt.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Truncation {
    /// Tokens of context that were not sent.
    pub dropped_tokens: usize,
    /// Nodes whose text was cut, wholly or partly, in order.
    pub dropped_node_ids: Vec<String>,
}

/// A finished synthesis.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Response {
    /// The answer's text (for a structured answer, its JSON).
    pub text: String,
    /// `false` when the sources do not answer: there were no nodes, the model said so
    /// (then [`Response::text`] is the configured "not in the sources" answer, or the
    /// model's own short words), or no step of the mode found anything
    /// ([`crate::text::abstention`]). `true` otherwise, and for modes that ask no
    /// question of the sources (`generation`, `no_text`, `context_only`).
    pub answerable: bool,
    /// The structured answer, when an output schema was set.
    pub structured: Option<Value>,
    /// The nodes given, then the additional sources, as given.
    pub source_nodes: Vec<Node>,
    /// Node id to its full metadata.
    pub metadata: Map<String, Value>,
    /// Calls and tokens.
    pub usage: UsageTotals,
    /// What truncation dropped (`simple_summarize` only).
    pub truncation: Option<Truncation>,
    /// The answer's citations, when they were asked for
    /// ([`crate::SynthesizerBuilder::citations`]).
    pub citations: Option<Citations>,
    /// One step per model call, when they were asked for
    /// ([`crate::SynthesizerBuilder::return_steps`]); see [`crate::steps`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps: Option<Vec<SynthStep>>,
    /// What the evidence stage kept and left out, when it was on
    /// ([`crate::SynthesizerBuilder::evidence`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<crate::evidence::EvidenceReport>,
    /// The grounding check of the answer: its facts looked up in what the model was
    /// shown ([`crate::grounding`]); none for modes that ask the sources nothing, JSON
    /// answers and abstentions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grounding: Option<crate::grounding::Grounding>,
    /// What escalation did, when it was on ([`crate::SynthesizerBuilder::escalate`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub escalation: Option<EscalationReport>,
}

impl Default for Response {
    fn default() -> Self {
        Self {
            text: String::new(),
            answerable: true,
            structured: None,
            source_nodes: Vec::new(),
            metadata: Map::new(),
            usage: UsageTotals::default(),
            truncation: None,
            citations: None,
            steps: None,
            evidence: None,
            grounding: None,
            escalation: None,
        }
    }
}

impl Response {
    /// Parses the structured answer (or the text) into `T`.
    pub fn parse<T: serde::de::DeserializeOwned>(&self) -> Result<T, SynthError> {
        let parsed = match &self.structured {
            Some(v) => serde_json::from_value(v.clone()),
            None => serde_json::from_str(&self.text),
        };
        parsed.map_err(|source| SynthError::Parse { source })
    }
}

impl Response {
    /// Whether node `id` is cited by the answer (false without citations).
    pub fn is_cited(&self, id: &str) -> bool {
        self.citations.as_ref().is_some_and(|c| c.cites(id))
    }

    /// The answer without its `[n]` markers (the citations stay in
    /// [`Response::citations`]): for showing an answer whose sources are listed apart.
    pub fn text_without_markers(&self) -> String {
        strip_markers(&self.text)
    }
}

impl std::fmt::Display for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// Where a stream leaves its citations when it ends.
pub(crate) type CitationSlot = Arc<std::sync::Mutex<Option<Citations>>>;

/// Where a stream's final call leaves whether the sources answered (set when the reply
/// said they do not).
pub(crate) type AnswerableSlot = Arc<std::sync::atomic::AtomicBool>;

/// A check of the whole answer once a stream has ended, which may change the response
/// (the grounding gate).
pub(crate) trait FinalCheck: Send + Sync {
    /// Checks `response`, changing it as the check's policy says, or fails.
    fn apply<'a>(
        &'a self,
        response: &'a mut Response,
    ) -> futures::future::BoxFuture<'a, Result<(), SynthError>>;
}

/// A synthesis whose answer arrives as text deltas.
///
/// Poll it as a [`Stream`] of deltas; once drained, [`StreamingResponse::text`] holds the
/// full text, equal to what the non-streaming call returns. [`StreamingResponse::finish`]
/// drains what is left and gives the [`Response`].
pub struct StreamingResponse {
    deltas: BoxStream<'static, Result<String, SynthError>>,
    text: String,
    done: bool,
    failed: bool,
    pub(crate) response: Response,
    pub(crate) caller: Option<Arc<dyn UsageSource>>,
    citations: Option<CitationSlot>,
    steps: Option<Arc<StepRecorder>>,
    answerable: Option<AnswerableSlot>,
    gate: Option<Box<dyn FinalCheck>>,
}

debug_fields!(StreamingResponse {
    text: text,
    done: done,
    ..
});

impl StreamingResponse {
    pub(crate) fn new(
        deltas: BoxStream<'static, Result<String, SynthError>>,
        response: Response,
        caller: Option<Arc<dyn UsageSource>>,
    ) -> Self {
        Self {
            deltas,
            text: String::new(),
            done: false,
            failed: false,
            response,
            caller,
            citations: None,
            steps: None,
            answerable: None,
            gate: None,
        }
    }

    setters! {
        /// Takes the steps from `recorder` when the stream has ended.
        pub(crate) fn with_steps(recorder: Arc<StepRecorder>) => Some(steps);

        /// Takes the citations from `slot` when the stream has ended.
        pub(crate) fn with_citations(slot: CitationSlot) => Some(citations);

        /// Takes whether the sources answered from `slot` when the stream has ended.
        pub(crate) fn with_answerable(slot: AnswerableSlot) => Some(answerable);
    }

    /// Checks the answer (its grounding) when the stream has ended.
    pub(crate) fn with_gate(mut self, gate: impl FinalCheck + 'static) -> Self {
        self.gate = Some(Box::new(gate));
        self
    }

    /// The text received so far (all of it once the stream is drained).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether every delta has been received.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The sources, as given.
    pub fn source_nodes(&self) -> &[Node] {
        &self.response.source_nodes
    }

    /// Drains the remaining deltas and returns the full response. An error in the stream
    /// is returned as the error: a partial answer is never presented as complete.
    pub async fn finish(mut self) -> Result<Response, SynthError> {
        use futures::StreamExt;
        while let Some(d) = self.next().await {
            d?;
        }
        if self.failed {
            return Err(SynthError::StreamFailed);
        }
        let mut response = std::mem::take(&mut self.response);
        response.text = std::mem::take(&mut self.text);
        if let Some(c) = &self.caller {
            response.usage = c.totals();
        }
        if let Some(recorder) = &self.steps {
            response.steps = Some(recorder.take());
        }
        if let Some(slot) = &self.answerable {
            response.answerable = slot.load(std::sync::atomic::Ordering::Acquire);
        }
        if let Some(slot) = &self.citations {
            response.citations = slot
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
        }
        if let Some(gate) = &self.gate {
            // The text was shown as it came: an unsupported answer is flagged (or, under
            // the abstain policy, replaced in the response) after the fact.
            gate.apply(&mut response).await?;
        }
        Ok(response)
    }
}

impl Stream for StreamingResponse {
    type Item = Result<String, SynthError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        match self.deltas.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(d))) => {
                self.text.push_str(&d);
                Poll::Ready(Some(Ok(d)))
            }
            Poll::Ready(Some(Err(e))) => {
                self.failed = true;
                self.done = true;
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(None) => {
                self.done = true;
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Why a first answer was set aside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EscalationReason {
    /// It said the sources do not answer.
    Abstained,
    /// Its facts are in no source it was shown.
    Unsupported,
}

/// What escalation did ([`Response::escalation`], [`crate::synth::escalation`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct EscalationReport {
    /// Whether the wider synthesis ran (and gave the answer).
    pub escalated: bool,
    /// Why the first answer was set aside (escalated only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<EscalationReason>,
    /// The first synthesis's mode.
    pub from: ResponseMode,
    /// The wider synthesis's mode.
    pub to: ResponseMode,
    /// How many nodes the first synthesis read.
    pub first_nodes: usize,
    /// The first answer (set aside when escalated).
    pub first_answer: String,
    /// What the first synthesis spent (in [`Response::usage`] too).
    pub first_usage: UsageTotals,
}
