//! The one-line hints of a question that will keep its user waiting (issue 46): a small
//! window the kept chunks fill several times over, said from the plan before any call,
//! and a server that reads prompts slowly, said after the first call. Each at most once;
//! never for the offline backend. Against a loopback server whose window and pace the
//! test sets; nothing here asserts a time, only what standard error says.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use serde_json::json;
use synthkit_testkit::Server;
use synthkit_testkit::openai::chat_reply;

use crate::common::{stderr, synthkit, write};

const QUESTION: &str = "How often are the telescope mirrors cleaned?";

/// A server whose window is `n_ctx` tokens and whose every reply takes `delay`, reporting
/// 100 prompt tokens a call (so a 1 s call reads 100 tokens a second).
fn server(n_ctx: usize, delay: Duration) -> Server {
    let props =
        move || async move { axum::Json(json!({"default_generation_settings": {"n_ctx": n_ctx}})) };
    let chat = move || async move {
        tokio::time::sleep(delay).await;
        let usage = json!({"prompt_tokens": 100, "completion_tokens": 4});
        axum::Json(chat_reply("m", "Every six months.", "stop", &usage))
    };
    Server::start(
        Router::new()
            .route("/props", get(props))
            .route("/v1/props", get(props))
            .route("/v1/chat/completions", post(chat)),
    )
}

/// A folder of 30 files, each a few hundred tokens about cleaning the mirrors.
fn folder() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..30 {
        let mut text = String::new();
        for j in 0..40 {
            text.push_str(&format!(
                "Telescope {i} has mirror {j}; its mirrors are cleaned every {} months by crew {}. ",
                i + j,
                i * 7 + j
            ));
        }
        write(dir.path(), &format!("docs/scope{i}.txt"), text);
    }
    dir
}

fn ask(server: &Server, dir: &Path, extra: &[&str]) -> Output {
    synthkit()
        .args(["ask", QUESTION])
        .arg(dir.join("docs"))
        .args([
            "--base-url",
            &server.base,
            "--llm",
            "openai",
            "--model",
            "m",
        ])
        .args(["--evidence", "off", "--on-unsupported", "warn"])
        .args(extra)
        .output()
        .unwrap()
}

fn hint_lines(out: &Output, needle: &str) -> usize {
    stderr(out).lines().filter(|l| l.contains(needle)).count()
}

#[test]
fn a_small_window_is_said_once_with_the_top_k_that_fits() {
    let dir = folder();
    let small = server(2048, Duration::ZERO);
    let out = ask(&small, dir.path(), &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(hint_lines(&out, "-token window"), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("--top-k "), "{}", stderr(&out));
    // The slow-server line is not said beside it.
    assert_eq!(hint_lines(&out, "tokens a second"), 0, "{}", stderr(&out));
    // -q keeps it quiet; the offline backend has no window to fill.
    assert_eq!(
        hint_lines(&ask(&small, dir.path(), &["-q"]), "-token window"),
        0
    );
    let offline = synthkit()
        .args(["ask", QUESTION])
        .arg(dir.path().join("docs"))
        .output()
        .unwrap();
    assert!(offline.status.success(), "{}", stderr(&offline));
    assert_eq!(
        hint_lines(&offline, "-token window"),
        0,
        "{}",
        stderr(&offline)
    );
}

#[test]
fn a_slow_server_is_said_once_after_the_first_call() {
    let dir = folder();
    // A window too large to be called small, filled more than once by 20 chunks, and
    // a server that reads 100 tokens a second.
    let slow = server(9000, Duration::from_millis(1000));
    let out = ask(&slow, dir.path(), &["--concurrency", "1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(hint_lines(&out, "tokens a second"), 1, "{}", stderr(&out));
    assert_eq!(hint_lines(&out, "-token window"), 0, "{}", stderr(&out));
}
