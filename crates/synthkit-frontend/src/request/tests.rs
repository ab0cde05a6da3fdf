//! Tests of the request protocol.

#![allow(clippy::unwrap_used)]
use super::*;
use serde_json::json;
use synthkit::model::ModelInfo;
use synthkit::testing::ScriptedModel;

fn model() -> Arc<dyn LanguageModel> {
    Arc::new(ScriptedModel::constant(ModelInfo::new("m"), "ok"))
}

fn request(v: Value) -> SynthesizeRequest {
    serde_json::from_value(v).unwrap()
}

#[test]
fn defaults_and_caps() {
    let defaults = RequestDefaults {
        mode: ResponseMode::Refine,
        concurrency: Concurrency::limit(4),
        max_prompt_tokens: Some(500),
        ..RequestDefaults::default()
    };
    let run = request(json!({"query": "q", "nodes": ["a"], "concurrency": 99}))
        .prepare(model(), defaults.clone(), |b| b)
        .unwrap();
    assert_eq!(run.synthesizer.mode(), ResponseMode::Refine);
    assert_eq!(run.synthesizer.budget().max_prompt_tokens(), 500);
    assert!(!run.stream);
    let e = request(json!({"query": "q", "concurrency": 0}))
        .prepare(model(), defaults.clone(), |b| b)
        .unwrap_err();
    assert_eq!(
        (e.kind(), e.to_string().as_str()),
        ("invalid_request", "`concurrency` must be at least 1")
    );
}

#[test]
fn answer_checks_are_the_defaults_a_request_may_override() {
    for backend in ["openai", "python"] {
        let d =
            RequestDefaults::default().with_checks(&crate::AnswerChecks::for_questions_to(backend));
        assert!(d.evidence_by_default, "{backend}");
        assert_eq!(
            d.on_unsupported,
            synthkit::grounding::OnUnsupported::Abstain
        );
    }
    let d = RequestDefaults::default()
        .with_checks(&crate::AnswerChecks::for_questions_to(crate::EXTRACTIVE));
    assert!(!d.evidence_by_default);
    // A request may still turn it on.
    assert!(d.evidence.is_some());
    assert_eq!(d.on_unsupported, synthkit::grounding::OnUnsupported::Warn);
}

#[test]
fn escalate_reads_true_a_number_or_false_and_refuses_a_stream() {
    let escalation = |v: Value, defaults: RequestDefaults| {
        request(v)
            .prepare(model(), defaults, |b| b)
            .map(|run| run.synthesizer.escalation().map(|e| e.first_nodes))
    };
    let off = RequestDefaults::default();
    let on = RequestDefaults {
        escalation: Some(synthkit::Escalation::new(3)),
        ..RequestDefaults::default()
    };
    let q = |e: Value| json!({"query": "q", "nodes": ["a"], "escalate": e});
    assert_eq!(escalation(q(json!(true)), off.clone()).unwrap(), Some(5));
    assert_eq!(escalation(q(json!(2)), off.clone()).unwrap(), Some(2));
    assert_eq!(
        escalation(json!({"query": "q"}), off.clone()).unwrap(),
        None
    );
    // The front end's default, unless the request turns it off.
    assert_eq!(
        escalation(json!({"query": "q"}), on.clone()).unwrap(),
        Some(3)
    );
    assert_eq!(escalation(q(json!(false)), on.clone()).unwrap(), None);
    for bad in [json!(0), json!(-1), json!(1.5), json!("yes")] {
        let e = serde_json::from_value::<SynthesizeRequest>(q(bad)).unwrap_err();
        assert!(e.to_string().contains("`escalate` must be"), "{e}");
    }
    let e = escalation(
        json!({"query": "q", "escalate": true, "stream": true}),
        off.clone(),
    )
    .unwrap_err();
    assert_eq!(e.kind(), "invalid_request");
    assert!(e.to_string().contains("leave out `stream`"), "{e}");
    // A stream is fine when the default escalation is turned off.
    escalation(json!({"query": "q", "escalate": false, "stream": true}), on).unwrap();
}

#[test]
fn prepare_from_keeps_the_base_settings_the_request_leaves_out() {
    let base = Synthesizer::builder(model())
        .mode(ResponseMode::Refine)
        .system_prompt("Be terse.")
        .qa_template(PromptTemplate::completion(
            TemplateKind::Qa,
            "CTX {context_str} Q {query_str}",
        ))
        .citations(true)
        .build()
        .unwrap();
    let defaults = RequestDefaults {
        mode: base.mode(),
        concurrency: Concurrency::limit(2),
        ..RequestDefaults::default()
    };
    let run = request(json!({"query": "q", "nodes": ["a"], "citations": true}))
        .prepare_from(&base, defaults.clone())
        .unwrap();
    let copy = run.synthesizer.to_builder();
    assert_eq!(run.synthesizer.mode(), ResponseMode::Refine);
    assert_eq!(
        run.synthesizer.templates().qa.texts(),
        ["CTX {context_str} Q {query_str}"]
    );
    let built = copy.build().unwrap();
    assert_eq!(
        built.templates().qa.texts(),
        ["CTX {context_str} Q {query_str}"]
    );
    // The request's own options win.
    let run = request(json!({"query": "q", "mode": "compact",
        "templates": {"qa": "OTHER {context_str} {query_str}"}}))
    .prepare_from(&base, defaults.clone())
    .unwrap();
    assert_eq!(run.synthesizer.mode(), ResponseMode::Compact);
    assert_eq!(
        run.synthesizer.templates().qa.texts(),
        ["OTHER {context_str} {query_str}"]
    );
}

#[test]
fn errors_name_what_to_change() {
    let d = RequestDefaults::default();
    let e = request(json!({"query": "q", "mode": "nope"}))
        .prepare(model(), d.clone(), |b| b)
        .unwrap_err();
    assert_eq!(e.kind(), "invalid_request");
    assert!(e.to_string().contains("nope"), "{e}");
    for blank in ["", "  \n\t"] {
        let e = request(json!({"query": blank, "nodes": ["a"]}))
            .prepare(model(), RequestDefaults::default(), |b| b)
            .unwrap_err();
        assert!(matches!(e, RequestError::EmptyQuery), "{e}");
        assert_eq!(e.kind(), "invalid_request");
        assert!(e.to_string().contains("`query` is empty"), "{e}");
    }
    let e = request(json!({"query": "q", "nodes": ["ok", 3]}))
        .prepare(model(), d.clone(), |b| b)
        .unwrap_err();
    assert!(e.to_string().starts_with("nodes[1]: node 2: "), "{e}");
    let e = request(json!({"query": "q", "templates": {"qa": "no variables"}}))
        .prepare(model(), d.clone(), |b| b)
        .unwrap_err();
    assert_eq!(e.kind(), "invalid_option", "{e}");
    assert!(
        serde_json::from_value::<SynthesizeRequest>(json!({"query": "q", "extra": 1})).is_err()
    );
    let e = request(json!({"query": "q", "max_prompt_tokens": 0}))
        .prepare(model(), d.clone(), |b| b)
        .unwrap_err();
    assert_eq!(e.kind(), "invalid_option", "{e}");
    assert!(e.to_string().contains("max_prompt_tokens"), "{e}");
}

#[test]
fn max_prompt_tokens_caps_the_budget() {
    let run = request(json!({"query": "q", "max_prompt_tokens": 300}))
        .prepare(model(), RequestDefaults::default(), |b| b)
        .unwrap();
    assert_eq!(run.synthesizer.budget().max_prompt_tokens(), 300);
}
