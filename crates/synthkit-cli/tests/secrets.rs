//! A password in `--base-url` (`http://user:PASSWORD@host/v1`) never shows: not on
//! `ask`'s standard output or error (plain, `--json`, `-vv` debug logs), not in
//! `synthkit serve`'s `/readyz` body or its log lines. Against a loopback port where
//! nothing listens and a loopback server that answers 500 to everything.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::any;

const PASSWORD: &str = "PASSWORD-hunter2-0451";
const QUESTION: &str = "How often is the primary mirror cleaned?";

/// A loopback port where nothing listens.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A loopback server answering 500 to every request; stops when dropped.
struct Failing {
    _runtime: tokio::runtime::Runtime,
    port: u16,
}

impl Failing {
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
        let app = Router::new().fallback(any(|| async {
            (StatusCode::INTERNAL_SERVER_ERROR, "internal error")
        }));
        runtime.spawn(async move { axum::serve(listener, app).await });
        Self {
            _runtime: runtime,
            port,
        }
    }
}

fn base_url(port: u16) -> String {
    format!("http://someone:{PASSWORD}@127.0.0.1:{port}/v1")
}

/// `synthkit ask` against `port` with `extra` flags: its stdout and stderr together.
fn ask(port: u16, extra: &[&str]) -> String {
    let docs = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/docs");
    let out = assert_cmd::Command::cargo_bin("synthkit")
        .unwrap()
        .args(["ask", QUESTION, docs, "--context-window", "4096"])
        .args(["--base-url", &base_url(port), "--model", "m"])
        .args(["--retries", "2", "--retry-max-secs", "2", "--timeout", "10"])
        .args(extra)
        .env_remove("SYNTHKIT_BASE_URL")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("SYNTHKIT_MODEL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("RUST_LOG")
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(!out.status.success());
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Every variant of `ask` hides the user-info; those that name the server's URL show it
/// as `http://***@127.0.0.1:PORT`. Returns how many named it.
fn assert_ask_hides_it(port: u16) -> usize {
    let mut named = 0;
    for extra in [
        &[][..],
        &["--json"],
        &["-vv"],
        &["--json", "-vv"],
        &["--stream", "-vv"],
    ] {
        let shown = ask(port, extra);
        assert!(!shown.contains(PASSWORD), "{extra:?}: {shown}");
        assert!(!shown.contains("someone"), "{extra:?}: {shown}");
        if shown.contains("@127.0.0.1") {
            assert!(
                shown.contains("http://***@127.0.0.1:"),
                "{extra:?}: {shown}"
            );
            named += 1;
        }
    }
    named
}

#[test]
fn ask_hides_the_password_when_no_server_listens() {
    let port = free_port();
    assert_eq!(assert_ask_hides_it(port), 5);
    let shown = ask(port, &[]);
    assert!(
        shown.contains(&format!(
            "check that a server is running at http://***@127.0.0.1:{port}/v1 (--base-url)"
        )),
        "{shown}"
    );
}

#[test]
fn ask_hides_the_password_when_the_server_fails() {
    let server = Failing::start();
    assert_ask_hides_it(server.port);
}

#[test]
fn a_bad_base_url_is_shown_without_its_password() {
    let out = assert_cmd::Command::cargo_bin("synthkit")
        .unwrap()
        .args(["ask", QUESTION, "--llm", "openai", "--base-url"])
        .arg(format!("ftp://someone:{PASSWORD}@127.0.0.1/v1"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains(PASSWORD), "{stderr}");
    assert!(stderr.contains("ftp://***@127.0.0.1/v1"), "{stderr}");
}

/// `synthkit serve` against `model_port`: the `/readyz` status and body, and what the
/// service wrote on stderr (at debug level).
async fn readyz(model_port: u16) -> (u16, String, String) {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("serve.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_synthkit"))
        .args(["-vv", "serve", "--bind", &format!("127.0.0.1:{port}")])
        .args(["--base-url", &base_url(model_port), "--model", "m"])
        .env_remove("SYNTHKIT_BASE_URL")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let answer = loop {
        if let Ok(r) = client.get(format!("{base}/readyz")).send().await {
            break r;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "serve ended ({status}): {}",
                std::fs::read_to_string(&log).unwrap()
            );
        }
        assert!(Instant::now() < deadline, "the service did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let status = answer.status().as_u16();
    let body = answer.text().await.unwrap();
    let _ = child.kill();
    let _ = child.wait();
    (status, body, std::fs::read_to_string(&log).unwrap())
}

#[test]
fn readyz_hides_the_password() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (status, body, log) = runtime.block_on(readyz(free_port()));
    assert_eq!(status, 503, "{body}");
    assert!(!body.contains(PASSWORD), "{body}");
    assert!(body.contains("http://***@127.0.0.1:"), "{body}");
    assert!(!log.contains(PASSWORD), "{log}");

    let server = Failing::start();
    let (status, body, log) = runtime.block_on(readyz(server.port));
    assert_eq!(status, 503, "{body}");
    assert!(!body.contains(PASSWORD), "{body}");
    assert!(
        body.contains(&format!("http://***@127.0.0.1:{}/v1/models", server.port)),
        "{body}"
    );
    assert!(!log.contains(PASSWORD), "{log}");
}
