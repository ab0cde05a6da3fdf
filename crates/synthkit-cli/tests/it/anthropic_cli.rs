//! `--api anthropic`: the command against a real llama.cpp `llama-server` speaking
//! Anthropic's Messages API (tiny random-weight model), and against a loopback fake for
//! the key (`ANTHROPIC_API_KEY` by default, `SYNTHKIT_API`) and overloads within
//! `--retries`.

use assert_cmd::Command;
use axum::response::IntoResponse;
use serde_json::Value;
use synthkit_testkit::anthropic::message_reply;
use synthkit_testkit::openai::error_reply;
use synthkit_testkit::record::Recorder;
use synthkit_testkit::record::numbered;
use synthkit_testkit::{Server, llama};

use crate::common::{assert_stderr_has, examples_docs, llama_shared, stderr, synthkit as clean};

fn synthkit(args: &[&str]) -> Command {
    let mut c = clean();
    c.args(args)
        .arg(examples_docs().join("05-safety.md"))
        .args(["--model", "tiny", "--num-output", "8", "--quiet"]);
    c
}

#[test]
fn ask_and_stream_through_the_messages_api() {
    let _shared = llama_shared();
    let Some(server) = llama::server_with_ctx(1024) else {
        return;
    };
    // The root URL, without /v1: the Messages API takes both.
    let root = server.base.trim_end_matches("/v1").to_string();
    let ask = || {
        let mut c = synthkit(&["ask", "What must be worn?", "--base-url", &root]);
        c.args(["--api", "anthropic", "--mode", "tree_summarize"])
            .args(["--evidence", "off"]);
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
/// message; its recorder keeps the requests (and the keys they carried).
fn fake(statuses: Vec<u16>) -> (Server, Recorder) {
    let app = numbered("/v1/messages", move |n| match statuses.get(n) {
        Some(&code) => error_reply(code, Some(0), "Overloaded"),
        None => axum::Json(message_reply("Wear goggles.", 50, 3)).into_response(),
    });
    let recorder = Recorder::default();
    (Server::start(recorder.wrap(app)), recorder)
}

#[test]
fn overloads_are_sent_again_within_retries_with_the_default_key_variable() {
    let (srv, seen) = fake(vec![529, 429]);
    let out = synthkit(&["ask", "What must be worn?", "--base-url", &srv.base])
        .args(["--retries", "3", "--context-window", "4096", "--json"])
        // The fake's answer is in no source: kept, as the test is about the retries.
        .args(["--evidence", "off", "--on-unsupported", "warn"])
        .env("SYNTHKIT_API", "anthropic")
        .env("ANTHROPIC_API_KEY", "sk-ant-cli-secret")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["answer"], "Wear goggles.", "{report}");
    let requests = seen.to("/v1/messages");
    assert_eq!(requests.len(), 3);
    assert!(
        requests
            .iter()
            .all(|r| r.header("x-api-key") == Some("sk-ant-cli-secret"))
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("sk-ant-cli-secret"));

    // Fewer sends allowed than overloads: the overload is the error, and the key is not
    // in it.
    let (srv, seen) = fake(vec![529, 529]);
    let out = synthkit(&["ask", "What must be worn?", "--base-url", &srv.base])
        .args([
            "--api",
            "anthropic",
            "--retries",
            "2",
            "--context-window",
            "4096",
            "--evidence",
            "off",
        ])
        .env("ANTHROPIC_API_KEY", "sk-ant-cli-secret")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_stderr_has(&out, "529");
    assert!(!stderr(&out).contains("sk-ant-cli-secret"));
    assert_eq!(seen.to("/v1/messages").len(), 2);
}

#[test]
fn anthropic_without_a_key_or_with_openai_only_flags_is_a_usage_error() {
    let out = synthkit(&["ask", "q", "--api", "anthropic"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_stderr_has(&out, "ANTHROPIC_API_KEY");
    let out = synthkit(&["ask", "q", "--api", "anthropic", "--seed", "1"])
        .args(["--base-url", "http://127.0.0.1:9"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_stderr_has(&out, "--seed");
}
