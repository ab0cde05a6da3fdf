//! Map steps under uneven latencies: a finished call frees its place at once (no
//! head-of-line blocking), answers keep the input order, a slow stream reader holds at
//! most `concurrency` answers, and a panicked call is an error, never an empty answer.
//! Everything runs on tokio's paused clock, so the schedule is exact.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use synthkit::model::{ModelInfo, ModelRequest};
use synthkit::testing::ScriptedModel;
use synthkit::{Concurrency, Node, ResponseMode, SynthError, Synthesizer, SynthesizerBuilder};
use tokio::time::Instant;

fn info() -> ModelInfo {
    crate::common::fixtures::scripted(4096, 64)
}

fn nodes(n: usize) -> Vec<Node> {
    (0..n)
        .map(|i| Node::new(format!("n{i}"), format!("chunk number {i} says fact {i}.")))
        .collect()
}

/// The chunk a request shows (accumulate prompts carry one chunk each).
fn chunk_of(r: &ModelRequest) -> usize {
    let context = r
        .source()
        .unwrap()
        .variable("context_str")
        .unwrap_or_default();
    let start = context.find("number ").expect("a chunk") + "number ".len();
    context[start..]
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a chunk number")
}

/// When each call started, by (level, index) of its step, relative to `t0`.
#[derive(Clone, Default)]
struct Starts(Arc<Mutex<BTreeMap<(u32, usize), Duration>>>);

impl Starts {
    /// A model whose call at step index `i` takes `latency(i)`.
    fn model(&self, t0: Instant, latency: fn(usize) -> Duration) -> ScriptedModel {
        let starts = self.clone();
        ScriptedModel::new(info(), |r| Ok(format!("answer {}", r.step().index))).with_latency(
            move |r| {
                let key = (r.step().level, r.step().index);
                starts.0.lock().unwrap().insert(key, t0.elapsed());
                latency(r.step().index)
            },
        )
    }

    /// A synthesizer builder in `mode` with `slots` calls at once over a [`Starts::model`]
    /// with [`uneven`] latencies, its clock started now; and that start.
    fn uneven_builder(&self, mode: ResponseMode, slots: usize) -> (SynthesizerBuilder, Instant) {
        let t0 = Instant::now();
        let builder = Synthesizer::builder(Arc::new(self.model(t0, uneven)))
            .mode(mode)
            .concurrency(Concurrency::limit(slots));
        (builder, t0)
    }

    /// The start times of the calls of `level`, by index.
    fn level(&self, level: u32) -> Vec<Duration> {
        let starts = self.0.lock().unwrap();
        starts
            .iter()
            .filter(|((l, _), _)| *l == level)
            .map(|(_, t)| *t)
            .collect()
    }
}

/// Greedy list scheduling of `latencies` (in start order) on `slots` machines: when
/// each job starts, and the makespan. With `first_alone`, the first job runs alone (the
/// engine sends the first call of a run alone while it may still calibrate its prompt
/// limit from the server's reported usage).
fn list_schedule(
    latencies: &[Duration],
    slots: usize,
    first_alone: bool,
) -> (Vec<Duration>, Duration) {
    let mut free = vec![Duration::ZERO; slots];
    let mut starts = Vec::new();
    let mut rest = latencies;
    if first_alone && let Some((first, others)) = latencies.split_first() {
        starts.push(Duration::ZERO);
        free = vec![*first; slots];
        rest = others;
    }
    for l in rest {
        let (i, at) = free
            .iter()
            .copied()
            .enumerate()
            .min_by_key(|(_, t)| *t)
            .unwrap();
        starts.push(at);
        free[i] = at + *l;
    }
    (starts, free.into_iter().max().unwrap())
}

/// The case: every 4th call takes 2 s, the others 0.1 s.
fn uneven(chunk: usize) -> Duration {
    if chunk.is_multiple_of(4) {
        Duration::from_secs(2)
    } else {
        Duration::from_millis(100)
    }
}

#[tokio::test(start_paused = true)]
async fn accumulate_refills_every_slot_as_soon_as_it_frees() {
    for calibrate in [false, true] {
        accumulate_schedule(calibrate).await;
    }
}

