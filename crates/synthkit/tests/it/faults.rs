//! Fault injection: `RetryModel<OpenAiModel>` and a real `Synthesizer` against a loopback
//! server that misbehaves on cue.
//!
//! Each test starts its own axum server on 127.0.0.1:0 (on its own thread and runtime)
//! speaking the OpenAI chat completions API. The server follows a script: the n-th request
//! it receives gets the n-th fault, and every request past the script gets a good answer.
//! Tests check that transient faults are retried until the job completes (and that the
//! server saw exactly the expected number of requests), that permanent faults fail with
//! the right typed `ModelError` without a retry, that a stream cut after its first delta
//! is an error and never a complete-looking answer, and that the API key never shows.
//!
//! Time is tokio's and paused, and every harness holds the clock (`clock::Hold`: no
//! auto-advance while the client waits for the loopback server), so the clock moves only
//! when a test moves it: the retry layer's hook moves it on by each wait the layer asks
//! for (backoff, Retry-After), and the hang test by the client's timeout once the hung
//! request is the only thing in flight. Retry waits and timeouts cost no wall time, and
//! no timeout can fire early while a request is on its way.
//!
//! Run with `--nocapture` to see one `FAULT | ...` line per case (fault, outcome,
//! requests seen).

use crate::common::fixtures::{collect, delta_text};
use crate::common::{clock, logs};
use std::collections::HashSet;
use std::io;
use synthkit_testkit::{openai, server};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::Response;
use axum::routing::post;
use futures::StreamExt;
use serde_json::{Value, json};
use synthkit::backend::openai::{OpenAiConfig, OpenAiModel};
use synthkit::layer::retry::{RetryEvent, RetryModel, RetryPolicy};
use synthkit::model::{LanguageModel, ModelError, ModelRequest, StreamEvent};
use synthkit::observe::CallReport;
use synthkit::prompt::{ChatMessage, RenderedPrompt, Role};

use clock::Hold;
use server::Server;
use synthkit::{Concurrency, Node, Observer, ResponseMode, SynthError, Synthesizer};
use tokio::sync::Notify;
use tokio::time::Instant;

/// A key that appears nowhere else, so any occurrence in output is a leak.
const KEY: &str = "sk-faults-UNIQUE-7f3a9c1e5b2d";
/// The client's timeout in the hang test.
const TIMEOUT: Duration = Duration::from_millis(300);
/// The client's timeout everywhere else: the held clock never gets that far.
const NEVER: Duration = Duration::from_secs(3600);
/// The size of the enormous reply's content.
const HUGE: usize = 20 * 1024 * 1024;
/// Requests a fault-free tree_summarize over [`nodes`] makes: three leaf summaries, then
/// the final one (checked by `baseline`).
const BASELINE: usize = 4;
/// The arrival number of the final tree_summarize call (after every leaf).
const FINAL: usize = BASELINE - 1;

// ---------------------------------------------------------------- the fault server

/// What the server does with one request.
#[derive(Debug, Clone)]
enum Fault {
    /// A good answer (JSON, or SSE when the request asks to stream).
    Ok,
    /// An HTTP error status with a body (and `Retry-After`, if given).
    Status {
        status: u16,
        retry_after: Option<&'static str>,
        body: String,
    },
    /// Never answer (the handler waits until the test drops the server).
    Hang,
    /// Send part of the body (one delta of a stream, half of a JSON body), then reset.
    DropMidBody,
    /// Send the headers, then reset before any byte of the body.
    DropBeforeBody,
    /// A 200 whose body is not JSON (or a stream whose chunk is not).
    Malformed,
    /// A 200 with `"choices": []`.
    EmptyChoices,
    /// A 200 whose body has invalid UTF-8 bytes in the content.
    InvalidUtf8,
    /// A good answer whose content is this many bytes.
    Huge(usize),
}

fn status(status: u16, body: &str) -> Fault {
    Fault::Status {
        status,
        retry_after: None,
        body: body.to_string(),
    }
}

#[derive(Default)]
struct Script {
    faults: Vec<Fault>,
    /// Faults for every request from this arrival number on (instead of good answers).
    forever: Option<(usize, Fault)>,
    count: AtomicUsize,
    bodies: Mutex<Vec<Value>>,
    /// Requests that got [`Fault::Hang`] so far; `hang` is told of each.
    hung: AtomicUsize,
    hang: Notify,
}

impl Script {
    fn fault(&self, n: usize) -> Fault {
        if let Some(f) = self.faults.get(n) {
            return f.clone();
        }
        match &self.forever {
            Some((from, f)) if n >= *from => f.clone(),
            _ => Fault::Ok,
        }
    }
}

