//! `accumulate` and `compact_accumulate`: one answer per chunk (or per packed chunk),
//! numbered `Response 1: ...` and joined by a separator. Calls run concurrently (bounded),
//! answers keep the chunks' order, and streaming gives the numbered answers in order
//! (decision 11).
//!
//! Calls: accumulate, one per chunk (more for chunks over the budget); compact_accumulate,
//! one per packed chunk (packed once, decision 5).

use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;

use super::run::with_content;
use super::{Job, Outcome};
use crate::error::SynthError;
use crate::model::{ModelRequest, StepInfo};
use crate::prompt::{PromptBudget, TemplateKind};

pub(crate) fn run(job: &Job, texts: &[String]) -> Result<Outcome, SynthError> {
    requests_for(job, "accumulate", &with_content(texts))
}

pub(crate) fn run_compact(job: &Job, texts: &[String]) -> Result<Outcome, SynthError> {
    let joined = PromptBudget::join_for_packing(&with_content(texts));
    let chunks: Vec<&str> = if joined.is_empty() {
        Vec::new()
    } else {
        vec![joined.as_str()]
    };
    requests_for(job, "compact_accumulate", &chunks)
}

fn requests_for(job: &Job, mode: &'static str, chunks: &[&str]) -> Result<Outcome, SynthError> {
    if chunks.is_empty() {
        return Ok(Outcome::Text(job.s.empty_response.clone()));
    }
    let template = job.template(TemplateKind::Qa);
    let schema = job.s.output_schema.clone();
    let size = job.room(&template, schema.as_deref())?;
    let mut requests = Vec::new();
    for chunk in chunks {
        let mut cursor = job.budget().cursor(chunk);
        loop {
            let step = StepInfo {
                mode,
                step: "qa",
                level: 0,
                index: requests.len(),
            };
            let Some((request, _)) = job.next_request(
                &mut cursor,
                &template,
                "context_str",
                size,
                step,
                schema.clone(),
            ) else {
                break;
            };
            requests.push(request);
        }
    }
    Ok(Outcome::Numbered(requests))
}

/// One item sent by a call's task to the stream's consumer.
enum Piece {
    /// Text of the current answer.
    Delta(String),
    /// The current answer is complete; another one follows from the same request (a
    /// request re-split after the server found it too long).
    Next,
    /// The call failed.
    Failed(SynthError),
}

/// Streams numbered answers in order: the answer being shown streams live while later
/// calls run ahead (at most `limit` calls in flight), their deltas buffered. A request the
/// server rejects as too long is re-split under a shrunk budget, and its parts become
/// consecutive numbered answers, as without streaming.
pub(crate) fn stream_numbered(
    job: Job,
    requests: Vec<ModelRequest>,
    limit: usize,
) -> BoxStream<'static, Result<String, SynthError>> {
    let permits = Arc::new(tokio::sync::Semaphore::new(limit.max(1)));
    let mut receivers = Vec::with_capacity(requests.len());
    let mut senders = Vec::with_capacity(requests.len());
    for _ in 0..requests.len() {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Piece>();
        senders.push(tx);
        receivers.push(rx);
    }
    // One driver hands out the permits in request order, so the answer shown next is
    // never starved by later ones.
    let driver_job = job.clone();
    tokio::spawn(async move {
        for (request, tx) in requests.into_iter().zip(senders) {
            let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
                return;
            };
            let job = driver_job.clone();
            tokio::spawn(async move {
                let _permit = permit;
                stream_one(&job, request, &tx).await;
            });
        }
    });
    let separator = job.s.separator.clone();
    let empty = job.empty();
    let state = Numbering {
        receivers: receivers.into_iter(),
        current: None,
        number: 0,
        any: false,
        done: false,
    };
    futures::stream::unfold(state, move |mut st| {
        let (separator, empty) = (separator.clone(), empty.clone());
        async move {
            st.next_item(&separator, &empty)
                .await
                .map(|item| (item, st))
        }
    })
    .boxed()
}

/// Streams one request into `tx`, re-splitting it when the server finds it too long.
async fn stream_one(
    job: &Job,
    request: ModelRequest,
    tx: &tokio::sync::mpsc::UnboundedSender<Piece>,
) {
    let mut pending = std::collections::VecDeque::from([request]);
    let mut first = true;
    while let Some(request) = pending.pop_front() {
        match job.caller.stream(request.clone()).await {
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
            Err(e) if job.correct_overflow(&e, &request) => match job.resplit(&request) {
                Ok(parts) => {
                    job.caller.plan(parts.len().saturating_sub(1));
                    for p in parts.into_iter().rev() {
                        pending.push_front(p);
                    }
                }
                Err(e) => {
                    let _ = tx.send(Piece::Failed(e));
                    return;
                }
            },
            Err(e) => {
                let _ = tx.send(Piece::Failed(e));
                return;
            }
        }
    }
}

/// The consumer's side: numbers answers as they come and stops after an error.
struct Numbering {
    receivers: std::vec::IntoIter<tokio::sync::mpsc::UnboundedReceiver<Piece>>,
    current: Option<tokio::sync::mpsc::UnboundedReceiver<Piece>>,
    number: usize,
    any: bool,
    done: bool,
}

impl Numbering {
    fn header(&mut self, separator: &str) -> String {
        self.number += 1;
        self.any = false;
        if self.number == 1 {
            format!("Response {}: ", self.number)
        } else {
            format!("{separator}Response {}: ", self.number)
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
            let Some(rx) = self.current.as_mut() else {
                let next = self.receivers.next()?;
                self.current = Some(next);
                return Some(Ok(self.header(separator)));
            };
            match rx.recv().await {
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
                Some(Piece::Failed(e)) => {
                    self.done = true;
                    return Some(Err(e));
                }
                None => {
                    self.current = None;
                    if !self.any {
                        self.any = true;
                        return Some(Ok(empty.to_string()));
                    }
                }
            }
        }
    }
}
