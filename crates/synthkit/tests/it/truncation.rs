//! Replies cut at the output limit (`finish_reason: length`) are surfaced: counted in
//! `UsageTotals::truncated_calls`, reported as `SynthEvent::ReplyTruncated` with their step
//! (intermediate ones included), and, with `OnTruncation::Error`, a typed error for plain
//! and streamed runs.

use crate::common::fixtures::Events;
use crate::common::fixtures::{nodes, stream_whole};
use std::sync::Arc;

use futures::StreamExt;
use synthkit::model::{FinishReason, ModelInfo, ModelRequest, StepInfo};
use synthkit::prompt::PromptBudget;
use synthkit::testing::ScriptedModel;
use synthkit::{OnTruncation, ResponseMode, Step, SynthError, SynthEvent, Synthesizer};

const NUM_OUTPUT: usize = 256;

fn info() -> ModelInfo {
    crate::common::fixtures::scripted(4096, NUM_OUTPUT)
}

/// Every reply is cut.
fn always_cut(_: &ModelRequest) -> FinishReason {
    FinishReason::Length
}

/// What every call of it answers: [`CUT_REPLY`], cut at the output limit.
fn always_cut_model() -> ScriptedModel {
    ScriptedModel::constant(info(), CUT_REPLY).with_finish_reason(always_cut)
}

/// The reply of [`always_cut_model`].
const CUT_REPLY: &str = "The sky is blue and";

impl Events {
    /// The steps of the `ReplyTruncated` events, with their token counts.
    fn truncated(&self) -> Vec<(StepInfo, u64, usize)> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                SynthEvent::ReplyTruncated {
                    step,
                    completion_tokens,
                    max_tokens,
                } => Some((*step, *completion_tokens, *max_tokens)),
                _ => None,
            })
            .collect()
    }

    /// The one `ReplyTruncated` event's step and token counts; fails the test unless there
    /// was exactly one.
    fn only_cut(&self) -> (StepInfo, u64, usize) {
        let cut = self.truncated();
        assert_eq!(cut.len(), 1, "{cut:?}");
        cut[0]
    }
}

fn synth(
    model: &ScriptedModel,
    mode: ResponseMode,
    policy: Option<OnTruncation>,
) -> (Synthesizer, Arc<Events>) {
    let events = Arc::new(Events::default());
    let mut b = Synthesizer::builder(Arc::new(model.clone()))
        .mode(mode)
        .observer(events.clone());
    if let Some(p) = policy {
        b = b.on_truncation(p);
    }
    (b.build().unwrap(), events)
}

#[tokio::test]
async fn whole_replies_are_not_reported() {
    let model = ScriptedModel::constant(info(), "Blue.");
    let (s, events) = synth(&model, ResponseMode::Compact, None);
    let r = s
        .synthesize("q", nodes(&["The sky is blue."]))
        .await
        .unwrap();
    assert_eq!(r.usage.truncated_calls, 0);
    let streamed = stream_whole(&s, "q", nodes(&["The sky is blue."])).await;
    assert_eq!(streamed.usage.truncated_calls, 0);
    assert!(events.truncated().is_empty());
}

#[tokio::test]
async fn a_cut_plain_reply_is_counted_and_reported_by_default() {
    let model = always_cut_model();
    let (s, events) = synth(&model, ResponseMode::Compact, None);
    let r = s
        .synthesize("q", nodes(&["The sky is blue."]))
        .await
        .unwrap();
    // Warn (the default) keeps the cut answer.
    assert_eq!(r.text, CUT_REPLY);
    assert_eq!(r.usage.calls, 1);
    assert_eq!(r.usage.truncated_calls, 1);
    let (step, completion_tokens, max_tokens) = events.only_cut();
    assert_eq!(step.mode, ResponseMode::Compact);
    assert_eq!(step.step, Step::Qa);
    assert_eq!(completion_tokens, 5);
    assert_eq!(max_tokens, NUM_OUTPUT);
}