fn usage() -> Value {
    json!({"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13})
}

fn ok_json(text: &str) -> String {
    openai::chat_reply("fault-model", text, "stop", &usage()).to_string()
}

fn chunk(content: &str) -> String {
    let c = json!({"object": "chat.completion.chunk",
                   "choices": [{"index": 0, "finish_reason": null, "delta": {"content": content}}]});
    format!("data: {c}\n\n")
}

fn reply(stream: bool, body: impl Into<Body>) -> Response {
    let ct = if stream {
        "text/event-stream"
    } else {
        "application/json"
    };
    Response::builder()
        .header(header::CONTENT_TYPE, ct)
        .body(body.into())
        .unwrap()
}

fn good(stream: bool, text: &str) -> Response {
    if stream {
        let (a, b) = text.split_at(text.len() / 2);
        openai::chat_stream("fault-model", &[a, b], "stop", &usage())
    } else {
        reply(false, ok_json(text))
    }
}

/// A body that sends `first` and then breaks the connection. The break comes a moment
/// after `first`, so that the client has read `first` (a reset arriving with unread data
/// would discard it, turning the fault into a cut before any data). The moment is real
/// time on the server's runtime: the client waits for it on the held clock, and no test
/// can tell the server when the client's reqwest has read the bytes.
fn broken(first: Option<String>) -> Body {
    let first: Vec<Result<Bytes, io::Error>> =
        first.into_iter().map(|f| Ok(Bytes::from(f))).collect();
    let reset = futures::stream::once(async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        Err(io::Error::new(
            io::ErrorKind::ConnectionReset,
            "fault: reset",
        ))
    });
    Body::from_stream(futures::stream::iter(first).chain(reset))
}

async fn handle(State(script): State<Arc<Script>>, body: Bytes) -> Response {
    let n = script.count.fetch_add(1, Ordering::SeqCst);
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let stream = request.get("stream") == Some(&Value::Bool(true));
    script.bodies.lock().unwrap().push(request);
    match script.fault(n) {
        Fault::Ok => good(stream, &format!("answer {n}")),
        Fault::Status {
            status,
            retry_after,
            body,
        } => {
            let mut r = Response::builder()
                .status(status)
                .header(header::CONTENT_TYPE, "application/json");
            if let Some(after) = retry_after {
                r = r.header(header::RETRY_AFTER, after);
            }
            r.body(Body::from(body)).unwrap()
        }
        Fault::Hang => {
            script.hung.fetch_add(1, Ordering::SeqCst);
            script.hang.notify_one();
            std::future::pending::<()>().await;
            good(stream, "too late")
        }
        Fault::DropMidBody => {
            let first = if stream {
                chunk("Hel")
            } else {
                let full = ok_json("a reply that never arrives whole");
                full[..full.len() / 2].to_string()
            };
            reply(stream, broken(Some(first)))
        }
        Fault::DropBeforeBody => reply(stream, broken(None)),
        Fault::Malformed => {
            if stream {
                reply(true, "data: {\"choices\": [oops\n\n")
            } else {
                reply(false, "{\"choices\": [{\"message\": oops")
            }
        }
        Fault::EmptyChoices => reply(
            stream,
            if stream {
                "data: {\"choices\":[],\"object\":\"chat.completion.chunk\"}\n\ndata: [DONE]\n\n"
                    .to_string()
            } else {
                r#"{"choices":[],"object":"chat.completion"}"#.to_string()
            },
        ),
        Fault::InvalidUtf8 => {
            let mut bytes = br#"{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"bad "#.to_vec();
            bytes.extend_from_slice(b"\xff\xfe\xc3\x28");
            bytes.extend_from_slice(br#""}}]}"#);
            if stream {
                let mut sse = b"data: ".to_vec();
                sse.extend_from_slice(&bytes);
                sse.extend_from_slice(b"\n\n");
                reply(true, sse)
            } else {
                reply(false, bytes)
            }
        }
        Fault::Huge(size) => good(stream, &"lorem ipsum ".repeat(size / 12)),
    }
}

/// A fault server with its script. While it lives the paused clock is held.
struct Harness {
    server: Server,
    script: Arc<Script>,
    _clock: Hold,
}

impl Harness {
    /// The n-th request gets `faults[n]`; later ones a good answer.
    fn new(faults: Vec<Fault>) -> Self {
        Self::with_script(Script {
            faults,
            ..Script::default()
        })
    }

    /// Every request gets `fault`.
    fn always(fault: Fault) -> Self {
        Self::with_script(Script {
            forever: Some((0, fault)),
            ..Script::default()
        })
    }

    fn with_script(script: Script) -> Self {
        let script = Arc::new(script);
        let app = Router::new()
            .route("/v1/chat/completions", post(handle))
            .with_state(Arc::clone(&script));
        Self {
            server: Server::start(app),
            script,
            _clock: Hold::new(),
        }
    }

    fn config(&self) -> OpenAiConfig {
        OpenAiConfig::new("fault-model")
            .with_base_url(&self.server.base)
            .with_api_key(KEY)
            .with_timeout(NEVER)
            .with_context_window(600)
            .with_num_output(64)
    }

    fn model(&self) -> RetryModel<OpenAiModel> {
        retrying(OpenAiModel::new(self.config()).unwrap())
    }

    fn requests(&self) -> usize {
        self.script.count.load(Ordering::SeqCst)
    }

    /// Whether some request body was sent twice (a retry resends the same body).
    fn any_resent(&self) -> bool {
        let bodies = self.script.bodies.lock().unwrap();
        let distinct: HashSet<String> = bodies.iter().map(Value::to_string).collect();
        distinct.len() < bodies.len()
    }

    async fn synthesize(&self) -> Result<synthkit::Response, SynthError> {
        synthesizer(self).synthesize(QUERY, nodes()).await
    }

    async fn stream_finish(&self) -> Result<synthkit::Response, SynthError> {
        synthesizer(self)
            .stream(QUERY, nodes())
            .await?
            .finish()
            .await
    }
}

fn policy() -> RetryPolicy {
    RetryPolicy::default()
        .with_max_attempts(4)
        .with_initial_backoff(Duration::from_millis(20))
        .with_max_backoff(Duration::from_millis(100))
        .with_max_elapsed(Duration::from_secs(10))
}

/// `model` behind the retry layer, whose every wait is skipped on the held clock.
fn retrying(model: OpenAiModel) -> RetryModel<OpenAiModel> {
    RetryModel::new(model, policy()).on_retry(advance_clock)
}

/// Moves the held clock on by the wait the retry layer is about to sleep (the layer
/// sleeps on tokio's clock), so the retry comes at once in wall time and after the wait
/// in tokio's. The hook runs just before the sleep starts, in the same poll, so the
/// spawned advance always comes after the sleep's deadline is set.
///
/// The advance is the wait rounded up to whole milliseconds: tokio's timers tick in
/// milliseconds and round deadlines up, so a jittered 7.3 ms wait fires only once the
/// clock has moved 8 ms. Every move of the clock here is whole milliseconds, so it stays
/// on tick boundaries and that is always enough.
fn advance_clock(retry: &RetryEvent<'_>) {
    let ms = retry.wait.as_nanos().div_ceil(1_000_000);
    let wait = Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX));
    tokio::spawn(async move { tokio::time::advance(wait).await });
}

