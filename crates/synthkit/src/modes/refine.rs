//! `refine`: answer from the first chunk, then refine the answer with each next chunk.
//!
//! Each step's context room is computed from the actual prompt: the query, the current
//! answer and the system prompt are counted exactly (decision 3), so small windows work
//! and every prompt is as full as it may be. A chunk too large for one step is handed out
//! in order, head first (decision 4). Calls: one per chunk that fits, more for chunks that
//! do not.
//!
//! A step whose reply would replace an answer grounded in the passages shown so far with
//! a reply whose facts are in none of them keeps the answer (the grounding guard,
//! [`crate::engine::grounding_guard`]; not in a streamed final step).

use std::borrow::Cow;
use std::collections::VecDeque;

use crate::engine::filter::filter_step;
use crate::engine::grounding_guard::GroundingGuard;
use crate::engine::origins::Sourced;
use crate::engine::{FinalHow, Job, Outcome, Verdict};
use crate::error::SynthError;
use crate::mode::{ResponseMode, Step};
use crate::model::StepInfo;
use crate::prompt::TemplateKind;
use crate::text::abstention::ReplyReading;

/// What refine packs: each node's text on its own (`texts[i]` is node `i`'s).
pub(crate) fn source(texts: &[Cow<'_, str>]) -> Sourced {
    Sourced::of_nodes(texts, true)
}

/// The refine loop over the parts of `source` (each split on its own, never merged with
/// another); `previous`: an answer to refine; `guard`: the grounding guard of the chain
/// this one resumes (what it had shown), if any.
pub(crate) async fn refine_texts(
    job: &Job,
    mode: ResponseMode,
    source: &Sourced,
    previous: Option<String>,
    guard: Option<GroundingGuard>,
) -> Result<Outcome, SynthError> {
    let chunks = source.parts();
    let filtering = job.filtering().is_on();
    let schema = if filtering {
        Some(Job::filter_schema())
    } else {
        job.output_schema()
    };
    let how = if filtering {
        FinalHow::Filter
    } else if schema.is_some() {
        FinalHow::Schema
    } else {
        FinalHow::Plain
    };
    // The grounding guard reads plain-text replies only (JSON replies are not read).
    let mut guard = (how == FinalHow::Plain).then(|| guard.unwrap_or_default());
    let qa = job.template(TemplateKind::Qa);
    let refine = job.template(TemplateKind::Refine);
    let mut answer = previous.filter(|a| !a.is_empty());
    let mut index = 0;
    let mut room_for: Option<(Option<String>, usize, usize)> = None;
    // Texts still to hand out, in order, each with whether its first call was planned.
    let mut queue: VecDeque<(&str, bool)> = chunks.iter().map(|c| (*c, true)).collect();
    // Progress: one call per chunk is planned up front (the final call is planned when it
    // is made); pieces beyond a chunk's first are planned as they appear.
    job.plan_calls(chunks.len().saturating_sub(1));
    while let Some((chunk, mut preplanned)) = queue.pop_front() {
        let last_text = queue.is_empty();
        let mut cursor = job.budget().cursor(chunk);
        loop {
            let (template, var, step) = match &answer {
                None => (qa.clone(), "context_str", Step::Qa),
                Some(a) => (
                    refine.partial("existing_answer", a),
                    "context_msg",
                    Step::Refine,
                ),
            };
            // The room depends only on the template, the current answer and the budget.
            let size = match &room_for {
                Some((a, shrink, size)) if *a == answer && *shrink == job.shrink() => *size,
                _ => {
                    let size = job.room(&template, schema.as_deref())?;
                    room_for = Some((answer.clone(), job.shrink(), size));
                    size
                }
            };
            let step = StepInfo {
                mode,
                step,
                level: 0,
                index,
            };
            let Some((request, piece)) = job
                .next_request(&mut cursor, &template, var, size, step, schema.clone())
                .await?
            else {
                break;
            };
            let text = piece.text(chunk);
            let request = source.tag(request, text);
            index += 1;
            if last_text && cursor.is_done() {
                if let Some(g) = &mut guard {
                    g.show(text);
                }
                return Ok(Outcome::Final {
                    request,
                    fallback: answer,
                    how,
                    truncation: None,
                    guard,
                });
            }
            if !preplanned || last_text {
                job.plan_calls(1);
            }
            preplanned = false;
            let result = if filtering {
                filter_step(job, &request)
                    .await
                    .map(|a| a.map(|a| job.checked(&request, a)))
            } else {
                job.call_text(&request).await.map(Some)
            };
            let result = match result {
                Ok(r) => r,
                Err(e) if job.absorb(&e, &request) == Verdict::Repack => {
                    // Re-pack this step under the shrunk budget: the rejected piece first,
                    // then the rest of its text.
                    let rest = chunk.get(piece.end..).unwrap_or_default();
                    if !rest.trim().is_empty() {
                        queue.push_front((rest, false));
                    }
                    queue.push_front((text, false));
                    break;
                }
                Err(e) => return Err(e),
            };
            if let Some(g) = &mut guard {
                g.show(text);
            }
            // A reply that says the passages do not answer, or that only talks about the
            // answer so far, leaves the answer as it was (none yet: the next chunk is
            // asked the question again).
            let result = result.filter(|r| {
                !r.is_empty() && job.read_step(&request, r, answer.is_some()).is_answer()
            });
            // So does a reply whose facts are in no passage shown, in place of an answer
            // whose facts are.
            let result = match (result, &mut guard) {
                (Some(r), Some(g)) => {
                    match job
                        .grounding_reading(&request, &r, answer.as_deref(), g)
                        .await
                    {
                        ReplyReading::Answer => Some(r),
                        reading => {
                            job.not_used(request.step(), reading, true);
                            None
                        }
                    }
                }
                (r, _) => r,
            };
            if let Some(r) = result {
                answer = Some(r);
                if let Some(g) = &mut guard {
                    g.new_answer();
                }
                if job.filtering().stops_when_satisfied() {
                    return Ok(Outcome::Text(answer.unwrap_or_default()));
                }
            }
        }
    }
    Ok(match answer {
        Some(a) => Outcome::Text(a),
        // Steps were asked and none found anything.
        None if index > 0 => Outcome::Unanswered(job.not_in_sources()),
        None => Outcome::Unanswered(job.empty()),
    })
}
