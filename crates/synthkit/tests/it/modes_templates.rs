//! Templates and variables in the response modes, with scripted models: braces in the text
//! and the query are sent literally, a template missing a variable or using ones nothing
//! fills is refused when the synthesizer is built, and extra variables reach every call (a
//! synthesis's own overriding the synthesizer's).

use std::sync::Arc;

use synthkit::prompt::{PromptTemplate, TemplateKind};
use synthkit::testing::ScriptedModel;
use synthkit::{ResponseMode, Synthesizer};

use crate::common::fixtures::nodes;
use crate::modes_common::{echo_kind, info, synth};

#[tokio::test]
async fn braces_in_text_and_query_are_sent_literally() {
    let model = ScriptedModel::new(info(), echo_kind);
    let q = "what is {context_str} and {x}?";
    let text = r#"json {"a": {"b": 1}} and {query_str} and {{y}}"#;
    for mode in [
        ResponseMode::Compact,
        ResponseMode::TreeSummarize,
        ResponseMode::SimpleSummarize,
        ResponseMode::Accumulate,
    ] {
        synth(&model, mode)
            .synthesize(q, nodes(&[text]))
            .await
            .unwrap();
    }
    for req in model.requests() {
        let p = req.prompt.to_text();
        assert!(p.contains(text), "{p}");
        assert!(p.contains(q), "{p}");
    }
}

#[tokio::test]
async fn a_template_missing_a_variable_is_named() {
    let model = ScriptedModel::new(info(), echo_kind);
    let err = Synthesizer::builder(Arc::new(model))
        .mode(ResponseMode::Refine)
        .refine_template(PromptTemplate::completion(
            TemplateKind::Refine,
            "{query_str} {context_msg}",
        ))
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("{existing_answer}"), "{err}");
}

/// A synthesizer in `mode` whose QA template has a `{tone}` variable, "dry" by default,
/// over a model that echoes each prompt's kind.
fn toned(mode: ResponseMode) -> (ScriptedModel, Synthesizer) {
    let model = ScriptedModel::new(info(), echo_kind);
    let s = Synthesizer::builder(Arc::new(model.clone()))
        .mode(mode)
        .qa_template(PromptTemplate::completion(
            TemplateKind::Qa,
            "Tone: {tone}\n{context_str}\n{query_str}",
        ))
        .variable("tone", "dry")
        .build()
        .unwrap();
    (model, s)
}

#[tokio::test]
async fn extra_variables_reach_every_call() {
    let (model, s) = toned(ResponseMode::Accumulate);
    s.synthesize("q", nodes(&["a", "b"])).await.unwrap();
    for r in model.requests() {
        assert!(r.prompt.to_text().starts_with("Tone: dry\n"));
    }
}

/// A template whose `{name}`s nothing fills is refused when the synthesizer is built, the
/// error naming the first of them and the ones it may use: it used to be sent, over the
/// budget that counted them as empty, and stopped with "a bug in packing".
#[tokio::test]
async fn a_template_with_unknown_variables_is_refused_up_front() {
    let many: String = (0..5000).map(|i| format!("{{v{i}}} ")).collect();
    let model = ScriptedModel::new(info(), echo_kind);
    let err = Synthesizer::builder(Arc::new(model.clone()))
        .mode(ResponseMode::TreeSummarize)
        .summary_template(PromptTemplate::completion(
            TemplateKind::Summary,
            format!("{{context_str}} {{tone}} {many}\n{{query_str}}"),
        ))
        .variable("tone", "dry")
        .build()
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("5000 variables") && text.contains("`{v0}`"),
        "{text}"
    );
    assert!(
        text.contains("and 4990 more") && !text.contains("`{v10}`"),
        "{text}"
    );
    assert!(
        text.contains("`{context_str}`") && text.contains("`{tone}`"),
        "{text}"
    );
    assert!(!text.contains("bug in packing"), "{text}");
    assert!(text.len() < 1000, "{} bytes: {text}", text.len());
    assert!(model.requests().is_empty());
    // A refine template has no `{context_str}` to fill.
    let err = Synthesizer::builder(Arc::new(model.clone()))
        .mode(ResponseMode::Refine)
        .refine_template(PromptTemplate::completion(
            TemplateKind::Refine,
            "{query_str} {existing_answer} {context_msg} {context_str}",
        ))
        .build()
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("1 variable that nothing fills: `{context_str}`"),
        "{err}"
    );
}

/// A synthesis's own variables override the synthesizer's defaults.
#[tokio::test]
async fn a_synthesis_variable_overrides_the_default() {
    let (model, s) = toned(ResponseMode::SimpleSummarize);
    let mut input = synthkit::SynthesisInput::new("q", nodes(&["a"]));
    input.variables.push(("tone".into(), "warm".into()));
    s.synthesize_input(input).await.unwrap();
    let prompts: Vec<String> = model
        .requests()
        .iter()
        .map(|r| r.prompt.to_text())
        .collect();
    assert!(
        prompts.iter().all(|p| p.starts_with("Tone: warm\n")),
        "{prompts:?}"
    );
}
