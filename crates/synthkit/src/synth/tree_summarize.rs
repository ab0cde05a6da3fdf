//! `tree_summarize`: pack the chunks into as few summary prompts as fit, summarise each
//! (concurrently, bounded, order kept), then summarise the summaries, until one answer is
//! left.
//!
//! Calls: the sum over levels of the packed chunk counts; the last level has one. A level
//! that does not reduce the number of chunks stops with [`SynthError::TreeNotConverging`]
//! (decision 8), so it always terminates.

use std::borrow::Cow;

use super::run::with_content;
use super::{FinalHow, Job, Outcome};
use crate::call::SynthEvent;
use crate::error::SynthError;
use crate::model::{ModelRequest, StepInfo};
use crate::prompt::{PromptBudget, TemplateKind};

/// More levels than any real tree needs (each level at least halves the chunks).
const MAX_LEVELS: u32 = 64;

pub(crate) async fn run(job: &Job, texts: &[Cow<'_, str>]) -> Result<Outcome, SynthError> {
    let mut current: Vec<String> = with_content(texts)
        .into_iter()
        .map(str::to_string)
        .collect();
    if current.is_empty() {
        return Ok(Outcome::Text(job.s.empty_response.clone()));
    }
    let template = job.template(TemplateKind::Summary);
    let schema = job.s.output_schema.clone();
    let how = FinalHow::for_schema(schema.as_deref());
    let mut level: u32 = 0;
    loop {
        // Pack this level's texts into as few prompts as fit (re-measured each level, as
        // a context correction may have shrunk the budget).
        let size = job.room(&template, schema.as_deref())?;
        let joined = PromptBudget::join_for_packing(&current);
        let mut cursor = job.budget().cursor(&joined);
        let mut index = 0;
        let mut next = || {
            let step = StepInfo {
                mode: "tree_summarize",
                step: "summary",
                level,
                index,
            };
            index += 1;
            let next = job.next_request(
                &mut cursor,
                &template,
                "context_str",
                size,
                step,
                schema.clone(),
            );
            next.map(|(request, _)| request)
        };
        // Two requests tell whether this is the final call.
        let mut first: Vec<ModelRequest> = Vec::with_capacity(2);
        while first.len() < 2 {
            match next() {
                Some(r) => first.push(r),
                None => break,
            }
        }
        if first.len() <= 1 {
            let request = match first.pop() {
                Some(r) => r,
                None => {
                    // Every summary was empty: one call with empty context, as the
                    // reference makes.
                    let step = StepInfo {
                        mode: "tree_summarize",
                        step: "summary",
                        level,
                        index: 0,
                    };
                    job.request(&template, &[("context_str", "")], step, schema.clone())
                }
            };
            return Ok(Outcome::Final {
                request,
                fallback: None,
                how,
                truncation: None,
            });
        }
        if level == 0 {
            // The first level is built as calls free up, so packing overlaps the calls.
            current = job
                .call_all(first.into_iter().chain(std::iter::from_fn(next)))
                .await?;
        } else {
            // Later levels are small; they are packed whole first, so that a level that
            // does not reduce stops before any of its calls.
            let mut requests = first;
            requests.extend(std::iter::from_fn(next));
            if requests.len() >= current.len() || level >= MAX_LEVELS {
                return Err(SynthError::TreeNotConverging {
                    level,
                    summaries: current.len(),
                    chunks: requests.len(),
                    chunk_size: size,
                });
            }
            current = job.call_all(requests.into_iter()).await?;
        }
        job.caller.event(SynthEvent::TreeLevel {
            level: level + 1,
            chunks: current.len(),
        });
        level += 1;
    }
}
