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

mod permanent;
mod transient;

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

/// How a test reaches the fault server.
#[derive(Clone, Copy, Debug)]
enum Via {
    /// One call of the retrying model.
    Complete,
    /// A synthesis: its leaves meet the faults.
    Synthesize,
    /// A streamed synthesis read to its end: its final call meets the faults.
    StreamFinish,
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

    /// The leaves' requests (the first [`FINAL`]) answer; the next ones (the final
    /// call's) get `faults`, later ones a good answer.
    fn at_final(faults: impl IntoIterator<Item = Fault>) -> Self {
        let mut script = vec![Fault::Ok; FINAL];
        script.extend(faults);
        Self::new(script)
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

    /// Reports what `fault` led to, with the requests made so far.
    fn report(&self, fault: &str, outcome: &str) {
        report(fault, outcome, self.requests());
    }

    /// Fails the test unless `text` is the answer to the last of the `requests` requests
    /// sent in all (the fake numbers its answers from 0); then reports the fault.
    #[track_caller]
    fn assert_answered(&self, text: &str, requests: usize, fault: &str, outcome: &str) {
        assert_eq!(text, format!("answer {}", requests - 1));
        assert_eq!(self.requests(), requests);
        report(fault, outcome, requests);
    }

    /// A harness whose `faults` meet the first requests `via` makes where it meets faults
    /// (the final call's for [`Via::StreamFinish`]).
    fn meeting(via: Via, faults: Vec<Fault>) -> Self {
        match via {
            Via::StreamFinish => Self::at_final(faults),
            Via::Complete | Via::Synthesize => Self::new(faults),
        }
    }

    /// The answer's text through `via`; fails the test on an error.
    async fn answer(&self, via: Via) -> String {
        match via {
            Via::Complete => self.model().complete(&request()).await.unwrap().text,
            Via::Synthesize => self.synthesize().await.unwrap().text,
            Via::StreamFinish => self.stream_finish().await.unwrap().text,
        }
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
    synthkit::testing::qa_request(
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
    h.report("none (tree_summarize, 3 leaves + final)", "completed");
}
