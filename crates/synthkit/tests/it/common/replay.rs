//! Replays a conformance trace (the format of the reference's recorded traces) through
//! synthkit with the replay model; shared by `examples/replay.rs` and the test suite.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use synthkit::model::ModelInfo;
use synthkit::observe::CallReport;
use synthkit::prompt::{PromptBudget, PromptTemplate, TemplateKind};
use synthkit::testing::ReplayModel;
use synthkit::{Node, Observer, ResponseMode, Synthesizer};

/// One call as the replay saw it.
#[derive(Debug, Clone)]
pub struct Call {
    pub kind: String,
    pub prompt: String,
    pub prompt_tokens: usize,
}

/// One mode's run.
#[derive(Debug, Clone)]
pub struct Run {
    pub outcome: &'static str,
    pub error: Option<String>,
    pub response: Option<String>,
    pub calls: Vec<Call>,
    pub source_ids: Vec<String>,
    pub truncated_tokens: usize,
}

#[derive(Default)]
struct Recorder(Mutex<Vec<Call>>);

impl Observer for Recorder {
    fn call_finished(&self, report: &CallReport<'_>) {
        self.0.lock().unwrap().push(Call {
            kind: report.request.source().unwrap().kind.as_str().to_string(),
            prompt: report.request.prompt.to_text(),
            prompt_tokens: report.request.prompt_tokens,
        });
    }
}

pub fn nodes(trace: &Value) -> Vec<Node> {
    trace["inputs"]["nodes"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|n| serde_json::from_value::<Node>(n.clone()).expect("node"))
                .collect()
        })
        .unwrap_or_default()
}

fn template(trace: &Value, name: &str, kind: TemplateKind) -> PromptTemplate {
    PromptTemplate::completion(
        kind,
        trace["config"]["templates"][name]
            .as_str()
            .unwrap_or("{query_str}"),
    )
}

/// Runs `mode` on the trace's inputs.
pub async fn run_mode(trace: &Value, mode: &str, streaming: bool) -> Run {
    run_mode_with(trace, mode, streaming, false).await
}

/// Runs `mode` on the trace's inputs, with or without citations.
pub async fn run_mode_with(trace: &Value, mode: &str, streaming: bool, citations: bool) -> Run {
    let inputs = &trace["inputs"];
    let window = inputs["context_window"].as_u64().unwrap_or(4096) as usize;
    let num_output = inputs["num_output"].as_u64().unwrap_or(256) as usize;
    let overlap = inputs["chunk_overlap_ratio"].as_f64().unwrap_or(0.1);
    let system_prompt = inputs["system_prompt"].as_str().map(str::to_string);
    let filtering = inputs["structured_answer_filtering"]
        .as_bool()
        .unwrap_or(false);
    let mut answers = BTreeMap::new();
    for (name, kind) in [
        ("qa", TemplateKind::Qa),
        ("refine", TemplateKind::Refine),
        ("summary", TemplateKind::Summary),
        ("simple", TemplateKind::Simple),
    ] {
        if let Some(a) = trace["config"]["llm"]["answers"][name].as_str() {
            answers.insert(kind, a.to_string());
        }
    }
    let info = ModelInfo::new("replay")
        .with_context_window(window)
        .with_num_output(num_output)
        .with_system_prompt(system_prompt);
    let model = Arc::new(ReplayModel::new(info, answers));
    let recorder = Arc::new(Recorder::default());
    let query = inputs["query"].as_str().unwrap_or_default().to_string();
    let nodes = nodes(trace);
    let source_ids: Vec<String> = nodes.iter().map(|n| n.id.clone()).collect();
    let built = (|| {
        let mode: ResponseMode = mode.parse()?;
        let budget = PromptBudget::new(window, num_output)?.with_chunk_overlap_ratio(overlap)?;
        Synthesizer::builder(model)
            .mode(mode)
            .budget(budget)
            .qa_template(template(trace, "qa", TemplateKind::Qa))
            .refine_template(template(trace, "refine", TemplateKind::Refine))
            .summary_template(template(trace, "summary", TemplateKind::Summary))
            .simple_template(template(trace, "simple", TemplateKind::Simple))
            .answer_filtering(
                if filtering && matches!(mode, ResponseMode::Refine | ResponseMode::Compact) {
                    synthkit::AnswerFiltering::on()
                } else {
                    synthkit::AnswerFiltering::Off
                },
            )
            .observer(recorder.clone())
            .citations(citations)
            .build()
    })();
    let result = match built {
        Err(e) => Err(e),
        Ok(synth) => {
            if streaming {
                match synth.stream(&query, nodes).await {
                    Ok(s) => s.finish().await,
                    Err(e) => Err(e),
                }
            } else {
                synth.synthesize(&query, nodes).await
            }
        }
    };
    let calls = recorder.0.lock().unwrap().clone();
    match result {
        Ok(r) => Run {
            outcome: "ok",
            error: None,
            truncated_tokens: r.truncation.as_ref().map_or(0, |t| t.dropped_tokens),
            response: Some(r.text),
            calls,
            source_ids,
        },
        Err(e) => Run {
            outcome: "error",
            error: Some(e.to_string()),
            response: None,
            calls,
            source_ids,
            truncated_tokens: 0,
        },
    }
}

/// The replay's JSON for every mode listed in the trace's `runs`.
pub async fn replay_json(trace: &Value) -> Value {
    let mut runs = serde_json::Map::new();
    if let Some(modes) = trace["runs"].as_object() {
        for mode in modes.keys() {
            let run = run_mode(trace, mode, false).await;
            runs.insert(
                mode.clone(),
                json!({
                    "outcome": run.outcome,
                    "error": run.error,
                    "response": run.response,
                    "calls": run.calls.iter().map(|c| json!({"kind": c.kind, "prompt": c.prompt, "prompt_tokens": c.prompt_tokens})).collect::<Vec<_>>(),
                }),
            );
        }
    }
    json!({ "runs": runs })
}
