//! `simple_summarize`: one call with as much of the context as fits, joined by newlines
//! and truncated at the budget. What truncation dropped is reported (tokens and node ids)
//! in the response and as an event (decision 7); use `tree_summarize` to keep everything.

use std::borrow::Cow;

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
    // The joined text and where each node's text ends in it.
    let mut joined = String::new();
    let mut ends: Vec<(usize, &str)> = Vec::new();
    for (text, node) in texts.iter().zip(nodes) {
        if text.trim().is_empty() {
            continue;
        }
        if !joined.is_empty() {
            joined.push('\n');
        }
        joined.push_str(text);
        ends.push((joined.len(), node.id.as_str()));
    }
    if joined.is_empty() {
        return Ok(Outcome::Text(job.s.empty_response.clone()));
    }
    let template = job.template(TemplateKind::Qa);
    let schema = job.s.output_schema.clone();
    let size = job.room(&template, schema.as_deref())?;
    let mut cursor = job.budget().cursor(&joined);
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
        Some((request, c)) => (request, c.end),
        None => (
            job.request(&template, &[("context_str", "")], step, schema.clone())
                .await?,
            0,
        ),
    };
    let rest = joined.get(kept_end..).unwrap_or_default().trim();
    let truncation = if rest.is_empty() {
        None
    } else {
        let dropped_tokens = job.budget().tokenizer().count(rest);
        let mut start = 0;
        let mut dropped_node_ids = Vec::new();
        for (end, id) in &ends {
            // A node is cut when any of its non-space text lies past the kept part.
            let node_text = joined.get(start..*end).unwrap_or_default();
            let node_end_trimmed = start + node_text.trim_end().len();
            if node_end_trimmed > kept_end {
                dropped_node_ids.push((*id).to_string());
            }
            start = end + 1;
        }
        let t = Truncation {
            dropped_tokens,
            dropped_node_ids,
        };
        job.caller.event(SynthEvent::Truncated {
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
    })
}
