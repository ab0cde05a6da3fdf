//! `return_steps`: one step per call, in every mode, with its node ids, tokens, retries,
//! truncation and reply (capped); streams carry them too.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use synthkit::layer::retry::{RetryModel, RetryPolicy};
use synthkit::model::{FinishReason, ModelError, ModelRequest};
use synthkit::steps::MAX_STEP_REPLY_BYTES;
use synthkit::testing::ScriptedModel;
use synthkit::{Response, ResponseMode, Synthesizer};

use crate::common::fixtures::{PACKING_MODES, many_nodes, nodes, scripted, stream_whole};

async fn run(mode: ResponseMode, model: ScriptedModel, citations: bool) -> Response {
    Synthesizer::builder(Arc::new(model))
        .mode(mode)
        .return_steps(true)
        .citations(citations)
        .build()
        .unwrap()
        .synthesize("What do the nodes say?", many_nodes())
        .await
        .unwrap()
}

/// The ids of the first level's steps, in step order, each once.
fn level0_ids(r: &Response) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for s in r.steps.as_ref().unwrap().iter().filter(|s| s.level == 0) {
        for id in &s.node_ids {
            if !ids.contains(id) {
                ids.push(id.clone());
            }
        }
    }
    ids
}

#[tokio::test]
async fn every_call_is_a_step_and_every_node_is_read() {
    let all: Vec<String> = many_nodes().into_iter().map(|n| n.id).collect();
    // simple_summarize makes one call and drops what does not fit.
    let modes = PACKING_MODES.into_iter();
    for mode in modes.filter(|m| *m != ResponseMode::SimpleSummarize) {
        for citations in [false, true] {
            let model = ScriptedModel::constant(scripted(700, 60), "A short reply.");
            let r = run(mode, model, citations).await;
            let steps = r.steps.as_ref().unwrap();
            assert!(r.usage.calls > 1, "{mode}: one call only");
            assert_eq!(steps.len() as u64, r.usage.calls, "{mode}");
            let mut calls: Vec<u64> = steps.iter().map(|s| s.call).collect();
            calls.sort_unstable();
            assert_eq!(calls, (1..=r.usage.calls).collect::<Vec<_>>(), "{mode}");
            let prompt: u64 = steps.iter().map(|s| s.prompt_tokens).sum();
            assert_eq!(prompt, r.usage.prompt_tokens, "{mode}");
            assert!(
                steps
                    .iter()
                    .all(|s| s.mode == mode && s.reply == "A short reply.")
            );
            assert_eq!(
                level0_ids(&r),
                all,
                "{mode} citations {citations}: {steps:#?}"
            );
        }
    }
}

#[tokio::test]
async fn tree_levels_name_the_summaries_they_read() {
    let model = ScriptedModel::constant(scripted(700, 60), "A summary of some nodes.");
    let r = run(ResponseMode::TreeSummarize, model, false).await;
    let steps = r.steps.unwrap();
    let top = steps.iter().map(|s| s.level).max().unwrap();
    assert!(top >= 1, "one level only: {steps:#?}");
    let last = steps.iter().find(|s| s.level == top).unwrap();
    assert_eq!(
        last.node_ids.len(),
        12,
        "the final summary stands on every node"
    );
    let below: Vec<u64> = steps
        .iter()
        .filter(|s| s.level == top - 1)
        .map(|s| s.call)
        .collect();
    assert_eq!(last.input_calls, below);
}

#[tokio::test]
async fn steps_only_on_request_and_in_streams_too() {
    let model = ScriptedModel::constant(scripted(700, 60), "ok");
    let plain = Synthesizer::builder(Arc::new(model.clone()))
        .mode(ResponseMode::Refine)
        .build()
        .unwrap();
    let r = plain.synthesize("q", many_nodes()).await.unwrap();
    assert!(r.steps.is_none());
    assert!(serde_json::to_value(&r).unwrap().get("steps").is_none());
    let with = Synthesizer::builder(Arc::new(model))
        .mode(ResponseMode::Refine)
        .return_steps(true)
        .build()
        .unwrap();
    let streamed = stream_whole(&with, "q", many_nodes()).await;
    let steps = streamed.steps.unwrap();
    assert_eq!(steps.len() as u64, streamed.usage.calls);
    assert_eq!(steps.last().unwrap().node_ids, vec!["n11".to_string()]);
}

#[tokio::test]
async fn long_replies_are_capped_and_say_so() {
    let long = "é".repeat(MAX_STEP_REPLY_BYTES); // two bytes a character
    let model = ScriptedModel::constant(scripted(40_000, 20_000), long.clone())
        .with_finish_reason(|_| FinishReason::Length);
    let r = Synthesizer::builder(Arc::new(model))
        .return_steps(true)
        .build()
        .unwrap()
        .synthesize("q", nodes(&["one"]))
        .await
        .unwrap();
    let step = &r.steps.unwrap()[0];
    assert!(step.reply_cut && step.truncated);
    assert_eq!(step.reply_bytes, long.len());
    assert!(step.reply.len() <= MAX_STEP_REPLY_BYTES && long.starts_with(&step.reply));
}

#[tokio::test(start_paused = true)]
async fn retries_are_counted_per_call() {
    // Each distinct prompt fails once with a transient error, then answers.
    let seen: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let model = ScriptedModel::new(scripted(700, 60), move |r: &ModelRequest| {
        let mut seen = seen.lock().unwrap();
        let n = seen.entry(r.prompt.to_text()).or_insert(0);
        *n += 1;
        if *n == 1 {
            Err(ModelError::Connection("reset".into()))
        } else {
            Ok("fine".into())
        }
    });
    let policy = RetryPolicy::default()
        .with_max_attempts(3)
        .with_initial_backoff(Duration::from_millis(1));
    let r = Synthesizer::builder(RetryModel::new(model, policy))
        .mode(ResponseMode::Refine)
        .return_steps(true)
        .build()
        .unwrap()
        .synthesize("q", many_nodes())
        .await
        .unwrap();
    let steps = r.steps.unwrap();
    assert!(steps.len() > 1);
    assert!(steps.iter().all(|s| s.retries == 1), "{steps:#?}");
}

/// With citations on, a summary's markers naming sources its prompt did not show are
/// removed before the next level reads it: the next level still names the summaries it
/// was given (packing's account, not a search for the raw replies).
#[tokio::test]
async fn tree_levels_name_their_summaries_when_markers_are_removed() {
    let model = ScriptedModel::constant(scripted(700, 60), "A summary [99] of some nodes [1].");
    let r = run(ResponseMode::TreeSummarize, model, true).await;
    let steps = r.steps.unwrap();
    let top = steps.iter().map(|s| s.level).max().unwrap();
    assert!(top >= 1, "one level only: {steps:#?}");
    for level in 1..=top {
        let mut below: Vec<u64> = steps
            .iter()
            .filter(|s| s.level == level - 1)
            .map(|s| s.call)
            .collect();
        below.sort_unstable();
        let mut read: Vec<u64> = steps
            .iter()
            .filter(|s| s.level == level)
            .flat_map(|s| s.input_calls.iter().copied())
            .collect();
        read.sort_unstable();
        assert_eq!(read, below, "level {level}: {steps:#?}");
    }
    let last = steps.iter().find(|s| s.level == top).unwrap();
    assert_eq!(last.node_ids.len(), 12, "{steps:#?}");
}
