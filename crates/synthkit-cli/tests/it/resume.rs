//! Kill and resume: a 200-chunk `summarize` (tree_summarize) against a slow loopback
//! OpenAI-compatible server, with `--cache`, is killed with SIGKILL part-way and run
//! again. The rerun must give the uninterrupted run's answer while making only the calls
//! the killed run had not finished: no prompt is sent twice, except those in flight at
//! the kill (at most `--concurrency` of them).
//!
//! The kill comes at a fixed point, with no sleep: the server lets [`KILL_AFTER`] calls
//! through, then holds every later request unanswered and tells the test each time one
//! starts waiting. Once `--concurrency` requests are held, the binary has nothing left
//! that it could send or finish, so it is killed there: exactly `KILL_AFTER` answered and
//! `--concurrency` in flight, whatever the machine's speed. Waits for the binary to end
//! are events too (its stderr reaching end of file), not polling.
//!
//! Everything stays on 127.0.0.1; every wait is bounded.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::routing::post;
use serde_json::{Value, json};

use crate::common::spawn_synthkit;

const NODES: usize = 200;
const CONCURRENCY: usize = 4;
/// How long the server takes to answer: 20 to 50 ms, by prompt (so calls in flight
/// finish at different times, as with a real server).
const LATENCY_MS: std::ops::RangeInclusive<u64> = 20..=50;
/// The killed run's server answers this many calls, then holds the rest.
const KILL_AFTER: usize = 60;
/// How long a run of the binary may go on before the test calls it hung: a safety net
/// that no healthy run comes near (a run takes seconds), not a bound on its speed.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// What the test hears about, from the server or from a run of the binary.
enum Event {
    /// This many requests are now held at the server's gate, unanswered.
    Held(usize),
    /// The binary closed its stderr (it ended); what it wrote there.
    Exited(String),
}

/// What the server saw.
struct Seen {
    /// Requests received, by prompt (the request's `messages`, as JSON).
    by_prompt: Mutex<HashMap<String, usize>>,
    received: AtomicUsize,
    answered: AtomicUsize,
    /// One permit per answer the server may still give; requests past them wait here.
    gate: tokio::sync::Semaphore,
    held: AtomicUsize,
    events: Mutex<Sender<Event>>,
}

impl Seen {
    fn prompts(&self) -> HashMap<String, usize> {
        self.by_prompt.lock().unwrap().clone()
    }
}

/// A slow OpenAI-compatible chat server: answers `Summary <hash of the prompt>.` after
/// [`LATENCY_MS`], counting requests per prompt. Stops when dropped.
struct Server {
    server: synthkit_testkit::Server,
    seen: Arc<Seen>,
}

impl Server {
    /// A server that answers every request.
    fn start() -> Self {
        Self::gated(tokio::sync::Semaphore::MAX_PERMITS, channel().0)
    }

    /// A server that answers `answers` requests and holds the rest until
    /// [`Server::open`], sending [`Event::Held`] to `events` as each one starts waiting.
    fn gated(answers: usize, events: Sender<Event>) -> Self {
        let seen = Arc::new(Seen {
            by_prompt: Mutex::default(),
            received: AtomicUsize::new(0),
            answered: AtomicUsize::new(0),
            gate: tokio::sync::Semaphore::new(answers),
            held: AtomicUsize::new(0),
            events: Mutex::new(events),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .with_state(Arc::clone(&seen));
        Self {
            server: synthkit_testkit::Server::start(app),
            seen,
        }
    }

    fn base_url(&self) -> &str {
        &self.server.base
    }

    /// Lets every request through from now on (held ones included).
    fn open(&self) {
        self.seen.gate.add_permits(1 << 20);
    }
}

/// FNV-1a, 64 bits: a stable hash for the answers.
fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

async fn chat(State(seen): State<Arc<Seen>>, Json(body): Json<Value>) -> Json<Value> {
    let prompt = body["messages"].to_string();
    seen.received.fetch_add(1, Ordering::SeqCst);
    *seen
        .by_prompt
        .lock()
        .unwrap()
        .entry(prompt.clone())
        .or_default() += 1;
    let permit = match seen.gate.try_acquire() {
        Ok(permit) => permit,
        Err(_) => {
            let held = seen.held.fetch_add(1, Ordering::SeqCst) + 1;
            let _ = seen.events.lock().unwrap().send(Event::Held(held));
            seen.gate.acquire().await.unwrap()
        }
    };
    permit.forget();
    let (low, high) = (*LATENCY_MS.start(), *LATENCY_MS.end());
    let latency = low + fnv(&prompt) % (high - low + 1);
    tokio::time::sleep(Duration::from_millis(latency)).await;
    seen.answered.fetch_add(1, Ordering::SeqCst);
    Json(json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": format!("Summary {:016x}.", fnv(&prompt))},
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": prompt.len() / 4, "completion_tokens": 8, "total_tokens": prompt.len() / 4 + 8}
    }))
}

