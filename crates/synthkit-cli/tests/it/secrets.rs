//! A password in `--base-url` (`http://user:PASSWORD@host/v1`) never shows: not on
//! `ask`'s standard output or error (plain, `--json`, `-vv` debug logs), not in
//! `synthkit serve`'s `/readyz` body or its log lines. Against a loopback port where
//! nothing listens and a loopback server that answers 500 to everything.

use std::process::Stdio;
use std::time::Duration;

use axum::Router;
use synthkit_testkit::Server;
use synthkit_testkit::openai::error_reply;

use crate::common::{Service, closed_port, examples_docs, get, spawn_synthkit, synthkit};

const PASSWORD: &str = "PASSWORD-hunter2-0451";
const QUESTION: &str = "How often is the primary mirror cleaned?";

/// A loopback server answering 500 to every request, on every path.
fn failing() -> Server {
    Server::start(Router::new().fallback(|| async { error_reply(500, None, "internal error") }))
}

fn base_url(port: u16) -> String {
    format!("http://someone:{PASSWORD}@127.0.0.1:{port}/v1")
}

/// `synthkit ask` against `port` with `extra` flags: its stdout and stderr together.
fn ask(port: u16, extra: &[&str]) -> String {
    let out = synthkit()
        .args(["ask", QUESTION, "--context-window", "4096"])
        .arg(examples_docs())
        .args(["--base-url", &base_url(port), "--model", "m"])
        .args(["--retries", "2", "--retry-max-secs", "2", "--timeout", "10"])
        .args(extra)
        .output()
        .unwrap();
    assert!(!out.status.success());
    format!(
        "{}\n{}",
        crate::common::stdout(&out),
        crate::common::stderr(&out)
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
    let port = closed_port();
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
    let server = failing();
    assert_ask_hides_it(server.port());
}

#[test]
fn a_bad_base_url_is_shown_without_its_password() {
    let out = synthkit()
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
fn readyz(model_port: u16) -> (u16, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("serve.log");
    let mut cmd = spawn_synthkit();
    cmd.args([
        "-vv",
        "serve",
        "--base-url",
        &base_url(model_port),
        "--model",
        "m",
    ]);
    let service = Service::start(cmd, Stdio::from(std::fs::File::create(&log).unwrap()));
    // The service checks its backend in the background: until the first check is done,
    // /readyz says so. Ask again (bounded) until it answers with a check's outcome.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let (status, body) = loop {
        let (status, body) =
            get(&service.addr, "/readyz", Duration::from_secs(30)).expect("/readyz answered");
        if !body.contains("not been checked yet") || std::time::Instant::now() > deadline {
            break (status, body);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(service);
    (status, body, std::fs::read_to_string(&log).unwrap())
}

#[test]
fn readyz_hides_the_password() {
    let (status, body, log) = readyz(closed_port());
    assert_eq!(status, 503, "{body}");
    assert!(!body.contains(PASSWORD), "{body}");
    assert!(body.contains("http://***@127.0.0.1:"), "{body}");
    assert!(!log.contains(PASSWORD), "{log}");

    let server = failing();
    let (status, body, log) = readyz(server.port());
    assert_eq!(status, 503, "{body}");
    assert!(!body.contains(PASSWORD), "{body}");
    assert!(
        body.contains(&format!("http://***@127.0.0.1:{}/v1/models", server.port())),
        "{body}"
    );
    assert!(!log.contains(PASSWORD), "{log}");
}
