//! The `synthkit` command end to end against a real llama.cpp `llama-server` on 127.0.0.1
//! (a tiny random-weight model; answers are nonsense, the protocol is the real one).
//!
//! A recording proxy sits between the command and the server, so the tests compare what
//! the command reports with what the server itself said: every mode's `--json` usage equals
//! the sum of the usage the server reported, streaming works, structured filtering sends a
//! JSON schema, and a prompt larger than the server's context is handled.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use synthkit_testkit::{Server, llama};

use crate::common::{all_modes, examples_docs, stderr, synthkit as clean};

/// The server's context size: small, so that packing and refining need several calls.
const CTX: usize = 1024;

/// What the server said, summed over the completion calls that went through the proxy.
#[derive(Default)]
struct Seen {
    calls: AtomicU64,
    prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
    bodies: Mutex<Vec<String>>,
}

struct Proxy {
    upstream: String,
    client: reqwest::Client,
    seen: Seen,
}

/// The usage a completion response reported: the whole body's, or a stream's last.
fn usage_of(body: &str) -> Option<(u64, u64)> {
    let read = |v: &Value| {
        let u = v.get("usage")?;
        Some((
            u.get("prompt_tokens")?.as_u64()?,
            u.get("completion_tokens")?.as_u64()?,
        ))
    };
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        return read(&v);
    }
    body.lines()
        .rev()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find_map(|v| read(&v))
}

async fn forward(
    State(p): State<Arc<Proxy>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let mut req = p
        .client
        .request(method, format!("{}{path}", p.upstream))
        .body(body.clone());
    if let Some(ct) = headers.get(header::CONTENT_TYPE) {
        req = req.header(header::CONTENT_TYPE, ct.clone());
    }
    let Ok(resp) = req.send().await else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let status = StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let ct = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string();
    let bytes = resp.bytes().await.unwrap_or_default();
    if uri.path().ends_with("/completions") {
        p.seen
            .bodies
            .lock()
            .unwrap()
            .push(String::from_utf8_lossy(&body).into_owned());
        if status.is_success() {
            p.seen.calls.fetch_add(1, Ordering::SeqCst);
            if let Some((pt, ctk)) = usage_of(&String::from_utf8_lossy(&bytes)) {
                p.seen.prompt_tokens.fetch_add(pt, Ordering::SeqCst);
                p.seen.completion_tokens.fetch_add(ctk, Ordering::SeqCst);
            }
        }
    }
    (status, [(header::CONTENT_TYPE, ct)], bytes).into_response()
}

/// A recording proxy in front of `upstream_base` (`http://127.0.0.1:PORT/v1`); its
/// server (base URL and all) and what it saw.
fn start_proxy(upstream_base: &str) -> (Server, Arc<Proxy>) {
    let root = upstream_base
        .trim_end_matches('/')
        .trim_end_matches("/v1")
        .to_string();
    let proxy = Arc::new(Proxy {
        upstream: root,
        client: reqwest::Client::new(),
        seen: Seen::default(),
    });
    let app = Router::new()
        .fallback(forward)
        .with_state(Arc::clone(&proxy));
    (Server::start(app), proxy)
}

fn docs() -> Vec<PathBuf> {
    let dir = examples_docs();
    vec![
        dir.join("02-telescope-maintenance.md"),
        dir.join("05-safety.md"),
    ]
}

/// `synthkit ARGS` over two sample documents through the proxy at `proxy`; its output
/// after checking it succeeded unless `may_fail`.
fn synthkit(proxy: &Server, args: &[&str], may_fail: bool) -> std::process::Output {
    let out = clean()
        .args(args)
        .args(docs())
        .args(["--llm", "openai", "--base-url", &proxy.base])
        .args(["--model", "tiny", "--num-output", "16"])
        // One call at a time: the test server's slots share one small KV cache, and
        // concurrent prompts would exhaust it (llama.cpp then answers HTTP 500).
        .args(["--chunk-size", "256", "--quiet", "--concurrency", "1"])
        .output()
        .unwrap();
    assert!(
        may_fail || out.status.success(),
        "{args:?}: {}",
        stderr(&out)
    );
    out
}

/// The tiny model's server, with the shared hold on the real-server lock (the SmolLM2
/// tests wait for it to end); returns from the test when none can be had here.
macro_rules! server {
    () => {
        match (crate::common::llama_shared(), llama::server_with_ctx(CTX)) {
            (hold, Some(s)) => (hold, s),
            (_, None) => return,
        }
    };
}

