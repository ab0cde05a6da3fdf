//! The OpenAI-compatible backend through the binary, against a loopback fake that records
//! every request: answers, traces and streams equal to the plain answer, a plan that sends
//! no completion, and an API key that never shows (not even when the server echoes it).
//!
//! The fake records each request before answering it, so once the command has ended its
//! record is complete: "no completion was requested" needs no waiting.

use std::path::Path;
use std::process::Output;
use std::time::Instant;

use axum::Router;
use axum::extract::Request;
use axum::response::IntoResponse;
use axum::routing::post;
use serde_json::{Value, json};
use synthkit_testkit::Server;
use synthkit_testkit::openai::{chat_reply, chat_stream, error_reply};
use synthkit_testkit::record::Recorder;

use crate::common::{MIRROR, QUESTION, closed_port, docs, json_of, stderr, stdout, synthkit};

const SERVER_ANSWER: &str = "Every three months.";

/// A loopback fake and the record of what reached it.
struct Fake {
    server: Server,
    seen: Recorder,
}

impl Fake {
    fn start(app: Router) -> Self {
        let seen = Recorder::default();
        Self {
            server: Server::start(seen.wrap(app)),
            seen,
        }
    }

    /// Answers chat completions, plain or streamed, with [`SERVER_ANSWER`] (usage: 100
    /// prompt and 4 completion tokens); 404 on any other path.
    fn answering() -> Self {
        let chat = |axum::Json(body): axum::Json<Value>| async move {
            let usage = json!({"prompt_tokens": 100, "completion_tokens": 4});
            if body["stream"] == true {
                return chat_stream("m", &["Every ", "three ", "months."], "stop", &usage);
            }
            axum::Json(chat_reply("m", SERVER_ANSWER, "stop", &usage)).into_response()
        };
        Self::start(
            Router::new()
                .route("/v1/chat/completions", post(chat))
                .fallback(|| async { error_reply(404, None, "not found") }),
        )
    }

    /// Answers every chat completion with `answer` (not streamed); 404 on any other path.
    fn replying(answer: &'static str) -> Self {
        let chat = move || async move {
            let usage = json!({"prompt_tokens": 100, "completion_tokens": 4});
            axum::Json(chat_reply("m", answer, "stop", &usage)).into_response()
        };
        Self::start(
            Router::new()
                .route("/v1/chat/completions", post(chat))
                .fallback(|| async { error_reply(404, None, "not found") }),
        )
    }

    /// Refuses every request with 401, echoing the request's headers (the API key
    /// included) in the body, as a careless server might.
    fn echoing_401() -> Self {
        Self::start(Router::new().fallback(|request: Request| async move {
            let headers = format!("{:?}", request.headers());
            error_reply(401, None, &format!("bad credentials; you sent: {headers}"))
        }))
    }

    fn base(&self) -> &str {
        &self.server.base
    }
}

/// `synthkit ask QUESTION DOCS` against `base` with `extra` flags.
fn ask(base: &str, dir: &Path, extra: &[&str]) -> assert_cmd::Command {
    let mut cmd = synthkit();
    cmd.args(["ask", QUESTION, "--base-url", base])
        .args(extra)
        .arg(dir);
    cmd
}