/// 200 nodes of ~800 common words each: with a 1024-token window (956 for the prompt),
/// tree_summarize packs them into ~206 leaf prompts.
fn write_nodes(path: &Path) {
    const WORDS: [&str; 32] = [
        "the", "river", "stone", "light", "city", "market", "winter", "garden", "north", "letter",
        "window", "music", "bridge", "forest", "paper", "engine", "harbor", "silver", "morning",
        "road", "school", "tower", "field", "summer", "office", "island", "coffee", "train",
        "valley", "story", "glass", "water",
    ];
    let mut state: u64 = 42;
    let mut lines = String::new();
    for i in 0..NODES {
        let mut text = format!("Part {i}.");
        for _ in 0..800 {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            text.push(' ');
            text.push_str(WORDS[(state >> 59) as usize]);
        }
        text.push('.');
        lines.push_str(&json!({"id": format!("n{i:03}"), "text": text}).to_string());
        lines.push('\n');
    }
    std::fs::write(path, lines).unwrap();
}

fn command(server: &Server, nodes: &Path, cache: Option<&Path>, out: &Path) -> Command {
    let mut cmd = spawn_synthkit();
    cmd.args(["summarize", "--nodes"])
        .arg(nodes)
        .args(["--llm", "openai", "--base-url", server.base_url()])
        .args(["--model", "loopback", "--context-window", "1024"])
        .args(["--num-output", "64", "--timeout", "20"])
        // Over 200 calls: past the size a run starts without asking (issue 23).
        .arg("--yes")
        .args([
            "--concurrency",
            &CONCURRENCY.to_string(),
            "--quiet",
            "--json",
        ])
        .stdin(Stdio::null())
        .stdout(File::create(out).unwrap())
        .stderr(Stdio::piped());
    if let Some(c) = cache {
        cmd.arg("--cache").arg(c);
    }
    cmd
}

/// Reads `child`'s stderr to its end on a thread, then sends it to `events` as
/// [`Event::Exited`]: the end of the file is the child ending.
fn watch(child: &mut Child, events: Sender<Event>) {
    let mut stderr = child.stderr.take().expect("stderr is piped");
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
        let _ = events.send(Event::Exited(text));
    });
}

/// The next event before `deadline`; past it, kills `child` and fails with `what` (and
/// what the child wrote to its stderr, once the kill has closed it).
fn next_event(events: &Receiver<Event>, deadline: Instant, child: &mut Child, what: &str) -> Event {
    if let Ok(event) = events.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        return event;
    }
    let _ = child.kill();
    let _ = child.wait();
    let mut stderr = String::new();
    while let Ok(event) = events.recv_timeout(Duration::from_secs(5)) {
        if let Event::Exited(text) = event {
            stderr = text;
            break;
        }
    }
    panic!("{what} within {RUN_TIMEOUT:?}; its stderr:\n{stderr}");
}

/// Waits for `child` to end, at most [`RUN_TIMEOUT`] (killing it past that); returns its
/// status and stderr.
fn wait(child: &mut Child) -> (ExitStatus, String) {
    let (tx, events) = channel();
    watch(child, tx);
    let deadline = Instant::now() + RUN_TIMEOUT;
    loop {
        if let Event::Exited(stderr) =
            next_event(&events, deadline, child, "synthkit did not finish")
        {
            return (child.wait().unwrap(), stderr);
        }
    }
}

/// Runs to completion; returns the JSON report.
fn run(mut cmd: Command, out: &Path) -> Value {
    let mut child = cmd.spawn().unwrap();
    let (status, stderr) = wait(&mut child);
    assert!(status.success(), "synthkit failed ({status}): {stderr}");
    serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap()
}

fn calls(report: &Value, field: &str) -> usize {
    report["usage"][field]
        .as_u64()
        .unwrap_or_else(|| panic!("no usage.{field} in {report}")) as usize
}

