//! `--retries`, `--rpm` and `--tpm` as a provider sees them: a loopback server that
//! answers every call with 429 counts the sends it gets. `--retries N` means at most N
//! sends of one call (the adaptive layer never sends again on its own), with or without
//! a rate budget, and the `--json` report counts the same sends.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use assert_cmd::Command;
use axum::Router;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::post;

/// A server that answers every chat with 429 (`Retry-After: 0`), counting the sends.
struct TooManyRequests {
    _runtime: tokio::runtime::Runtime,
    base: String,
    sends: Arc<AtomicUsize>,
}

impl TooManyRequests {
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
        let sends = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&sends);
        let app = Router::new().route(
            "/v1/chat/completions",
            post(move || {
                seen.fetch_add(1, Ordering::SeqCst);
                async {
                    (
                        StatusCode::TOO_MANY_REQUESTS,
                        [("retry-after", "0")],
                        r#"{"error": {"message": "rate limited", "type": "rate_limit"}}"#,
                    )
                        .into_response()
                }
            }),
        );
        runtime.spawn(async move { axum::serve(listener, app).await });
        Self {
            _runtime: runtime,
            base: format!("http://127.0.0.1:{port}/v1"),
            sends,
        }
    }

    fn sends(&self) -> usize {
        self.sends.load(Ordering::SeqCst)
    }
}

/// `synthkit ask` with one small node against `base`, no discovery.
fn ask(base: &str, extra: &[&str]) -> std::process::Output {
    let mut cmd = Command::cargo_bin("synthkit").unwrap();
    cmd.args(["ask", "What is it?", "-", "-q", "--base-url", base])
        .args([
            "--model",
            "m",
            "--context-window",
            "4096",
            "--no-server-tokenizer",
        ])
        .args(extra)
        .env_remove("OPENAI_API_KEY")
        .env_remove("RUST_LOG")
        .write_stdin("A short document.")
        .timeout(Duration::from_secs(120));
    cmd.output().unwrap()
}

#[test]
fn retries_count_sends_429s_included() {
    for (flags, sends) in [
        (vec!["--retries", "1"], 1),
        (vec![], 4),
        (
            vec!["--retries", "3", "--rpm", "600", "--tpm", "1000000"],
            3,
        ),
    ] {
        let server = TooManyRequests::start();
        let out = ask(&server.base, &flags);
        assert_eq!(out.status.code(), Some(1), "{flags:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("429"), "{stderr}");
        assert_eq!(server.sends(), sends, "{flags:?}: {stderr}");
    }
}
