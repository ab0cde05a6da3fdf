//! Reading replies for "the sources do not answer" and for talk about the previous
//! answer ([`crate::text::abstention`]): in intermediate steps, in the final call, and in a
//! streamed final call, which holds back only what it must to read the reply the same way.
//!
//! A streamed final call holds back text while it could still be the marker phrase
//! (`Not in the sources`, a few characters), and, in a step that has an answer to keep
//! (refine's last step), its first words until they show whether the reply opens as a
//! non-answer does, and then, if it does, the rest of a short reply. So the streamed text
//! always equals the text of the same reply not streamed.
//!
//! A refine chain's grounding guard ([`super::grounding_guard`]) reads a reply's facts
//! against the passages shown so far: in intermediate steps and in a final call that is
//! not streamed. A streamed final call is not held back for it (the reply would have to
//! be held whole): its text stays, and the synthesis's grounding gate flags it.

use futures::StreamExt;
use futures::stream::BoxStream;

use super::Job;
use super::fanout::Reply;
use super::grounding_guard::GroundingGuard;
use crate::error::SynthError;
use crate::mode::ResponseMode;
use crate::model::{ModelRequest, StepInfo};
use crate::observe::SynthEvent;
use crate::response::AnswerableSlot;
use crate::text::abstention::{
    ReplyReading, has_opening, is_long, may_start_with_not_in_sources, opens_like_no_answer,
    read_reply, starts_with_not_in_sources,
};

/// The final call's text, read.
pub(crate) enum FinalText {
    /// An answer (empty: none, the fallback applies).
    Answer(String),
    /// The sources do not answer; this is the answer's text.
    Unanswered(String),
}

impl Job {
    /// Whether replies of `request` are read at all: plain-text replies of modes that ask
    /// the sources (not generation's query-only prompt, nor JSON replies).
    pub(super) fn reads(&self, request: &ModelRequest) -> bool {
        request.schema.is_none() && self.mode() != ResponseMode::Generation
    }

    /// How an intermediate step's `reply` reads; `has_previous`: the step had an answer
    /// to keep. A reply that is not an answer is reported ([`SynthEvent::ReplyNotUsed`]).
    pub(crate) fn read_step(
        &self,
        request: &ModelRequest,
        reply: &str,
        has_previous: bool,
    ) -> ReplyReading {
        if !self.reads(request) {
            return ReplyReading::Answer;
        }
        let reading = read_reply(reply, has_previous);
        if reading != ReplyReading::Answer {
            self.not_used(request.step(), reading, has_previous);
        }
        reading
    }

    /// Whether a tree level's `reply` says its passages do not answer (then it is
    /// reported and left out of the next level); JSON replies (`structured`) are not read.
    pub(crate) fn drops_unanswered(&self, reply: &Reply, structured: bool) -> bool {
        if structured || self.mode() == ResponseMode::Generation {
            return false;
        }
        let reading = read_reply(&reply.text, false);
        if reading.abstains() {
            self.not_used(reply.step, reading, false);
        }
        reading.abstains()
    }

    /// Reports a reply that was not used as an answer ([`SynthEvent::ReplyNotUsed`]).
    pub(crate) fn not_used(&self, step: StepInfo, reading: ReplyReading, kept_previous: bool) {
        tracing::info!(
            target: "synthkit",
            step = step.step.as_str(),
            index = step.index,
            ?reading,
            kept_previous,
            "a reply was not used as an answer"
        );
        self.caller.event(SynthEvent::ReplyNotUsed {
            step,
            reading,
            kept_previous,
        });
    }

    /// The final call's plain `text`, read: `previous` is the answer the step had;
    /// `guard`, a refine chain's grounding guard (a reply that reads as an answer but
    /// whose facts are in no passage shown keeps a grounded `previous`).
    pub(crate) async fn read_final(
        &self,
        request: &ModelRequest,
        text: String,
        previous: &Option<String>,
        guard: Option<GroundingGuard>,
    ) -> FinalText {
        if !self.reads(request) {
            return FinalText::Answer(text);
        }
        let mut reading = read_reply(&text, previous.is_some());
        if reading == ReplyReading::Answer
            && let Some(mut guard) = guard
        {
            reading = self
                .grounding_reading(request, &text, previous.as_deref(), &mut guard)
                .await;
        }
        self.decide(request.step(), reading, text, previous)
    }

