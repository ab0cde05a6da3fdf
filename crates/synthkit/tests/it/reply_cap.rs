//! The reply size cap of the OpenAI-compatible backend (`OpenAiConfig::max_reply_bytes`)
//! against a loopback server that answers 100 MB: plain, as SSE events, as one SSE line
//! without end, as an error body, and to discovery. The 100 MB are generated lazily, a
//! chunk at a time, and the server counts the bytes it managed to hand to the
//! connection: the client must refuse the reply with the cap's name long before the
//! server has sent it all, so it never held it whole.

use synthkit_testkit::server;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::response::Response;
use axum::routing::{get, post};
use futures::StreamExt;
use synthkit::backend::openai::{OpenAiConfig, OpenAiModel};
use synthkit::model::{LanguageModel, ModelError, ModelRequest, StreamEvent};
use synthkit::prompt::RenderedPrompt;

use server::Server;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// What the server offers: 100 MB.
const REPLY_BYTES: u64 = 100_000_000;
/// The size of each chunk the server generates.
const CHUNK: usize = 64 << 10;
/// The client's cap in these tests.
const CAP: usize = 1 << 20;
/// The most the server may have sent when the client gave up: the cap, plus the
/// loopback socket's send and receive buffers (a few MiB each), plus slack. Far below
/// the 100 MB offered.
const MAX_SENT: u64 = 32 << 20;
/// How long the server's body may take to notice that the client has gone: a safety net
/// for a client that never lets go, far past the moment a healthy run notices.
const DROP_DEADLINE: Duration = Duration::from_secs(60);

/// The shapes of 100 MB reply the server can give.
#[derive(Clone, Copy)]
enum Shape {
    /// A JSON completion whose content is 100 MB of `x`, chunked (no length).
    Plain,
    /// The same, announced with a `Content-Length` of 100 MB.
    PlainWithLength,
    /// SSE: one delta event after another, 100 MB of them.
    Events,
    /// SSE: one `data:` line of 100 MB, never ended by a newline.
    OneLine,
    /// HTTP 500 with a 100 MB body.
    Error,
}

/// What the server reports about one generated body.
struct Report {
    /// Bytes handed to the connection so far.
    sent: AtomicU64,
    /// Whether the body was generated to its end.
    finished: AtomicBool,
}

/// Counts what was taken from the generator; says the final count when dropped (the
/// server drops a body once the connection is gone).
struct Generator {
    report: Arc<Report>,
    dropped: UnboundedSender<u64>,
    shape: Shape,
    produced: u64,
}

impl Drop for Generator {
    fn drop(&mut self) {
        let _ = self.dropped.send(self.report.sent.load(Ordering::SeqCst));
    }
}

