//! Behaviour of every response mode with scripted models: call counts, templates,
//! streaming, concurrency, structured filtering, output types and bad input.

use crate::common::fixtures::nodes;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use serde::Deserialize;
use synthkit::model::{
    Completion, LanguageModel, ModelError, ModelFuture, ModelInfo, ModelRequest,
};
use synthkit::observe::CallReport;
use synthkit::prompt::{BudgetError, PromptBudget, PromptTemplate, TemplateKind};
use synthkit::synth::{StepEvaluator, StepVerdict, VerdictFuture};
use synthkit::testing::ScriptedModel;
use synthkit::{
    AnswerFiltering, CallDoor, Concurrency, Observer, ResponseMode, SynthError, Synthesizer,
    SynthesizerBuilder,
};

fn info() -> ModelInfo {
    crate::common::fixtures::scripted(4096, 256)
}

fn echo_kind(r: &ModelRequest) -> Result<String, ModelError> {
    Ok(format!("{} answer", r.source().unwrap().kind))
}

/// Asserts the template kinds of the model's requests, in order.
#[track_caller]
fn assert_kinds(model: &ScriptedModel, expected: &[TemplateKind]) {
    let requests = model.requests();
    let kinds: Vec<_> = requests.iter().map(|r| r.source().unwrap().kind).collect();
    assert_eq!(kinds, expected);
}

fn synth(model: &ScriptedModel, mode: ResponseMode) -> Synthesizer {
    synth_with(model, mode, |b| b)
}

/// A synthesizer in `mode` over `model`, with what `configure` sets.
fn synth_with(
    model: &ScriptedModel,
    mode: ResponseMode,
    configure: impl FnOnce(SynthesizerBuilder) -> SynthesizerBuilder,
) -> Synthesizer {
    let builder = Synthesizer::builder(Arc::new(model.clone())).mode(mode);
    configure(builder).build().unwrap()
}

/// The answer of a synthesis in `mode` over `model`, to `query` with one node per text.
async fn answer(
    model: &ScriptedModel,
    mode: ResponseMode,
    query: &str,
    texts: &[&str],
) -> synthkit::Response {
    synth(model, mode)
        .synthesize(query, nodes(texts))
        .await
        .unwrap()
}

