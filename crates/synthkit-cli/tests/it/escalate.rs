//! `--escalate`: compact over the first chunks, then map_reduce over every chunk when
//! that answer abstains; `--json` says what happened and usage counts every call; the
//! plan counts the escalation as an upper bound; `--stream` is refused with it.

use axum::Router;
use axum::response::IntoResponse;
use axum::routing::post;
use serde_json::{Value, json};
use synthkit_testkit::Server;
use synthkit_testkit::openai::{chat_reply, error_reply};
use synthkit_testkit::record::Recorder;

use crate::common::{QUESTION, ask_at, assert_usage_error, docs, json_of, stderr, synthkit};

/// A server whose plain answers abstain, whose map records state the answer, and whose
/// reduce (a plain call over records) answers from them.
fn server() -> (Server, Recorder) {
    let chat = |axum::Json(body): axum::Json<Value>| async move {
        let usage = json!({"prompt_tokens": 100, "completion_tokens": 4});
        let prompt = body["messages"].to_string();
        let reply = if body.get("response_format").is_some() {
            json!({"information": "The primary mirror is cleaned every three months.",
                   "rationale": "stated", "answer": "every three months", "confidence": 5,
                   "no_information": false})
            .to_string()
        } else if prompt.contains("Confidence:") {
            "Every three months.".to_string()
        } else {
            "Not in the sources.".to_string()
        };
        axum::Json(chat_reply("m", &reply, "stop", &usage)).into_response()
    };
    let seen = Recorder::default();
    let app = Router::new()
        .route("/v1/chat/completions", post(chat))
        .fallback(|| async { error_reply(404, None, "not found") });
    (Server::start(seen.wrap(app)), seen)
}

/// `ask` with evidence off: the first answer is the model's own.
fn ask(base: &str, dir: &std::path::Path, extra: &[&str]) -> std::process::Output {
    ask_at(base, dir, &[&["--evidence", "off"], extra].concat())
}

#[test]
fn an_abstaining_first_answer_escalates_to_map_reduce_over_every_chunk() {
    let dir = docs();
    let (server, seen) = server();
    let out = ask(&server.base, dir.path(), &["--json", "--escalate=1"]);
    let v = json_of(&out);
    assert_eq!(v["answer"], "Every three months.", "{v:#}");
    let e = &v["escalation"];
    assert_eq!(e["escalated"], true, "{v:#}");
    assert_eq!(e["reason"], "abstained");
    assert_eq!(
        (e["from"].as_str(), e["to"].as_str()),
        (Some("compact"), Some("map_reduce"))
    );
    assert_eq!(e["first_nodes"], 1);
    let calls = seen.to("/chat/completions");
    // One compact call, then maps and a reduce; usage counts them all.
    assert!(calls.len() >= 3, "{calls:?}");
    assert!(calls[0].json().get("response_format").is_none());
    assert!(calls[1].json().get("response_format").is_some());
    assert_eq!(v["usage"]["calls"].as_u64().unwrap() as usize, calls.len());
    // The text output says so under the answer.
    let out = ask(&server.base, dir.path(), &["--escalate=1"]);
    let text = crate::common::stdout(&out);
    assert!(
        text.contains("Escalated: compact over the first 1 chunk said the sources do not answer; this answer is map_reduce over every chunk."),
        "{text}"
    );
}

#[test]
fn without_escalate_the_abstention_is_the_answer() {
    let dir = docs();
    let (server, seen) = server();
    let v = json_of(&ask(&server.base, dir.path(), &["--json"]));
    assert_eq!(v["answerable"], false, "{v:#}");
    assert!(v.get("escalation").is_none());
    assert_eq!(seen.to("/chat/completions").len(), 1);
}

#[test]
fn the_plan_counts_the_escalation_and_stream_is_refused() {
    let dir = docs();
    let (server, seen) = server();
    let out = ask(
        &server.base,
        dir.path(),
        &["--plan", "--json", "--escalate"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let plan = json_of(&out);
    let alone = json_of(&ask(&server.base, dir.path(), &["--plan", "--json"]));
    assert!(
        seen.to("/chat/completions").is_empty(),
        "a plan makes no call"
    );
    let calls = |v: &Value| v["total"]["calls"].as_u64().unwrap();
    assert!(calls(&plan) > calls(&alone), "{plan:#} vs {alone:#}");
    // The escalation's rows are an upper bound: it may not happen.
    assert_eq!(plan["total"]["exact"], false);
    assert!(
        plan["steps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["step"] == "map")
    );
    let out = ask(&server.base, dir.path(), &["--escalate", "--stream"]);
    assert_usage_error(&out, "drop --stream or --escalate");
}

#[test]
fn summarize_refuses_escalate() {
    let dir = docs();
    let out = synthkit()
        .args(["summarize", "--escalate"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_usage_error(&out, "use `ask --escalate`");
}

#[test]
fn batch_escalate_is_the_default_of_lines_that_do_not_say() {
    let (server, seen) = server();
    let dir = tempfile::tempdir().unwrap();
    let nodes = json!([
        "The dome opens at dusk.",
        "The primary mirror is cleaned every three months."
    ]);
    let lines = [
        json!({"id": "default", "query": QUESTION, "nodes": nodes}),
        json!({"id": "off", "query": QUESTION, "nodes": nodes, "escalate": false}),
    ];
    let input = dir.path().join("in.jsonl");
    std::fs::write(
        &input,
        lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .unwrap();
    let output = dir.path().join("out.jsonl");
    let out = synthkit()
        .args(["batch", "-q", "--evidence", "off", "--escalate=1"])
        .args(["--base-url", &server.base, "--context-window", "4096"])
        .arg(&input)
        .arg("-o")
        .arg(&output)
        .env("OPENAI_API_KEY", "")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let rows: Vec<Value> = std::fs::read_to_string(&output)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let by_id = |id: &str| rows.iter().find(|r| r["id"] == id).unwrap()["response"].clone();
    let escalated = by_id("default");
    assert_eq!(escalated["text"], "Every three months.", "{rows:#?}");
    assert_eq!(escalated["escalation"]["first_nodes"], 1);
    assert_eq!(escalated["escalation"]["reason"], "abstained");
    let off = by_id("off");
    assert!(off.get("escalation").is_none(), "{off:#}");
    assert_eq!(off["answerable"], false, "{off:#}");
    // The escalated line made a compact call, maps and a reduce; the other one call.
    let calls = seen.to("/chat/completions").len() as u64;
    let used = |r: &Value| r["usage"]["calls"].as_u64().unwrap();
    assert_eq!(used(&escalated) + used(&off), calls);
    assert_eq!(used(&off), 1);
}
