//! Finishing a synthesis: the final call (plain, structured or filtering), streamed or
//! not, and the response with its sources.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use serde_json::Value;

use super::fanout::Driven;
use super::grounding_guard::GroundingGuard;
use super::reading::FinalText;
use super::{Job, filter};
use crate::citation::{CitationLedger, MarkerRewriter, numbers_in};
use crate::error::SynthError;
use crate::model::ModelRequest;
use crate::observe::UsageSource;
use crate::response::{AnswerableSlot, CitationSlot, Response, StreamingResponse, Truncation};

/// How the final answer is produced once a mode has done its intermediate work.
pub(crate) enum Outcome {
    /// The answer is known (no call needed).
    Text(String),
    /// The sources do not answer: this text is the answer, and the response says
    /// `answerable: false` (no nodes, or no step found anything).
    Unanswered(String),
    /// One last call; `fallback` is the answer if the call's answer is empty or unusable;
    /// `truncation` is what simple_summarize dropped; `guard`, a refine chain's grounding
    /// guard (what the chain showed the model), applied when the call is not streamed.
    Final {
        request: ModelRequest,
        fallback: Option<String>,
        how: FinalHow,
        truncation: Option<Truncation>,
        guard: Option<GroundingGuard>,
    },
    /// An answer made of many calls' answers (accumulate), produced by the mode.
    Composite(Box<dyn Composite>),
}

impl Outcome {
    /// One last call read `how`, with no fallback, truncation or guard.
    pub(crate) fn final_call(request: ModelRequest, how: FinalHow) -> Self {
        Outcome::Final {
            request,
            fallback: None,
            how,
            truncation: None,
            guard: None,
        }
    }
}

/// An answer a mode produces from many calls at the end (accumulate's numbered answers):
/// whole, or as a stream. Its markers are checked call by call.
pub(crate) trait Composite: Send {
    /// The whole answer.
    fn answer<'a>(self: Box<Self>, job: &'a Job) -> BoxFuture<'a, Result<String, SynthError>>;
    /// The answer as a stream of deltas, owning every call it starts.
    fn stream(self: Box<Self>, job: Job) -> BoxStream<'static, Result<String, SynthError>>;
}

/// How the final call's reply is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FinalHow {
    /// Plain text.
    Plain,
    /// JSON following the output schema.
    Schema,
    /// A filtering step: `{query_satisfied, answer}`.
    Filter,
}

impl FinalHow {
    /// Plain text, or JSON when there is an output schema.
    pub(crate) fn for_schema(schema: Option<&Value>) -> Self {
        if schema.is_some() {
            FinalHow::Schema
        } else {
            FinalHow::Plain
        }
    }
}

impl Job {
    /// Makes the final call (if any) and fills `response`.
    pub(crate) async fn finish(
        &self,
        outcome: Outcome,
        response: &mut Response,
    ) -> Result<(), SynthError> {
        match outcome {
            Outcome::Text(t) => response.text = self.cite_final(t, None, response).await,
            Outcome::Unanswered(t) => {
                response.answerable = false;
                response.text = self.cite_final(t, None, response).await;
            }
            Outcome::Final {
                request,
                fallback,
                how,
                truncation,
                guard,
            } => {
                self.caller.plan(1);
                let (text, structured) = self.final_call(&request, how).await?;
                response.structured = structured;
                response.truncation = truncation;
                let text = match (text, how) {
                    (Some(t), FinalHow::Plain) => {
                        Some(self.read_final(&request, t, &fallback, guard).await)
                    }
                    (t, _) => t.map(FinalText::Answer),
                };
                response.text = match text {
                    Some(FinalText::Answer(t)) if !t.is_empty() => {
                        let shown = self.shown_sources(&request);
                        self.cite_final(t, Some(shown), response).await
                    }
                    Some(FinalText::Unanswered(t)) => {
                        response.answerable = false;
                        self.cite_final(t, None, response).await
                    }
                    _ => {
                        let t = fallback.unwrap_or_else(|| self.empty());
                        self.cite_final(t, None, response).await
                    }
                };
            }
            Outcome::Composite(composite) => {
                let text = composite.answer(self).await?;
                response.text = self.cite_final(text, None, response).await;
            }
        }
        Ok(())
    }

    /// The final answer with its markers checked against `shown` (every source when
    /// `None`, for text already checked step by step) and renumbered; fills
    /// `response.citations`. Unchanged without citations.
    async fn cite_final(
        &self,
        text: String,
        shown: Option<BTreeSet<u32>>,
        response: &mut Response,
    ) -> String {
        let Some(ledger) = &self.ledger else {
            return text;
        };
        let mut rewriter = self.final_rewriter(ledger, shown);
        let out = rewriter.rewrite(&text);
        let (citations, _) = citations_of(Arc::clone(ledger), rewriter, text).await;
        response.citations = Some(citations);
        out
    }