#[tokio::test]
async fn zero_nodes_cost_no_call_except_generation() {
    for mode in ResponseMode::ALL {
        let model = ScriptedModel::new(info(), echo_kind);
        let s = synth(&model, mode);
        let r = s.synthesize("q", vec![]).await.unwrap();
        let streamed = s.stream("q", vec![]).await.unwrap().finish().await.unwrap();
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
async fn streaming_equals_non_streaming_in_every_mode() {
    let text = "word ".repeat(3000);
    let many: Vec<String> = (0..12).map(|i| format!("chunk {i}: {text}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    for mode in ResponseMode::ALL {
        let model = ScriptedModel::new(info(), |r| {
            // More words than a final refine step holds back to read its opening.
            Ok(format!(
                "{} answer with several words, enough to stream {}",
                r.source().unwrap().kind,
                r.step().index
            ))
        });
        let s = synth(&model, mode);
        let plain = s.synthesize("q", nodes(&many)).await.unwrap();
        let mut stream = s.stream("q", nodes(&many)).await.unwrap();
        let mut deltas = 0;
        while let Some(d) = stream.next().await {
            d.unwrap();
            deltas += 1;
        }
        assert_eq!(stream.text(), plain.text, "{mode}");
        let done = stream.finish().await.unwrap();
        assert_eq!(done.text, plain.text, "{mode}");
        if mode.calls_model() {
            assert!(deltas > 1, "{mode} streamed {deltas} deltas");
        }
    }
}

/// Paused time: the scripted model's 1 ms delays keep calls in flight together without
/// costing wall time.
#[tokio::test(start_paused = true)]
async fn concurrency_keeps_prompts_and_answers_identical() {
    let text = "lorem ipsum ".repeat(1500);
    let many: Vec<String> = (0..20).map(|i| format!("part {i} {text}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    for mode in [
        ResponseMode::TreeSummarize,
        ResponseMode::Accumulate,
        ResponseMode::CompactAccumulate,
    ] {
        let mut results = Vec::new();
        for limit in [1, 8, 0] {
            let model = ScriptedModel::new(info(), |r| {
                Ok(format!("sum {} {}", r.step().level, r.step().index))
            })
            .with_delay(Duration::from_millis(1));
            let s = synth_with(&model, mode, |b| b.concurrency(Concurrency::limit(limit)));
            let r = s.synthesize("q", nodes(&many)).await.unwrap();
            let mut prompts: Vec<String> = model
                .requests()
                .iter()
                .map(|r| r.prompt.to_text())
                .collect();
            prompts.sort();
            results.push((r.text, prompts));
        }
        assert_eq!(results[0], results[1], "{mode}");
        assert_eq!(results[0], results[2], "{mode}");
        assert!(results[0].1.len() > 1, "{mode} should need several calls");
    }
}

/// A model whose every call stays in flight for 10 ms of tokio's (paused) clock, counting
/// how many calls are in flight at once.
#[derive(Default)]
struct Overlapping {
    now: AtomicUsize,
    peak: AtomicUsize,
    calls: AtomicUsize,
}

impl LanguageModel for Overlapping {
    fn info(&self) -> ModelInfo {
        info()
    }

    fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, Completion> {
        Box::pin(async move {
            let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.peak.fetch_max(now, Ordering::SeqCst);
            self.calls.fetch_add(1, Ordering::SeqCst);
            // Paused time only moves once every task is waiting: until then, every call
            // started is still in flight.
            tokio::time::sleep(Duration::from_millis(10)).await;
            self.now.fetch_sub(1, Ordering::SeqCst);
            Ok(Completion::text(format!(
                "summary {}",
                request.step().index
            )))
        })
    }
}

/// The most calls in flight at once, and the calls made, for `mode` over `texts`.
async fn overlap(mode: ResponseMode, texts: &[&str], concurrency: Concurrency) -> (usize, usize) {
    let model = Arc::new(Overlapping::default());
    let s = Synthesizer::builder(model.clone())
        .mode(mode)
        .budget(PromptBudget::new(400, 100).unwrap())
        .concurrency(concurrency)
        .build()
        .unwrap();
    s.synthesize("q", nodes(texts)).await.unwrap();
    (
        model.peak.load(Ordering::SeqCst),
        model.calls.load(Ordering::SeqCst),
    )
}

/// The limit is reached and never passed, in a flat mode and across tree levels; without
/// it the same jobs overlap more (so the first check can fail).
#[tokio::test(start_paused = true)]
async fn concurrency_is_bounded() {
    let many: Vec<String> = (0..30).map(|i| format!("chunk {i}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    // 12 long chunks: about one per leaf prompt (at most 300 tokens), so the first level
    // has many more calls than the limit.
    let long = "word ".repeat(200);
    let leaves = vec![long.as_str(); 12];
    for (mode, texts) in [
        (ResponseMode::Accumulate, &many),
        (ResponseMode::TreeSummarize, &leaves),
    ] {
        let (peak, calls) = overlap(mode, texts, Concurrency::limit(3)).await;
        assert_eq!(peak, 3, "{mode}: peak in flight ({calls} calls)");
        if mode == ResponseMode::Accumulate {
            assert_eq!(calls, 30);
        }
        let (free, _) = overlap(mode, texts, Concurrency::Unlimited).await;
        assert!(free > 3, "{mode}: {free} in flight without a limit");
    }
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

#[tokio::test]
async fn extra_variables_reach_every_call() {
    let model = ScriptedModel::new(info(), echo_kind);
    let s = Synthesizer::builder(Arc::new(model.clone()))
        .mode(ResponseMode::Accumulate)
        .qa_template(PromptTemplate::completion(
            TemplateKind::Qa,
            "Tone: {tone}\n{context_str}\n{query_str}",
        ))
        .variable("tone", "dry")
        .build()
        .unwrap();
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
    let model = ScriptedModel::new(info(), echo_kind);
    let s = Synthesizer::builder(Arc::new(model.clone()))
        .mode(ResponseMode::SimpleSummarize)
        .qa_template(PromptTemplate::completion(
            TemplateKind::Qa,
            "Tone: {tone}\n{context_str}\n{query_str}",
        ))
        .variable("tone", "dry")
        .build()
        .unwrap();
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

#[tokio::test]
async fn model_errors_keep_their_meaning_through_concurrency() {
    let model = ScriptedModel::new(info(), |r| {
        if r.step().index == 3 {
            Err(ModelError::Server {
                status: 503,
                body: "overloaded".into(),
            })
        } else {
            Ok("fine".into())
        }
    });
    let many: Vec<String> = (0..10).map(|i| format!("chunk {i}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let err = synth(&model, ResponseMode::Accumulate)
        .synthesize("q", nodes(&many))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            SynthError::Model {
                source: ModelError::Server { status: 503, .. },
                ..
            }
        ),
        "{err}"
    );
    let mut stream = synth(&model, ResponseMode::Accumulate)
        .stream("q", nodes(&many))
        .await
        .unwrap();
    let mut saw_error = false;
    while let Some(d) = stream.next().await {
        saw_error |= d.is_err();
    }
    assert!(saw_error);
}

#[derive(Default)]
struct Progress {
    planned: AtomicUsize,
    done: AtomicUsize,
    reports: Mutex<Vec<(String, usize)>>,
}
impl Observer for Progress {
    fn calls_planned(&self, total: usize) {
        self.planned.store(total, Ordering::SeqCst);
    }
    fn call_finished(&self, report: &CallReport<'_>) {
        self.done.fetch_add(1, Ordering::SeqCst);
        self.reports.lock().unwrap().push((
            report.request.step().step.to_string(),
            report.request.prompt_tokens,
        ));
    }
}

#[tokio::test]
async fn the_observer_sees_every_call() {
    let progress = Arc::new(Progress::default());
    let model = ScriptedModel::new(info(), echo_kind);
    let s = Synthesizer::builder(Arc::new(model))
        .mode(ResponseMode::Refine)
        .observer(progress.clone())
        .build()
        .unwrap();
    let r = s.synthesize("q", nodes(&["a", "b", "c"])).await.unwrap();
    assert_eq!(progress.done.load(Ordering::SeqCst), 3);
    assert_eq!(progress.planned.load(Ordering::SeqCst), 3);
    assert_eq!(r.usage.calls, 3);
    assert!(r.usage.prompt_tokens > 0);
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
