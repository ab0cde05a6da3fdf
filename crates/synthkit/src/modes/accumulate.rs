//! `accumulate` and `compact_accumulate`: one answer per chunk (or per packed chunk),
//! numbered `Response 1: ...` and joined by a separator. Calls run concurrently (bounded),
//! answers keep the chunks' order, and streaming gives the numbered answers in order
//! (decision 11).
//!
//! Calls: accumulate, one per chunk (more for chunks over the budget); compact_accumulate,
//! one per packed chunk (packed once, decision 5).

use std::borrow::Cow;
use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use serde_json::Value;

use crate::engine::fanout::RequestSource;
use crate::engine::finish::driven;
use crate::engine::origins::Sourced;
use crate::engine::{Composite, Job, Outcome, Verdict};
use crate::error::SynthError;
use crate::many::OwnedTask;
use crate::mode::{ResponseMode, Step};
use crate::model::{ModelRequest, StepInfo};
use crate::prompt::{PromptTemplate, TemplateKind};
use crate::text::ChunkCursor;

pub(crate) fn run(job: &Job, texts: &[Cow<'_, str>]) -> Result<Outcome, SynthError> {
    requests_for(
        job,
        ResponseMode::Accumulate,
        Sourced::of_nodes(texts, true),
    )
}

pub(crate) fn run_compact(job: &Job, texts: &[Cow<'_, str>]) -> Result<Outcome, SynthError> {
    requests_for(
        job,
        ResponseMode::CompactAccumulate,
        Sourced::of_nodes(texts, false),
    )
}

fn requests_for(job: &Job, mode: ResponseMode, chunks: Sourced) -> Result<Outcome, SynthError> {
    if chunks.is_empty() {
        return Ok(Outcome::Text(job.empty()));
    }
    let chunks = Arc::new(chunks);
    // Fail now, before any call, if the template leaves no room.
    NumberedRequests::new(job, mode, &chunks)?;
    Ok(Outcome::Composite(Box::new(Numbered { mode, chunks })))
}

/// Accumulate's answer: one numbered answer per piece of each chunk, joined.
struct Numbered {
    /// `accumulate` or `compact_accumulate`.
    mode: ResponseMode,
    /// The texts, each split on its own ([`Sourced::parts`]).
    chunks: Arc<Sourced>,
}

impl Composite for Numbered {
    fn answer<'a>(self: Box<Self>, job: &'a Job) -> BoxFuture<'a, Result<String, SynthError>> {
        Box::pin(async move {
            let requests = NumberedRequests::new(job, self.mode, &self.chunks)?;
            let answers: Vec<String> = job
                .call_all(requests)
                .await?
                .into_iter()
                .map(|reply| reply.text)
                .collect();
            Ok(numbered(job, &answers))
        })
    }

    fn stream(self: Box<Self>, job: Job) -> BoxStream<'static, Result<String, SynthError>> {
        stream_numbered(job, self.mode, self.chunks)
    }
}

/// `Response 1: ...`, `Response 2: ...`, joined by the separator; an empty answer is the
/// empty response.
fn numbered(job: &Job, answers: &[String]) -> String {
    let mut out = String::new();
    let empty = job.empty();
    for (i, a) in answers.iter().enumerate() {
        if i > 0 {
            out.push_str(job.separator());
        }
        out.push_str(&label(i + 1));
        out.push_str(if a.is_empty() { &empty } else { a });
    }
    out
}

/// The label of the `n`th answer (from 1).
fn label(n: usize) -> String {
    format!("Response {n}: ")
}

/// What the model wrote of a numbered answer (one [`numbered`] or streamed with
/// `separator`): each part without the label this mode put before it, the parts on lines
/// of their own, a part that is the `empty` answer (a call that gave nothing) left out.
/// The labels, separators and empty answers are the engine's text, not claims: the
/// grounding check reads this instead (else every `Response N` is a number to look up).
/// A part whose label is not the expected one is kept whole.
pub(crate) fn model_text(answer: &str, separator: &str, empty: &str) -> String {
    if separator.is_empty() {
        return answer.to_string();
    }
    let mut out = String::with_capacity(answer.len());
    for (i, part) in answer.split(separator).enumerate() {
        let part = part.strip_prefix(label(i + 1).as_str()).unwrap_or(part);
        if part == empty {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(part);
    }
    out
}

/// The requests of accumulate, built one at a time as they are needed: each chunk split
/// on its own, each piece as full as its prompt allows.
struct NumberedRequests<'a> {
    job: &'a Job,
    mode: ResponseMode,
    template: PromptTemplate,
    schema: Option<Arc<Value>>,
    size: usize,
    /// Where the chunks come from (the nodes of each piece).
    source: &'a Sourced,
    chunks: std::vec::IntoIter<&'a str>,
    cursor: Option<ChunkCursor<'a>>,
    index: usize,
}

