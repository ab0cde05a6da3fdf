//! The OpenAI-compatible backend's settings from the command line, against a loopback
//! server: `OPENAI_BASE_URL` alone selects it, the model comes from its `/models` and the
//! report names the model that answered, sampling flags and `--extra-body` reach the
//! request body, bad values are usage errors, and a hanging server fails with the timeout
//! that fired and the flag that sets it.

use assert_cmd::Command;
use axum::Router;
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::{Value, json};
use synthkit_testkit::Server;
use synthkit_testkit::openai::chat_reply;
use synthkit_testkit::record::Recorder;

use crate::common::{examples_docs, json_of, stderr, synthkit};

const QUESTION: &str = "How often is the primary mirror cleaned?";
const ANSWER: &str = "Every three months.";
/// The model `/v1/models` lists first.
const LISTED: &str = "qwen2.5-1.5b-instruct-q4_k_m.gguf";
/// The model the completion reply says answered.
const ANSWERED: &str = "qwen2.5-1.5b-instruct (answering)";

/// An OpenAI-compatible server recording the chat request bodies.
struct Fake {
    server: Server,
    recorder: Recorder,
}

impl Fake {
    /// Lists [`LISTED`] at `/v1/models` and answers chats with [`ANSWER`], naming
    /// `answered` as the model when given (no model otherwise).
    fn start(answered: Option<&'static str>) -> Self {
        let models = json!({"object": "list", "data": [
            {"id": LISTED, "object": "model", "owned_by": "llamacpp"},
            {"id": "another", "object": "model"}]});
        let chat = move || async move {
            let usage = json!({"prompt_tokens": 100, "completion_tokens": 4});
            let mut reply = chat_reply(answered.unwrap_or_default(), ANSWER, "stop", &usage);
            if answered.is_none() {
                reply.as_object_mut().unwrap().remove("model");
            }
            axum::Json(reply)
        };
        let app = Router::new()
            .route("/v1/models", get(move || async move { axum::Json(models) }))
            .route("/v1/chat/completions", post(chat));
        let recorder = Recorder::default();
        Self {
            server: Server::start(recorder.wrap(app)),
            recorder,
        }
    }

    fn base(&self) -> &str {
        &self.server.base
    }

    fn bodies(&self) -> Vec<Value> {
        let chats = self.recorder.to("/chat/completions");
        chats.iter().map(|r| r.json()).collect()
    }
}

/// A loopback server that accepts connections and never answers, recording every request
/// as it arrives; stops when dropped.
fn black_hole() -> (Server, Recorder) {
    let recorder = Recorder::default();
    let app = recorder.wrap(Router::new().fallback(std::future::pending::<Response>));
    (Server::start(app), recorder)
}

/// `synthkit ask QUESTION DOCS` in an environment without base URLs, model or key.
fn ask(extra: &[&str]) -> Command {
    let mut cmd = synthkit();
    cmd.args(["ask", QUESTION])
        .arg(examples_docs())
        .args(["-q", "--context-window", "4096"])
        .args(extra);
    cmd
}