const QUERY: &str = "What do the notes say?";

/// Three nodes, each too big to share a summary prompt with another.
fn nodes() -> Vec<Node> {
    (0..3)
        .map(|i| {
            let text = format!("Note {i}. ") + &format!("fact {i} is recorded here. ").repeat(50);
            Node::new(format!("n{i}"), text)
        })
        .collect()
}

fn synthesizer(h: &Harness) -> Synthesizer {
    synthesizer_over(h.model(), None)
}

fn synthesizer_over(
    model: RetryModel<OpenAiModel>,
    observer: Option<Arc<dyn Observer>>,
) -> Synthesizer {
    // The leaves run at once (no first call alone for calibration): the harness relies on
    // the hung leaf being in flight beside the others.
    let mut builder = Synthesizer::builder(Arc::new(model))
        .mode(ResponseMode::TreeSummarize)
        .concurrency(Concurrency::limit(4))
        .calibrate_from_usage(false);
    if let Some(observer) = observer {
        builder = builder.observer(observer);
    }
    builder.build().unwrap()
}

fn request() -> ModelRequest {
    crate::common::fixtures::qa_request(
        RenderedPrompt::Chat(vec![ChatMessage::new(Role::User, "Say hi")]),
        3,
        16,
        Some("Say hi"),
    )
}

fn model_error(e: &SynthError) -> &ModelError {
    match e {
        SynthError::Model { source, .. } => source,
        other => panic!("expected SynthError::Model, got {other:?}"),
    }
}

fn report(fault: &str, outcome: &str, requests: usize) {
    println!("FAULT | {fault} | {outcome} | {requests}");
}

/// The variant name of an error, from its `Debug`.
fn kind(e: &impl std::fmt::Debug) -> String {
    let d = format!("{e:?}");
    d.split([' ', '(', '{'])
        .next()
        .unwrap_or_default()
        .to_string()
}

// ---------------------------------------------------------------- baseline

#[tokio::test(start_paused = true)]
async fn baseline() {
    let h = Harness::new(vec![]);
    let r = h.synthesize().await.unwrap();
    assert_eq!(h.requests(), BASELINE);
    assert_eq!(r.text, format!("answer {FINAL}"));
    assert!(!h.any_resent());
    let h = Harness::new(vec![]);
    let r = h.stream_finish().await.unwrap();
    assert_eq!(r.text, format!("answer {FINAL}"));
    assert_eq!(h.requests(), BASELINE);
    report(
        "none (tree_summarize, 3 leaves + final)",
        "completed",
        h.requests(),
    );
}

// ---------------------------------------------------------------- transient faults: retried

#[tokio::test(start_paused = true)]
async fn rate_limited_with_retry_after_then_ok() {
    let limited = || Fault::Status {
        status: 429,
        retry_after: Some("1"),
        body: r#"{"error":{"message":"slow down","type":"rate_limit"}}"#.into(),
    };
    // The layer waits exactly the Retry-After (longer than any backoff of `policy`), on
    // tokio's clock: paused, so the second it stands for costs no wall time.
    // Direct.
    let h = Harness::new(vec![limited()]);
    let start = Instant::now();
    let c = h.model().complete(&request()).await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    assert_eq!(c.text, "answer 1");
    assert_eq!(h.requests(), 2);
    report(
        "429 + Retry-After: 1, then ok (complete)",
        "completed after 1 retry, waited 1 s",
        h.requests(),
    );

    // Through the synthesizer: one leaf is rate limited.
    let h = Harness::new(vec![limited()]);
    let start = Instant::now();
    let r = h.synthesize().await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    assert_eq!(r.text, format!("answer {}", BASELINE));
    assert_eq!(h.requests(), BASELINE + 1);
    report(
        "429 + Retry-After: 1 on a leaf (synth)",
        "completed after 1 retry",
        h.requests(),
    );

    // The streamed final call is rate limited.
    let mut faults = vec![Fault::Ok; FINAL];
    faults.push(limited());
    let h = Harness::new(faults);
    let start = Instant::now();
    let r = h.stream_finish().await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    assert_eq!(r.text, format!("answer {}", BASELINE));
    assert_eq!(h.requests(), BASELINE + 1);
    report(
        "429 + Retry-After: 1 on the streamed final call (synth stream)",
        "completed after 1 retry",
        h.requests(),
    );
}

