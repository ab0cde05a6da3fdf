//! The spans of a synthesis as any `tracing` subscriber sees them (no exporter): one
//! synthesis span, a step span per stage under it, a call span per model call under its
//! step, with the GenAI attribute names; a failed call marks its span and the synthesis's
//! as errors; no prompt or reply becomes a `tracing` field.
//! (The export to a real receiver is tested in the CLI's suite, against Arize Phoenix.)

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};

use synthkit::model::{FinishReason, ModelInfo};
use synthkit::testing::ScriptedModel;
use synthkit::{Node, OnTruncation, Response, ResponseMode, SynthError, Synthesizer};
use tracing::Instrument;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

use crate::common::fixtures::{PACKING_MODES, many_nodes, scripted};

/// One span as recorded: its name, its parent's name and its fields.
#[derive(Debug, Clone, Default)]
struct Seen {
    name: String,
    parent: Option<u64>,
    fields: BTreeMap<String, String>,
}

/// The name of the span [`recorded`] runs its work in: the recorder keeps the spans under
/// it, by the id of the run.
const RUN: &str = "test.recorded";

/// Every span under a [`RUN`] span, by run, then by span id.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<BTreeMap<u64, BTreeMap<u64, Seen>>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_string(),
            format!("{value:?}").trim_matches('"').to_string(),
        );
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let Some(run) = span.scope().skip(1).find(|s| s.name() == RUN) else {
            return;
        };
        let parent = span.parent().map(|p| p.id().into_u64());
        let mut seen = Seen {
            name: attrs.metadata().name().to_string(),
            parent,
            fields: BTreeMap::new(),
        };
        attrs.record(&mut Fields(&mut seen.fields));
        let mut runs = self.0.lock().unwrap();
        runs.entry(run.id().into_u64())
            .or_default()
            .insert(id.into_u64(), seen);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        let mut runs = self.0.lock().unwrap();
        if let Some(seen) = runs.values_mut().find_map(|r| r.get_mut(&id.into_u64())) {
            values.record(&mut Fields(&mut seen.fields));
        }
    }
}

/// The process's recorder, installed as the global subscriber on first use. Global, not
/// a thread's default: `tracing` caches per callsite whether anyone listens, for the
/// whole process, and a span callsite first met by another test's thread while a
/// thread-default subscriber is being installed can stay cached as unheard (the span is
/// then never made). With a global subscriber that listens to everything, no callsite is
/// ever cached as unheard. Other tests' spans are not kept (they are under no [`RUN`]).
fn recorder() -> &'static Recorder {
    static RECORDER: OnceLock<Recorder> = OnceLock::new();
    RECORDER.get_or_init(|| {
        let recorder = Recorder::default();
        let subscriber = tracing_subscriber::registry().with(recorder.clone());
        tracing::subscriber::set_global_default(subscriber)
            .expect("no other test of this binary installs a global subscriber");
        // A callsite another thread was registering while it was installed: ask again.
        tracing::callsite::rebuild_interest_cache();
        recorder
    })
}

/// Runs `synth` over `nodes` under a recording subscriber: the result and the spans.
fn record(synth: &Synthesizer, nodes: Vec<Node>) -> (bool, BTreeMap<u64, Seen>) {
    let (response, spans) = record_response(synth, nodes);
    (response.is_ok(), spans)
}

/// [`record`], with the response.
fn record_response(
    synth: &Synthesizer,
    nodes: Vec<Node>,
) -> (Result<Response, SynthError>, BTreeMap<u64, Seen>) {
    recorded(synth.synthesize("How often is the mirror cleaned?", nodes))
}

/// Runs `work` to its end in a [`RUN`] span: its output and the spans under it.
fn recorded<F: Future>(work: F) -> (F::Output, BTreeMap<u64, Seen>) {
    let recorder = recorder();
    let run = tracing::info_span!("test.recorded");
    let id = run.id().expect("the global recorder listens").into_u64();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let output = rt.block_on(work.instrument(run));
    drop(rt);
    let spans = recorder.0.lock().unwrap().remove(&id).unwrap_or_default();
    (output, spans)
}

fn nodes() -> Vec<Node> {
    vec![
        Node::new("a", "The mirror was cleaned monthly, said the old manual."),
        Node::new("b", "Now it is cleaned every three months."),
        Node::new("c", "The dome opens at dusk."),
    ]
}