#[test]
fn plan_makes_no_model_call() {
    let dir = docs();
    // Nothing listens on the port: a model call would fail.
    let url = format!("http://127.0.0.1:{}/v1", closed_port());
    let out = ask(&url, dir.path(), &["--plan", "--llm", "openai"])
        .args(["--context-window", "1024", "--mode", "refine"])
        .args(["--price-per-1k", "0.5", "--chunk-size", "40"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("no model was called"), "{text}");
    assert!(
        text.contains("exact") && text.contains("upper bound"),
        "{text}"
    );
    assert!(text.contains("estimated prompt cost: $"), "{text}");

    // With a server that records requests: discovery may ask, but no completion is
    // requested.
    let fake = Fake::answering();
    let out = ask(fake.base(), dir.path(), &["--plan", "--json"])
        .args(["--mode", "tree_summarize", "--context-window", "600"])
        .args(["--chunk-size", "40"])
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(v["backend"], "openai");
    assert_eq!(v["mode"], "tree_summarize");
    let steps = v["steps"].as_array().unwrap();
    assert!(!steps.is_empty());
    assert_eq!(steps[0]["exact"], true);
    let sum: u64 = steps.iter().map(|s| s["calls"].as_u64().unwrap()).sum();
    assert_eq!(v["total"]["calls"].as_u64().unwrap(), sum);
    assert!(v["total"]["prompt_tokens"].as_u64().unwrap() > 0);
    let seen = fake.seen.requests();
    assert!(
        seen.iter().all(|r| !r.path.contains("completions")),
        "{seen:?}"
    );
}

#[test]
fn openai_backend_answers_and_traces() {
    let dir = docs();
    let fake = Fake::answering();
    let trace = dir.path().join("trace.jsonl");
    let out = ask(fake.base(), dir.path(), &["--json", "-q"])
        .args(["--context-window", "4096", "--trace"])
        .arg(&trace)
        .env("OPENAI_API_KEY", "")
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(v["answer"], SERVER_ANSWER);
    assert_eq!(v["backend"], "openai");
    assert_eq!(v["usage"]["calls"], 1);
    assert_eq!(v["usage"]["prompt_tokens"], 100);
    assert_eq!(v["usage"]["completion_tokens"], 4);
    let text = std::fs::read_to_string(&trace).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // One call line, then the run's record.
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[1]["run"]["answer"], SERVER_ANSWER);
    let line = &lines[0];
    assert_eq!(line["response"], SERVER_ANSWER);
    assert_eq!(line["usage_reported"], true);
    // The model calls (the command also probes the server's /tokenize).
    let posts = fake.seen.to("/chat/completions");
    assert_eq!(posts.len(), 1);
    assert!(
        posts[0].text().contains(MIRROR),
        "the documents are in the prompt"
    );
}

/// A question to a model is answered evidence first by default: the prompt holds the
/// sentence that bears on it, not the rest of its chunk nor the chunks with none (the
/// JSON's `evidence` says so); `--evidence off` sends the whole chunks. An answer whose
/// facts are in no source abstains by default; `--on-unsupported warn` keeps it.
#[test]
fn a_model_answers_evidence_first_and_abstains_by_default() {
    let dir = docs();
    let other = "The dome motors are greased every year.";
    let fake = Fake::answering();
    let prompt = |extra: &[&str]| {
        let before = fake.seen.to("/chat/completions").len();
        let out = ask(fake.base(), dir.path(), &["--json", "-q"])
            .args(["--context-window", "4096"])
            .args(extra)
            .output()
            .unwrap();
        let v = json_of(&out);
        assert_eq!(v["answer"], SERVER_ANSWER, "{extra:?}: {v}");
        let posts = fake.seen.to("/chat/completions");
        assert_eq!(posts.len(), before + 1, "{extra:?}");
        (v, posts[before].text())
    };

    let (v, text) = prompt(&[]);
    assert!(text.contains(MIRROR), "{text}");
    assert!(
        !text.contains(other),
        "evidence first shows no other sentence: {text}"
    );
    assert!(
        !text.contains("Harrow Ridge"),
        "nor a chunk with none: {text}"
    );
    let kept = v["evidence"]["kept"].as_array().unwrap();
    assert_eq!(kept.len(), 1, "{v}");
    assert!(
        kept[0]["node_id"].as_str().unwrap().contains("maintenance"),
        "{v}"
    );

    let (v, text) = prompt(&["--evidence", "off"]);
    assert!(text.contains(MIRROR) && text.contains(other), "{text}");
    assert!(text.contains("The technician plans all work."), "{text}");
    assert!(v.get("evidence").is_none(), "{v}");

    // A reply whose year is in no source.
    let fake = Fake::replying("In 2005.");
    let answer = |extra: &[&str]| {
        json_of(
            &ask(fake.base(), dir.path(), &["--json", "-q"])
                .args(["--context-window", "4096"])
                .args(extra)
                .output()
                .unwrap(),
        )
    };
    let v = answer(&[]);
    assert_eq!(v["answerable"], false, "{v}");
    assert_ne!(v["answer"], "In 2005.", "{v}");
    assert_eq!(v["grounding"]["withheld"], "In 2005.", "{v}");
    let v = answer(&["--on-unsupported", "warn"]);
    assert_eq!(v["answer"], "In 2005.", "{v}");
}