/// Streams a synthesis of one node to its end: every item (delta or error), in order, and
/// the stream, for `finish`.
async fn stream_to_end(
    s: &Synthesizer,
) -> (Vec<Result<String, SynthError>>, synthkit::StreamingResponse) {
    let mut stream = s.stream("q", nodes(&["The sky is blue."])).await.unwrap();
    let mut items = Vec::new();
    while let Some(item) = stream.next().await {
        items.push(item);
    }
    (items, stream)
}

#[tokio::test]
async fn a_cut_streamed_reply_is_counted_and_reported() {
    let model = always_cut_model();
    let (s, events) = synth(&model, ResponseMode::Compact, Some(OnTruncation::Warn));
    let (items, stream) = stream_to_end(&s).await;
    let text: String = items.into_iter().map(Result::unwrap).collect();
    assert_eq!(text, CUT_REPLY);
    let r = stream.finish().await.unwrap();
    assert_eq!(r.usage.truncated_calls, 1);
    let cut = events.only_cut();
    assert_eq!(cut.0.step, Step::Qa);
    assert_eq!(cut.2, NUM_OUTPUT);
}

#[tokio::test]
async fn a_cut_intermediate_refine_step_is_reported_with_its_step() {
    // Refine: one call per chunk; only the first refine step (index 1) is cut.
    let model = second_step_cut();
    let (s, events) = synth(&model, ResponseMode::Refine, None);
    let r = s
        .synthesize("q", nodes(&["first.", "second.", "third."]))
        .await
        .unwrap();
    assert_eq!(model.requests().len(), 3);
    assert_eq!(r.text, "answer 2");
    assert_eq!(r.usage.truncated_calls, 1);
    let cut = events.only_cut();
    assert_eq!(
        cut.0,
        StepInfo::new(ResponseMode::Refine, Step::Refine).at(0, 1)
    );
}

/// A model that answers `answer INDEX` and whose second step (index 1) is cut.
fn second_step_cut() -> ScriptedModel {
    ScriptedModel::new(info(), |r| Ok(format!("answer {}", r.step().index))).with_finish_reason(
        |r| {
            if r.step().index == 1 {
                FinishReason::Length
            } else {
                FinishReason::Stop
            }
        },
    )
}

/// A tree_summarize model that answers `summary INDEX` and whose second summary of
/// level 0 is cut.
fn second_leaf_cut() -> ScriptedModel {
    ScriptedModel::new(info(), |r| Ok(format!("summary {}", r.step().index))).with_finish_reason(
        |r| {
            if r.step().level == 0 && r.step().index == 1 {
                FinishReason::Length
            } else {
                FinishReason::Stop
            }
        },
    )
}

#[tokio::test]
async fn a_cut_tree_summarize_level_is_reported_with_its_level_and_index() {
    // Small prompts, so the first level has several summaries; the second summary of
    // level 0 is cut.
    let budget = PromptBudget::new(400, 100).unwrap();
    let model = second_leaf_cut();
    let events = Arc::new(Events::default());
    let s = Synthesizer::builder(Arc::new(model.clone()))
        .mode(ResponseMode::TreeSummarize)
        .budget(budget)
        .observer(events.clone())
        .build()
        .unwrap();
    let text = "word ".repeat(200);
    let many: Vec<&str> = vec![text.as_str(); 6];
    let r = s.synthesize("q", nodes(&many)).await.unwrap();
    let levels: Vec<u32> = model.requests().iter().map(|r| r.step().level).collect();
    assert!(levels.iter().any(|l| *l > 0), "{levels:?}");
    assert_eq!(r.usage.truncated_calls, 1);
    let cut = events.only_cut();
    assert_eq!(
        cut.0,
        StepInfo::new(ResponseMode::TreeSummarize, Step::Summary).at(0, 1)
    );
    assert_eq!(cut.2, 100);
}

#[tokio::test]
async fn every_cut_reply_is_counted() {
    let model = ScriptedModel::new(info(), |r| Ok(format!("answer {}", r.step().index)))
        .with_finish_reason(always_cut);
    let (s, events) = synth(&model, ResponseMode::Refine, None);
    let r = s
        .synthesize("q", nodes(&["first.", "second.", "third."]))
        .await
        .unwrap();
    assert_eq!(r.usage.calls, 3);
    assert_eq!(r.usage.truncated_calls, 3);
    let indexes: Vec<usize> = events.truncated().iter().map(|c| c.0.index).collect();
    assert_eq!(indexes, vec![0, 1, 2]);
}

