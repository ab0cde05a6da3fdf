//! The OpenAI-compatible backend's settings from the command line, against a loopback
//! server: `OPENAI_BASE_URL` alone selects it, the model comes from its `/models` and the
//! report names the model that answered, sampling flags and `--extra-body` reach the
//! request body, bad values are usage errors, and a hanging server fails with the timeout
//! that fired and the flag that sets it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use axum::Router;
use axum::routing::{get, post};
use serde_json::{Value, json};

const QUESTION: &str = "How often is the primary mirror cleaned?";
const ANSWER: &str = "Every three months.";
/// The model `/v1/models` lists first.
const LISTED: &str = "qwen2.5-1.5b-instruct-q4_k_m.gguf";
/// The model the completion reply says answered.
const ANSWERED: &str = "qwen2.5-1.5b-instruct (answering)";

/// An OpenAI-compatible server on its own runtime, recording the chat request bodies; it
/// stops when dropped.
struct Server {
    _runtime: tokio::runtime::Runtime,
    base: String,
    bodies: Arc<Mutex<Vec<Value>>>,
}

impl Server {
    /// Lists [`LISTED`] at `/v1/models` and answers chats with [`ANSWER`], naming
    /// `answered` as the model when given.
    fn start(answered: Option<&'static str>) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&bodies);
        let app = Router::new()
            .route(
                "/v1/models",
                get(|| async {
                    axum::Json(json!({"object": "list", "data": [
                        {"id": LISTED, "object": "model", "owned_by": "llamacpp"},
                        {"id": "another", "object": "model"}]}))
                }),
            )
            .route(
                "/v1/chat/completions",
                post(move |body: axum::Json<Value>| {
                    let seen = Arc::clone(&seen);
                    async move {
                        seen.lock().unwrap().push(body.0);
                        let mut reply = json!({
                            "choices": [{"index": 0, "message": {"role": "assistant", "content": ANSWER}, "finish_reason": "stop"}],
                            "usage": {"prompt_tokens": 100, "completion_tokens": 4}
                        });
                        if let Some(m) = answered {
                            reply["model"] = json!(m);
                        }
                        axum::Json(reply)
                    }
                }),
            );
        runtime.spawn(async move { axum::serve(listener, app).await });
        Self {
            _runtime: runtime,
            base: format!("http://127.0.0.1:{port}/v1"),
            bodies,
        }
    }

    fn bodies(&self) -> Vec<Value> {
        self.bodies.lock().unwrap().clone()
    }
}

/// A loopback server that accepts connections and never reads or answers (for 60 s).
fn black_hole() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut held = Vec::new();
        while Instant::now() < deadline {
            match listener.accept() {
                Ok((conn, _)) => held.push(conn),
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    });
    format!("http://{addr}/v1")
}

/// `synthkit ask QUESTION DOCS` in an environment without base URLs, model or key.
fn ask(extra: &[&str]) -> Command {
    let docs = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/docs");
    let mut cmd = Command::cargo_bin("synthkit").unwrap();
    cmd.args(["ask", QUESTION, docs, "-q", "--context-window", "4096"])
        .args(extra)
        .env_remove("SYNTHKIT_BASE_URL")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("SYNTHKIT_MODEL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("RUST_LOG")
        .timeout(Duration::from_secs(120));
    cmd
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json_of(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            stderr_of(out)
        )
    })
}

#[test]
fn openai_base_url_alone_selects_the_server() {
    let server = Server::start(None);
    let out = ask(&["--json"])
        .env("OPENAI_BASE_URL", &server.base)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let v = json_of(&out);
    assert_eq!(v["backend"], "openai");
    assert!(v["answer"].as_str().unwrap().starts_with(ANSWER), "{v}");
    let calls = server.bodies().len();
    assert!(calls >= 1);
    assert_eq!(v["usage"]["calls"].as_u64(), u64::try_from(calls).ok());
    // `--base-url` (and SYNTHKIT_BASE_URL) still win over it.
    let other = Server::start(None);
    let out = ask(&["--json", "--base-url", &other.base])
        .env("OPENAI_BASE_URL", &server.base)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert_eq!(server.bodies().len(), calls);
    assert!(!other.bodies().is_empty());
    // A bad OPENAI_BASE_URL is a usage error that names it.
    let out = ask(&[])
        .env("OPENAI_BASE_URL", "localhost:8080/v1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("OPENAI_BASE_URL must start with http://"));
}

#[test]
fn json_reports_the_model_the_server_answered_with() {
    // The reply names its model: the report says that one; the request named the model
    // the server lists first (no --model given).
    let server = Server::start(Some(ANSWERED));
    let out = ask(&["--json", "--base-url", &server.base])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert_eq!(json_of(&out)["model"], ANSWERED);
    assert_eq!(server.bodies()[0]["model"], LISTED);

    // The reply names none: the discovered name.
    let server = Server::start(None);
    let out = ask(&["--json", "--base-url", &server.base])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert_eq!(json_of(&out)["model"], LISTED);

    // --model wins over discovery (and is what the report says when the reply is silent).
    let server = Server::start(None);
    let out = ask(&["--json", "--base-url", &server.base, "--model", "mine"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert_eq!(json_of(&out)["model"], "mine");
    assert_eq!(server.bodies()[0]["model"], "mine");
}

#[test]
fn sampling_flags_and_extra_body_reach_the_request() {
    let server = Server::start(None);
    let out = ask(&[
        "--base-url",
        &server.base,
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
    assert!(out.status.success(), "{}", stderr_of(&out));
    let body = &server.bodies()[0];
    assert!(
        (body["top_p"].as_f64().unwrap() - 0.9).abs() < 1e-6,
        "{body}"
    );
    assert_eq!(body["seed"], -7, "{body}");
    assert_eq!(body["top_k"], 40, "{body}");
    assert_eq!(body["cache_prompt"], true, "{body}");
    // The extra body wins over the flags.
    assert!(
        (body["temperature"].as_f64().unwrap() - 0.2).abs() < 1e-6,
        "{body}"
    );

    let server = Server::start(None);
    let out = ask(&["--base-url", &server.base, "--temperature", "0.7"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let body = &server.bodies()[0];
    assert!(
        (body["temperature"].as_f64().unwrap() - 0.7).abs() < 1e-6,
        "{body}"
    );
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
        let stderr = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{flags:?}: {stderr}");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
    }
}

/// A server that accepts and never answers: the call fails after the request timeout,
/// and the message says how long it waited, which timeout fired and the flag to raise.
#[test]
fn a_hanging_server_fails_with_the_request_timeout_and_names_the_flag() {
    let url = black_hole();
    let start = Instant::now();
    let out = ask(&["--base-url", &url, "--model", "m", "--timeout", "0.5"])
        .args(["--retries", "1"])
        .output()
        .unwrap();
    let elapsed = start.elapsed();
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("no answer from the model: gave up after ")
            && stderr.contains("(the request timeout is 500ms)")
            && stderr.contains("(--timeout SECS)")
            && stderr.contains(&format!("check that a server is running at {url}")),
        "{stderr}"
    );
    // Discovery gives up after one timeout; the slots question waits up to 10 s.
    assert!(elapsed < Duration::from_secs(30), "{elapsed:?}");
}