/// `ask Q --mode MODE EXTRA` through a fresh proxy: the JSON report (or `Null` when
/// `--json` is not among `extra`) and what the proxy saw.
fn ask(server: &llama::LlamaServer, q: &str, mode: &str, extra: &[&str]) -> (Value, Arc<Proxy>) {
    let (proxy_server, proxy) = start_proxy(&server.base);
    let mut args = vec!["ask", q, "--mode", mode];
    args.extend_from_slice(extra);
    let out = synthkit(&proxy_server, &args, false);
    assert!(!out.stdout.is_empty(), "{mode}");
    let report = match extra.contains(&"--json") {
        true => serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{mode}: {e}")),
        false => Value::Null,
    };
    (report, proxy)
}

const MIRROR_Q: &str = "How often is the mirror cleaned?";

#[test]
fn every_mode_reports_the_usage_the_server_reported() {
    let (_shared, server) = server!();
    for mode in all_modes() {
        let (report, proxy) = ask(&server, MIRROR_Q, mode, &["--json", "--evidence", "off"]);
        assert!(report["answer"].is_string(), "{mode}: {report}");
        let usage = &report["usage"];
        let seen = &proxy.seen;
        let calls = seen.calls.load(Ordering::SeqCst);
        for (field, total) in [
            ("calls", &seen.calls),
            ("prompt_tokens", &seen.prompt_tokens),
            ("completion_tokens", &seen.completion_tokens),
        ] {
            let total = total.load(Ordering::SeqCst);
            assert_eq!(usage[field].as_u64(), Some(total), "{mode}: {field}");
        }
        if matches!(mode, "no_text" | "context_only") {
            assert_eq!(calls, 0, "{mode}");
        } else {
            assert!(calls >= 1, "{mode}");
            assert!(seen.prompt_tokens.load(Ordering::SeqCst) > 0, "{mode}");
        }
        if matches!(mode, "refine" | "compact" | "tree_summarize" | "accumulate") {
            assert!(
                calls > 1,
                "{mode} should need several calls in a {CTX}-token window"
            );
        }
    }
}

#[test]
fn streaming_works_in_every_calling_mode() {
    let (_shared, server) = server!();
    for mode in ["compact", "tree_summarize", "accumulate", "generation"] {
        let q = "What is checked every spring?";
        let (_, proxy) = ask(&server, q, mode, &["--stream", "--evidence", "off"]);
        let bodies = proxy.seen.bodies.lock().unwrap();
        assert!(
            bodies.iter().any(|b| b.contains("\"stream\":true")),
            "{mode}: nothing was streamed"
        );
    }
}

#[test]
fn structured_filtering_sends_a_json_schema() {
    let (_shared, server) = server!();
    let extra = ["--structured-filtering", "--json"];
    let (report, proxy) = ask(&server, MIRROR_Q, "refine", &extra);
    assert!(report["answer"].is_string());
    let bodies = proxy.seen.bodies.lock().unwrap();
    assert!(!bodies.is_empty());
    for b in bodies.iter() {
        let v: Value = serde_json::from_str(b).unwrap();
        assert_eq!(v["response_format"]["type"], "json_schema", "{b}");
        assert!(
            v["response_format"]["json_schema"]["schema"]["properties"]["query_satisfied"]
                .is_object(),
            "{b}"
        );
    }
    // Every step's reply parsed (llama.cpp constrains the output to the schema).
    assert_eq!(
        report["usage"]["calls"].as_u64(),
        Some(proxy.seen.calls.load(Ordering::SeqCst))
    );
}

#[test]
fn prompts_larger_than_the_servers_context_are_handled() {
    let (_shared, server) = server!();
    // Told the window is far larger than the server's: the server rejects the first prompts
    // as too long, the budget shrinks by the excess it reports, and the job completes.
    let extra = ["--context-window", "8192", "--json", "--evidence", "off"];
    let (_, proxy) = ask(&server, MIRROR_Q, "compact", &extra);
    let rejected =
        proxy.seen.bodies.lock().unwrap().len() as u64 - proxy.seen.calls.load(Ordering::SeqCst);
    assert!(
        rejected >= 1,
        "the server should have rejected an over-long prompt first"
    );

    // A question that alone is larger than the server's context cannot be re-packed: a
    // clear error, not a crash.
    let (proxy_server, _proxy) = start_proxy(&server.base);
    let question = "why is the sky blue ".repeat(250);
    let args = [
        "ask",
        &question,
        "--mode",
        "compact",
        "--context-window",
        "8192",
        "--evidence",
        "off",
    ];
    let out = synthkit(&proxy_server, &args, true);
    let stderr = stderr(&out);
    assert!(!out.status.success(), "{stderr}");
    assert_ne!(out.status.code(), Some(101), "{stderr}");
    assert!(
        stderr.contains("error:") && stderr.contains("shorten the query"),
        "{stderr}"
    );
}