#[test]
fn openai_base_url_alone_selects_the_server() {
    let server = Fake::start(None);
    let out = ask(&["--json"])
        .env("OPENAI_BASE_URL", server.base())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json_of(&out);
    assert_eq!(v["backend"], "openai");
    assert!(v["answer"].as_str().unwrap().starts_with(ANSWER), "{v}");
    let calls = server.bodies().len();
    assert!(calls >= 1);
    assert_eq!(v["usage"]["calls"].as_u64(), u64::try_from(calls).ok());
    // `--base-url` (and SYNTHKIT_BASE_URL) still win over it.
    let other = Fake::start(None);
    let out = ask(&["--json", "--base-url", other.base()])
        .env("OPENAI_BASE_URL", server.base())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(server.bodies().len(), calls);
    assert!(!other.bodies().is_empty());
    // A bad OPENAI_BASE_URL is a usage error that names it.
    let out = ask(&[])
        .env("OPENAI_BASE_URL", "localhost:8080/v1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("OPENAI_BASE_URL must start with http://"));
}

#[test]
fn json_reports_the_model_the_server_answered_with() {
    // The reply names its model: the report says that one; the request named the model
    // the server lists first (no --model given).
    let server = Fake::start(Some(ANSWERED));
    let out = ask(&["--json", "--base-url", server.base()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(json_of(&out)["model"], ANSWERED);
    assert_eq!(server.bodies()[0]["model"], LISTED);

    // The reply names none: the discovered name.
    let server = Fake::start(None);
    let out = ask(&["--json", "--base-url", server.base()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(json_of(&out)["model"], LISTED);

    // --model wins over discovery (and is what the report says when the reply is silent).
    let server = Fake::start(None);
    let out = ask(&["--json", "--base-url", server.base(), "--model", "mine"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(json_of(&out)["model"], "mine");
    assert_eq!(server.bodies()[0]["model"], "mine");
}

/// Fails the test unless the request body's number `field` is `expected` (to 1e-6: the
/// flags are `f32`).
#[track_caller]
fn assert_near(body: &Value, field: &str, expected: f64) {
    let got = body[field].as_f64();
    assert!(
        got.is_some_and(|v| (v - expected).abs() < 1e-6),
        "{field}: {body}"
    );
}

#[test]
fn sampling_flags_and_extra_body_reach_the_request() {
    let server = Fake::start(None);
    let out = ask(&[
        "--base-url",
        server.base(),
        "--temperature",
        "0.7",
        "--top-p",
        "0.9",
        "--seed",
        "-7",
        "--extra-body",
        r#"{"top_k": 40, "cache_prompt": true, "temperature": 0.2}"#,
    ])
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let body = &server.bodies()[0];
    assert_near(body, "top_p", 0.9);
    assert_eq!(body["seed"], -7, "{body}");
    assert_eq!(body["top_k"], 40, "{body}");
    assert_eq!(body["cache_prompt"], true, "{body}");
    // The extra body wins over the flags.
    assert_near(body, "temperature", 0.2);

    let server = Fake::start(None);
    let out = ask(&["--base-url", server.base(), "--temperature", "0.7"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let body = &server.bodies()[0];
    assert_near(body, "temperature", 0.7);
    assert!(
        body.get("top_p").is_none() && body.get("seed").is_none(),
        "{body}"
    );
}

#[test]
fn bad_settings_are_usage_errors() {
    for (flags, says) in [
        (&["--extra-body", "[1]"][..], "expected a JSON object"),
        (&["--extra-body", "{\"top_k\": "][..], "not valid JSON"),
        (&["--extra-body", "40"][..], "got a number"),
        (&["--top-p", "1.5"][..], "from 0 to 1"),
        (&["--temperature=-1"][..], "0 or more"),
        (&["--seed", "x"][..], "invalid value"),
        (
            &["--timeout", "0"][..],
            "--timeout must be a positive number",
        ),
        (
            &["--connect-timeout=-1"][..],
            "--connect-timeout must be a positive",
        ),
        (
            &["--idle-timeout", "0"][..],
            "--idle-timeout must be a positive",
        ),
    ] {
        let out = ask(&["--base-url", "http://127.0.0.1:9/v1"])
            .args(flags)
            .output()
            .unwrap();
        let stderr = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{flags:?}: {stderr}");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
    }
}

/// A server that accepts and never answers: the call fails after the request timeout,
/// and the message says how long it waited, which timeout fired and the flag to raise.
/// Counted, not timed: the chat request the server got was given up on (it never
/// answers), and there was exactly one (`--retries 1`: one send), so the run ended on
/// that send's 0.5 s request timeout and not on some longer wait or another send. (The
/// binary's own safety timeout turns a hang into a failure.)
#[test]
fn a_hanging_server_fails_with_the_request_timeout_and_names_the_flag() {
    let (hole, seen) = black_hole();
    let url = hole.base.clone();
    let out = ask(&["--base-url", &url, "--model", "m", "--timeout", "0.5"])
        .args(["--retries", "1"])
        .output()
        .unwrap();
    let stderr = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("no answer from the model: gave up after ")
            && stderr.contains("(the request timeout is 500ms)")
            && stderr.contains("(--timeout SECS)")
            && stderr.contains(&format!("check that a server is running at {url}")),
        "{stderr}"
    );
    // The one send of the call, given up on at the request timeout.
    let paths: Vec<String> = seen.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(
        paths
            .iter()
            .filter(|p| p.ends_with("/chat/completions"))
            .count(),
        1,
        "{paths:?}"
    );
}
