//! `simple_summarize`: one call with as much of the context as fits, joined by newlines
//! and truncated at the budget. What truncation dropped is reported (tokens and node ids)
//! in the response and as an event (decision 7); use `tree_summarize` to keep everything.

use std::borrow::Cow;

use crate::engine::origins::{PromptNodes, Sourced};
use crate::engine::{FinalHow, Job, Outcome};
use crate::error::SynthError;
use crate::mode::{ResponseMode, Step};
use crate::model::StepInfo;
use crate::node::Node;
use crate::observe::SynthEvent;
use crate::prompt::TemplateKind;
use crate::response::Truncation;

pub(crate) async fn run(
    job: &Job,
    texts: &[Cow<'_, str>],
    nodes: &[Node],
) -> Result<Outcome, SynthError> {
    // The nodes' texts joined by newlines, each knowing its node.
    let joined = Sourced::join(
        texts
            .iter()
            .enumerate()
            .map(|(i, t)| (t.as_ref(), PromptNodes::one(i))),
        "\n",
        false,
    );
    if joined.is_empty() {
        return Ok(Outcome::Text(job.empty()));
    }
    let template = job.template(TemplateKind::Qa);
    let schema = job.output_schema();
    let size = job.room(&template, schema.as_deref())?;
    let mut cursor = job.budget().cursor(joined.text());
    let step = StepInfo::new(ResponseMode::SimpleSummarize, Step::Qa);
    let first = job
        .next_request(
            &mut cursor,
            &template,
            "context_str",
            size,
            step,
            schema.clone(),
        )
        .await?;
    let (request, kept_end) = match first {
        Some((request, c)) => (joined.tag(request, c.text(joined.text())), c.end),
        None => (
            job.request(&template, &[("context_str", "")], step, schema.clone())
                .await?,
            0,
        ),
    };
    let rest = joined.text().get(kept_end..).unwrap_or_default().trim();
    let truncation = if rest.is_empty() {
        None
    } else {
        let dropped_tokens = job.budget().tokenizer().count(rest);
        let dropped_node_ids = joined
            .cut_after(kept_end)
            .positions()
            .iter()
            .filter_map(|&i| nodes.get(i as usize).map(|n| n.id.clone()))
            .collect();
        let t = Truncation {
            dropped_tokens,
            dropped_node_ids,
        };
        job.event(SynthEvent::Truncated {
            dropped_tokens: t.dropped_tokens,
            dropped_node_ids: t.dropped_node_ids.clone(),
        });
        tracing::warn!(
            target: "synthkit",
            dropped_tokens = t.dropped_tokens,
            nodes = t.dropped_node_ids.len(),
            "simple_summarize truncated the context; use tree_summarize to keep everything"
        );
        Some(t)
    };
    let how = FinalHow::for_schema(schema.as_deref());
    Ok(Outcome::Final {
        request,
        fallback: None,
        how,
        truncation,
        guard: None,
    })
}