#[tokio::test(start_paused = true)]
async fn server_errors_then_ok() {
    // Direct: 500, 502, 503, then ok.
    let h = Harness::new(vec![
        status(500, "boom"),
        status(502, "bad gateway"),
        status(503, "unavailable"),
    ]);
    let c = h.model().complete(&request()).await.unwrap();
    assert_eq!(c.text, "answer 3");
    assert_eq!(h.requests(), 4);
    report(
        "500, 502, 503, then ok (complete)",
        "completed after 3 retries",
        h.requests(),
    );

    // Through the synthesizer: the first three arrivals (the three concurrent leaves) fail.
    let h = Harness::new(vec![
        status(500, "boom"),
        status(502, "bad gateway"),
        status(503, "unavailable"),
    ]);
    let r = h.synthesize().await.unwrap();
    assert_eq!(r.text, format!("answer {}", BASELINE + 2));
    assert_eq!(h.requests(), BASELINE + 3);
    report(
        "500/502/503 on the three leaves (synth)",
        "completed after 3 retries",
        h.requests(),
    );

    // Streamed final call: 503 twice.
    let mut faults = vec![Fault::Ok; FINAL];
    faults.extend([status(503, "x"), status(502, "y")]);
    let h = Harness::new(faults);
    let r = h.stream_finish().await.unwrap();
    assert_eq!(r.text, format!("answer {}", BASELINE + 1));
    assert_eq!(h.requests(), BASELINE + 2);
    report(
        "503, 502 on the streamed final call (synth stream)",
        "completed after 2 retries",
        h.requests(),
    );
}

#[tokio::test(start_paused = true)]
async fn persistent_server_errors_give_up_after_max_attempts() {
    let h = Harness::always(status(503, "still down"));
    let e = h.model().complete(&request()).await.unwrap_err();
    assert!(matches!(e, ModelError::Server { status: 503, .. }), "{e:?}");
    assert_eq!(h.requests(), 4);
    report(
        "503 forever (complete)",
        "typed error Server{503} after 4 attempts",
        h.requests(),
    );

    let h = Harness::always(status(503, "still down"));
    let e = h.synthesize().await.unwrap_err();
    assert!(
        matches!(model_error(&e), ModelError::Server { status: 503, .. }),
        "{e:?}"
    );
    // Every leaf in flight made at most 4 attempts; the first to give up ends the job.
    assert!(
        h.requests() >= 4 && h.requests() <= 3 * 4,
        "{}",
        h.requests()
    );
    report(
        "503 forever (synth)",
        "typed error SynthError::Model(Server{503})",
        h.requests(),
    );
}

/// Counts the calls of a synthesis that have finished.
#[derive(Default)]
struct Finished {
    calls: AtomicUsize,
    changed: Notify,
}

impl Observer for Finished {
    fn call_finished(&self, _report: &CallReport<'_>) {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_one();
    }
}