#[test]
fn a_killed_run_resumes_from_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = dir.path().join("nodes.jsonl");
    write_nodes(&nodes);
    let out = dir.path().join("out.json");
    let db = dir.path().join("cache.sqlite");

    // The reference: one uninterrupted run, no cache, its own server.
    let reference = Server::start();
    let expected = run(command(&reference, &nodes, None, &out), &out);
    let total = calls(&expected, "calls");
    let reference_prompts = reference.seen.prompts();
    assert_eq!(reference.seen.received.load(Ordering::SeqCst), total);
    assert!(
        total > NODES,
        "{total} calls: expected one per node and more"
    );
    assert_eq!(reference_prompts.len(), total, "a prompt was sent twice");
    drop(reference);

    // The killed run: killed once all its calls in flight are held at the server, after
    // KILL_AFTER answers.
    let (tx, events) = channel();
    let server = Server::gated(KILL_AFTER, tx.clone());
    let mut child = command(&server, &nodes, Some(&db), &out).spawn().unwrap();
    watch(&mut child, tx);
    let deadline = Instant::now() + RUN_TIMEOUT;
    loop {
        match next_event(
            &events,
            deadline,
            &mut child,
            "the server held too few calls",
        ) {
            Event::Held(n) if n == CONCURRENCY => break,
            Event::Held(_) => {}
            Event::Exited(stderr) => panic!("synthkit ended before it could be killed: {stderr}"),
        }
    }
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert!(!status.success());
    // Nothing was on its way: every call in flight was held, so the counts are final.
    let received_before = server.seen.received.load(Ordering::SeqCst);
    let answered_before = server.seen.answered.load(Ordering::SeqCst);
    assert_eq!(answered_before, KILL_AFTER);
    assert_eq!(received_before, KILL_AFTER + CONCURRENCY);
    assert!(
        received_before < total,
        "the killed run finished everything"
    );
    server.open();

    // The rerun, to completion, with the same cache and the same server.
    let resumed = run(command(&server, &nodes, Some(&db), &out), &out);
    let received_total = server.seen.received.load(Ordering::SeqCst);
    let rerun_calls = received_total - received_before;
    let cached = calls(&resumed, "cached_calls");
    let new = calls(&resumed, "new_calls");

    assert_eq!(resumed["answer"], expected["answer"]);
    assert_eq!(calls(&resumed, "calls"), total);
    assert_eq!(cached + new, total);
    assert_eq!(
        new, rerun_calls,
        "new calls reported vs calls the server got"
    );
    // Everything answered before the kill was stored, but for replies still on their
    // way when the process died (at most one per call in flight).
    assert!(
        cached + CONCURRENCY >= answered_before,
        "cached {cached}, answered before the kill {answered_before}"
    );
    // Over both runs the server saw exactly the reference's prompts, each once, but for
    // those in flight at the kill.
    let prompts = server.seen.prompts();
    assert_eq!(
        prompts.keys().collect::<std::collections::BTreeSet<_>>(),
        reference_prompts.keys().collect(),
        "the resumed job sent other prompts than the uninterrupted one"
    );
    let repeats: usize = prompts.values().map(|n| n - 1).sum();
    assert!(
        repeats <= CONCURRENCY,
        "{repeats} prompts were sent again (at most {CONCURRENCY} were in flight)"
    );
    assert_eq!(received_total, total + repeats);

    // A third run: everything from the cache.
    let again = run(command(&server, &nodes, Some(&db), &out), &out);
    assert_eq!(server.seen.received.load(Ordering::SeqCst), received_total);
    assert_eq!(again["answer"], expected["answer"]);
    assert_eq!(calls(&again, "cached_calls"), total);
    assert_eq!(calls(&again, "new_calls"), 0);
    drop(server);

    eprintln!(
        "resume: {total} calls in all; killed after {answered_before} answered \
         ({received_before} received); rerun: {cached} cached, {new} new calls; \
         {repeats} prompts sent twice"
    );
}

/// `--cache` with the offline backend: the second run is answered from the cache; a cache
/// path that cannot be opened is a usage error that names the path.
#[test]
fn the_extractive_backend_is_cached_too_and_bad_paths_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("notes.md");
    let text = (0..40)
        .map(|i| format!("Sentence {i} says the mirror is cleaned every {i} weeks."))
        .collect::<Vec<_>>()
        .join(" ");
    std::fs::write(&doc, text).unwrap();
    let db = dir.path().join("c.db");
    let out = dir.path().join("out.json");
    let cmd = |cache: &Path| {
        let mut cmd = spawn_synthkit();
        cmd.args([
            "summarize",
            "--mode",
            "tree_summarize",
            "--chunk-size",
            "64",
        ])
        .arg(&doc)
        .arg("--cache")
        .arg(cache)
        .args([
            "--llm",
            "extractive",
            "--context-window",
            "600",
            "--num-output",
            "48",
            "--json",
        ])
        .stdin(Stdio::null())
        .stdout(File::create(&out).unwrap())
        .stderr(Stdio::piped());
        cmd
    };
    let first = run(cmd(&db), &out);
    let n = calls(&first, "calls");
    assert!(n > 1, "{first}");
    assert_eq!(calls(&first, "new_calls"), n);

    let mut child = cmd(&db).spawn().unwrap();
    let (status, stderr) = wait(&mut child);
    assert!(status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("response cache: {n} cached, 0 new calls")),
        "{stderr}"
    );
    let second: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(second["answer"], first["answer"]);
    assert_eq!(calls(&second, "cached_calls"), n);

    let bad = dir.path().join("no/such/folder/c.db");
    let mut child = cmd(&bad).spawn().unwrap();
    let (status, stderr) = wait(&mut child);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot open cache {}: ", bad.display())),
        "{stderr}"
    );
}