#[tokio::test]
async fn error_policy_fails_a_plain_run_with_the_step() {
    let model = second_step_cut();
    let (s, events) = synth(&model, ResponseMode::Refine, Some(OnTruncation::Error));
    let err = s
        .synthesize("q", nodes(&["first.", "second.", "third."]))
        .await
        .unwrap_err();
    match &err {
        SynthError::Truncated {
            step, max_tokens, ..
        } => {
            assert_eq!(
                *step,
                StepInfo::new(ResponseMode::Refine, Step::Refine).at(0, 1)
            );
            // The step's own limit: bounded by its tiny input (64), under the reserve.
            assert_eq!(*max_tokens, 64.min(NUM_OUTPUT));
        }
        other => panic!("expected Truncated, got {other:?}"),
    }
    let message = err.to_string();
    assert!(message.contains("refine"), "{message}");
    assert!(message.contains("index 1"), "{message}");
    assert!(message.contains("output reserve"), "{message}");
    // The run stopped at the cut step: no final call.
    assert_eq!(model.requests().len(), 2);
    // The event is still reported.
    assert_eq!(events.truncated().len(), 1);
}

#[tokio::test]
async fn error_policy_ends_a_stream_with_the_error() {
    let model = always_cut_model();
    let (s, _) = synth(&model, ResponseMode::Compact, Some(OnTruncation::Error));
    let (items, _) = stream_to_end(&s).await;
    let (last, deltas) = items.split_last().expect("at least the error");
    assert!(deltas.iter().all(Result::is_ok), "{items:?}");
    assert!(!deltas.is_empty(), "the deltas come before the error");
    assert!(
        matches!(
            last,
            Err(SynthError::Truncated { step, max_tokens: NUM_OUTPUT, .. })
                if step.step == Step::Qa && step.mode == ResponseMode::Compact
        ),
        "{last:?}"
    );

    // `finish` gives the typed error, not a partial answer.
    let stream = s.stream("q", nodes(&["The sky is blue."])).await.unwrap();
    let err = stream.finish().await.unwrap_err();
    assert!(matches!(err, SynthError::Truncated { .. }), "{err:?}");
}

#[tokio::test]
async fn error_policy_fails_a_streamed_run_at_a_cut_intermediate_step() {
    // The tree's first level runs before the final call is streamed.
    let budget = PromptBudget::new(400, 100).unwrap();
    let model = second_leaf_cut();
    let s = Synthesizer::builder(Arc::new(model.clone()))
        .mode(ResponseMode::TreeSummarize)
        .budget(budget)
        .on_truncation(OnTruncation::Error)
        .build()
        .unwrap();
    let text = "word ".repeat(200);
    let many: Vec<&str> = vec![text.as_str(); 6];
    let err = match s.stream("q", nodes(&many)).await {
        Ok(stream) => stream.finish().await.unwrap_err(),
        Err(e) => e,
    };
    match err {
        SynthError::Truncated { step, .. } => {
            assert_eq!(
                step,
                StepInfo::new(ResponseMode::TreeSummarize, Step::Summary).at(0, 1)
            );
        }
        other => panic!("expected Truncated, got {other:?}"),
    }
}

#[test]
fn the_event_serializes_with_its_step() {
    let event = SynthEvent::ReplyTruncated {
        step: StepInfo::new(ResponseMode::TreeSummarize, Step::Summary).at(1, 2),
        completion_tokens: 256,
        max_tokens: 256,
    };
    let v = serde_json::to_value(&event).unwrap();
    assert_eq!(v["event"], "reply_truncated");
    assert_eq!(v["step"]["level"], 1);
    assert_eq!(v["step"]["index"], 2);
    assert_eq!(v["max_tokens"], 256);
    assert_eq!(OnTruncation::default(), OnTruncation::Warn);
}
