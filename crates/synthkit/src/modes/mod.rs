//! One file per response mode. Each decides the steps of its mode and leaves packing,
//! counting, calling and correcting to the [engine](crate::engine); this module
//! dispatches a synthesis to its mode, and resumes a final step the server rejected.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;

use crate::engine::grounding_guard::GroundingGuard;
use crate::engine::origins::{Origin, PromptNodes, Sourced};
use crate::engine::{FinalHow, Job, Outcome};
use crate::error::SynthError;
use crate::mode::ResponseMode;
use crate::model::ModelRequest;
use crate::node::Node;
use crate::prompt::{PromptTemplate, TemplateKind};

pub(crate) mod accumulate;
pub(crate) mod compact;
pub(crate) mod context_only;
pub(crate) mod generation;
pub(crate) mod map_reduce;
pub(crate) mod no_text;
pub(crate) mod refine;
pub(crate) mod simple_summarize;
pub(crate) mod tree_summarize;

/// Runs the mode of `job` over `texts` (the nodes' model-visible text) up to its final
/// step; `previous` is an answer to refine further (refine and compact).
pub(crate) async fn run(
    job: &Job,
    nodes: &[Node],
    previous: Option<&str>,
    texts: &[Cow<'_, str>],
) -> Result<Outcome, SynthError> {
    let mode = job.mode();
    // Zero nodes: the empty response without a call (the sources cannot answer), except
    // generation, which answers the query alone.
    if nodes.is_empty() {
        match mode {
            ResponseMode::Generation => {}
            ResponseMode::NoText | ResponseMode::ContextOnly => {
                return Ok(Outcome::Text(job.empty()));
            }
            _ => return Ok(Outcome::Unanswered(job.empty())),
        }
    }
    match mode {
        ResponseMode::Refine | ResponseMode::Compact => {
            let source = match mode {
                ResponseMode::Refine => refine::source(texts),
                _ => compact::source(texts),
            };
            let previous = previous.map(str::to_string);
            refine::refine_texts(job, mode, &source, previous, None).await
        }
        ResponseMode::TreeSummarize => tree_summarize::run(job, texts).await,
        ResponseMode::SimpleSummarize => simple_summarize::run(job, texts, nodes).await,
        ResponseMode::Accumulate => accumulate::run(job, texts),
        ResponseMode::CompactAccumulate => accumulate::run_compact(job, texts),
        ResponseMode::Generation => generation::run(job).await,
        ResponseMode::NoText => Ok(no_text::run()),
        ResponseMode::ContextOnly => Ok(context_only::run(texts)),
        ResponseMode::MapReduce => map_reduce::run(job, texts).await,
    }
}

/// What the levels of a tree (tree_summarize's summaries, map_reduce's reduce) are
/// built with.
pub(crate) struct Tree {
    /// The template of the level calls.
    pub(crate) template: PromptTemplate,
    /// The output schema, which the final call's reply follows.
    pub(crate) schema: Option<Arc<Value>>,
    /// How the final call's reply is read.
    pub(crate) how: FinalHow,
}

impl Tree {
    /// Drops the blank texts of `current` (each with where it came from) and starts a
    /// tree over the rest with the template of `kind`; `None` when no text is left, for
    /// which the caller answers with the empty response and no call.
    pub(crate) fn start(
        job: &Job,
        current: &mut Vec<(String, Origin)>,
        kind: TemplateKind,
    ) -> Option<Self> {
        current.retain(|(t, _)| !t.trim().is_empty());
        if current.is_empty() {
            return None;
        }
        let schema = job.output_schema();
        Some(Self {
            template: job.template(kind),
            how: FinalHow::for_schema(schema.as_deref()),
            schema,
        })
    }

    /// The texts of one level, joined for packing ([`Sourced::packing_join`]).
    pub(crate) fn join(current: &[(String, Origin)]) -> Sourced {
        Sourced::packing_join(
            current
                .iter()
                .map(|(t, origin)| (t.as_str(), origin.clone())),
        )
    }
}

/// What is needed to redo a final call that the server rejected as too long.
pub(crate) struct Resume {
    pub(crate) request: ModelRequest,
    fallback: Option<String>,
    /// A refine chain's grounding guard: what the chain had shown.
    guard: Option<GroundingGuard>,
}

impl Resume {
    /// The resume point of a final call; none for generation, whose prompt is the query
    /// alone and cannot be re-packed.
    pub(crate) fn of(outcome: &Outcome, mode: ResponseMode) -> Option<Self> {
        match outcome {
            Outcome::Final {
                request,
                fallback,
                guard,
                ..
            } if mode != ResponseMode::Generation => Some(Self {
                request: request.clone(),
                fallback: fallback.clone(),
                guard: guard.clone(),
            }),
            _ => None,
        }
    }
}

/// Re-packs a rejected final step under the lowered limit and continues from there.
pub(crate) async fn resume(
    job: &Job,
    nodes: &[Node],
    previous: Option<&str>,
    texts: &[Cow<'_, str>],
    r: Resume,
) -> Result<Outcome, SynthError> {
    let context = r
        .request
        .source()
        .and_then(|s| {
            s.variable("context_msg")
                .or_else(|| s.variable("context_str"))
        })
        .unwrap_or_default()
        .to_string();
    // The context came from the nodes the rejected prompt held.
    let held = PromptNodes::of(&r.request);
    match job.mode() {
        mode @ (ResponseMode::Refine | ResponseMode::Compact) => {
            let source = Sourced::side_by_side([(context.as_str(), held)]);
            let guard = r.guard.map(GroundingGuard::resumed);
            refine::refine_texts(job, mode, &source, r.fallback, guard).await
        }
        ResponseMode::TreeSummarize => {
            let origin = Origin::of_context(&r.request);
            tree_summarize::summarize(job, vec![(context, origin)]).await
        }
        ResponseMode::MapReduce => {
            // The records the rejected final prompt held, reduced again under the lowered
            // limit (the map level is not run again).
            let origin = Origin::of_context(&r.request);
            let level = r.request.step().level;
            map_reduce::reduce(job, vec![(context, origin)], level).await
        }
        _ => run(job, nodes, previous, texts).await,
    }
}