    /// What a final reply read as `reading` becomes.
    fn decide(
        &self,
        step: StepInfo,
        reading: ReplyReading,
        text: String,
        previous: &Option<String>,
    ) -> FinalText {
        if reading == ReplyReading::Answer {
            return FinalText::Answer(text);
        }
        self.not_used(step, reading, previous.is_some());
        match (previous, reading) {
            (Some(p), _) => FinalText::Answer(p.clone()),
            (None, ReplyReading::NotInSources) => FinalText::Unanswered(self.not_in_sources()),
            (None, _) => FinalText::Unanswered(text),
        }
    }

    /// The streamed final reply `inner`, read as [`Job::read_final`] reads it whole;
    /// `slot` is set to `false` when the sources do not answer.
    ///
    /// All but the grounding guard: a refine reply whose facts are in no passage shown
    /// is passed on as it comes (it could only be judged whole, so holding it back would
    /// hold back the whole answer); the synthesis's grounding gate flags it at the end
    /// (`Response::grounding`, and its `on_unsupported` policy).
    pub(crate) fn gate_final(
        &self,
        inner: BoxStream<'static, Result<String, SynthError>>,
        step: StepInfo,
        previous: Option<String>,
        slot: &AnswerableSlot,
    ) -> BoxStream<'static, Result<String, SynthError>> {
        if self.mode() == ResponseMode::Generation {
            return inner;
        }
        let gate = Gate {
            job: self.clone(),
            step,
            previous,
            slot: std::sync::Arc::clone(slot),
            state: State::Holding(String::new()),
            done: false,
        };
        Box::pin(futures::stream::unfold(
            (inner, gate),
            |(mut inner, mut gate)| async move {
                loop {
                    if gate.done {
                        return None;
                    }
                    match inner.next().await {
                        Some(Ok(d)) => {
                            if let Some(out) = gate.push(&d) {
                                return Some((Ok(out), (inner, gate)));
                            }
                        }
                        Some(Err(e)) => {
                            gate.done = true;
                            return Some((Err(e), (inner, gate)));
                        }
                        None => {
                            gate.done = true;
                            let out = gate.finish();
                            return (!out.is_empty()).then_some((Ok(out), (inner, gate)));
                        }
                    }
                }
            },
        ))
    }
}

/// Where a streamed final reply stands.
enum State {
    /// Text held back while the reply may still be the marker or (with an answer to keep)
    /// short.
    Holding(String),
    /// Text passed through; its start is kept while the reply is short (to read it at
    /// the end), `None` once it is long.
    Passing(Option<String>),
    /// The reply starts with the marker phrase: the rest is dropped.
    Marker,
}

struct Gate {
    job: Job,
    step: StepInfo,
    previous: Option<String>,
    slot: AnswerableSlot,
    state: State,
    done: bool,
}

impl Gate {
    /// Takes delta `d`; what to pass on now, if anything.
    fn push(&mut self, d: &str) -> Option<String> {
        match &mut self.state {
            State::Marker => None,
            State::Passing(start) => {
                if let Some(s) = start {
                    s.push_str(d);
                    if is_long(s) {
                        *start = None;
                    }
                }
                (!d.is_empty()).then(|| d.to_string())
            }
            State::Holding(held) => {
                held.push_str(d);
                if starts_with_not_in_sources(held) {
                    self.state = State::Marker;
                    return None;
                }
                let keep_holding = if self.previous.is_some() {
                    // Until its opening is whole, then all of a short reply that opens as
                    // a non-answer.
                    !is_long(held) && (!has_opening(held) || opens_like_no_answer(held))
                } else {
                    may_start_with_not_in_sources(held)
                };
                if keep_holding {
                    return None;
                }
                let held = std::mem::take(held);
                self.state = State::Passing((!is_long(&held)).then(|| held.clone()));
                Some(held)
            }
        }
    }

    /// The stream ended: what is left to pass on.
    fn finish(&mut self) -> String {
        let (reading, text, passed) = match std::mem::replace(&mut self.state, State::Marker) {
            State::Marker => (ReplyReading::NotInSources, String::new(), false),
            State::Holding(held) => (read_reply(&held, self.previous.is_some()), held, false),
            State::Passing(Some(start)) => {
                (read_reply(&start, self.previous.is_some()), start, true)
            }
            State::Passing(None) => (ReplyReading::Answer, String::new(), true),
        };
        let out = self.job.decide(self.step, reading, text, &self.previous);
        match out {
            // Already passed on (a reply that read as an answer).
            FinalText::Answer(_) if passed => String::new(),
            FinalText::Answer(t) => t,
            FinalText::Unanswered(t) => {
                self.slot.store(false, std::sync::atomic::Ordering::Release);
                if passed { String::new() } else { t }
            }
        }
    }
}
