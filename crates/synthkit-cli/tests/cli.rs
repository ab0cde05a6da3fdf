//! End-to-end tests of the `synthkit` binary, offline: the extractive backend, small files
//! in temporary folders, and (for the OpenAI-compatible backend) a tiny HTTP server on
//! the loopback interface that answers a bounded number of requests.

// Test helpers outside `#[test]` functions: failing loudly is the point.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use serde_json::Value;
use synthkit::text::{BpeTokenizer, Tokenizer};
use tempfile::TempDir;

const MIRROR: &str = "The primary mirror is cleaned every three months with carbon dioxide snow.";
const QUESTION: &str = "How often is the primary mirror cleaned?";

fn synthkit() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_synthkit"));
    // A clean environment for the backend choice.
    cmd.env_remove("SYNTHKIT_BASE_URL")
        .env_remove("SYNTHKIT_MODEL")
        .env_remove("OPENAI_BASE_URL");
    cmd
}

fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&path, bytes).unwrap();
    path
}

/// A folder with three small documents; the mirror sentence is in `maintenance.md`.
fn docs() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "about.md",
        "# About\n\nHarrow Ridge Observatory sits at 1,420 metres. The dome opens at dusk. Visitors park behind the cafe.\n",
    );
    write(
        dir.path(),
        "maintenance.md",
        format!(
            "# Maintenance\n\nThe technician plans all work. {MIRROR} The dome motors are greased every year.\n"
        ),
    );
    write(
        dir.path(),
        "notes/safety.txt",
        "Two people must be on site whenever the dome is open. Wear warm clothes.\n",
    );
    dir
}

fn stdout_of(out: &std::process::Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8(out.stderr.clone()).unwrap()
}

fn json_of(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout_of(out)))
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

// ---------------------------------------------------------------------------------------
// A minimal HTTP server for the OpenAI-compatible backend.

/// One request as the fake server saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    headers: String,
    body: String,
}