impl Generator {
    fn next_chunk(&mut self) -> Option<Bytes> {
        if self.produced >= REPLY_BYTES {
            self.report.finished.store(true, Ordering::SeqCst);
            return None;
        }
        let chunk = match (self.shape, self.produced) {
            (Shape::Plain | Shape::PlainWithLength, 0) => {
                pad(r#"{"choices":[{"index":0,"message":{"role":"assistant","content":""#)
            }
            (Shape::OneLine, 0) => pad(r#"data: {"choices":[{"index":0,"delta":{"content":""#),
            (Shape::Events, _) => {
                // One event per chunk, each exactly CHUNK bytes long.
                let head = r#"data: {"choices":[{"index":0,"delta":{"content":""#;
                let tail = "\"}}]}\n\n";
                let mut e = String::with_capacity(CHUNK);
                e.push_str(head);
                e.push_str(&"x".repeat(CHUNK - head.len() - tail.len()));
                e.push_str(tail);
                e
            }
            _ => "x".repeat(CHUNK),
        };
        self.produced += chunk.len() as u64;
        self.report
            .sent
            .fetch_add(chunk.len() as u64, Ordering::SeqCst);
        Some(Bytes::from(chunk))
    }
}

/// `head` followed by `x` up to one chunk.
fn pad(head: &str) -> String {
    let mut s = head.to_string();
    s.push_str(&"x".repeat(CHUNK - head.len()));
    s
}

/// A capped server and a model of it.
struct Served {
    /// Kept running while the test runs.
    _server: Server,
    report: Arc<Report>,
    /// The bytes sent, each time a body is dropped.
    dropped: UnboundedReceiver<u64>,
    /// A model of the server with the reply cap [`CAP`].
    model: OpenAiModel,
}

impl Served {
    /// Once the client has given up, the server's body is dropped: what it had sent by
    /// then is far below the 100 MB, and it never finished. (Awaited, not blocked on: the
    /// client's connection task runs on the test's runtime and must close the socket.)
    /// Waits until the server saw the client stop reading, checks it had not sent it all,
    /// and prints `what` with the bytes it had sent.
    async fn assert_not_buffered(&mut self, what: &str) {
        let sent = tokio::time::timeout(DROP_DEADLINE, self.dropped.recv())
            .await
            .expect("the server went on sending after the client gave up")
            .expect("the server stopped");
        assert!(!self.report.finished.load(Ordering::SeqCst));
        assert!(
            sent < MAX_SENT,
            "the server sent {sent} bytes before the client stopped reading"
        );
        eprintln!("{what}: the server had sent {sent} bytes");
    }
}

/// A server answering every completion (and `/props`) with `shape`, and a model of it.
fn serve(shape: Shape) -> Served {
    let (server, report, dropped) = serve_parts(shape);
    let model = OpenAiModel::new(config(&server)).unwrap();
    Served {
        _server: server,
        report,
        dropped,
        model,
    }
}

/// A server answering every completion (and `/props`) with `shape`; the receiver gets
/// the bytes sent each time a body is dropped.
fn serve_parts(shape: Shape) -> (Server, Arc<Report>, UnboundedReceiver<u64>) {
    let report = Arc::new(Report {
        sent: AtomicU64::new(0),
        finished: AtomicBool::new(false),
    });
    let (dropped, rx) = unbounded_channel();
    let handler = {
        let report = Arc::clone(&report);
        move || {
            let report = Arc::clone(&report);
            let dropped = dropped.clone();
            async move {
                let generator = Generator {
                    report,
                    dropped,
                    shape,
                    produced: 0,
                };
                let body = futures::stream::unfold(generator, |mut g| async move {
                    let chunk = g.next_chunk()?;
                    Some((Ok::<_, std::io::Error>(chunk), g))
                });
                let (status, content_type) = match shape {
                    Shape::Plain | Shape::PlainWithLength => (200, "application/json"),
                    Shape::Events | Shape::OneLine => (200, "text/event-stream"),
                    Shape::Error => (500, "application/json"),
                };
                let mut r = Response::builder()
                    .status(status)
                    .header("content-type", content_type);
                if matches!(shape, Shape::PlainWithLength) {
                    r = r.header("content-length", REPLY_BYTES.to_string());
                }
                r.body(Body::from_stream(body)).unwrap()
            }
        }
    };
    let app = Router::new()
        .route("/v1/chat/completions", post(handler.clone()))
        .route("/props", get(handler));
    (Server::start(app), report, rx)
}

fn config(server: &Server) -> OpenAiConfig {
    OpenAiConfig::new("test-model")
        .with_base_url(&server.base)
        .with_timeout(Duration::from_secs(60))
        .with_max_reply_bytes(CAP)
}

fn request() -> ModelRequest {
    synthkit::testing::qa_request(RenderedPrompt::Text("Say hi".into()), 10, 16, None)
}

/// A stream's last item is the cap's error ([`assert_refused`]).
fn assert_ends_refused(last: Option<Result<StreamEvent, ModelError>>) {
    match last {
        Some(Err(e)) => assert_refused(&e),
        other => panic!("expected the cap's error, got {other:?}"),
    }
}

/// The error is the cap's, says so, and is not retried.
fn assert_refused(e: &ModelError) {
    assert!(
        matches!(e, ModelError::ReplyTooLarge { limit } if *limit == CAP),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("1048576 bytes (1.0 MiB)") && msg.contains("with_max_reply_bytes"),
        "{msg}"
    );
    assert!(!e.is_transient());
}

/// A plain reply over the cap, with or without a `Content-Length` that announces it, is
/// refused without reading it all.
#[tokio::test]
async fn a_plain_reply_over_the_cap_is_refused_without_reading_it_all() {
    for (shape, name) in [
        (Shape::Plain, "plain: refused"),
        (Shape::PlainWithLength, "content-length: refused"),
    ] {
        let mut served = serve(shape);
        let e = served.model.complete(&request()).await.unwrap_err();
        assert_refused(&e);
        served.assert_not_buffered(name).await;
    }
}

#[tokio::test]
async fn a_stream_of_events_over_the_cap_is_cut_with_the_caps_error() {
    let mut served = serve(Shape::Events);
    let mut stream = served.model.stream(&request()).await.unwrap();
    let mut delta_bytes = 0;
    let mut last = None;
    while let Some(item) = stream.next().await {
        match item {
            Ok(StreamEvent::Delta(d)) => delta_bytes += d.len(),
            other => {
                last = Some(other);
                break;
            }
        }
    }
    // The deltas before the cap came through; the stream then ends with the error.
    assert!(delta_bytes > 0 && delta_bytes <= CAP, "{delta_bytes}");
    assert_ends_refused(last);
    assert!(stream.next().await.is_none());
    drop(stream);
    let what = format!("events: refused after {delta_bytes} delta bytes");
    served.assert_not_buffered(&what).await;
}

#[tokio::test]
async fn one_sse_line_without_end_is_cut_with_the_caps_error() {
    let mut served = serve(Shape::OneLine);
    let mut stream = served.model.stream(&request()).await.unwrap();
    assert_ends_refused(stream.next().await);
    drop(stream);
    served.assert_not_buffered("one line: refused").await;
}

#[tokio::test]
async fn an_error_body_is_read_only_in_part() {
    let mut served = serve(Shape::Error);
    let e = served.model.complete(&request()).await.unwrap_err();
    // Still the server's error (so retries see it as such), with its start shown.
    match &e {
        ModelError::Server { status: 500, body } => {
            assert!(body.starts_with(r"xxxx") && body.len() < 2200, "{body}")
        }
        other => panic!("{other:?}"),
    }
    served.assert_not_buffered("error body").await;
}

#[tokio::test]
async fn discovery_ignores_an_answer_over_the_cap() {
    let mut served = serve(Shape::Plain);
    assert_eq!(served.model.discover().await, None);
    served.assert_not_buffered("discovery").await;
}

/// The cap is exact: a reply of exactly the cap is read, one byte more is refused.
#[tokio::test]
async fn the_cap_is_exact() {
    let reply = r#"{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"hi"}}]}"#;
    let app = Router::new().route(
        "/v1/chat/completions",
        post(move || async move {
            Response::builder()
                .header("content-type", "application/json")
                // No length: the chunked path counts.
                .body(Body::from_stream(futures::stream::iter([Ok::<
                    _,
                    std::io::Error,
                >(
                    Bytes::from_static(reply.as_bytes()),
                )])))
                .unwrap()
        }),
    );
    let server = Server::start(app);
    let exact = OpenAiModel::new(config(&server).with_max_reply_bytes(reply.len())).unwrap();
    assert_eq!(exact.complete(&request()).await.unwrap().text, "hi");
    let under = OpenAiModel::new(config(&server).with_max_reply_bytes(reply.len() - 1)).unwrap();
    assert!(matches!(
        under.complete(&request()).await,
        Err(ModelError::ReplyTooLarge { limit }) if limit == reply.len() - 1
    ));
    assert_eq!(
        OpenAiConfig::new("m").transport.max_reply_bytes,
        OpenAiConfig::DEFAULT_MAX_REPLY_BYTES
    );
    assert_eq!(OpenAiConfig::DEFAULT_MAX_REPLY_BYTES, 8 << 20);
}
