//! The command shows the library's warnings on standard error: a retried call is named
//! there by default, `-q` keeps only errors, and `RUST_LOG` overrides both.

use axum::response::IntoResponse;
use serde_json::json;
use synthkit_testkit::Server;
use synthkit_testkit::openai::{chat_reply, error_reply};
use synthkit_testkit::record::numbered;

use crate::common::{examples_docs, stderr, synthkit};

/// A chat server whose every other call (the first included) answers 502.
fn flaky() -> Server {
    Server::start(numbered("/v1/chat/completions", |n| {
        if n.is_multiple_of(2) {
            return error_reply(502, None, "upstream hiccup");
        }
        let usage = json!({"prompt_tokens": 100, "completion_tokens": 4});
        axum::Json(chat_reply("m", "Every six months.", "stop", &usage)).into_response()
    }))
}

/// `synthkit ask` over the sample documents against `server`: success and stderr.
fn ask(server: &Server, extra: &[&str], rust_log: Option<&str>) -> (bool, String) {
    let mut cmd = synthkit();
    cmd.args(["ask", "How often is the mirror cleaned?"])
        .arg(examples_docs())
        .args(["--base-url", &server.base, "--retry-max-secs", "10"])
        .args(extra);
    if let Some(level) = rust_log {
        cmd.env("RUST_LOG", level);
    }
    let out = cmd.output().unwrap();
    (out.status.success(), stderr(&out))
}

#[test]
fn retries_show_on_stderr_unless_quiet() {
    let server = flaky();
    let (ok, stderr) = ask(&server, &[], None);
    assert!(ok, "{stderr}");
    assert!(stderr.contains("retrying"), "{stderr}");
    assert!(stderr.contains("502"), "{stderr}");
    // One style: `warning: ...` as the command's own lines, never `WARN`.
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("warning: ") && l.contains("retrying")),
        "{stderr}"
    );
    assert!(!stderr.contains("WARN"), "{stderr}");
    // Captured, not a terminal: plain text, no colour escapes.
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");

    let (ok, stderr) = ask(&server, &["-q"], None);
    assert!(ok, "{stderr}");
    assert!(!stderr.contains("retrying"), "{stderr}");
}

#[test]
fn rust_log_overrides_the_level() {
    let (ok, stderr) = ask(&flaky(), &["-q"], Some("synthkit=debug"));
    assert!(ok, "{stderr}");
    assert!(stderr.contains("retrying"), "{stderr}");
    // One style: the library's lines read as the command's own.
    assert!(stderr.contains("debug: "), "{stderr}");
    assert!(!stderr.contains("DEBUG"), "{stderr}");
}
