//! `--api anthropic`: the command against a real llama.cpp `llama-server` speaking
//! Anthropic's Messages API (tiny random-weight model), and against a loopback fake for
//! the key (`ANTHROPIC_API_KEY` by default, `SYNTHKIT_API`) and overloads within
//! `--retries`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use synthkit_testkit::llama;
use synthkit_testkit::server;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use serde_json::{Value, json};

fn doc() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/docs/05-safety.md")
}

fn synthkit(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_synthkit"));
    c.args(args)
        .arg(doc())
        .args(["--model", "tiny", "--num-output", "8", "--quiet"])
        .env_remove("SYNTHKIT_BASE_URL")
        .env_remove("SYNTHKIT_API")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("ANTHROPIC_BASE_URL");
    c
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn ask_and_stream_through_the_messages_api() {
    let Some(server) = llama::server_with_ctx(1024) else {
        return;
    };
    // The root URL, without /v1: the Messages API takes both.
    let root = server.base.trim_end_matches("/v1").to_string();
    let ask = || {
        let mut c = synthkit(&["ask", "What must be worn?", "--base-url", &root]);
        c.args(["--api", "anthropic", "--mode", "tree_summarize"]);
        c
    };
    let out = ask().arg("--json").output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        report["answer"].as_str().is_some_and(|a| !a.is_empty()),
        "{report}"
    );
    assert_eq!(report["backend"], "anthropic", "{report}");
    assert!(
        report["usage"]["prompt_tokens"].as_u64() > Some(0),
        "{report}"
    );
    let out = ask().arg("--stream").output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!String::from_utf8_lossy(&out.stdout).trim().is_empty());
}

/// A fake Messages API answering `statuses` in turn (with `retry-after: 0`), then a
/// message; it counts the requests and keeps the keys it was sent.
fn fake(statuses: Vec<u16>) -> (server::Server, Arc<AtomicUsize>, Arc<Mutex<Vec<String>>>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let keys = Arc::new(Mutex::new(Vec::new()));
    let (h, k) = (hits.clone(), keys.clone());
    let app = Router::new().route(
        "/v1/messages",
        post(move |headers: HeaderMap| {
            let n = h.fetch_add(1, Ordering::SeqCst);
            let key = headers
                .get("x-api-key")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            k.lock().unwrap().push(key.to_string());
            let status = statuses.get(n).copied();
            async move {
                match status {
                    Some(code) => (
                        StatusCode::from_u16(code).unwrap(),
                        [("retry-after", "0")],
                        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
                            .to_string(),
                    )
                        .into_response(),
                    None => axum::Json(json!({
                        "type": "message", "role": "assistant", "model": "fake",
                        "content": [{"type": "text", "text": "Wear goggles."}],
                        "stop_reason": "end_turn",
                        "usage": {"input_tokens": 50, "output_tokens": 3}
                    }))
                    .into_response(),
                }
            }
        }),
    );
    (server::Server::start(app), hits, keys)
}

#[test]
fn overloads_are_sent_again_within_retries_with_the_default_key_variable() {
    let (srv, hits, keys) = fake(vec![529, 429]);
    let out = synthkit(&["ask", "What must be worn?", "--base-url", &srv.base])
        .args(["--retries", "3", "--context-window", "4096", "--json"])
        .env("SYNTHKIT_API", "anthropic")
        .env("ANTHROPIC_API_KEY", "sk-ant-cli-secret")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["answer"], "Wear goggles.", "{report}");
    assert_eq!(hits.load(Ordering::SeqCst), 3);
    assert!(
        keys.lock()
            .unwrap()
            .iter()
            .all(|k| k == "sk-ant-cli-secret")
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("sk-ant-cli-secret"));

    // Fewer sends allowed than overloads: the overload is the error, and the key is not
    // in it.
    let (srv, hits, _) = fake(vec![529, 529]);
    let out = synthkit(&["ask", "What must be worn?", "--base-url", &srv.base])
        .args([
            "--api",
            "anthropic",
            "--retries",
            "2",
            "--context-window",
            "4096",
        ])
        .env("ANTHROPIC_API_KEY", "sk-ant-cli-secret")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("529"), "{}", stderr(&out));
    assert!(!stderr(&out).contains("sk-ant-cli-secret"));
    assert_eq!(hits.load(Ordering::SeqCst), 2);
}

#[test]
fn anthropic_without_a_key_or_with_openai_only_flags_is_a_usage_error() {
    let out = synthkit(&["ask", "q", "--api", "anthropic"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("ANTHROPIC_API_KEY"),
        "{}",
        stderr(&out)
    );
    let out = synthkit(&["ask", "q", "--api", "anthropic", "--seed", "1"])
        .args(["--base-url", "http://127.0.0.1:9"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--seed"), "{}", stderr(&out));
}
