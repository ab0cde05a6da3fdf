//! OpenTelemetry as users see it: `ask --otlp-endpoint` and `serve --otlp-endpoint`
//! export to a real Arize Phoenix on loopback (`scripts/phoenix.sh`, its own venv), and the
//! spans are read back through Phoenix's GraphQL API: the tree (synthesis, steps, calls),
//! the GenAI attributes and token counts, content only with `--otel-content`, and a
//! service request under its caller's `traceparent`.
//!
//! Without Phoenix (no python3, venv or PyPI) the test prints why and passes, except in CI
//! (`CI` set), where it fails.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{
    MIRROR, QUESTION, Service, closed_port, request, spawn_synthkit, synthkit, write,
};

/// A Phoenix on a free loopback port, with its data in a temporary folder; stopped when
/// dropped.
struct Phoenix {
    addr: String,
    child: Child,
    _data: tempfile::TempDir,
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/phoenix.sh")
}

/// Installs (once) and starts Phoenix; `None` (with a message; a failure in CI) when it
/// cannot be installed.
fn phoenix() -> Option<Phoenix> {
    let install = Command::new(script()).arg("install").status().unwrap();
    if !install.success() {
        assert!(
            std::env::var_os("CI").is_none(),
            "Arize Phoenix is needed in CI: scripts/phoenix.sh install failed ({install})"
        );
        eprintln!("skipped: Arize Phoenix cannot be installed (scripts/phoenix.sh install)");
        return None;
    }
    let data = tempfile::tempdir().unwrap();
    let port = closed_port();
    let child = Command::new(script())
        .args(["serve", &port.to_string()])
        .env("PHOENIX_WORKING_DIR", data.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut phoenix = Phoenix {
        addr: format!("127.0.0.1:{port}"),
        child,
        _data: data,
    };
    // Polling with a deadline: nothing tells us when Phoenix is listening (its first
    // start creates its database).
    let deadline = Instant::now() + Duration::from_secs(180);
    while crate::common::get(&phoenix.addr, "/healthz", Duration::from_secs(2)).map(|r| r.0)
        != Some(200)
    {
        if let Some(status) = phoenix.child.try_wait().unwrap() {
            panic!("Phoenix ended before it answered ({status})");
        }
        assert!(Instant::now() < deadline, "Phoenix did not start in 180 s");
        std::thread::sleep(Duration::from_millis(200));
    }
    Some(phoenix)
}

/// One span as Phoenix gives it back.
#[derive(Debug, Clone)]
struct Span {
    name: String,
    trace: String,
    id: String,
    parent: Option<String>,
    status: String,
    /// Phoenix's attributes: dotted names nested (`gen_ai.usage.input_tokens` is
    /// `{"gen_ai": {"usage": {"input_tokens": ..}}}`).
    attributes: Value,
}

impl Span {
    fn attr(&self, name: &str) -> Option<&Value> {
        name.split('.')
            .try_fold(&self.attributes, |v, key| v.get(key))
    }

    fn str(&self, name: &str) -> &str {
        self.attr(name).and_then(Value::as_str).unwrap_or_default()
    }

    fn int(&self, name: &str) -> Option<i64> {
        self.attr(name).and_then(Value::as_i64)
    }
}

/// Every span Phoenix holds.
fn all_spans(phoenix: &Phoenix) -> Vec<Span> {
    let query = "{ projects { edges { node { spans(first: 1000) { edges { node { name parentId statusCode context { traceId spanId } attributes } } } } } } }";
    let body = json!({ "query": query }).to_string();
    let (status, text) = request(
        &phoenix.addr,
        "POST /graphql",
        &[("Content-Type", "application/json")],
        &body,
        Duration::from_secs(60),
    )
    .expect("Phoenix's GraphQL answers");
    assert_eq!(status, 200, "{text}");
    let value: Value = serde_json::from_str(&text).unwrap();
    assert!(value["errors"].is_null(), "{text}");
    let mut out = Vec::new();
    for project in value["data"]["projects"]["edges"].as_array().unwrap() {
        for edge in project["node"]["spans"]["edges"].as_array().unwrap() {
            let n = &edge["node"];
            out.push(Span {
                name: n["name"].as_str().unwrap().to_string(),
                trace: n["context"]["traceId"].as_str().unwrap().to_string(),
                id: n["context"]["spanId"].as_str().unwrap().to_string(),
                parent: n["parentId"].as_str().map(str::to_string),
                status: n["statusCode"].as_str().unwrap_or_default().to_string(),
                attributes: serde_json::from_str(n["attributes"].as_str().unwrap_or("{}")).unwrap(),
            });
        }
    }
    out
}

/// How long the tests poll Phoenix for spans that must arrive: Phoenix stores them
/// asynchronously and tells no one, so this is polled; the limit is a safety net for
/// spans that never arrive, not a bound on how fast they do.
const SPANS_ARRIVE: Duration = Duration::from_secs(120);

/// The spans of the trace whose synthesis span's node ids contain `marker`, once it has
/// at least `min` spans (polled, see [`SPANS_ARRIVE`]).
fn trace_of(phoenix: &Phoenix, marker: &str, min: usize) -> Vec<Span> {
    let deadline = Instant::now() + SPANS_ARRIVE;
    loop {
        let all = all_spans(phoenix);
        let trace = all
            .iter()
            .find(|s| {
                s.name.starts_with("synthesize ") && s.str("synthkit.node_ids").contains(marker)
            })
            .map(|s| s.trace.clone());
        if let Some(trace) = trace {
            let spans: Vec<Span> = all.into_iter().filter(|s| s.trace == trace).collect();
            if spans.len() >= min {
                return spans;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no trace with {marker} in Phoenix after {SPANS_ARRIVE:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `ask` over a folder of three documents in `mode`, exported to Phoenix; the folder
/// (its name marks the run's node ids).
fn ask(phoenix: &Phoenix, mode: &str, extra: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "about.md",
        "# About\n\nThe dome opens at dusk. Visitors park behind the cafe.\n",
    );
    write(
        dir.path(),
        "maintenance.md",
        format!("# Maintenance\n\n{MIRROR} The dome motors are greased every year.\n"),
    );
    write(
        dir.path(),
        "safety.md",
        "# Safety\n\nTwo people must be on site whenever the dome is open.\n",
    );
    let endpoint = format!("http://{}", phoenix.addr);
    let out = synthkit()
        .args([
            "ask",
            QUESTION,
            "--mode",
            mode,
            "--chunk-size",
            "40",
            "--otlp-endpoint",
            &endpoint,
        ])
        .args(extra)
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        !stderr.contains("OpenTelemetry"),
        "no export warning: {stderr}"
    );
    dir
}

fn marker(dir: &tempfile::TempDir) -> String {
    dir.path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// Checks the tree of one synthesis: a root `synthesize MODE`, step spans under it, call
/// spans under the steps with the GenAI attributes; returns the calls.
fn check_tree(spans: &[Span], mode: &str) -> Vec<Span> {
    let root: Vec<&Span> = spans.iter().filter(|s| s.parent.is_none()).collect();
    assert_eq!(root.len(), 1, "one root: {spans:#?}");
    let root = root[0];
    assert_eq!(root.name, format!("synthesize {mode}"));
    assert_eq!(root.str("synthkit.mode"), mode);
    assert_eq!(root.str("openinference.span.kind"), "CHAIN");
    let steps: Vec<&Span> = spans
        .iter()
        .filter(|s| s.parent.as_deref() == Some(root.id.as_str()))
        .collect();
    assert!(!steps.is_empty(), "steps under the synthesis");
    let calls: Vec<Span> = spans
        .iter()
        .filter(|s| {
            steps
                .iter()
                .any(|st| s.parent.as_deref() == Some(st.id.as_str()))
        })
        .cloned()
        .collect();
    assert_eq!(
        steps.len() + calls.len() + 1,
        spans.len(),
        "nothing else in the trace"
    );
    let total_calls: i64 = steps.iter().map(|s| s.int("synthkit.calls").unwrap()).sum();
    assert_eq!(total_calls as usize, calls.len());
    assert_eq!(root.int("synthkit.calls"), Some(calls.len() as i64));
    let mut input = 0;
    let all_ids: Vec<&str> = root.str("synthkit.node_ids").split(',').collect();
    let mut read: Vec<&str> = Vec::new();
    for call in &calls {
        // Each call names the nodes its prompt held, all among the synthesis's.
        let ids: Vec<&str> = call.str("synthkit.node_ids").split(',').collect();
        assert_eq!(call.int("synthkit.nodes"), Some(ids.len() as i64));
        assert!(
            ids.iter().all(|id| all_ids.contains(id)),
            "{ids:?} in {all_ids:?}"
        );
        read.extend(ids);
        assert_eq!(call.name, "text_completion extractive");
        assert_eq!(call.str("gen_ai.operation.name"), "text_completion");
        assert_eq!(call.str("gen_ai.request.model"), "extractive");
        assert_eq!(call.str("gen_ai.provider.name"), "synthkit.extractive");
        assert_eq!(call.str("gen_ai.response.finish_reasons"), "stop");
        assert_eq!(call.str("synthkit.mode"), mode);
        assert!(call.int("gen_ai.request.max_tokens").unwrap() > 0);
        assert!(call.int("gen_ai.usage.input_tokens").unwrap() > 0);
        assert!(call.int("gen_ai.usage.output_tokens").unwrap() > 0);
        assert!(call.int("synthkit.index").is_some());
        assert_ne!(call.status, "ERROR");
        input += call.int("gen_ai.usage.input_tokens").unwrap();
    }
    assert_eq!(root.int("synthkit.usage.input_tokens"), Some(input));
    assert!(
        all_ids.iter().all(|id| read.contains(id)),
        "every node was read"
    );
    calls
}

#[test]
fn spans_reach_phoenix_as_a_tree_and_serve_continues_the_callers_trace() {
    let Some(phoenix) = phoenix() else { return };

    // refine: a `qa` step then a `refine` step, no content.
    let dir = ask(&phoenix, "refine", &[]);
    let spans = trace_of(&phoenix, &marker(&dir), 5);
    let calls = check_tree(&spans, "refine");
    assert!(calls.len() >= 2, "{calls:#?}");
    let steps: Vec<&str> = spans
        .iter()
        .filter(|s| s.name.contains(" level "))
        .map(|s| s.str("synthkit.step"))
        .collect();
    assert!(
        steps.contains(&"qa") && steps.contains(&"refine"),
        "{steps:?}"
    );
    for s in &spans {
        assert!(
            s.attr("gen_ai.input.messages").is_none(),
            "no content by default"
        );
        assert!(s.attr("gen_ai.output.messages").is_none());
        assert!(s.attr("synthkit.query").is_none());
    }

    // tree_summarize with content: levels, and the prompts and replies on the calls.
    let dir = ask(&phoenix, "tree_summarize", &["--otel-content"]);
    let spans = trace_of(&phoenix, &marker(&dir), 3);
    let calls = check_tree(&spans, "tree_summarize");
    let root = spans.iter().find(|s| s.parent.is_none()).unwrap();
    assert_eq!(root.str("synthkit.query"), QUESTION);
    for call in &calls {
        let input: Value = serde_json::from_str(call.str("gen_ai.input.messages")).unwrap();
        assert_eq!(input[0]["role"], "user");
        assert!(
            input[0]["parts"][0]["content"]
                .as_str()
                .unwrap()
                .contains(QUESTION)
        );
        let output: Value = serde_json::from_str(call.str("gen_ai.output.messages")).unwrap();
        assert_eq!(output[0]["role"], "assistant");
        assert_eq!(output[0]["finish_reason"], "stop");
    }

    // serve: the request span's parent is the caller's span, the synthesis is its child.
    let endpoint = format!("http://{}", phoenix.addr);
    let mut cmd = spawn_synthkit();
    cmd.args(["serve", "--otlp-endpoint", &endpoint]);
    let service = Service::start(cmd, Stdio::null());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let trace_id = format!("{:032x}", nanos | (1 << 100));
    let parent_id = "00f067aa0ba902b7";
    let traceparent = format!("00-{trace_id}-{parent_id}-01");
    let body = json!({
        "query": QUESTION,
        "mode": "refine",
        "nodes": [{"id": "serve-a", "text": MIRROR}, {"id": "serve-b", "text": "The dome opens at dusk."}],
    })
    .to_string();
    let (status, text) = request(
        &service.addr,
        "POST /v1/synthesize",
        &[
            ("Content-Type", "application/json"),
            ("traceparent", &traceparent),
        ],
        &body,
        Duration::from_secs(60),
    )
    .unwrap();
    assert_eq!(status, 200, "{text}");
    let deadline = Instant::now() + SPANS_ARRIVE;
    let ours = loop {
        let ours: Vec<Span> = all_spans(&phoenix)
            .into_iter()
            .filter(|s| s.trace == trace_id)
            .collect();
        if ours.iter().any(|s| s.name.starts_with("text_completion")) && ours.len() >= 5 {
            break ours;
        }
        assert!(
            Instant::now() < deadline,
            "the service's spans did not reach Phoenix: {ours:#?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let request_span = ours
        .iter()
        .find(|s| s.name == "POST /v1/synthesize")
        .unwrap();
    assert_eq!(request_span.parent.as_deref(), Some(parent_id));
    let synthesis = ours.iter().find(|s| s.name == "synthesize refine").unwrap();
    assert_eq!(synthesis.parent.as_deref(), Some(request_span.id.as_str()));
    assert!(synthesis.str("synthkit.node_ids").contains("serve-a"));
    drop(service);
}