#[test]
fn refine_gives_a_synthesis_its_steps_and_their_calls() {
    let model = ScriptedModel::constant(
        ModelInfo::new("m").with_provider("test"),
        "Every three months.",
    );
    let synth = Synthesizer::builder(model)
        .mode(ResponseMode::Refine)
        .build()
        .unwrap();
    let (ok, spans) = record(&synth, nodes());
    assert!(ok);
    let roots: Vec<(&u64, &Seen)> = spans
        .iter()
        .filter(|(_, s)| s.name == "synthkit.synthesize")
        .collect();
    assert_eq!(roots.len(), 1);
    let (root_id, root) = roots[0];
    assert_eq!(root.fields["synthkit.mode"], "refine");
    assert_eq!(root.fields["synthkit.node_ids"], "a,b,c");
    assert_eq!(root.fields["synthkit.calls"], "3");
    let steps: Vec<(&u64, &Seen)> = spans
        .iter()
        .filter(|(_, s)| s.parent == Some(*root_id))
        .collect();
    let names: Vec<&str> = steps
        .iter()
        .map(|(_, s)| s.fields["synthkit.step"].as_str())
        .collect();
    assert_eq!(names, ["qa", "refine"]);
    for (id, step) in &steps {
        let calls: Vec<&Seen> = spans.values().filter(|s| s.parent == Some(**id)).collect();
        assert_eq!(calls.len().to_string(), step.fields["synthkit.calls"]);
        for call in calls {
            assert_eq!(call.name, "synthkit.call");
            assert_eq!(call.fields["otel.name"], "text_completion m");
            assert_eq!(call.fields["gen_ai.operation.name"], "text_completion");
            assert_eq!(call.fields["gen_ai.request.model"], "m");
            assert_eq!(call.fields["gen_ai.provider.name"], "test");
            assert_eq!(call.fields["gen_ai.response.finish_reasons"], "stop");
            assert!(
                call.fields["gen_ai.usage.input_tokens"]
                    .parse::<u64>()
                    .unwrap()
                    > 0
            );
            assert!(
                call.fields["gen_ai.usage.output_tokens"]
                    .parse::<u64>()
                    .unwrap()
                    > 0
            );
            // Content never becomes a tracing field (log formatters print fields).
            assert!(!call.fields.contains_key("gen_ai.input.messages"));
            assert!(
                !call
                    .fields
                    .values()
                    .any(|v| v.contains("Every three months"))
            );
        }
    }
}

#[test]
fn a_failed_call_marks_its_span_and_the_synthesis_as_errors() {
    let model = ScriptedModel::constant(ModelInfo::new("m"), "Every")
        .with_finish_reason(|_| FinishReason::Length);
    let synth = Synthesizer::builder(model)
        .mode(ResponseMode::Compact)
        .on_truncation(OnTruncation::Error)
        .build()
        .unwrap();
    let (ok, spans) = record(&synth, nodes());
    assert!(!ok);
    let root = spans
        .values()
        .find(|s| s.name == "synthkit.synthesize")
        .unwrap();
    assert_eq!(root.fields["otel.status_code"], "ERROR");
    assert_eq!(root.fields["error.type"], "truncated");
    let call = spans.values().find(|s| s.name == "synthkit.call").unwrap();
    assert_eq!(call.fields["otel.status_code"], "ERROR");
    assert_eq!(call.fields["synthkit.truncated"], "true");
    assert_eq!(call.fields["gen_ai.response.finish_reasons"], "length");
}

/// Each call's span names the nodes its prompt held: the same ones the response's steps
/// find by locating each prompt's context in the nodes' texts (two independent ways), in
/// every mode that packs nodes; a tree's upper levels name the nodes under the summaries
/// they read, and the top call names them all.
#[test]
fn every_call_span_names_the_nodes_its_prompt_held() {
    let nodes = many_nodes();
    let all: Vec<String> = nodes.iter().map(|n| n.id.clone()).collect();
    for mode in PACKING_MODES {
        let synth = Synthesizer::builder(ScriptedModel::constant(scripted(700, 40), "Short."))
            .mode(mode)
            .return_steps(true)
            .build()
            .unwrap();
        let (response, spans) = record_response(&synth, nodes.clone());
        let response = response.unwrap();
        let steps = response.steps.clone().unwrap();
        let calls: Vec<&Seen> = spans
            .values()
            .filter(|s| s.name == "synthkit.call")
            .collect();
        assert_eq!(calls.len(), steps.len(), "{mode:?}");
        if mode == ResponseMode::SimpleSummarize {
            // One call with what fits; the rest is reported as dropped.
            let dropped = &response.truncation.as_ref().unwrap().dropped_node_ids;
            assert!(!dropped.is_empty() && steps[0].node_ids.len() < all.len());
            assert!(
                steps[0]
                    .node_ids
                    .iter()
                    .chain(dropped)
                    .any(|id| id == "n11")
            );
        } else {
            assert!(calls.len() > 1, "{mode:?}: the window makes several calls");
        }
        for step in &steps {
            let call = calls
                .iter()
                .find(|c| {
                    c.fields["synthkit.level"] == step.level.to_string()
                        && c.fields["synthkit.index"] == step.index.to_string()
                })
                .unwrap_or_else(|| panic!("{mode:?}: no span for {step:?}"));
            assert!(!step.node_ids.is_empty(), "{mode:?}: {step:?}");
            assert_eq!(
                call.fields["synthkit.node_ids"],
                step.node_ids.join(","),
                "{mode:?} level {} index {}",
                step.level,
                step.index
            );
            assert_eq!(
                call.fields["synthkit.nodes"],
                step.node_ids.len().to_string()
            );
        }
        if mode == ResponseMode::TreeSummarize {
            let top = steps.iter().map(|s| s.level).max().unwrap();
            assert!(top > 0);
            let last = steps.iter().find(|s| s.level == top).unwrap();
            assert_eq!(last.node_ids, all, "the top call is over every node");
        }
    }
}

