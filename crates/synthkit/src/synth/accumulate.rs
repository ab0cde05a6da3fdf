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
use crate::call::Caller;
use crate::error::SynthError;
use crate::model::{ModelRequest, StepInfo};
use crate::prompt::budget::chunk_text;
use crate::prompt::{PromptBudget, TemplateKind};

pub(crate) fn run(job: &Job<'_>, texts: &[String]) -> Result<Outcome, SynthError> {
    requests_for(job, "accumulate", &with_content(texts))
}

pub(crate) fn run_compact(job: &Job<'_>, texts: &[String]) -> Result<Outcome, SynthError> {
    let joined = PromptBudget::join_for_packing(&with_content(texts));
    let chunks: Vec<&str> = if joined.is_empty() {
        Vec::new()
    } else {
        vec![joined.as_str()]
    };
    requests_for(job, "compact_accumulate", &chunks)
}

fn requests_for(job: &Job<'_>, mode: &'static str, chunks: &[&str]) -> Result<Outcome, SynthError> {
    if chunks.is_empty() {
        return Ok(Outcome::Text(job.s.empty_response.clone()));
    }
    let template = job.template(TemplateKind::Qa);
    let schema = job.s.output_schema.clone();
    let size = job.room(&template, schema.as_deref())?;
    let overlap = job.budget().overlap_for(size);
    let mut requests = Vec::new();
    for chunk in chunks {
        let mut cursor = job.budget().cursor(chunk);
        while let Some(piece) = cursor.next_chunk(size, overlap) {
            let step = StepInfo {
                mode,
                step: "qa",
                level: 0,
                index: requests.len(),
            };
            requests.push(job.request(
                &template,
                &[("context_str", chunk_text(chunk, &piece))],
                step,
                schema.clone(),
            ));
        }
    }
    Ok(Outcome::Numbered(requests))
}

/// Streams numbered answers in order: the answer being shown streams live while later
/// calls run ahead (at most `limit` calls in flight), their deltas buffered.
pub(crate) fn stream_numbered(
    caller: Arc<Caller>,
    requests: Vec<ModelRequest>,
    limit: usize,
    separator: String,
    empty: String,
) -> BoxStream<'static, Result<String, SynthError>> {
    let permits = Arc::new(tokio::sync::Semaphore::new(limit.max(1)));
    // Each call runs in a task that forwards its deltas through a channel, so later calls
    // make progress while an earlier answer is being shown. One driver hands out the
    // permits in request order, so the answer shown next is never starved by later ones.
    let mut receivers = Vec::with_capacity(requests.len());
    let mut senders = Vec::with_capacity(requests.len());
    for _ in 0..requests.len() {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Result<String, SynthError>>();
        senders.push(tx);
        receivers.push(rx);
    }
    tokio::spawn(async move {
        for (request, tx) in requests.into_iter().zip(senders) {
            let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
                return;
            };
            let caller = Arc::clone(&caller);
            tokio::spawn(async move {
                let _permit = permit;
                match caller.stream(request).await {
                    Ok(mut s) => {
                        while let Some(d) = s.next().await {
                            let stop = d.is_err();
                            if tx.send(d).is_err() || stop {
                                break;
                            }
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                    }
                }
            });
        }
    });
    let started = futures::stream::iter(receivers.into_iter().enumerate());
    let mut failed = false;
    started
        .flat_map(move |(i, rx)| answer_stream(i, rx, &separator, empty.clone()))
        .take_while(move |item| {
            // Stop after the first error: a partial answer is never shown as complete.
            let go = !failed;
            failed |= item.is_err();
            futures::future::ready(go)
        })
        .boxed()
}

/// `Response {i}: ` and the deltas of answer `i` (the empty response when it has no text).
fn answer_stream(
    i: usize,
    rx: tokio::sync::mpsc::UnboundedReceiver<Result<String, SynthError>>,
    separator: &str,
    empty: String,
) -> BoxStream<'static, Result<String, SynthError>> {
    let header = if i == 0 {
        format!("Response {}: ", i + 1)
    } else {
        format!("{separator}Response {}: ", i + 1)
    };
    let body = futures::stream::unfold(
        (rx, false, false, empty),
        |(mut rx, any, done, empty)| async move {
            if done {
                return None;
            }
            match rx.recv().await {
                Some(Ok(d)) => {
                    let any = any || !d.is_empty();
                    Some((Ok(d), (rx, any, false, empty)))
                }
                Some(Err(e)) => Some((Err(e), (rx, true, true, empty))),
                None if any => None,
                None => {
                    let text = std::mem::take(&mut { empty });
                    Some((Ok(text), (rx, true, true, String::new())))
                }
            }
        },
    );
    futures::stream::once(async move { Ok(header) })
        .chain(body)
        .boxed()
}
