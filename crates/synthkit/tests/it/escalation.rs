//! Escalation: the mode over the first nodes, then `map_reduce` over all of them when
//! that answer abstains or states facts found in no source; the plan counts both.

use std::sync::Arc;

use futures::StreamExt;
use serde_json::json;
use synthkit::model::ModelRequest;
use synthkit::prompt::TemplateKind;
use synthkit::testing::ScriptedModel;
use synthkit::{Escalation, EscalationReason, Node, ResponseMode, Synthesizer};

use crate::common::fixtures::scripted;

fn nodes() -> Vec<Node> {
    vec![
        Node::new("dome", "The dome opens at dusk."),
        Node::new("cafe", "The cafe sells tea and cake."),
        Node::new("mirror", "The mirror is cleaned every six months."),
    ]
}

fn kind(r: &ModelRequest) -> TemplateKind {
    r.source().unwrap().kind
}

/// Answers from the mirror's node when shown it, says the sources do not answer
/// otherwise; map calls get records, reduce calls text.
fn reader(first: &'static str) -> ScriptedModel {
    ScriptedModel::new(scripted(4096, 256), move |r| {
        let seen = r.prompt.to_text().contains("mirror is cleaned");
        Ok(match kind(r) {
            TemplateKind::Map => json!({
                "information": if seen { "The mirror is cleaned every six months." } else { "" },
                "rationale": "", "answer": if seen { "every six months" } else { "" },
                "confidence": 4, "no_information": !seen
            })
            .to_string(),
            TemplateKind::Reduce => "Every six months.".into(),
            _ if seen => "Every six months.".into(),
            _ => first.into(),
        })
    })
}

fn synth(model: &ScriptedModel, first: usize) -> Synthesizer {
    Synthesizer::builder(Arc::new(model.clone()))
        .mode(ResponseMode::Compact)
        .escalate(Escalation::new(first))
        .build()
        .unwrap()
}

#[tokio::test]
async fn an_answer_from_the_first_nodes_is_not_escalated() {
    let model = reader("unused");
    let r = synth(&model, 3)
        .synthesize("How often is the mirror cleaned?", nodes())
        .await
        .unwrap();
    assert_eq!(r.text, "Every six months.");
    assert_eq!(model.requests().len(), 1);
    let e = r.escalation.unwrap();
    assert!(!e.escalated && e.reason.is_none());
    assert_eq!(
        (e.from, e.to, e.first_nodes),
        (ResponseMode::Compact, ResponseMode::MapReduce, 3)
    );
}

#[tokio::test]
async fn an_abstention_over_the_first_nodes_escalates_to_map_reduce_over_all() {
    let model = reader("The sources do not answer this question.");
    let r = synth(&model, 2)
        .synthesize("How often is the mirror cleaned?", nodes())
        .await
        .unwrap();
    assert_eq!(r.text, "Every six months.");
    assert!(r.answerable);
    let e = r.escalation.clone().unwrap();
    assert!(e.escalated);
    assert_eq!(e.reason, Some(EscalationReason::Abstained));
    assert_eq!(e.first_nodes, 2);
    // The first call saw the first two nodes only; then map and reduce calls.
    let requests = model.requests();
    let first = requests[0].prompt.to_text();
    assert!(
        first.contains("dusk") && !first.contains("six months"),
        "{first}"
    );
    assert!(requests[1..].iter().any(|r| kind(r) == TemplateKind::Map));
    assert!(
        requests[1..]
            .iter()
            .any(|r| kind(r) == TemplateKind::Reduce)
    );
    // Usage counts both syntheses.
    assert_eq!(r.usage.calls, requests.len() as u64);
    assert_eq!(e.first_usage.calls, 1);
    // In JSON it says what happened.
    let v = serde_json::to_value(&e).unwrap();
    assert_eq!(v["reason"], "abstained");
    assert_eq!(v["to"], "map_reduce");
}

#[tokio::test]
async fn an_answer_found_in_no_source_escalates() {
    let model = reader("It was founded in 1935.");
    let r = synth(&model, 1)
        .synthesize("How often is the mirror cleaned?", nodes())
        .await
        .unwrap();
    let e = r.escalation.unwrap();
    assert_eq!(e.reason, Some(EscalationReason::Unsupported));
    assert_eq!(e.first_answer, "It was founded in 1935.");
    assert_eq!(r.text, "Every six months.");
}

#[tokio::test]
async fn the_plan_counts_the_escalation_as_an_upper_bound() {
    let model = reader("unused");
    let synth = synth(&model, 1);
    let plan = synth
        .plan("How often is the mirror cleaned?", nodes())
        .await
        .unwrap();
    let alone = Synthesizer::builder(Arc::new(model.clone()))
        .mode(ResponseMode::Compact)
        .build()
        .unwrap()
        .plan("How often is the mirror cleaned?", nodes()[..1].to_vec())
        .await
        .unwrap();
    assert!(plan.calls > alone.calls, "{plan:?}");
    assert!(!plan.exact);
    assert!(model.requests().is_empty(), "a plan makes no call");
}

#[tokio::test]
async fn a_stream_is_not_escalated() {
    let model = reader("The sources do not answer this question.");
    let mut stream = synth(&model, 1)
        .stream("How often is the mirror cleaned?", nodes())
        .await
        .unwrap();
    while stream.next().await.is_some() {}
    // One compact call over every node: the stream's answer is shown as it comes.
    assert_eq!(model.requests().len(), 1);
}
