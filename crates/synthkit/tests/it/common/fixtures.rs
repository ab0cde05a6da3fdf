//! Models' descriptions, nodes and observers that many modules build the same way.

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use synthkit::model::{CompletionStream, LanguageModel, ModelError, ModelInfo, StreamEvent, Usage};
use synthkit::observe::CallReport;
use synthkit::{Node, Observer, ResponseMode, SynthEvent, Synthesizer};

/// `synth`'s streamed answer to `query` over `nodes`, read to its end.
pub async fn stream_whole(
    synth: &Synthesizer,
    query: &str,
    nodes: Vec<Node>,
) -> synthkit::Response {
    synth
        .stream(query, nodes)
        .await
        .unwrap()
        .finish()
        .await
        .unwrap()
}

/// The description of a scripted test model with this window and output.
pub fn scripted(window: usize, output: usize) -> ModelInfo {
    ModelInfo::new("scripted")
        .with_context_window(window)
        .with_num_output(output)
}

/// Twelve nodes of about 60 words each (`n0`..`n11`): several calls in every mode at a
/// small window.
pub fn many_nodes() -> Vec<Node> {
    let texts: Vec<String> = (0..12)
        .map(|i| {
            let words: Vec<String> = (0..60).map(|w| format!("w{i}x{w}")).collect();
            format!("Node {i} says {}.", words.join(" "))
        })
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    nodes(&refs)
}

/// One node per text, with ids `n{first}`, `n{first + 1}`, and so on.
pub fn nodes_from(first: usize, texts: &[&str]) -> Vec<Node> {
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| Node::new(format!("n{}", i + first), *t))
        .collect()
}

/// One node per text, with ids `n0`, `n1`, ...
pub fn nodes(texts: &[&str]) -> Vec<Node> {
    nodes_from(0, texts)
}

/// An observer keeping every event of a synthesis.
#[derive(Default)]
pub struct Events(pub Mutex<Vec<SynthEvent>>);

impl Observer for Events {
    fn event(&self, event: &SynthEvent) {
        self.0.lock().unwrap().push(event.clone());
    }
}

/// Each call's prompt count by synthkit and by the server: `(mode/step, ours, theirs,
/// whether the server reported usage)`.
#[derive(Default)]
pub struct Counts(pub Mutex<Vec<(String, usize, u64, bool)>>);

impl Observer for Counts {
    fn call_finished(&self, r: &CallReport<'_>) {
        self.0.lock().unwrap().push((
            format!("{}/{}", r.request.step().mode, r.request.step().step),
            r.request.prompt_tokens,
            r.usage.prompt_tokens,
            r.usage_reported,
        ));
    }
}

impl Counts {
    /// A synthesizer of `mode` over `model` whose every call is counted in the returned
    /// counts.
    pub fn synthesizer(
        model: Arc<dyn LanguageModel>,
        mode: ResponseMode,
    ) -> (Synthesizer, Arc<Counts>) {
        let counts = Arc::new(Counts::default());
        let synth = Synthesizer::builder(model)
            .mode(mode)
            .observer(counts.clone())
            .build()
            .unwrap();
        (synth, counts)
    }
}

/// Every event of a model's stream (bounded: no stream here yields a thousand events).
pub async fn collect(s: CompletionStream) -> Vec<Result<StreamEvent, ModelError>> {
    s.take(1000).collect().await
}

/// The text of a stream's deltas.
pub fn delta_text(events: &[Result<StreamEvent, ModelError>]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::Delta(d)) => Some(d.as_str()),
            _ => None,
        })
        .collect()
}

/// The usage of a stream that is deltas (at least one) then a `Done` with usage and a
/// finish reason; fails the test when it is not.
pub fn deltas_then_done(events: &[Result<StreamEvent, ModelError>]) -> Usage {
    let (last, deltas) = events.split_last().expect("events");
    assert!(!deltas.is_empty());
    assert!(
        deltas
            .iter()
            .all(|e| matches!(e, Ok(StreamEvent::Delta(_)))),
        "{events:?}"
    );
    let Ok(StreamEvent::Done {
        usage: Some(usage),
        finish_reason: Some(_),
    }) = last
    else {
        panic!("the last event is not a Done with usage: {last:?}");
    };
    assert!(usage.prompt_tokens > 0);
    *usage
}

/// Every mode that packs nodes into prompts.
pub const PACKING_MODES: [ResponseMode; 6] = [
    ResponseMode::Refine,
    ResponseMode::Compact,
    ResponseMode::TreeSummarize,
    ResponseMode::SimpleSummarize,
    ResponseMode::Accumulate,
    ResponseMode::CompactAccumulate,
];
