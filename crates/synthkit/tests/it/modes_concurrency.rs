//! Streaming and concurrency in the response modes, with scripted models: a stream ends
//! with a plain synthesis's answer in every mode, calls in flight together change no
//! prompt and no answer, the concurrency limit is reached and never passed, a model error
//! keeps its meaning through concurrent calls, and the observer sees every call.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use synthkit::model::{
    Completion, LanguageModel, ModelError, ModelFuture, ModelInfo, ModelRequest,
};
use synthkit::observe::CallReport;
use synthkit::prompt::PromptBudget;
use synthkit::testing::ScriptedModel;
use synthkit::{Concurrency, Observer, ResponseMode, SynthError, Synthesizer};

use crate::common::fixtures::nodes;
use crate::modes_common::{echo_kind, info, synth, synth_with};

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