type Responder = fn(&Seen) -> (u16, &'static str, String);

/// Serves at most `max` connections on 127.0.0.1 for at most 60 s, then stops by itself.
struct FakeServer {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl FakeServer {
    fn start(max: usize, respond: Responder) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(60);
            let served = AtomicUsize::new(0);
            while served.load(Ordering::Relaxed) < max && Instant::now() < deadline {
                match listener.accept() {
                    Ok((stream, _)) => {
                        served.fetch_add(1, Ordering::Relaxed);
                        if let Some(req) = handle(stream, respond) {
                            log.lock().unwrap().push(req);
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Self { port, seen }
    }

    fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn handle(stream: TcpStream, respond: Responder) -> Option<Seen> {
    stream.set_nonblocking(false).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut first = String::new();
    reader.read_line(&mut first).ok()?;
    let mut parts = first.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut headers = String::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        if line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        headers.push_str(&line);
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).ok()?;
    let seen = Seen {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    let (status, content_type, reply) = respond(&seen);
    let mut stream = stream;
    let head = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        reply.len()
    );
    stream.write_all(head.as_bytes()).ok()?;
    stream.write_all(reply.as_bytes()).ok()?;
    stream.flush().ok()?;
    Some(seen)
}

const SERVER_ANSWER: &str = "Every three months.";

/// Answers chat completions (plain or streamed) with [`SERVER_ANSWER`]; 404 otherwise.
fn openai_responder(req: &Seen) -> (u16, &'static str, String) {
    if req.method != "POST" || !req.path.ends_with("/chat/completions") {
        return (
            404,
            "application/json",
            "{\"error\":{\"message\":\"not found\"}}".into(),
        );
    }
    if req.body.contains("\"stream\":true") {
        let mut sse = String::new();
        for piece in ["Every ", "three ", "months."] {
            sse.push_str(&format!(
                "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{piece}\"}}}}]}}\n\n"
            ));
        }
        sse.push_str(
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
        );
        sse.push_str(
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":4}}\n\n",
        );
        sse.push_str("data: [DONE]\n\n");
        return (200, "text/event-stream", sse);
    }
    let body = serde_json::json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": SERVER_ANSWER}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 4}
    });
    (200, "application/json", body.to_string())
}

/// Refuses every request, echoing the request headers (the API key included) in the body,
/// as a careless server might.
fn echo_401_responder(req: &Seen) -> (u16, &'static str, String) {
    let body = serde_json::json!({"error": {"message": format!("bad credentials; you sent: {}", req.headers)}});
    (401, "application/json", body.to_string())
}

// ---------------------------------------------------------------------------------------
// tokens and split

#[test]
fn tokens_counts_a_file_and_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "t.txt", "hello world");
    synthkit()
        .arg("tokens")
        .arg(&f)
        .assert()
        .success()
        .stdout("2\n");
    synthkit()
        .arg("tokens")
        .write_stdin("hello world")
        .assert()
        .success()
        .stdout("2\n");
    synthkit()
        .args(["tokens", "-"])
        .write_stdin("hello world")
        .assert()
        .success()
        .stdout("2\n");
    synthkit()
        .args(["tokens", "--tokenizer", "o200k_base"])
        .write_stdin("")
        .assert()
        .success()
        .stdout("0\n");
    synthkit()
        .args(["tokens", "--tokenizer", "gpt2"])
        .write_stdin("x")
        .assert()
        .code(2);
}

#[test]
fn split_json_chunks_fit_the_size() {
    let text = "The quick brown fox jumps over the lazy dog. ".repeat(40)
        + "Supercalifragilistic words appear too.";
    let out = synthkit()
        .args(["split", "--chunk-size", "25", "--overlap", "5", "--json"])
        .write_stdin(text)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let chunks: Vec<String> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(chunks.len() > 10);
    let tok = BpeTokenizer::cl100k_base();
    for c in &chunks {
        assert!(
            tok.count(c) <= 25,
            "chunk of {} tokens: {c:?}",
            tok.count(c)
        );
        assert!(!c.trim().is_empty());
    }
}

#[test]
fn split_text_has_delimiters_and_default_overlap_is_capped() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "t.md",
        "one two three four five six seven eight nine ten",
    );
    // chunk size 5 < default overlap 20: the default is capped, not an error.
    let out = synthkit()
        .args(["split", "--chunk-size", "5"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = stdout_of(&out);
    assert!(text.starts_with("--- chunk 1/"), "{text}");
    assert!(
        text.lines().filter(|l| l.starts_with("--- chunk ")).count() >= 2,
        "{text}"
    );
    synthkit()
        .args(["split", "--chunk-size", "5", "--json"])
        .write_stdin("")
        .assert()
        .success()
        .stdout("[]\n");
}

#[test]
fn split_overlap_larger_than_size_is_a_usage_error() {
    let out = synthkit()
        .args(["split", "--chunk-size", "10", "--overlap", "20"])
        .write_stdin("some text")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr_of(&out);
    assert!(err.starts_with("error: "), "{err}");
    assert!(
        err.contains("chunk overlap (20) is larger than chunk size (10)"),
        "{err}"
    );
    synthkit()
        .args(["split", "--chunk-size", "0"])
        .write_stdin("x")
        .assert()
        .code(2);
}

// ---------------------------------------------------------------------------------------
// ask and summarize, offline

#[test]
fn ask_over_a_folder_finds_the_sentence() {
    let dir = docs();
    let out = synthkit()
        .args(["ask", QUESTION])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = stdout_of(&out);
    assert!(text.starts_with(MIRROR), "{text}");
    assert!(text.contains("\nSources:\n"), "{text}");
    // Only the source the answer's sentence came from is listed; the others are counted.
    assert!(
        text.contains("  1. ") && text.contains("maintenance.md#1"),
        "{text}"
    );
    assert!(!text.contains("about.md#1"), "{text}");
    assert!(
        text.contains("(2 other retrieved chunks not cited; --json lists them)"),
        "{text}"
    );
    assert!(
        stderr_of(&out).contains("extractive answer"),
        "the extractive backend is labelled"
    );
}

#[test]
fn quiet_hides_notes() {
    let dir = docs();
    let out = synthkit()
        .args(["ask", QUESTION, "--quiet"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(stderr_of(&out), "");
}

#[test]
fn json_report_shape_and_usage() {
    let dir = docs();
    let out = synthkit()
        .args(["ask", QUESTION, "--json", "-q"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let v = json_of(&out);
    assert_eq!(v["answer"], MIRROR);
    assert_eq!(v["mode"], "compact");
    assert_eq!(v["backend"], "extractive");
    assert_eq!(v["query"], QUESTION);
    let sources = v["sources"].as_array().unwrap();
    assert_eq!(sources.len(), 3);
    for s in sources {
        assert!(
            s["id"].as_str().unwrap().contains(".md#1")
                || s["id"].as_str().unwrap().contains(".txt#1")
        );
        assert!(s["path"].as_str().is_some());
        assert!(s["excerpt"].as_str().unwrap().chars().count() <= 160);
        assert!(s.get("score").is_some());
    }
    // compact packs three small files into one prompt: one call.
    assert_eq!(v["usage"]["calls"], 1);
    assert!(v["usage"]["prompt_tokens"].as_u64().unwrap() > 50);
    // The extractive backend cites the sentence's source ([n], removed from the answer
    // without --cite): its reply is the sentence and the marker.
    let completion = v["usage"]["completion_tokens"].as_u64().unwrap();
    assert!(completion >= BpeTokenizer::cl100k_base().count(MIRROR) as u64);
    assert_eq!(v["grounded"], true);
    assert_eq!(sources[0]["cited"], true);
    assert!(
        sources[0]["id"]
            .as_str()
            .unwrap()
            .contains("maintenance.md#1")
    );
    assert_eq!(sources[1]["cited"], false);
    assert!(
        v["timings"]["total_ms"].as_f64().unwrap() >= v["timings"]["model_ms"].as_f64().unwrap()
    );
    assert!(v.get("truncation").is_none());
}

#[test]
fn every_mode_runs() {
    let dir = docs();
    let modes = [
        "refine",
        "compact",
        "tree_summarize",
        "simple_summarize",
        "accumulate",
        "compact_accumulate",
        "generation",
        "no_text",
        "context_only",
    ];
    for mode in modes {
        let out = synthkit()
            .args(["ask", QUESTION, "--json", "-q", "--mode", mode])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{mode}: {}", stderr_of(&out));
        let v = json_of(&out);
        assert_eq!(v["mode"], mode);
        let answer = v["answer"].as_str().unwrap();
        let calls = v["usage"]["calls"].as_u64().unwrap();
        match mode {
            "no_text" => assert_eq!((answer, calls), ("", 0)),
            "context_only" => {
                assert_eq!(calls, 0);
                assert!(answer.contains(MIRROR), "{answer}");
            }
            "generation" => assert_eq!(calls, 1),
            "accumulate" => {
                assert_eq!(calls, 3);
                assert!(answer.starts_with("Response 1: "), "{answer}");
                assert!(answer.contains(MIRROR), "{answer}");
            }
            _ => {
                assert!(calls >= 1, "{mode}");
                assert!(answer.contains(MIRROR), "{mode}: {answer}");
            }
        }
    }
}

#[test]
fn unknown_mode_is_a_usage_error() {
    let dir = docs();
    let out = synthkit()
        .args(["ask", QUESTION, "--mode", "fastest"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr_of(&out).contains("unknown response mode `fastest`"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn summarize_defaults_to_tree_summarize() {
    let dir = docs();
    let out = synthkit()
        .args(["summarize", "--json", "-q"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let v = json_of(&out);
    assert_eq!(v["mode"], "tree_summarize");
    assert_eq!(v["query"], "Summarize the text.");
    assert!(!v["answer"].as_str().unwrap().is_empty());
}

#[test]
fn stdin_is_a_document() {
    let out = synthkit()
        .args(["ask", QUESTION, "-q"])
        .write_stdin(format!("Unrelated words. {MIRROR}"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = stdout_of(&out);
    assert!(text.starts_with(MIRROR), "{text}");
    assert!(text.contains("<stdin>#1"), "{text}");
}

#[test]
fn empty_input_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = synthkit()
        .args(["ask", QUESTION])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    assert!(
        err.starts_with("error: no text files found under "),
        "{err}"
    );

    let out = synthkit()
        .args(["ask", QUESTION])
        .write_stdin("")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("no text to work on"),
        "{}",
        stderr_of(&out)
    );

    let out = synthkit()
        .args(["ask", QUESTION, "/definitely/not/here"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr_of(&out).contains("cannot read `/definitely/not/here`"));
}

#[test]
fn binary_and_hidden_files_are_skipped() {
    let dir = docs();
    write(dir.path(), "blob.txt", b"\x00\x01\x02binary\x00data");
    write(dir.path(), "image", b"\x89PNG\r\n\x1a\n\x00\x00");
    write(
        dir.path(),
        ".git/config.md",
        "The primary mirror is never cleaned.",
    );
    write(dir.path(), "picture.png", "not read");
    let out = synthkit()
        .args(["ask", QUESTION, "--json"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains("skipping binary file") && err.contains("blob.txt"),
        "{err}"
    );
    let v = json_of(&out);
    let ids: Vec<&str> = v["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    // Issue 11: text is recognised by content, not extension: `picture.png` holding text
    // is read (it was skipped as another type before).
    assert_eq!(ids.len(), 4, "{ids:?}");
    assert!(ids.iter().any(|id| id.contains("picture.png")), "{ids:?}");
    assert!(
        ids.iter()
            .all(|id| !id.contains("blob") && !id.contains("image") && !id.contains(".git"))
    );
    assert_eq!(v["answer"], MIRROR);
}

#[test]
fn invalid_utf8_is_decoded_lossily_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = b"The caf\xe9 opens at nine. ".to_vec();
    bytes.extend_from_slice(MIRROR.as_bytes());
    write(dir.path(), "latin1.txt", bytes);
    let out = synthkit()
        .args(["ask", "When does the cafe open?", "--mode", "context_only"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains("warning: ") && err.contains("latin1.txt") && err.contains("not valid UTF-8"),
        "{err}"
    );
    assert!(
        // Issue 11: legacy 8-bit text is decoded as windows-1252 (was U+FFFD before).
        stdout_of(&out).contains("caf\u{e9} opens"),
        "{}",
        stdout_of(&out)
    );
}

#[test]
fn stream_prints_the_same_as_the_plain_answer() {
    let dir = docs();
    for mode in [
        "compact",
        "refine",
        "tree_summarize",
        "accumulate",
        "context_only",
        "no_text",
    ] {
        let plain = synthkit()
            .args(["ask", QUESTION, "-q", "--mode", mode])
            .arg(dir.path())
            .output()
            .unwrap();
        let streamed = synthkit()
            .args(["ask", QUESTION, "-q", "--stream", "--mode", mode])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            plain.status.success() && streamed.status.success(),
            "{mode}"
        );
        assert_eq!(stdout_of(&plain), stdout_of(&streamed), "{mode}");
    }
}

#[test]
fn trace_writes_one_line_per_call() {
    let dir = docs();
    let trace = dir.path().join("trace.jsonl");
    let out = synthkit()
        .args([
            "ask", QUESTION, "--json", "-q", "--mode", "refine", "--trace",
        ])
        .arg(&trace)
        .arg(dir.path().join("about.md"))
        .arg(dir.path().join("maintenance.md"))
        .arg(dir.path().join("notes"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let calls = json_of(&out)["usage"]["calls"].as_u64().unwrap();
    assert_eq!(calls, 3);
    let text = std::fs::read_to_string(&trace).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len() as u64, calls);
    for (i, l) in lines.iter().enumerate() {
        for key in [
            "mode",
            "step",
            "level",
            "index",
            "kind",
            "prompt",
            "prompt_tokens",
            "response",
            "completion_tokens",
            "ms",
        ] {
            assert!(l.get(key).is_some(), "line {i} lacks {key}: {l}");
        }
        assert_eq!(l["mode"], "refine");
        assert_eq!(l["index"], i as u64);
        let prompt = l["prompt"].as_str().unwrap();
        assert!(prompt.contains(QUESTION));
        assert_eq!(
            l["prompt_tokens"].as_u64().unwrap(),
            BpeTokenizer::cl100k_base().count(prompt) as u64
        );
    }
    assert_eq!(lines[0]["step"], "qa");
    assert_eq!(lines[0]["kind"], "qa");
    assert_eq!(lines[1]["step"], "refine");
}

#[test]
fn plan_makes_no_model_call() {
    let dir = docs();
    // Nothing listens on the port: a model call would fail.
    let url = format!("http://127.0.0.1:{}/v1", closed_port());
    let out = synthkit()
        .args([
            "ask",
            QUESTION,
            "--plan",
            "--llm",
            "openai",
            "--base-url",
            &url,
            "--context-window",
            "1024",
        ])
        .args([
            "--mode",
            "refine",
            "--price-per-1k",
            "0.5",
            "--chunk-size",
            "40",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = stdout_of(&out);
    assert!(text.contains("no model was called"), "{text}");
    assert!(
        text.contains("exact") && text.contains("upper bound"),
        "{text}"
    );
    assert!(text.contains("estimated prompt cost: $"), "{text}");

    // With a server that counts requests: discovery may ask, but no completion is requested.
    let server = FakeServer::start(20, openai_responder);
    let out = synthkit()
        .args([
            "ask",
            QUESTION,
            "--plan",
            "--json",
            "--base-url",
            &server.base_url(),
            "--mode",
            "tree_summarize",
        ])
        .args(["--context-window", "600", "--chunk-size", "40"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let v = json_of(&out);
    assert_eq!(v["backend"], "openai");
    assert_eq!(v["mode"], "tree_summarize");
    let steps = v["steps"].as_array().unwrap();
    assert!(!steps.is_empty());
    assert_eq!(steps[0]["exact"], true);
    let sum: u64 = steps.iter().map(|s| s["calls"].as_u64().unwrap()).sum();
    assert_eq!(v["total"]["calls"].as_u64().unwrap(), sum);
    assert!(v["total"]["prompt_tokens"].as_u64().unwrap() > 0);
    assert!(
        server
            .seen()
            .iter()
            .all(|r| !r.path.contains("completions")),
        "{:?}",
        server.seen()
    );
}

#[test]
fn plan_first_step_matches_the_real_run() {
    let dir = docs();
    let args = [
        "ask",
        QUESTION,
        "--json",
        "-q",
        "--mode",
        "accumulate",
        "--chunk-size",
        "30",
    ];
    let plan = json_of(
        &synthkit()
            .args(args)
            .arg("--plan")
            .arg(dir.path())
            .output()
            .unwrap(),
    );
    let real = json_of(&synthkit().args(args).arg(dir.path()).output().unwrap());
    // accumulate has one step: its counts are exact.
    assert_eq!(plan["total"]["exact"], true);
    assert_eq!(plan["total"]["calls"], real["usage"]["calls"]);
    assert_eq!(
        plan["total"]["prompt_tokens"],
        real["usage"]["prompt_tokens"]
    );
}

#[test]
fn nodes_from_json_and_jsonl() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = serde_json::json!([
        {"id": "n1", "text": "The dome opens at dusk.", "metadata": {"file_path": "a.md"}, "score": 0.4},
        {"id": "n2", "text": MIRROR, "metadata": {"file_path": "b.md", "secret": "x"}, "excluded_llm_metadata_keys": ["secret"], "score": 0.9}
    ]);
    let json_path = write(
        dir.path(),
        "nodes.json",
        serde_json::to_string_pretty(&nodes).unwrap(),
    );
    let jsonl: String = nodes
        .as_array()
        .unwrap()
        .iter()
        .map(|n| format!("{n}\n"))
        .collect();
    let jsonl_path = write(dir.path(), "nodes.jsonl", jsonl);
    for path in [&json_path, &jsonl_path] {
        let out = synthkit()
            .args(["ask", QUESTION, "--json", "-q", "--nodes"])
            .arg(path)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr_of(&out));
        let v = json_of(&out);
        assert_eq!(v["answer"], MIRROR);
        let n2 = v["sources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == "n2")
            .unwrap();
        assert_eq!(n2["path"], "b.md");
        assert_eq!(n2["score"], 0.9);
    }
}

#[test]
fn malformed_jsonl_names_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "nodes.jsonl",
        "{\"id\":\"a\",\"text\":\"x\"}\n\n{\"id\":\"b\",\"text\":\"y\"}\n{\"id\":\"c\",\"txt\":\"z\"}\n",
    );
    let out = synthkit()
        .args(["ask", QUESTION, "--nodes"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    assert!(
        err.starts_with("error: ") && err.contains("nodes.jsonl: line 4"),
        "{err}"
    );
    assert!(err.contains("node 3 has no `text`"), "{err}");

    let path = write(
        dir.path(),
        "broken.jsonl",
        "{\"id\":\"a\",\"text\":\"x\"}\n{not json\n",
    );
    let out = synthkit()
        .args(["ask", QUESTION, "--nodes"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr_of(&out).contains("line 2"), "{}", stderr_of(&out));
}

#[test]
fn top_k_keeps_the_most_relevant_chunks() {
    let dir = docs();
    let out = synthkit()
        .args([
            "ask",
            QUESTION,
            "--json",
            "-q",
            "--top-k",
            "1",
            "--chunk-size",
            "20",
            "--chunk-overlap",
            "0",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let v = json_of(&out);
    let sources = v["sources"].as_array().unwrap();
    assert_eq!(sources.len(), 1);
    assert!(
        sources[0]["id"]
            .as_str()
            .unwrap()
            .contains("maintenance.md#")
    );
    assert!(sources[0]["score"].as_f64().unwrap() > 0.0);
    assert!(v["answer"].as_str().unwrap().contains("primary mirror"));
    synthkit()
        .args(["ask", QUESTION, "--top-k", "0"])
        .arg(dir.path())
        .assert()
        .code(2);
}

#[test]
fn custom_templates() {
    let dir = docs();
    let good = write(
        dir.path(),
        "qa.tmpl",
        "CUSTOM QA\n{context_str}\nQuestion: {query_str}\nAnswer:",
    );
    let bad = write(dir.path(), "bad.tmpl", "No variables here.");
    let trace = dir.path().join("t.jsonl");
    let out = synthkit()
        .args(["ask", QUESTION, "-q", "--qa-template"])
        .arg(&good)
        .arg("--trace")
        .arg(&trace)
        .arg(dir.path().join("maintenance.md"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(
        std::fs::read_to_string(&trace)
            .unwrap()
            .contains("CUSTOM QA")
    );
    let out = synthkit()
        .args(["ask", QUESTION, "--qa-template"])
        .arg(&bad)
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr_of(&out).contains("{context_str}"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn bad_flags_are_usage_errors() {
    let dir = docs();
    for extra in [
        vec!["--overlap", "1.5"],
        vec!["--context-window", "100", "--num-output", "200"],
        vec!["--chunk-size", "10", "--chunk-overlap", "11"],
        vec!["--stream", "--json"],
        vec!["--price-per-1k", "1"],
        vec!["--llm", "magic"],
    ] {
        let out = synthkit()
            .args(["ask", QUESTION])
            .args(&extra)
            .arg(dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {}", stderr_of(&out));
        assert!(stderr_of(&out).starts_with("error: "), "{extra:?}");
    }
}

// ---------------------------------------------------------------------------------------
// The OpenAI-compatible backend against a loopback server

#[test]
fn openai_backend_answers_and_traces() {
    let dir = docs();
    let server = FakeServer::start(10, openai_responder);
    let trace = dir.path().join("trace.jsonl");
    let out = synthkit()
        .args([
            "ask",
            QUESTION,
            "--json",
            "-q",
            "--base-url",
            &server.base_url(),
            "--context-window",
            "4096",
            "--trace",
        ])
        .arg(&trace)
        .arg(dir.path())
        .env("OPENAI_API_KEY", "")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let v = json_of(&out);
    assert_eq!(v["answer"], SERVER_ANSWER);
    assert_eq!(v["backend"], "openai");
    assert_eq!(v["usage"]["calls"], 1);
    assert_eq!(v["usage"]["prompt_tokens"], 100);
    assert_eq!(v["usage"]["completion_tokens"], 4);
    let line: Value =
        serde_json::from_str(std::fs::read_to_string(&trace).unwrap().trim()).unwrap();
    assert_eq!(line["response"], SERVER_ANSWER);
    assert_eq!(line["usage_reported"], true);
    let posts: Vec<Seen> = server
        .seen()
        .into_iter()
        // The model calls (the command also probes the server's /tokenize).
        .filter(|r| r.method == "POST" && r.path.ends_with("/completions"))
        .collect();
    assert_eq!(posts.len(), 1);
    assert!(
        posts[0].body.contains(MIRROR),
        "the documents are in the prompt"
    );
}

#[test]
fn openai_stream_equals_plain() {
    let dir = docs();
    let server = FakeServer::start(10, openai_responder);
    let common = [
        "ask",
        QUESTION,
        "-q",
        "--llm",
        "openai",
        "--context-window",
        "4096",
    ];
    let plain = synthkit()
        .args(common)
        .args(["--base-url", &server.base_url()])
        .arg(dir.path())
        .output()
        .unwrap();
    let streamed = synthkit()
        .args(common)
        .args(["--stream", "--base-url", &server.base_url()])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(plain.status.success(), "{}", stderr_of(&plain));
    assert!(streamed.status.success(), "{}", stderr_of(&streamed));
    assert!(stdout_of(&plain).starts_with(SERVER_ANSWER));
    assert_eq!(stdout_of(&plain), stdout_of(&streamed));
}

#[test]
fn api_key_never_appears() {
    let dir = docs();
    let key = format!(
        "sk-test-{}-{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos() ^ 0x5eed
    );
    let var = format!("SYNTHKIT_TEST_KEY_{}", std::process::id());
    let check = |out: &std::process::Output, trace: &Path, what: &str| {
        assert!(!stdout_of(out).contains(&key), "{what}: key in stdout");
        assert!(
            !stderr_of(out).contains(&key),
            "{what}: key in stderr: {}",
            stderr_of(out)
        );
        let t = std::fs::read_to_string(trace).unwrap_or_default();
        assert!(!t.contains(&key), "{what}: key in the trace");
    };

    // A server that echoes the Authorization header in its error body.
    let server = FakeServer::start(10, echo_401_responder);
    let trace = dir.path().join("t1.jsonl");
    let out = synthkit()
        .args([
            "ask",
            QUESTION,
            "--base-url",
            &server.base_url(),
            "--api-key-env",
            &var,
            "--context-window",
            "4096",
        ])
        .arg("--trace")
        .arg(&trace)
        .arg(dir.path())
        .env(&var, &key)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("401"), "{}", stderr_of(&out));
    // The key was sent, so the redaction was really tested.
    assert!(server.seen().iter().any(|r| r.headers.contains(&key)));
    check(&out, &trace, "401 echo");

    // JSON output and streaming against the same kind of server.
    let server = FakeServer::start(10, echo_401_responder);
    let out = synthkit()
        .args([
            "ask",
            QUESTION,
            "--stream",
            "--base-url",
            &server.base_url(),
            "--api-key-env",
            &var,
        ])
        .args(["--context-window", "4096"])
        .arg(dir.path())
        .env(&var, &key)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    check(&out, &trace, "401 echo, streamed");

    // A closed port, a plan, and a successful call with a trace.
    let url = format!("http://127.0.0.1:{}/v1", closed_port());
    let out = synthkit()
        .args(["ask", QUESTION, "--base-url", &url, "--api-key-env", &var])
        .arg(dir.path())
        .env(&var, &key)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("check that a server is running"),
        "{}",
        stderr_of(&out)
    );
    check(&out, &trace, "closed port");

    let out = synthkit()
        .args([
            "ask",
            QUESTION,
            "--plan",
            "--base-url",
            &url,
            "--api-key-env",
            &var,
        ])
        .arg(dir.path())
        .env(&var, &key)
        .output()
        .unwrap();
    assert!(out.status.success());
    check(&out, &trace, "plan");

    let server = FakeServer::start(10, openai_responder);
    let trace = dir.path().join("t2.jsonl");
    let out = synthkit()
        .args([
            "ask",
            QUESTION,
            "--json",
            "--base-url",
            &server.base_url(),
            "--api-key-env",
            &var,
            "--context-window",
            "4096",
        ])
        .arg("--trace")
        .arg(&trace)
        .arg(dir.path())
        .env(&var, &key)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    check(&out, &trace, "success");
}

// ---------------------------------------------------------------------------------------
// The repository's sample documents

#[test]
fn sample_documents() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/docs");
    if !docs.is_dir() {
        eprintln!("skipped: {} does not exist", docs.display());
        return;
    }
    let out = synthkit()
        .args([
            "ask",
            "What is the elevation of the observatory?",
            "--json",
            "-q",
        ])
        .arg(&docs)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let v = json_of(&out);
    assert!(
        v["answer"].as_str().unwrap().contains("1,420 metres"),
        "{}",
        v["answer"]
    );
    assert!(v["sources"].as_array().unwrap().len() >= 6);
}

// ---------------------------------------------------------------------------------------
// citations and grounding

#[test]
fn cite_marks_the_answer_and_lists_cited_sources_first() {
    let dir = docs();
    let out = synthkit()
        .args(["ask", QUESTION, "--cite", "-q"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = stdout_of(&out);
    let cited_answer = MIRROR.replace("snow.", "snow [1].");
    assert!(text.starts_with(&cited_answer), "{text}");
    assert!(text.contains("Sources:\n  [1] "), "{text}");
    assert!(text.contains("maintenance.md#1"), "{text}");
    assert!(
        text.contains("(2 other retrieved chunks not cited"),
        "{text}"
    );

    // Streamed, the same bytes.
    let streamed = synthkit()
        .args(["ask", QUESTION, "--cite", "-q", "--stream"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(stdout_of(&streamed), text);

    let out = synthkit()
        .args(["ask", QUESTION, "--cite", "-q", "--json"])
        .arg(dir.path())
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(v["answer"], cited_answer);
    assert_eq!(v["citations"][0]["marker"], 1);
    let cited = v["citations"][0]["node_ids"][0].as_str().unwrap();
    assert!(cited.ends_with("maintenance.md#1"), "{v}");
    assert_eq!(v["sources"][0]["id"], cited);
    assert_eq!(v["sources"][0]["citation"], 1);
    assert_eq!(v["citations_removed"], serde_json::json!([]));
    assert_eq!(v["grounded"], true);
}

#[test]
fn an_off_topic_question_is_not_answered_from_the_documents() {
    let dir = docs();
    let out = synthkit()
        .args(["ask", "Who won the 1998 FIFA World Cup?", "--json", "-q"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let v = json_of(&out);
    assert_eq!(
        v["answer"],
        "(no answer found: no passage matches enough of the question)"
    );
    assert_eq!(v["grounded"], false);
    assert!(
        v["sources"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["cited"] == false)
    );
    let text = stdout_of(
        &synthkit()
            .args(["ask", "Who won the 1998 FIFA World Cup?", "-q"])
            .arg(dir.path())
            .output()
            .unwrap(),
    );
    assert!(
        text.contains("No source was cited (3 chunks retrieved"),
        "{text}"
    );
}
