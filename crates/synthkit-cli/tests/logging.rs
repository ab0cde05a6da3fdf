//! The command shows the library's warnings on standard error: a retried call is named
//! there by default, `-q` keeps only errors, and `RUST_LOG` overrides both.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use assert_cmd::Command;
use axum::Router;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::post;
use serde_json::json;

/// A chat server on its own runtime whose every other call answers 502 (it stops when
/// dropped, with its runtime).
struct Flaky {
    _runtime: tokio::runtime::Runtime,
    port: u16,
}

impl Flaky {
    fn start() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        let calls = Arc::new(AtomicUsize::new(0));
        let app = Router::new().route(
            "/v1/chat/completions",
            post(move || {
                let calls = calls.clone();
                async move {
                    if calls.fetch_add(1, Ordering::SeqCst).is_multiple_of(2) {
                        return (StatusCode::BAD_GATEWAY, "upstream hiccup").into_response();
                    }
                    axum::Json(json!({"choices":[{"index":0,"message":{"role":"assistant","content":"Every six months."},"finish_reason":"stop"}]})).into_response()
                }
            }),
        );
        runtime.spawn(async move { axum::serve(listener, app).await });
        Self {
            _runtime: runtime,
            port,
        }
    }
}

fn ask(server: &Flaky, extra: &[&str]) -> (bool, String) {
    let docs = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/docs");
    let out = Command::cargo_bin("synthkit")
        .unwrap()
        .args(["ask", "How often is the mirror cleaned?", docs])
        .args([
            "--base-url",
            &format!("http://127.0.0.1:{}/v1", server.port),
        ])
        .args(["--retry-max-secs", "10"])
        .args(extra)
        .env_remove("RUST_LOG")
        .env_remove("OPENAI_API_KEY")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn retries_show_on_stderr_unless_quiet() {
    let server = Flaky::start();
    let (ok, stderr) = ask(&server, &[]);
    assert!(ok, "{stderr}");
    assert!(stderr.contains("retrying"), "{stderr}");
    assert!(stderr.contains("502"), "{stderr}");
    // Captured, not a terminal: plain text, no colour escapes.
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");

    let (ok, stderr) = ask(&server, &["-q"]);
    assert!(ok, "{stderr}");
    assert!(!stderr.contains("retrying"), "{stderr}");
}

#[test]
fn rust_log_overrides_the_level() {
    let server = Flaky::start();
    let docs = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/docs");
    let out = Command::cargo_bin("synthkit")
        .unwrap()
        .args(["ask", "How often is the mirror cleaned?", docs, "-q"])
        .args([
            "--base-url",
            &format!("http://127.0.0.1:{}/v1", server.port),
        ])
        .env("RUST_LOG", "synthkit=debug")
        .env_remove("OPENAI_API_KEY")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("retrying"), "{stderr}");
    assert!(stderr.contains("DEBUG"), "{stderr}");
}