    /// The rewriter of a final answer: renumbering, and hiding markers when asked.
    fn final_rewriter(
        &self,
        ledger: &CitationLedger,
        shown: Option<BTreeSet<u32>>,
    ) -> MarkerRewriter {
        let r = MarkerRewriter::new(shown.unwrap_or_else(|| ledger.all()), true);
        if self.s.citation_markers {
            r
        } else {
            r.hiding_markers()
        }
    }

    /// `deltas` with their markers checked against `shown` and renumbered as they pass;
    /// the citations land in `slot` when the stream ends (in quote mode the stream keeps
    /// the answer as written for the quote check then). Unchanged without citations.
    fn cite_stream(
        &self,
        deltas: BoxStream<'static, Result<String, SynthError>>,
        shown: Option<BTreeSet<u32>>,
        slot: &CitationSlot,
    ) -> BoxStream<'static, Result<String, SynthError>> {
        let Some(ledger) = self.ledger.clone() else {
            return deltas;
        };
        let rewriter = self.final_rewriter(&ledger, shown);
        let slot = Arc::clone(slot);
        let state = (deltas, rewriter, String::new(), false);
        Box::pin(futures::stream::unfold(
            state,
            move |(mut deltas, mut rewriter, mut raw, done)| {
                let ledger = Arc::clone(&ledger);
                let slot = Arc::clone(&slot);
                async move {
                    if done {
                        return None;
                    }
                    loop {
                        match deltas.next().await {
                            Some(Ok(d)) => {
                                if ledger.checks_quotes() {
                                    raw.push_str(&d);
                                }
                                let out = rewriter.push(&d);
                                if !out.is_empty() {
                                    return Some((Ok(out), (deltas, rewriter, raw, false)));
                                }
                            }
                            Some(Err(e)) => {
                                return Some((Err(e), (deltas, rewriter, raw, true)));
                            }
                            None => {
                                let rest = rewriter.finish();
                                let (citations, rewriter) =
                                    citations_of(Arc::clone(&ledger), rewriter, raw).await;
                                *slot.lock().unwrap_or_else(PoisonError::into_inner) =
                                    Some(citations);
                                return (!rest.is_empty()).then_some((
                                    Ok(rest),
                                    (deltas, rewriter, String::new(), true),
                                ));
                            }
                        }
                    }
                }
            },
        ))
    }

    /// The final call: (text or None when unusable, structured value).
    async fn final_call(
        &self,
        request: &ModelRequest,
        how: FinalHow,
    ) -> Result<(Option<String>, Option<Value>), SynthError> {
        match how {
            FinalHow::Plain => Ok((Some(self.caller.complete(request).await?.text), None)),
            FinalHow::Schema => {
                let c = self.caller.structured(request).await?;
                Ok((Some(c.value.to_string()), Some(c.value)))
            }
            FinalHow::Filter => Ok((filter::filter_step(self, request).await?, None)),
        }
    }

    /// Turns the outcome into a stream: the final call streamed; everything else as one
    /// delta. The streamed text always equals the non-streamed text.
    pub(crate) async fn open_stream(
        &self,
        outcome: Outcome,
        base: Response,
    ) -> Result<StreamingResponse, SynthError> {
        let caller: Arc<dyn UsageSource> = self.caller.clone();
        match outcome {
            // The grounding guard is not applied to a streamed reply (see
            // `Job::gate_final`): the synthesis's grounding gate flags it.
            Outcome::Final {
                request,
                fallback,
                how: FinalHow::Plain,
                truncation,
                guard: _,
            } => {
                self.caller.plan(1);
                let shown = self.ledger.as_ref().map(|_| {
                    let mut shown = self.shown_sources(&request);
                    shown.extend(fallback.as_deref().map(numbers_in).unwrap_or_default());
                    shown
                });
                let step = request.step();
                let inner = self.caller.stream(request).await?;
                let answerable = AnswerableSlot::new(true.into());
                let inner = self.gate_final(inner, step, fallback.clone(), &answerable);
                let fallback = fallback.unwrap_or_else(|| self.empty());
                let mut base = base;
                base.truncation = truncation;
                let slot = CitationSlot::default();
                let deltas = self.cite_stream(with_fallback(inner, fallback), shown, &slot);
                Ok(StreamingResponse::new(deltas, base, Some(caller))
                    .with_citations(slot)
                    .with_answerable(answerable))
            }
            Outcome::Composite(composite) if self.s.output_schema.is_none() => {
                let s = composite.stream(self.clone());
                let slot = CitationSlot::default();
                let deltas = self.cite_stream(s, None, &slot);
                Ok(StreamingResponse::new(deltas, base, Some(caller)).with_citations(slot))
            }
            other => {
                let mut response = base;
                self.finish(other, &mut response).await?;
                // Known in full: one delta (none for an empty answer).
                let text = std::mem::take(&mut response.text);
                let s = futures::stream::iter((!text.is_empty()).then_some(Ok(text))).boxed();
                Ok(StreamingResponse::new(s, response, Some(caller)))
            }
        }
    }
}

