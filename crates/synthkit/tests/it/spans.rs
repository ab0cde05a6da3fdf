//! The spans of a synthesis as any `tracing` subscriber sees them (no exporter): one
//! synthesis span, a step span per stage under it, a call span per model call under its
//! step, with the GenAI attribute names; a failed call marks its span and the synthesis's
//! as errors; no prompt or reply becomes a `tracing` field.
//! (The export to a real receiver is tested in the CLI's suite, against Arize Phoenix.)

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use synthkit::model::{FinishReason, ModelInfo};
use synthkit::testing::ScriptedModel;
use synthkit::{Node, OnTruncation, ResponseMode, Synthesizer};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// One span as recorded: its name, its parent's name and its fields.
#[derive(Debug, Clone, Default)]
struct Seen {
    name: String,
    parent: Option<u64>,
    fields: BTreeMap<String, String>,
}

#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<BTreeMap<u64, Seen>>>);

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
        let parent = ctx
            .span(id)
            .and_then(|s| s.parent())
            .map(|p| p.id().into_u64());
        let mut seen = Seen {
            name: attrs.metadata().name().to_string(),
            parent,
            fields: BTreeMap::new(),
        };
        attrs.record(&mut Fields(&mut seen.fields));
        self.0.lock().unwrap().insert(id.into_u64(), seen);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        if let Some(seen) = self.0.lock().unwrap().get_mut(&id.into_u64()) {
            values.record(&mut Fields(&mut seen.fields));
        }
    }
}

/// Runs `synth` over `nodes` under a recording subscriber: the result and the spans.
fn record(synth: &Synthesizer, nodes: Vec<Node>) -> (bool, BTreeMap<u64, Seen>) {
    let recorder = Recorder::default();
    let subscriber = tracing_subscriber::registry().with(recorder.clone());
    let ok = tracing::subscriber::with_default(subscriber, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(synth.synthesize("How often is the mirror cleaned?", nodes))
            .is_ok()
    });
    let spans = recorder.0.lock().unwrap().clone();
    (ok, spans)
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