async fn accumulate_schedule(calibrate: bool) {
    let starts = Starts::default();
    let (builder, t0) = starts.uneven_builder(ResponseMode::Accumulate, 4);
    let synth = builder.calibrate_from_usage(calibrate).build().unwrap();
    let r = synth.synthesize("q", nodes(17)).await.unwrap();
    let wall = t0.elapsed();

    // Answers keep the input order whatever the finishing order.
    for i in 0..17 {
        assert!(
            r.text.contains(&format!("Response {}: answer {i}", i + 1)),
            "{}",
            r.text
        );
    }
    let latencies: Vec<Duration> = (0..17).map(uneven).collect();
    let (expected, makespan) = list_schedule(&latencies, 4, calibrate);
    assert_eq!(
        starts.level(0),
        expected,
        "every call starts the moment a slot frees"
    );
    assert_eq!(wall, makespan, "the wall time is the list-scheduling bound");
    // Waiting for the oldest call before starting another (head-of-line blocking) took
    // 6.4 s here.
    let bound = if calibrate { 4700 } else { 4200 };
    assert_eq!(makespan, Duration::from_millis(bound));
}

#[tokio::test(start_paused = true)]
async fn a_tree_level_refills_slots_too() {
    let starts = Starts::default();
    let (builder, _) = starts.uneven_builder(ResponseMode::TreeSummarize, 3);
    // A small window: the text needs many leaf prompts.
    let synth = builder
        .budget(
            synthkit::prompt::PromptBudget::new(160, 20)
                .unwrap()
                .with_chunk_overlap_ratio(0.0)
                .unwrap(),
        )
        .build()
        .unwrap();
    let nodes: Vec<Node> = (0..9)
        .map(|i| Node::new(format!("n{i}"), "word ".repeat(100)))
        .collect();
    let _ = synth.synthesize("q", nodes).await.unwrap();
    let leaves = starts.level(0);
    assert!(leaves.len() >= 6, "{} leaf calls", leaves.len());
    let latencies: Vec<Duration> = (0..leaves.len()).map(uneven).collect();
    let (expected, _) = list_schedule(&latencies, 3, true);
    assert_eq!(
        leaves, expected,
        "every leaf starts the moment a slot frees"
    );
}

#[tokio::test(start_paused = true)]
async fn a_slow_stream_reader_holds_at_most_concurrency_answers() {
    let model = ScriptedModel::new(info(), |r| Ok(format!("answer {}", chunk_of(r))));
    let synth = Synthesizer::builder(Arc::new(model.clone()))
        .mode(ResponseMode::Accumulate)
        .concurrency(Concurrency::limit(4))
        .build()
        .unwrap();
    let mut stream = synth.stream("q", nodes(30)).await.unwrap();
    // Read the first item, then stop reading while the runtime has all the time it
    // needs to run ahead.
    let first = stream.next().await.unwrap().unwrap();
    assert_eq!(first, "Response 1: ");
    tokio::time::sleep(Duration::from_secs(60)).await;
    let asked = model.requests().len();
    assert!(
        asked <= 4,
        "{asked} answers were computed for a reader that read none of them"
    );
    // Reading on gets every answer, in order.
    let mut text = first;
    while let Some(d) = stream.next().await {
        text.push_str(&d.unwrap());
    }
    for i in 0..30 {
        assert!(
            text.contains(&format!("Response {}: answer {i}", i + 1)),
            "{text}"
        );
    }
    assert_eq!(model.requests().len(), 30);
}

#[tokio::test(start_paused = true)]
async fn a_panicked_call_fails_the_stream_and_the_answer() {
    let model = ScriptedModel::new(info(), |r| {
        if chunk_of(r) == 2 {
            panic!("the model blew up");
        }
        Ok(format!("answer {}", chunk_of(r)))
    });
    for stream in [false, true] {
        let synth = Synthesizer::builder(Arc::new(model.clone()))
            .mode(ResponseMode::Accumulate)
            .concurrency(Concurrency::limit(2))
            .build()
            .unwrap();
        let result = if stream {
            let mut s = synth.stream("q", nodes(5)).await.unwrap();
            let mut text = String::new();
            let mut failed = None;
            while let Some(d) = s.next().await {
                match d {
                    Ok(d) => text.push_str(&d),
                    Err(e) => failed = Some(e),
                }
            }
            assert!(!text.contains("Empty Response"), "{text}");
            failed.map_or(Ok(text), Err)
        } else {
            synth.synthesize("q", nodes(5)).await.map(|r| r.text)
        };
        match result {
            Err(SynthError::Task { .. }) => {}
            other => panic!("stream={stream}: expected a task error, got {other:?}"),
        }
    }
}