/// A streamed answer's synthesis span counts the streamed final call too: its totals are
/// recorded when the stream is done, not when it opens.
#[test]
fn a_streamed_synthesis_counts_its_final_call() {
    let synth = Synthesizer::builder(ScriptedModel::constant(ModelInfo::new("m"), "Monthly."))
        .mode(ResponseMode::Refine)
        .build()
        .unwrap();
    let (text, spans) = recorded(async {
        let stream = synth.stream("How often?", nodes()).await.unwrap();
        stream.finish().await.unwrap().text
    });
    assert_eq!(text, "Monthly.");
    let root = spans
        .values()
        .find(|s| s.name == "synthkit.synthesize")
        .unwrap();
    let calls: Vec<&Seen> = spans
        .values()
        .filter(|s| s.name == "synthkit.call")
        .collect();
    assert_eq!(calls.len(), 3);
    assert_eq!(root.fields["synthkit.calls"], "3");
    let input: u64 = calls
        .iter()
        .map(|c| {
            c.fields["gen_ai.usage.input_tokens"]
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    assert_eq!(
        root.fields["synthkit.usage.input_tokens"],
        input.to_string()
    );
}

/// A synthesis started under a thread's own subscriber while another one is the global
/// default: its calls run on a multi-thread runtime's workers, whose default is the
/// global one, and still make their spans with the synthesis's subscriber, under its
/// spans (a child made with the workers' default would name a parent that subscriber has
/// never seen, and `tracing-subscriber`'s registry panics on that).
#[test]
fn calls_on_worker_threads_make_their_spans_with_the_synthesis_subscriber() {
    recorder(); // the global default, listening
    let local = Recorder::default();
    let subscriber = tracing_subscriber::registry().with(local.clone());
    let synth = Synthesizer::builder(ScriptedModel::constant(scripted(700, 40), "Short."))
        .mode(ResponseMode::Accumulate)
        .build()
        .unwrap();
    let answer = tracing::subscriber::with_default(subscriber, || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let run = tracing::info_span!("test.recorded");
        rt.block_on(
            synth
                .synthesize("What do they say?", many_nodes())
                .instrument(run),
        )
    });
    assert!(answer.is_ok());
    let runs = local.0.lock().unwrap();
    let spans = runs
        .values()
        .next()
        .expect("the run's spans, in its own subscriber");
    let calls = spans.values().filter(|s| s.name == "synthkit.call").count();
    assert!(calls > 1, "{calls} call spans");
    assert!(spans.values().all(|s| s.parent.is_some()));
}

#[test]
fn a_call_that_thought_carries_its_reasoning_tokens() {
    let model = ScriptedModel::constant(
        ModelInfo::new("m").with_provider("test"),
        "<think>The manual says monthly, the note says three months.</think>Every three months.",
    );
    let synth = Synthesizer::builder(model)
        .mode(ResponseMode::Compact)
        .build()
        .unwrap();
    let (ok, spans) = record(&synth, nodes());
    assert!(ok);
    let calls: Vec<&Seen> = spans
        .values()
        .filter(|s| s.name == "synthkit.call")
        .collect();
    assert!(!calls.is_empty());
    for call in calls {
        let reasoning: u64 = call.fields["gen_ai.usage.reasoning.output_tokens"]
            .parse()
            .unwrap();
        let output: u64 = call.fields["gen_ai.usage.output_tokens"].parse().unwrap();
        assert!(reasoning > 0 && reasoning <= output, "{call:?}");
        // The thinking is content: never a tracing field.
        assert!(!call.fields.values().any(|v| v.contains("monthly")));
    }
}
