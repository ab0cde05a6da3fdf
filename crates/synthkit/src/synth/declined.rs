//! A declined question the evidence covers: when the model answers "not in the sources"
//! in its own words although the best sentence covers most of the question
//! ([`crate::evidence::Evidence::with_extract_when_declined`]), the answer is the
//! selector's own, drawn from the sources' sentences and checked as any answer is.

use crate::error::SynthError;
use crate::evidence::{self, Evidence, EvidenceReport, Extracted};
use crate::grounding::OnUnsupported;
use crate::grounding::gate::Gate;
use crate::node::Node;
use crate::response::Response;

/// Answers `response` from `nodes`' sentences when its model declined a question
/// `report` says they cover; the model's reply goes into [`EvidenceReport::extracted`].
pub(super) async fn extract_when_declined(
    evidence: &Evidence,
    report: &mut EvidenceReport,
    query: &str,
    nodes: &[Node],
    response: &mut Response,
    not_in_sources: &str,
) -> Result<(), SynthError> {
    let Some(floor) = evidence.extract_coverage() else {
        return Ok(());
    };
    let declined_by_model = !response.answerable
        && response.structured.is_none()
        && response
            .grounding
            .as_ref()
            .is_none_or(|g| g.withheld.is_none());
    if !declined_by_model
        || report.abstained
        || !report.missing.is_empty()
        // A coverage that is not a number covers nothing.
        || report.coverage.is_nan()
        || report.coverage < floor
    {
        return Ok(());
    }
    let Some(answer) = evidence::extract(evidence, query, nodes).await else {
        return Ok(());
    };
    // Its sources are listed apart: markers in its text (a selector's labels) go.
    let text = crate::citation::strip_markers(&answer.text);
    if text.is_empty() {
        return Ok(());
    }
    tracing::info!(target: "synthkit", coverage = report.coverage, "the model declined a question the sources' sentences cover: the answer is those sentences");
    let declined = std::mem::replace(&mut response.text, text);
    response.answerable = true;
    report.extracted = Some(Extracted {
        declined,
        sources: answer
            .sources
            .iter()
            .filter_map(|&i| nodes.get(i).map(|n| n.id.clone()))
            .collect(),
    });
    // The sources' own sentences: checked against the nodes whole (where they were
    // taken from), and never withheld.
    let gate = Gate::new(
        query,
        nodes,
        OnUnsupported::Warn,
        not_in_sources.to_string(),
    );
    gate.apply(response).await
}