impl<'a> NumberedRequests<'a> {
    fn new(job: &'a Job, mode: ResponseMode, source: &'a Sourced) -> Result<Self, SynthError> {
        let template = job.template(TemplateKind::Qa);
        let schema = job.output_schema();
        let size = job.room(&template, schema.as_deref())?;
        Ok(Self {
            job,
            mode,
            template,
            schema,
            size,
            source,
            chunks: source.parts().into_iter(),
            cursor: None,
            index: 0,
        })
    }
}

impl RequestSource for NumberedRequests<'_> {
    async fn next_request(&mut self) -> Result<Option<ModelRequest>, SynthError> {
        loop {
            if let Some(cursor) = self.cursor.as_mut() {
                let step = StepInfo::new(self.mode, Step::Qa).at(0, self.index);
                let next = self
                    .job
                    .next_request(
                        cursor,
                        &self.template,
                        "context_str",
                        self.size,
                        step,
                        self.schema.clone(),
                    )
                    .await?;
                if let Some((request, piece)) = next {
                    self.index += 1;
                    let request = self.source.tag(request, piece.text(cursor.text()));
                    return Ok(Some(request));
                }
            }
            let Some(chunk) = self.chunks.next() else {
                return Ok(None);
            };
            self.cursor = Some(self.job.budget().cursor(chunk));
        }
    }
}

/// One item sent by a call's task to the stream's consumer.
enum Piece {
    /// Text of the current answer.
    Delta(String),
    /// The current answer is complete; another one follows from the same request (a
    /// request re-split after the server found it too long).
    Next,
    /// The request's answers are complete.
    End,
    /// The call failed.
    Failed(SynthError),
}

/// One request's answer as the consumer holds it: its pieces, the task producing them,
/// and its place among the answers allowed at once. The place is given back when the
/// consumer moves past the answer (not when the call ends), so at most `concurrency`
/// answers are in flight or waiting unread, however slow the reader.
struct Answer {
    pieces: tokio::sync::mpsc::UnboundedReceiver<Piece>,
    task: OwnedTask<()>,
    _place: tokio::sync::OwnedSemaphorePermit,
}

/// Streams numbered answers in order: the answer being shown streams live while later
/// calls run ahead (at most the synthesizer's concurrency answers in flight or unread),
/// their deltas buffered. A request the server rejects as too long is re-split under the
/// lowered limit, and its parts become consecutive numbered answers, as without
/// streaming.
///
/// The stream owns everything it starts: the driver that packs requests is polled by the
/// stream, and each call's task is owned by the answer the stream holds, so dropping the
/// stream cancels every call in flight. A failure anywhere, a panicked call included,
/// fails the stream with its typed error.
fn stream_numbered(
    job: Job,
    mode: ResponseMode,
    chunks: Arc<Sourced>,
) -> BoxStream<'static, Result<String, SynthError>> {
    // The answers, in request order; the driver sends them as it builds requests.
    let (answers_tx, answers) = tokio::sync::mpsc::unbounded_channel::<Answer>();
    let driver_job = job.clone();
    let driver = async move {
        let job = driver_job;
        let places = Arc::new(tokio::sync::Semaphore::new(job.concurrency().max(1)));
        let mut requests = NumberedRequests::new(&job, mode, &chunks)?;
        // Places are handed out in request order, so the answer shown next is never
        // starved by later ones.
        while let Some(request) = requests.next_request().await? {
            let Ok(place) = Arc::clone(&places).acquire_owned().await else {
                break;
            };
            let (tx, pieces) = tokio::sync::mpsc::unbounded_channel::<Piece>();
            job.plan_calls(1);
            let call_job = job.clone();
            let task = OwnedTask::spawn(async move {
                stream_one(&call_job, request, &tx).await;
            });
            let answer = Answer {
                pieces,
                task,
                _place: place,
            };
            if answers_tx.send(answer).is_err() {
                // The consumer is gone.
                return Ok(());
            }
            // The first call goes alone while the limit may be calibrated from it.
            job.calibrated().await;
        }
        Ok(())
    };
    let separator = job.separator().to_string();
    let empty = job.empty();
    let state = Numbering {
        mode,
        answers,
        current: None,
        number: 0,
        any: false,
        done: false,
    };
    let output = futures::stream::unfold(state, move |mut st| {
        let (separator, empty) = (separator.clone(), empty.clone());
        async move {
            st.next_item(&separator, &empty)
                .await
                .map(|item| (item, st))
        }
    })
    .boxed();
    driven(Box::pin(driver), output)
}

