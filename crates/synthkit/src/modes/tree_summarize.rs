//! `tree_summarize`: pack the chunks into as few summary prompts as fit, summarise each
//! (concurrently, bounded, order kept), then summarise the summaries, until one answer is
//! left.
//!
//! Calls: the sum over levels of the packed chunk counts; the last level has one. A level
//! that does not reduce the number of chunks stops with [`SynthError::TreeNotConverging`]
//! (decision 8), so it always terminates.

use std::borrow::Cow;

use crate::engine::fanout::{Prebuilt, RequestSource};
use crate::engine::origins::{Origin, PromptNodes};
use crate::engine::packed::{LevelStep, PackedLevel};
use crate::engine::{Job, Outcome};
use crate::error::SynthError;
use crate::mode::{ResponseMode, Step};
use crate::model::{ModelRequest, StepInfo};
use crate::modes::Tree;
use crate::observe::SynthEvent;
use crate::prompt::TemplateKind;

/// More levels than any real tree needs (each level at least halves the chunks).
const MAX_LEVELS: u32 = 64;

/// The rest of level 0, after the requests already built.
struct Rest<'a, 'b> {
    built: std::vec::IntoIter<ModelRequest>,
    level: &'b mut PackedLevel<'a>,
}

impl RequestSource for Rest<'_, '_> {
    async fn next_request(&mut self) -> Result<Option<ModelRequest>, SynthError> {
        match self.built.next() {
            Some(r) => Ok(Some(r)),
            None => self.level.next_request().await,
        }
    }
}

pub(crate) async fn run(job: &Job, texts: &[Cow<'_, str>]) -> Result<Outcome, SynthError> {
    let first = texts
        .iter()
        .enumerate()
        .filter(|(_, t)| !t.trim().is_empty())
        .map(|(i, t)| (t.to_string(), Origin::from(PromptNodes::one(i))))
        .collect();
    summarize(job, first).await
}

/// The tree over `current`: texts with content, each with where it came from.
pub(crate) async fn summarize(
    job: &Job,
    mut current: Vec<(String, Origin)>,
) -> Result<Outcome, SynthError> {
    let Some(Tree {
        template,
        schema,
        how,
    }) = Tree::start(job, &mut current, TemplateKind::Summary)
    else {
        return Ok(Outcome::Text(job.empty()));
    };
    let mut level: u32 = 0;
    loop {
        // Pack this level's texts into as few prompts as fit (re-measured each level, as
        // a context correction may have lowered the limit).
        let size = job.room(&template, schema.as_deref())?;
        let joined = Tree::join(&current);
        let at = LevelStep {
            mode: ResponseMode::TreeSummarize,
            step: Step::Summary,
            level,
        };
        let mut requests = PackedLevel::new(job, &template, schema.clone(), size, &joined, at);
        // Two requests tell whether this is the final call.
        let mut first: Vec<ModelRequest> = Vec::with_capacity(2);
        while first.len() < 2 {
            match requests.next_request().await? {
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
                    let step =
                        StepInfo::new(ResponseMode::TreeSummarize, Step::Summary).at(level, 0);
                    job.request(&template, &[("context_str", "")], step, schema.clone())
                        .await?
                }
            };
            return Ok(Outcome::final_call(request, how));
        }
        let answers = if level == 0 {
            // The first level is built as calls free up, so packing overlaps the calls.
            job.call_all(Rest {
                built: first.into_iter(),
                level: &mut requests,
            })
            .await?
        } else {
            // Later levels are small; they are packed whole first, so that a level that
            // does not reduce stops before any of its calls.
            let mut all = first;
            while let Some(r) = requests.next_request().await? {
                all.push(r);
            }
            if all.len() >= current.len() || level >= MAX_LEVELS {
                return Err(SynthError::TreeNotConverging {
                    mode: ResponseMode::TreeSummarize,
                    level,
                    summaries: current.len(),
                    chunks: all.len(),
                    chunk_size: size,
                });
            }
            job.call_all(Prebuilt(all.into_iter())).await?
        };
        drop(requests);
        // Summaries that say their passages do not answer carry nothing up the tree.
        current = answers
            .into_iter()
            .filter(|reply| !job.drops_unanswered(reply, schema.is_some()))
            .map(|reply| (reply.text, reply.origin))
            .collect();
        if current.is_empty() {
            return Ok(Outcome::Unanswered(job.not_in_sources()));
        }
        job.event(SynthEvent::TreeLevel {
            level: level + 1,
            chunks: current.len(),
        });
        level += 1;
    }
}