/// Runs `call` on the held clock and lets each hung request time out. Once the server
/// holds a request it will never answer and `finished` has seen `others` calls finish
/// (those it did answer, which the client has now read), the hung request is the only
/// thing the client still waits for: moving the clock on by [`TIMEOUT`] fires its timeout
/// and no other.
async fn timing_out_hangs<T>(
    h: &Harness,
    finished: &Finished,
    others: usize,
    call: impl Future<Output = T>,
) -> T {
    let script = &h.script;
    tokio::pin!(call);
    let mut timed_out = 0;
    loop {
        let seen = timed_out;
        let only_hung_left = async move {
            while script.hung.load(Ordering::SeqCst) <= seen
                || finished.calls.load(Ordering::SeqCst) < others
            {
                tokio::select! {
                    () = script.hang.notified() => {}
                    () = finished.changed.notified() => {}
                }
            }
        };
        tokio::select! {
            out = &mut call => return out,
            () = only_hung_left => {
                tokio::time::advance(TIMEOUT).await;
                timed_out += 1;
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn hang_past_the_timeout_then_ok() {
    // The server never answers a hung request; the client gives up after TIMEOUT of
    // tokio's (paused) clock, then waits its backoff (at most `policy`'s first ceiling,
    // 20 ms) and retries.
    let h = Harness::new(vec![Fault::Hang]);
    let model = retrying(OpenAiModel::new(h.config().with_timeout(TIMEOUT)).unwrap());
    let start = Instant::now();
    let c = timing_out_hangs(&h, &Finished::default(), 0, model.complete(&request()))
        .await
        .unwrap();
    assert_eq!(c.text, "answer 1");
    assert_eq!(h.requests(), 2);
    let took = start.elapsed();
    assert!(
        took >= TIMEOUT && took <= TIMEOUT + Duration::from_millis(20),
        "{took:?}"
    );
    report(
        "hang (never answered) > 300 ms timeout, then ok (complete)",
        "completed after 1 retry (Timeout)",
        h.requests(),
    );

    // One of the three leaves hangs; the other two finish first.
    let h = Harness::new(vec![Fault::Hang]);
    let finished = Arc::new(Finished::default());
    let synth = synthesizer_over(
        retrying(OpenAiModel::new(h.config().with_timeout(TIMEOUT)).unwrap()),
        Some(finished.clone()),
    );
    let r = timing_out_hangs(&h, &finished, 2, synth.synthesize(QUERY, nodes()))
        .await
        .unwrap();
    assert!(r.text.starts_with("answer "));
    assert_eq!(h.requests(), BASELINE + 1);
    report(
        "hang on a leaf (synth)",
        "completed after 1 retry",
        h.requests(),
    );

    // The streamed final call hangs before its headers (after the three leaves).
    let mut faults = vec![Fault::Ok; FINAL];
    faults.push(Fault::Hang);
    let h = Harness::new(faults);
    let finished = Arc::new(Finished::default());
    let synth = synthesizer_over(
        retrying(OpenAiModel::new(h.config().with_timeout(TIMEOUT)).unwrap()),
        Some(finished.clone()),
    );
    let stream_finish = async { synth.stream(QUERY, nodes()).await?.finish().await };
    let r = timing_out_hangs(&h, &finished, FINAL, stream_finish)
        .await
        .unwrap();
    assert_eq!(r.text, format!("answer {}", BASELINE));
    assert_eq!(h.requests(), BASELINE + 1);
    report(
        "hang on the streamed final call (synth stream)",
        "completed after 1 retry",
        h.requests(),
    );
}

#[tokio::test(start_paused = true)]
async fn a_stream_dropped_before_its_first_event_is_retried() {
    // Nothing reached the caller, so the layer retries.
    let h = Harness::new(vec![Fault::DropBeforeBody]);
    let events = collect(h.model().stream(&request()).await.unwrap()).await;
    let text = delta_text(&events);
    assert_eq!(text, "answer 1");
    assert!(matches!(events.last(), Some(Ok(StreamEvent::Done { .. }))));
    assert_eq!(h.requests(), 2);
    report(
        "SSE reset before the first event (stream)",
        "completed after 1 retry (Incomplete)",
        h.requests(),
    );

    let mut faults = vec![Fault::Ok; FINAL];
    faults.push(Fault::DropBeforeBody);
    let h = Harness::new(faults);
    let r = h.stream_finish().await.unwrap();
    assert_eq!(r.text, format!("answer {}", BASELINE));
    assert_eq!(h.requests(), BASELINE + 1);
    report(
        "SSE reset before the first event (synth stream)",
        "completed after 1 retry",
        h.requests(),
    );
}

/// A JSON reply whose connection breaks: no panic, and either a retry that completes or a
/// typed error. Today it is a typed `Malformed` without retry: see the ignored test below.
#[tokio::test(start_paused = true)]
async fn a_json_reply_dropped_mid_body_does_not_panic() {
    for (name, fault) in [
        (
            "connection reset before the JSON body",
            Fault::DropBeforeBody,
        ),
        ("connection reset mid JSON body", Fault::DropMidBody),
    ] {
        let h = Harness::new(vec![fault.clone()]);
        let outcome = match h.model().complete(&request()).await {
            Ok(c) => {
                assert_eq!(c.text, "answer 1");
                assert_eq!(h.requests(), 2);
                "completed after 1 retry".to_string()
            }
            Err(e) => {
                assert!(
                    matches!(
                        e,
                        ModelError::Malformed(_)
                            | ModelError::Connection(_)
                            | ModelError::Incomplete(_)
                    ),
                    "{e:?}"
                );
                format!("typed error {}, {} request(s)", kind(&e), h.requests())
            }
        };
        report(&format!("{name} (complete)"), &outcome, h.requests());

        let h = Harness::new(vec![fault]);
        let outcome = match h.synthesize().await {
            Ok(_) => "completed".to_string(),
            Err(e) => format!("typed error SynthError::Model({})", kind(model_error(&e))),
        };
        report(&format!("{name} on a leaf (synth)"), &outcome, h.requests());
    }
}

/// A JSON reply whose connection breaks is a transport failure and is retried (reqwest
/// reports a body cut mid-way as a decode error; the backend maps it to `Connection`).
#[tokio::test(start_paused = true)]
async fn a_json_reply_dropped_mid_body_is_retried() {
    for fault in [Fault::DropBeforeBody, Fault::DropMidBody] {
        let h = Harness::new(vec![fault.clone()]);
        let c = h.model().complete(&request()).await.unwrap();
        assert_eq!(c.text, "answer 1");
        assert_eq!(h.requests(), 2);

        let h = Harness::new(vec![fault]);
        h.synthesize().await.unwrap();
        assert_eq!(h.requests(), BASELINE + 1);
    }
}

// ---------------------------------------------------------------- a stream cut mid-way

#[tokio::test(start_paused = true)]
async fn a_stream_cut_after_its_first_delta_is_an_error_never_an_answer() {
    let h = Harness::new(vec![Fault::DropMidBody]);
    let events = collect(h.model().stream(&request()).await.unwrap()).await;
    assert_eq!(
        format!("{:?}", events.first()),
        format!(
            "{:?}",
            Some(&Ok::<_, ModelError>(StreamEvent::Delta("Hel".into())))
        )
    );
    let last = events.last().unwrap();
    assert!(matches!(last, Err(ModelError::Incomplete(_))), "{last:?}");
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Ok(StreamEvent::Done { .. })))
    );
    assert_eq!(
        h.requests(),
        1,
        "a stream that already gave text is never replayed"
    );
    report(
        "SSE reset after the first delta (stream)",
        "typed error Incomplete, no retry, no Done",
        h.requests(),
    );

    // Through the synthesizer: `finish` fails, with the typed error.
    let mut faults = vec![Fault::Ok; FINAL];
    faults.push(Fault::DropMidBody);
    let h = Harness::new(faults);
    let e = h.stream_finish().await.unwrap_err();
    assert!(
        matches!(model_error(&e), ModelError::Incomplete(_)),
        "{e:?}"
    );
    assert_eq!(h.requests(), BASELINE);
    report(
        "SSE reset after the first delta (synth stream, finish)",
        "typed error SynthError::Model(Incomplete)",
        h.requests(),
    );

    // Polling the deltas: "Hel" arrives, then the error; the stream is not done.
    let mut faults = vec![Fault::Ok; FINAL];
    faults.push(Fault::DropMidBody);
    let h = Harness::new(faults);
    let mut s = synthesizer(&h).stream(QUERY, nodes()).await.unwrap();
    let mut items = Vec::new();
    for _ in 0..100 {
        match s.next().await {
            Some(item) => items.push(item),
            None => break,
        }
    }
    assert!(
        matches!(items.first(), Some(Ok(d)) if d == "Hel"),
        "{items:?}"
    );
    assert!(
        matches!(
            items.last(),
            Some(Err(SynthError::Model {
                source: ModelError::Incomplete(_),
                ..
            }))
        ),
        "{items:?}"
    );
    assert_eq!(s.text(), "Hel");
    // A drained, failed stream never finishes as a response.
    assert!(s.finish().await.is_err());
}

// ---------------------------------------------------------------- permanent faults: no retry

/// Checks that `fault` on every request fails with an error `is` accepts, with one request
/// for the direct call and no body resent by the synthesizer; with `stream`, the same for
/// the synthesizer's streamed final call. Returns the direct error.
async fn permanent(
    name: &str,
    fault: Fault,
    stream: bool,
    is: fn(&ModelError) -> bool,
) -> ModelError {
    let h = Harness::always(fault.clone());
    let e = h.model().complete(&request()).await.unwrap_err();
    assert!(is(&e), "{name}: {e:?}");
    assert!(!e.is_transient());
    assert_eq!(h.requests(), 1, "{name}: retried");
    report(
        &format!("{name} (complete)"),
        &format!("typed error {}, no retry", kind(&e)),
        h.requests(),
    );

    let h = Harness::always(fault.clone());
    let se = h.synthesize().await.unwrap_err();
    assert!(is(model_error(&se)), "{name}: {se:?}");
    assert!(!h.any_resent(), "{name}: the synthesizer's layer retried");
    assert!((1..=3).contains(&h.requests()), "{name}: {}", h.requests());
    report(
        &format!("{name} (synth)"),
        &format!(
            "typed error SynthError::Model({}), no retry",
            kind(model_error(&se))
        ),
        h.requests(),
    );

    if !stream {
        return e;
    }
    // Only the streamed final call fails.
    let mut faults = vec![Fault::Ok; FINAL];
    faults.push(fault);
    let h = Harness::new(faults);
    let se = h.stream_finish().await.unwrap_err();
    assert!(is(model_error(&se)), "{name} (stream): {se:?}");
    assert_eq!(h.requests(), BASELINE, "{name} (stream): retried");
    report(
        &format!("{name} (synth stream)"),
        &format!(
            "typed error SynthError::Model({}), no retry",
            kind(model_error(&se))
        ),
        h.requests(),
    );
    e
}

#[tokio::test(start_paused = true)]
async fn unauthorized_is_never_retried() {
    let e = permanent(
        "401",
        status(401, r#"{"error":{"message":"Invalid API Key","code":401}}"#),
        true,
        |e| matches!(e, ModelError::Auth { status: 401, .. }),
    )
    .await;
    assert!(e.to_string().contains("API key"));
}

#[tokio::test(start_paused = true)]
async fn malformed_json_is_never_retried() {
    permanent("malformed JSON", Fault::Malformed, true, |e| {
        matches!(e, ModelError::Malformed(_))
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn empty_choices_is_never_retried() {
    let e = permanent("empty choices", Fault::EmptyChoices, false, |e| {
        matches!(e, ModelError::Malformed(_))
    })
    .await;
    assert!(e.to_string().contains("no choices"), "{e}");

    // Streamed: chunks without choices then `[DONE]` are a finished, empty reply (servers
    // legitimately send a usage chunk with no choices): one `Done`, no delta, no retry.
    let h = Harness::always(Fault::EmptyChoices);
    let events = collect(h.model().stream(&request()).await.unwrap()).await;
    assert!(
        matches!(events.as_slice(), [Ok(StreamEvent::Done { .. })]),
        "{events:?}"
    );
    assert_eq!(h.requests(), 1);
    report(
        "empty choices + [DONE] (stream)",
        "completed: an empty reply (one Done), no retry",
        h.requests(),
    );
}

/// The synthesizer's streamed final call answers nothing: the response is the
/// empty-response text (a regression test: the fallback once polled a finished stream).
#[tokio::test(start_paused = true)]
async fn an_empty_streamed_final_answer_gives_the_empty_response() {
    let mut faults = vec![Fault::Ok; FINAL];
    faults.push(Fault::EmptyChoices);
    let h = Harness::new(faults);
    let r = h.stream_finish().await.unwrap();
    assert_eq!(r.text, synthkit::synth::DEFAULT_EMPTY_RESPONSE);
    assert_eq!(h.requests(), BASELINE);
    report(
        "empty choices + [DONE] (synth stream)",
        "completed with the empty-response text, no retry",
        h.requests(),
    );
}

#[tokio::test(start_paused = true)]
async fn invalid_utf8_is_never_retried() {
    let e = permanent("invalid UTF-8", Fault::InvalidUtf8, true, |e| {
        matches!(e, ModelError::Malformed(_))
    })
    .await;
    assert!(e.to_string().contains("UTF-8"), "{e}");
}

#[tokio::test(start_paused = true)]
async fn context_too_long_is_never_retried() {
    let body = r#"{"error":{"code":400,"message":"request (3027 tokens) exceeds the available context size (2048 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":3027,"n_ctx":2048}}"#;
    let fault = status(400, body);
    let is = |e: &ModelError| {
        matches!(
            e,
            ModelError::ContextTooLong {
                prompt_tokens: Some(3027),
                context_window: Some(2048),
                ..
            }
        )
    };
    let h = Harness::always(fault.clone());
    let e = h.model().complete(&request()).await.unwrap_err();
    assert!(is(&e), "{e:?}");
    assert_eq!(h.requests(), 1, "retried");
    report(
        "400 context too long (complete)",
        "typed error ContextTooLong, no retry",
        h.requests(),
    );

    // The synthesizer handles a context error itself (it shrinks its budget and re-packs),
    // so its outcome is its own: the model's typed error, or a budget error when the
    // server's count leaves no room. The retry layer never resends (checked above).
    for stream in [false, true] {
        let h = Harness::always(fault.clone());
        let result = if stream {
            h.stream_finish().await
        } else {
            h.synthesize().await
        };
        let e = result.unwrap_err();
        let outcome = match &e {
            SynthError::Model { source, .. } => {
                assert!(is(source), "{e:?}");
                format!("typed error SynthError::Model({})", kind(source))
            }
            SynthError::Budget(b) => format!("typed error SynthError::Budget({})", kind(b)),
            other => panic!("unexpected {other:?}"),
        };
        // Re-packing may send smaller prompts (overlapping pieces can even repeat one),
        // but it is bounded: a few corrections, then the typed error.
        assert!(
            h.requests() < 200,
            "{} requests: re-packing did not stop",
            h.requests()
        );
        let name = if stream { "synth stream" } else { "synth" };
        report(
            &format!("400 context too long, every request ({name})"),
            &format!("{outcome}, no retry"),
            h.requests(),
        );
    }
}

// ---------------------------------------------------------------- an enormous body

#[tokio::test(start_paused = true)]
async fn an_enormous_body_does_not_panic() {
    // Outcome: a typed error, not retried. 20 MB of content is over the default reply cap
    // (`OpenAiConfig::max_reply_bytes`, 8 MiB): reading stops at the cap with
    // `ReplyTooLarge`, which is not transient. However slow the (debug) build reads it,
    // the call cannot turn into a typed `Timeout`: the clock is held.
    let h = Harness::new(vec![Fault::Huge(HUGE)]);
    let e = h.model().complete(&request()).await.unwrap_err();
    assert!(
        matches!(e, ModelError::ReplyTooLarge { limit } if limit == OpenAiConfig::DEFAULT_MAX_REPLY_BYTES),
        "{e:?}"
    );
    assert_eq!(h.requests(), 1);
    report(
        "20 MB content (complete)",
        "typed error ModelError::ReplyTooLarge, no retry",
        h.requests(),
    );

    // Streamed as one 20 MB SSE event: cut at the cap, never taken as complete (the
    // retry layer looks at a stream's first event, so the error comes from `stream`).
    let h = Harness::new(vec![Fault::Huge(HUGE)]);
    let e = match h.model().stream(&request()).await {
        Err(e) => e,
        Ok(s) => collect(s).await.pop().unwrap().unwrap_err(),
    };
    assert!(matches!(e, ModelError::ReplyTooLarge { .. }), "{e:?}");
    assert_eq!(h.requests(), 1);
    report(
        "20 MB content (stream)",
        "typed error ModelError::ReplyTooLarge, no retry",
        h.requests(),
    );

    // With the cap raised above it, the 20 MB reply is read whole, plain and streamed.
    let h = Harness::new(vec![Fault::Huge(HUGE), Fault::Huge(HUGE)]);
    let raised = || {
        let config = h.config().with_max_reply_bytes(32 << 20);
        retrying(OpenAiModel::new(config).unwrap())
    };
    let c = raised().complete(&request()).await.unwrap();
    assert!(c.text.len() >= HUGE - 12, "{}", c.text.len());
    let events = collect(raised().stream(&request()).await.unwrap()).await;
    let len: usize = events
        .iter()
        .map(|e| match e {
            Ok::<_, ModelError>(StreamEvent::Delta(d)) => d.len(),
            _ => 0,
        })
        .sum();
    assert!(len >= HUGE - 12, "{len}");
    assert!(matches!(events.last(), Some(Ok(StreamEvent::Done { .. }))));
    assert_eq!(h.requests(), 2);
    report(
        "20 MB content, cap raised to 32 MiB",
        "completed, 20 MB text, plain and streamed",
        h.requests(),
    );

    // The synthesizer's final answer is enormous: the job fails with the cap's error.
    let mut faults = vec![Fault::Ok; FINAL];
    faults.push(Fault::Huge(HUGE));
    let h = Harness::new(faults);
    let e = h.synthesize().await.unwrap_err();
    assert!(
        matches!(
            &e,
            SynthError::Model {
                source: ModelError::ReplyTooLarge { .. },
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(h.requests(), BASELINE);
    report(
        "20 MB final answer (synth)",
        "typed error SynthError::Model(ReplyTooLarge), no retry",
        h.requests(),
    );
}

// ---------------------------------------------------------------- the key never shows

fn show(shown: &mut Vec<String>, e: &(impl std::fmt::Debug + std::fmt::Display)) {
    shown.push(format!("{e} / {e:?} / {e:#?}"));
}

#[tokio::test(start_paused = true)]
async fn the_api_key_never_appears_in_errors_debug_or_logs() {
    // This test runs on one thread (current-thread runtime): everything it polls logs here.
    let (_guard, logs) = logs::capture();

    let echo = format!(r#"{{"error":{{"message":"invalid key {KEY}","code":0}}}}"#);
    let mut shown: Vec<String> = Vec::new();

    // Errors that echo the key: auth, rate limit and server errors (the latter retried
    // and logged at each retry), a malformed body, and an error object inside a stream.
    let cases = [
        status(401, &echo),
        Fault::Status {
            status: 429,
            retry_after: Some("0"),
            body: echo.clone(),
        },
        status(500, &echo),
        status(400, &echo),
    ];
    for fault in cases {
        let h = Harness::always(fault);
        let model = h.model();
        let e = model.complete(&request()).await.unwrap_err();
        show(&mut shown, &e);
        let se = h.synthesize().await.unwrap_err();
        show(&mut shown, &se);
        let se = h.stream_finish().await.unwrap_err();
        show(&mut shown, &se);
        shown.push(format!("{model:?} {model:#?} {:?}", model.inner().config()));
    }
    let h = Harness::always(Fault::Status {
        status: 200,
        retry_after: None,
        body: format!("<html>{KEY}"),
    });
    let e = h.model().complete(&request()).await.unwrap_err();
    assert!(matches!(e, ModelError::Malformed(_)), "{e:?}");
    show(&mut shown, &e);

    // A stream whose error chunk carries the key, after a delta.
    let app = Router::new().route(
        "/v1/chat/completions",
        post(|| async move {
            let err = json!({"error": {"code": 500, "message": format!("crash {KEY}")}});
            reply(true, format!("{}data: {err}\n\n", chunk("Hel")))
        }),
    );
    let server = Server::start(app);
    let _clock = Hold::new();
    let config = OpenAiConfig::new("m")
        .with_base_url(&server.base)
        .with_api_key(KEY)
        .with_timeout(NEVER);
    let model = retrying(OpenAiModel::new(config.clone()).unwrap());
    let events = collect(model.stream(&request()).await.unwrap()).await;
    assert!(matches!(
        events.last(),
        Some(Err(ModelError::Server { .. }))
    ));
    shown.push(format!("{events:?}"));
    shown.push(format!("{config:?} {config:#?} {model:?}"));

    let logs = logs.text();
    assert!(logs.contains("retrying"), "no retry was logged: {logs}");
    assert!(logs.contains("[REDACTED]"), "{logs}");
    assert!(!logs.contains(KEY), "the key leaked into the logs");
    assert!(
        !logs.contains("UNIQUE-7f3a"),
        "part of the key leaked into the logs"
    );
    for s in &shown {
        assert!(
            !s.contains(KEY) && !s.contains("UNIQUE-7f3a"),
            "the key leaked: {s}"
        );
    }
    assert!(shown.iter().any(|s| s.contains("[REDACTED]")));
    report(
        "key echoed in bodies (401/429/500/400/malformed/stream)",
        "never in Display/Debug/logs",
        0,
    );
}