/// Streams one request into `tx`, re-splitting it when the server finds it too long;
/// ends with [`Piece::End`] or [`Piece::Failed`].
async fn stream_one(
    job: &Job,
    request: ModelRequest,
    tx: &tokio::sync::mpsc::UnboundedSender<Piece>,
) {
    let mut pending = std::collections::VecDeque::from([request]);
    let mut first = true;
    while let Some(request) = pending.pop_front() {
        match job.stream(request.clone()).await {
            Ok(mut s) => {
                if !first && tx.send(Piece::Next).is_err() {
                    return;
                }
                first = false;
                while let Some(d) = s.next().await {
                    let piece = match d {
                        Ok(t) => Piece::Delta(t),
                        Err(e) => Piece::Failed(e),
                    };
                    let stop = matches!(piece, Piece::Failed(_));
                    if tx.send(piece).is_err() || stop {
                        return;
                    }
                }
            }
            Err(e) if job.absorb(&e, &request) == Verdict::Repack => {
                match job.resplit(&request).await {
                    Ok(parts) => {
                        job.plan_calls(parts.len().saturating_sub(1));
                        for p in parts.into_iter().rev() {
                            pending.push_front(p);
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Piece::Failed(e));
                        return;
                    }
                }
            }
            Err(e) => {
                let _ = tx.send(Piece::Failed(e));
                return;
            }
        }
    }
    let _ = tx.send(Piece::End);
}

/// The consumer's side: numbers answers as they come and stops after an error.
struct Numbering {
    mode: ResponseMode,
    answers: tokio::sync::mpsc::UnboundedReceiver<Answer>,
    current: Option<Answer>,
    number: usize,
    any: bool,
    done: bool,
}

impl Numbering {
    fn header(&mut self, separator: &str) -> String {
        self.number += 1;
        self.any = false;
        if self.number == 1 {
            label(self.number)
        } else {
            format!("{separator}{}", label(self.number))
        }
    }

    async fn next_item(
        &mut self,
        separator: &str,
        empty: &str,
    ) -> Option<Result<String, SynthError>> {
        loop {
            if self.done {
                return None;
            }
            let Some(answer) = self.current.as_mut() else {
                let next = self.answers.recv().await?;
                self.current = Some(next);
                return Some(Ok(self.header(separator)));
            };
            match answer.pieces.recv().await {
                Some(Piece::Delta(t)) => {
                    self.any |= !t.is_empty();
                    if !t.is_empty() {
                        return Some(Ok(t));
                    }
                }
                Some(Piece::Next) => {
                    let filler = if self.any {
                        String::new()
                    } else {
                        empty.to_string()
                    };
                    return Some(Ok(filler + &self.header(separator)));
                }
                Some(Piece::End) => {
                    // Moving past the answer gives its place back.
                    self.current = None;
                    if !self.any {
                        self.any = true;
                        return Some(Ok(empty.to_string()));
                    }
                }
                Some(Piece::Failed(e)) => {
                    self.done = true;
                    return Some(Err(e));
                }
                None => {
                    // The task ended without finishing its answer: it panicked (or was
                    // cancelled). Report why, never an empty answer.
                    self.done = true;
                    let answer = self.current.take()?;
                    return Some(match answer.task.await {
                        Err(e) => Err(e),
                        Ok(()) => Err(SynthError::Model {
                            mode: self.mode,
                            step: Step::Qa,
                            source: crate::model::ModelError::Incomplete(
                                "the call ended without its answer".into(),
                            ),
                        }),
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::model_text;

    const SEP: &str = "\n---------------------\n";

    #[test]
    fn the_model_text_of_a_numbered_answer_has_no_label_or_separator() {
        let answer = format!("Response 1: Six months.{SEP}Response 2: At dusk.");
        assert_eq!(
            model_text(&answer, SEP, "Empty Response"),
            "Six months.\n\nAt dusk."
        );
    }

    #[test]
    fn empty_answers_are_left_out_and_an_unexpected_label_is_kept() {
        let answer = format!("Response 1: Empty Response{SEP}Response 7: At dusk.");
        assert_eq!(
            model_text(&answer, SEP, "Empty Response"),
            "Response 7: At dusk."
        );
        assert_eq!(model_text("Response 1: x", "", "e"), "Response 1: x");
    }
}
