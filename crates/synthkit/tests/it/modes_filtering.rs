//! Structured answers in the response modes, with scripted models: answer filtering keeps
//! the reference's semantics and can stop once the query is satisfied, a step evaluator
//! calls the model through the call door, and output types parse the final answer.

use std::sync::Arc;

use serde::Deserialize;
use synthkit::model::ModelRequest;
use synthkit::prompt::TemplateKind;
use synthkit::synth::{StepEvaluator, StepVerdict, VerdictFuture};
use synthkit::testing::ScriptedModel;
use synthkit::{AnswerFiltering, CallDoor, ResponseMode, Synthesizer};

use crate::common::fixtures::nodes;
use crate::modes_common::{assert_kinds, echo_kind, info, synth_with};

fn filter_model(satisfied: &'static [&'static str]) -> ScriptedModel {
    ScriptedModel::new(info(), move |r| {
        let ctx = r
            .source()
            .unwrap()
            .variable("context_str")
            .or(r.source().unwrap().variable("context_msg"))
            .unwrap_or_default()
            .to_string();
        if ctx.contains("garbled") {
            return Ok("not json at all".into());
        }
        Ok(serde_json::json!({"query_satisfied": satisfied.iter().any(|s| ctx.contains(s)), "answer": ctx}).to_string())
    })
}

/// A refine synthesizer over `model` with `filtering`.
fn filtering_refine(model: &ScriptedModel, filtering: AnswerFiltering) -> Synthesizer {
    synth_with(model, ResponseMode::Refine, |b| {
        b.answer_filtering(filtering)
    })
}

#[tokio::test]
async fn structured_filtering_keeps_reference_semantics() {
    let model = filter_model(&["input2"]);
    let s = filtering_refine(&model, AnswerFiltering::on());
    let r = s
        .synthesize("q", nodes(&["input1", "input2", "input3"]))
        .await
        .unwrap();
    assert_eq!(r.text, "input2");
    assert_kinds(
        &model,
        &[TemplateKind::Qa, TemplateKind::Qa, TemplateKind::Refine],
    );
    assert!(model.requests().iter().all(|r| r.schema.is_some()));

    let none = filter_model(&[]);
    let s = filtering_refine(&none, AnswerFiltering::on());
    assert_eq!(
        s.synthesize("q", nodes(&["input1", "garbled", "input3"]))
            .await
            .unwrap()
            .text,
        "Empty Response"
    );
}

#[tokio::test]
async fn stop_when_satisfied_saves_calls() {
    let model = filter_model(&["input2"]);
    let s = filtering_refine(&model, AnswerFiltering::stop_when_satisfied());
    let r = s
        .synthesize("q", nodes(&["input1", "input2", "input3", "input4"]))
        .await
        .unwrap();
    assert_eq!(r.text, "input2");
    assert_eq!(model.requests().len(), 2);
}

/// Judges every step satisfied, after asking the model through the call door.
struct AlwaysSatisfied;

impl StepEvaluator for AlwaysSatisfied {
    fn evaluate<'a>(&'a self, request: &'a ModelRequest, door: &'a CallDoor) -> VerdictFuture<'a> {
        Box::pin(async move {
            let reply = door.complete(request).await?;
            Ok(StepVerdict {
                query_satisfied: true,
                answer: format!("judged {} ({})", request.step().index, reply.text),
            })
        })
    }
}

#[tokio::test]
async fn a_step_evaluator_calls_through_the_call_door() {
    let model = ScriptedModel::new(info(), echo_kind);
    let s = filtering_refine(
        &model,
        AnswerFiltering::with_evaluator(Arc::new(AlwaysSatisfied), false),
    );
    let r = s.synthesize("q", nodes(&["a", "b"])).await.unwrap();
    assert_eq!(r.text, "judged 1 (refine answer)");
    // The evaluator's calls are the synthesis's calls: counted, and checked by the door.
    assert_eq!(r.usage.calls, 2);
    assert_eq!(model.requests().len(), 2);
}

#[derive(Debug, Deserialize, schemars::JsonSchema, PartialEq)]
struct Colour {
    name: String,
    hex: String,
}

#[tokio::test]
async fn output_types_parse_the_final_answer() {
    let model = ScriptedModel::new(info(), |r| {
        assert!(r.schema.is_some());
        Ok(r##"Here you go: {"name": "blue", "hex": "#00f"}"##.into())
    });
    for mode in [
        ResponseMode::Compact,
        ResponseMode::TreeSummarize,
        ResponseMode::Refine,
    ] {
        let s = synth_with(&model, mode, |b| b.output_type::<Colour>());
        let r = s
            .synthesize("sky colour?", nodes(&["The sky is blue (#00f).", "more"]))
            .await
            .unwrap();
        assert_eq!(
            r.parse::<Colour>().unwrap(),
            Colour {
                name: "blue".into(),
                hex: "#00f".into()
            },
            "{mode}"
        );
    }
}