/// The citations of a final answer (`raw`, as the model wrote it) rewritten by
/// `rewriter`, and the rewriter back. Checking quotes searches the sources' text, work
/// the request sizes, so in quote mode it runs on a blocking thread, not the runtime's,
/// and stops soon after this future is dropped (the request is gone: a timeout, a client
/// that left).
async fn citations_of(
    ledger: Arc<CitationLedger>,
    mut rewriter: MarkerRewriter,
    raw: String,
) -> (crate::citation::Citations, MarkerRewriter) {
    if !ledger.checks_quotes() {
        let c = ledger.citations(&mut rewriter, &raw, &AtomicBool::new(false));
        return (c.unwrap_or_default(), rewriter);
    }
    let stop = StopOnDrop::default();
    let flag = Arc::clone(&stop.0);
    let checked = tokio::task::spawn_blocking(move || {
        let c = ledger.citations(&mut rewriter, &raw, &flag);
        (c, rewriter)
    })
    .await;
    drop(stop);
    match checked {
        Ok((c, rewriter)) => (c.unwrap_or_default(), rewriter),
        Err(e) => {
            tracing::error!(target: "synthkit", error = %e, "checking the answer's quotes failed");
            // The rewriter is not used again once its answer has ended.
            let spent = MarkerRewriter::new(BTreeSet::new(), true);
            (crate::citation::Citations::default(), spent)
        }
    }
}

/// Sets its flag when dropped: held by the side awaiting a blocking check, it tells the
/// check to stop once nobody awaits it.
#[derive(Debug, Default)]
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Passes deltas through; if the stream ends having given no text, gives `fallback`.
fn with_fallback(
    inner: BoxStream<'static, Result<String, SynthError>>,
    fallback: String,
) -> BoxStream<'static, Result<String, SynthError>> {
    let state = (inner, false, Some(fallback), false);
    Box::pin(futures::stream::unfold(
        state,
        |(mut inner, mut any, mut fallback, done)| async move {
            if done {
                return None;
            }
            match inner.next().await {
                Some(Ok(d)) => {
                    any |= !d.is_empty();
                    Some((Ok(d), (inner, any, fallback, false)))
                }
                Some(Err(e)) => Some((Err(e), (inner, true, None, true))),
                None => match fallback.take() {
                    Some(f) if !any => Some((Ok(f), (inner, true, None, true))),
                    _ => None,
                },
            }
        },
    ))
}

/// A stream of `T` driven by a future the stream owns (see [`Driven`]).
pub(crate) fn driven<T: Send + 'static>(
    driver: futures::future::BoxFuture<'static, Result<(), SynthError>>,
    output: BoxStream<'static, Result<T, SynthError>>,
) -> BoxStream<'static, Result<T, SynthError>> {
    Box::pin(Driven::new(driver, output))
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    /// A quote-mode ledger over one large source, the answer to check (256 fabricated
    /// quotes, each searched for in the whole source) and its rewriter.
    fn costly_check() -> (Arc<CitationLedger>, MarkerRewriter, String) {
        let source = "the dome opens at dusk and closes at dawn. ".repeat(40_000);
        let ledger = CitationLedger::with_texts(vec!["dome".into()], Some(vec![source]));
        let raw: String = (0..crate::citation::MAX_QUOTES)
            .map(|i| format!("Dusk [1] \"fabricated words number {i}.\" "))
            .collect();
        let mut rewriter = MarkerRewriter::new(ledger.all(), true);
        rewriter.rewrite(&raw);
        (ledger, rewriter, raw)
    }

    #[tokio::test]
    async fn a_quote_check_stops_once_its_caller_is_gone() {
        let (ledger, rewriter, raw) = costly_check();
        let (citations, _) = citations_of(Arc::clone(&ledger), rewriter, raw).await;
        assert_eq!(citations.quotes.len(), crate::citation::MAX_QUOTES);
        let full = ledger.check_steps();

        let (ledger, rewriter, raw) = costly_check();
        // Polled once (the check starts on a blocking thread), then dropped: the request
        // is gone.
        let started = citations_of(Arc::clone(&ledger), rewriter, raw).now_or_never();
        assert!(started.is_none(), "the check cannot have ended yet");
        // The blocking thread holds the ledger until the check returns (bounded wait).
        for _ in 0..6000 {
            if Arc::strong_count(&ledger) == 1 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(Arc::strong_count(&ledger), 1, "the check never returned");
        let stopped = ledger.check_steps();
        assert!(
            stopped < full / 10,
            "the stopped check took {stopped} steps of the full check's {full}"
        );
    }
}