#[test]
fn openai_stream_equals_plain() {
    let dir = docs();
    let fake = Fake::answering();
    let run = |extra: &[&str]| {
        let out = ask(fake.base(), dir.path(), extra)
            .args(["-q", "--llm", "openai", "--context-window", "4096"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{extra:?}: {}", stderr(&out));
        stdout(&out)
    };
    let plain = run(&[]);
    assert!(plain.starts_with(SERVER_ANSWER), "{plain}");
    assert_eq!(plain, run(&["--stream"]));
}

#[test]
fn api_key_never_appears() {
    let dir = docs();
    let key = format!(
        "sk-test-{}-{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos() ^ 0x5eed
    );
    let var = format!("SYNTHKIT_TEST_KEY_{}", std::process::id());
    let echoing = Fake::echoing_401();
    let answering = Fake::answering();
    let closed = format!("http://127.0.0.1:{}/v1", closed_port());
    // A server that echoes the key in its error body (plain and streamed), a closed port,
    // a plan, and a successful call with a trace: each with its exit code and what its
    // stderr must say.
    let cases: [(&str, &str, &[&str], i32, &str); 5] = [
        ("401 echo", echoing.base(), &[], 1, "401"),
        (
            "401 echo, streamed",
            echoing.base(),
            &["--stream"],
            1,
            "401",
        ),
        (
            "closed port",
            &closed,
            &[],
            1,
            "check that a server is running",
        ),
        ("plan", &closed, &["--plan"], 0, ""),
        ("success", answering.base(), &["--json"], 0, ""),
    ];
    for (i, (what, base, extra, code, says)) in cases.into_iter().enumerate() {
        let trace = dir.path().join(format!("t{i}.jsonl"));
        let out: Output = ask(base, dir.path(), extra)
            .args(["--api-key-env", &var, "--context-window", "4096", "--trace"])
            .arg(&trace)
            .env(&var, &key)
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(code), "{what}: {err}");
        assert!(err.contains(says), "{what}: {err}");
        assert!(!stdout(&out).contains(&key), "{what}: key in stdout");
        assert!(!err.contains(&key), "{what}: key in stderr: {err}");
        let t = std::fs::read_to_string(&trace).unwrap_or_default();
        assert!(!t.contains(&key), "{what}: key in the trace");
    }
    // The key was sent, so the redaction was really tested.
    let sent = echoing.seen.requests();
    assert!(sent.iter().any(|r| r.headers_contain(&key)), "{sent:?}");
    assert!(
        answering
            .seen
            .requests()
            .iter()
            .any(|r| r.headers_contain(&key))
    );
}

/// `--mode map_reduce` end to end: structured map calls (a JSON record each, the schema
/// sent as `response_format`), then one plain reduce call whose prompt holds the records
/// with their confidence; the answer is the reduce call's.
#[test]
fn map_reduce_mode_maps_to_records_then_reduces() {
    let dir = docs();
    let chat = |axum::Json(body): axum::Json<Value>| async move {
        let usage = json!({"prompt_tokens": 100, "completion_tokens": 4});
        let reply = if body.get("response_format").is_some() {
            json!({"information": "The mirror is cleaned every three months.", "rationale": "stated",
                   "answer": "every three months", "confidence": 5, "no_information": false})
            .to_string()
        } else {
            SERVER_ANSWER.to_string()
        };
        axum::Json(chat_reply("m", &reply, "stop", &usage)).into_response()
    };
    let fake = Fake::start(
        Router::new()
            .route("/v1/chat/completions", post(chat))
            .fallback(|| async { error_reply(404, None, "not found") }),
    );
    let out = ask(
        fake.base(),
        dir.path(),
        &["--json", "-q", "--mode", "map_reduce"],
    )
    .args(["--context-window", "4096"])
    .env("OPENAI_API_KEY", "")
    .output()
    .unwrap();
    let v = json_of(&out);
    assert_eq!(v["answer"], SERVER_ANSWER, "{v}");
    assert_eq!(v["mode"], "map_reduce");
    let calls = fake.seen.to("/chat/completions");
    assert!(calls.len() >= 2, "{calls:?}");
    let (maps, last) = calls.split_at(calls.len() - 1);
    assert!(
        maps.iter()
            .all(|r| r.json().get("response_format").is_some())
    );
    let reduce = last[0].json();
    assert!(reduce.get("response_format").is_none(), "{reduce}");
    assert!(
        reduce.to_string().contains("Confidence: 5/5"),
        "the reduce prompt holds the records: {reduce}"
    );
    assert_eq!(v["usage"]["calls"].as_u64().unwrap() as usize, calls.len());
}
