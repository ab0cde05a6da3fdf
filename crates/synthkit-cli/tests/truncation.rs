//! Replies cut at the output limit (`finish_reason: "length"`) are surfaced by the command:
//! `--json` counts them in `usage.truncated_calls`, a warning after the answer names
//! `--num-output` (hidden by `-q`), and `--on-truncation error` exits with 1.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use assert_cmd::Command;
use axum::Router;
use axum::routing::post;
use serde_json::{Value, json};

/// A chat server on its own runtime that answers every call with `finish_reason` (it stops
/// when dropped, with its runtime).
struct Server {
    _runtime: tokio::runtime::Runtime,
    port: u16,
}

impl Server {
    fn start(finish_reason: &'static str) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        let app = Router::new().route(
            "/v1/chat/completions",
            post(move || async move {
                axum::Json(json!({
                    "choices": [{
                        "index": 0,
                        "message": {"role": "assistant", "content": "The primary mirror is cleaned every"},
                        "finish_reason": finish_reason
                    }],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 64, "total_tokens": 164}
                }))
            }),
        );
        runtime.spawn(async move { axum::serve(listener, app).await });
        Self {
            _runtime: runtime,
            port,
        }
    }
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn ask(server: &Server, extra: &[&str]) -> Run {
    let docs = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/docs");
    let out = Command::cargo_bin("synthkit")
        .unwrap()
        .args(["ask", "How often is the mirror cleaned?", docs])
        .args([
            "--base-url",
            &format!("http://127.0.0.1:{}/v1", server.port),
        ])
        .args(["--num-output", "64", "--retries", "1"])
        .args(extra)
        .env_remove("RUST_LOG")
        .env_remove("OPENAI_API_KEY")
        .env_remove("SYNTHKIT_MODEL")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

const WARNING: &str = "cut at the output limit (--num-output 64); raise --num-output";

#[test]
fn json_counts_cut_replies_and_stderr_warns() {
    let server = Server::start("length");
    let run = ask(&server, &["--json"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    let calls = v["usage"]["calls"].as_u64().unwrap();
    assert!(calls >= 1, "{v}");
    assert_eq!(v["usage"]["truncated_calls"].as_u64(), Some(calls), "{v}");
    assert_eq!(v["answer"], "The primary mirror is cleaned every");
    let line = run
        .stderr
        .lines()
        .find(|l| l.starts_with("warning: ") && l.contains(WARNING))
        .unwrap_or_else(|| panic!("no warning line: {}", run.stderr));
    let expected = if calls == 1 {
        "1 model reply was".to_string()
    } else {
        format!("{calls} model replies were")
    };
    assert!(line.contains(&expected), "{line}");
}

#[test]
fn the_warning_follows_a_text_or_streamed_answer_unless_quiet() {
    let server = Server::start("length");
    for extra in [&[][..], &["--stream"][..]] {
        let run = ask(&server, extra);
        assert_eq!(run.code, Some(0), "{extra:?}: {}", run.stderr);
        assert!(
            run.stdout.contains("The primary mirror is cleaned every"),
            "{extra:?}: {}",
            run.stdout
        );
        assert!(run.stderr.contains(WARNING), "{extra:?}: {}", run.stderr);
    }
    let run = ask(&server, &["-q"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        !run.stderr.contains("cut at the output limit"),
        "{}",
        run.stderr
    );
}

#[test]
fn whole_replies_give_no_warning() {
    let server = Server::start("stop");
    let run = ask(&server, &["--json"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["usage"]["truncated_calls"].as_u64(), Some(0), "{v}");
    assert!(
        !run.stderr.contains("cut at the output limit"),
        "{}",
        run.stderr
    );
}

#[test]
fn on_truncation_error_exits_1() {
    let server = Server::start("length");
    for extra in [&["--json"][..], &["--stream"][..]] {
        let mut args = vec!["--on-truncation", "error"];
        args.extend_from_slice(extra);
        let run = ask(&server, &args);
        assert_eq!(run.code, Some(1), "{extra:?}: {}", run.stderr);
        let error = run
            .stderr
            .lines()
            .find(|l| l.starts_with("error: "))
            .unwrap_or_else(|| panic!("{extra:?}: no error line: {}", run.stderr));
        assert!(
            error.contains("cut at the output limit (--num-output 64)"),
            "{error}"
        );
        assert!(error.contains("raise --num-output"), "{error}");
        assert!(
            !run.stdout.contains("\"truncated_calls\""),
            "{}",
            run.stdout
        );
    }
    // A bad value is a usage error.
    let run = ask(&server, &["--on-truncation", "ignore"]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
}
