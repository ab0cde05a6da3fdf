//! The OpenAI-compatible backend against an in-process HTTP server on 127.0.0.1.
//!
//! Each test starts its own axum server (on its own thread and runtime, so that the
//! synchronous server tokenizer can block the test's thread without starving the server),
//! records what the client sent and answers with bodies shaped like llama.cpp's.

use crate::common::clock;
use crate::common::fixtures::{collect, delta_text};
use synthkit_testkit::server;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt;
use serde_json::{Value, json};
use synthkit::backend::openai::{OpenAiConfig, OpenAiModel, ServerCounter, TokenizeDialect};
use synthkit::model::{
    CompletionStream, FinishReason, LanguageModel, ModelError, ModelRequest, PromptCounter,
    StreamEvent, TimeoutKind, Usage,
};
use synthkit::prompt::{ChatMessage, RenderedPrompt, Role};

use clock::Hold;
use server::Server;
use tokio::time::Instant;

mod discovery;
mod errors;

const KEY: &str = "sk-test-SECRET-0123456789";

/// What the server saw: path, headers and JSON body of each request.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<(String, HeaderMap, Value)>>>);

impl Seen {
    fn push(&self, path: &str, headers: &HeaderMap, body: &Bytes) {
        let v = serde_json::from_slice(body).unwrap_or(Value::Null);
        self.0
            .lock()
            .unwrap()
            .push((path.to_string(), headers.clone(), v));
    }
    fn last(&self) -> (String, HeaderMap, Value) {
        self.0.lock().unwrap().last().cloned().expect("no request")
    }
    fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }
    /// A handler for `method` that records each request as `path`, then answers
    /// `answer(body)`.
    fn answering(
        &self,
        method: axum::routing::MethodFilter,
        path: &'static str,
        answer: impl Fn(&Bytes) -> Response + Clone + Send + Sync + 'static,
    ) -> axum::routing::MethodRouter {
        let seen = self.clone();
        axum::routing::on(method, move |h: HeaderMap, b: Bytes| {
            let seen = seen.clone();
            let answer = answer.clone();
            async move {
                seen.push(path, &h, &b);
                answer(&b)
            }
        })
    }
}

/// What these tests ask of a loopback server: a client configured for it.
trait Client {
    fn config(&self) -> OpenAiConfig;
    fn model(&self) -> OpenAiModel;
    /// A model whose request timeout is `request` and idle timeout `idle`.
    fn model_with_timeouts(&self, request: Duration, idle: Duration) -> OpenAiModel;
}

impl Client for Server {
    fn config(&self) -> OpenAiConfig {
        OpenAiConfig::new("test-model")
            .with_base_url(&self.base)
            .with_api_key(KEY)
            .with_timeout(Duration::from_secs(10))
    }

    fn model(&self) -> OpenAiModel {
        OpenAiModel::new(self.config()).unwrap()
    }

    fn model_with_timeouts(&self, request: Duration, idle: Duration) -> OpenAiModel {
        let config = self.config().with_timeout(request).with_idle_timeout(idle);
        OpenAiModel::new(config).unwrap()
    }
}

fn request(prompt: RenderedPrompt, max_tokens: usize) -> ModelRequest {
    synthkit::testing::qa_request(prompt, 10, max_tokens, Some("q"))
}

fn chat_request() -> ModelRequest {
    request(
        RenderedPrompt::Chat(vec![
            ChatMessage::new(Role::System, "Be brief."),
            ChatMessage::new(Role::User, "Say hi"),
        ]),
        16,
    )
}

/// A recording handler answering `status`, `headers` and `body` to every request.
fn fixed(
    seen: &Seen,
    status: u16,
    headers: &[(&'static str, &'static str)],
    body: impl Into<Bytes>,
) -> axum::routing::MethodRouter {
    let seen = seen.clone();
    let body: Bytes = body.into();
    let headers: Vec<(&'static str, &'static str)> = headers.to_vec();
    post(move |uri: axum::http::Uri, h: HeaderMap, b: Bytes| {
        let seen = seen.clone();
        let body = body.clone();
        let headers = headers.clone();
        async move {
            seen.push(uri.path(), &h, &b);
            let mut r = Response::builder().status(status);
            for (k, v) in headers {
                r = r.header(k, v);
            }
            r.body(Body::from(body)).unwrap()
        }
    })
}

const CHAT_OK: &str = r#"{"choices":[{"finish_reason":"length","index":0,"message":{"role":"assistant","content":"manuel Socrates kettle","reasoning_content":"ignored"}}],"created":1795323801,"model":"tiny.gguf","system_fingerprint":"b0-unknown","object":"chat.completion","usage":{"completion_tokens":8,"prompt_tokens":29,"total_tokens":37,"prompt_tokens_details":{"cached_tokens":0}},"id":"chatcmpl-3D2A","timings":{"cache_n":0,"prompt_n":29}}"#;

const JSON: (&str, &str) = ("content-type", "application/json");
const SSE: (&str, &str) = ("content-type", "text/event-stream");

/// A `text/event-stream` answer whose body is `body`'s bytes as they come.
fn sse_stream_response<S>(body: S) -> Response
where
    S: futures::TryStream + Send + 'static,
    S::Ok: Into<Bytes>,
    S::Error: Into<axum::BoxError>,
{
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(body))
        .unwrap()
}

fn sse(chunks: &[&str]) -> String {
    chunks.iter().map(|c| format!("data: {c}\n\n")).collect()
}

fn chat_chunk(content: &str) -> String {
    json!({"choices":[{"finish_reason":null,"index":0,"delta":{"content":content}}],"object":"chat.completion.chunk"}).to_string()
}

// ---------------------------------------------------------------- success paths

#[tokio::test]
async fn chat_completion_sends_the_expected_body_and_reads_usage() {
    let seen = Seen::default();
    let server = Server::start(
        Router::new().route("/v1/chat/completions", fixed(&seen, 200, &[JSON], CHAT_OK)),
    );
    let model = server.model();
    let c = model.complete(&chat_request()).await.unwrap();
    assert_eq!(c.text, "manuel Socrates kettle");
    assert_eq!(
        c.usage,
        Some(Usage {
            prompt_tokens: 29,
            completion_tokens: 8,
            ..Default::default()
        })
    );
    assert_eq!(c.finish_reason, Some(FinishReason::Length));

    let (path, headers, body) = seen.last();
    assert_eq!(path, "/v1/chat/completions");
    assert_eq!(
        headers.get(header::AUTHORIZATION).unwrap(),
        &format!("Bearer {KEY}")
    );
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["max_tokens"], 16);
    assert!((body["temperature"].as_f64().unwrap() - 0.1).abs() < 1e-6);
    assert_eq!(
        body["messages"],
        json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi"}])
    );
    assert!(body.get("stream").is_none());
    assert!(body.get("response_format").is_none());

    // A text prompt sent to a chat endpoint is one user message.
    model
        .complete(&request(RenderedPrompt::Text("plain".into()), 4))
        .await
        .unwrap();
    let (_, _, body) = seen.last();
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": "plain"}])
    );
    assert_eq!(body["max_tokens"], 4);
}

#[tokio::test]
async fn an_injected_http_client_sends_every_call() {
    let seen = Seen::default();
    let server = Server::start(
        Router::new().route("/v1/chat/completions", fixed(&seen, 200, &[JSON], CHAT_OK)),
    );
    let mut defaults = HeaderMap::new();
    defaults.insert("x-from-the-caller", "yes".parse().unwrap());
    let client = reqwest::Client::builder()
        .default_headers(defaults)
        .user_agent("the-callers-client")
        .build()
        .unwrap();
    let config = server.config().with_http_client(client);
    assert!(format!("{config:?}").contains(r#"http_client: Some("custom")"#));
    let model = OpenAiModel::new(config).unwrap();
    model.complete(&chat_request()).await.unwrap();
    let (_, headers, _) = seen.last();
    assert_eq!(headers.get("x-from-the-caller").unwrap(), "yes");
    assert_eq!(
        headers.get(header::USER_AGENT).unwrap(),
        "the-callers-client"
    );
    // The key is still the config's, sent by synthkit on the caller's client.
    assert_eq!(
        headers.get(header::AUTHORIZATION).unwrap(),
        &format!("Bearer {KEY}")
    );
}

#[tokio::test]
async fn completion_endpoint_sends_a_text_prompt_without_auth_when_keyless() {
    let seen = Seen::default();
    let reply = r#"{"choices":[{"text":" eitherModern630istration","index":0,"logprobs":null,"finish_reason":"stop"}],"object":"text_completion","usage":{"completion_tokens":4,"prompt_tokens":2,"total_tokens":6}}"#;
    let server =
        Server::start(Router::new().route("/v1/completions", fixed(&seen, 200, &[JSON], reply)));
    let mut config = server.config().with_chat(false).with_temperature(None);
    config.transport.api_key = None;
    let model = OpenAiModel::new(config).unwrap();
    assert!(!model.info().is_chat);
    let c = model
        .complete(&request(RenderedPrompt::Text("Say hi".into()), 4))
        .await
        .unwrap();
    assert_eq!(c.text, " eitherModern630istration");
    assert_eq!(c.finish_reason, Some(FinishReason::Stop));
    assert_eq!(c.usage.map(|u| u.total()), Some(6));
    let (path, headers, body) = seen.last();
    assert_eq!(path, "/v1/completions");
    assert!(headers.get(header::AUTHORIZATION).is_none());
    assert_eq!(
        body,
        json!({"model": "test-model", "prompt": "Say hi", "max_tokens": 4})
    );

    // A chat prompt sent to a completion model is rendered as `role: content` lines.
    model.complete(&chat_request()).await.unwrap();
    let (_, _, body) = seen.last();
    assert_eq!(
        body["prompt"],
        "system: Be brief.\nuser: Say hi\nassistant: "
    );
}

#[tokio::test]
async fn chat_stream_yields_deltas_then_one_done_with_usage() {
    let seen = Seen::default();
    let body = sse(&[
        r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"object":"chat.completion.chunk"}"#,
        r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"reasoning_content":"let me think"}}],"object":"chat.completion.chunk"}"#,
        &chat_chunk(" randomized"),
        &chat_chunk("emade"),
        r#"{"choices":[{"finish_reason":"length","index":0,"delta":{}}],"object":"chat.completion.chunk"}"#,
        r#"{"choices":[],"object":"chat.completion.chunk","usage":{"completion_tokens":2,"prompt_tokens":29,"total_tokens":31},"timings":{"cache_n":28}}"#,
        "[DONE]",
    ]);
    let server =
        Server::start(Router::new().route("/v1/chat/completions", fixed(&seen, 200, &[SSE], body)));
    let model = server.model();
    let events = collect(model.stream(&chat_request()).await.unwrap()).await;
    assert_eq!(
        format!("{:?}", events),
        format!(
            "{:?}",
            vec![
                Ok::<_, ModelError>(StreamEvent::Thinking("let me think".into())),
                Ok::<_, ModelError>(StreamEvent::Delta(" randomized".into())),
                Ok::<_, ModelError>(StreamEvent::Delta("emade".into())),
                Ok::<_, ModelError>(StreamEvent::Done {
                    usage: Some(Usage {
                        prompt_tokens: 29,
                        completion_tokens: 2,
                        // llama.cpp's `timings.cache_n` (issue 45).
                        cached_prompt_tokens: 28,
                        ..Default::default()
                    }),
                    finish_reason: Some(FinishReason::Length)
                }),
            ]
        )
    );
    let (_, headers, body) = seen.last();
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["max_tokens"], 16);
    assert_eq!(headers.get(header::ACCEPT).unwrap(), "text/event-stream");
}

#[tokio::test]
async fn completion_stream_with_usage_on_the_finish_chunk() {
    let seen = Seen::default();
    let body = sse(&[
        r#"{"choices":[{"text":" alters","index":0,"logprobs":null,"finish_reason":null}],"object":"text_completion"}"#,
        r#"{"choices":[{"text":" grabbed","index":0,"logprobs":null,"finish_reason":null}],"object":"text_completion"}"#,
        r#"{"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}],"object":"text_completion","usage":{"completion_tokens":2,"prompt_tokens":2,"total_tokens":4}}"#,
        "[DONE]",
    ]);
    let server =
        Server::start(Router::new().route("/v1/completions", fixed(&seen, 200, &[SSE], body)));
    let model = OpenAiModel::new(server.config().with_chat(false)).unwrap();
    let events = collect(model.stream(&chat_request()).await.unwrap()).await;
    let text = delta_text(&events);
    assert_eq!(text, " alters grabbed");
    assert_eq!(
        format!("{:?}", events.last()),
        format!(
            "{:?}",
            Some(&Ok::<_, ModelError>(StreamEvent::Done {
                usage: Some(Usage {
                    prompt_tokens: 2,
                    completion_tokens: 2,
                    ..Default::default()
                }),
                finish_reason: Some(FinishReason::Length)
            }))
        )
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Ok(StreamEvent::Done { .. })))
            .count(),
        1
    );
}

#[tokio::test]
async fn a_server_that_ignores_stream_true_still_streams() {
    let seen = Seen::default();
    let server = Server::start(
        Router::new().route("/v1/chat/completions", fixed(&seen, 200, &[JSON], CHAT_OK)),
    );
    let events = collect(server.model().stream(&chat_request()).await.unwrap()).await;
    // The reasoning comes apart, as the reply's thinking; then the text and `Done`.
    assert_eq!(events.len(), 3);
    assert_eq!(
        format!("{:?}", events[0]),
        format!(
            "{:?}",
            Ok::<_, ModelError>(StreamEvent::Thinking("ignored".into()))
        )
    );
    let events = &events[1..];
    assert_eq!(
        format!("{:?}", events[0]),
        format!(
            "{:?}",
            Ok::<_, ModelError>(StreamEvent::Delta("manuel Socrates kettle".into()))
        )
    );
    assert!(matches!(
        events[1],
        Ok::<_, ModelError>(StreamEvent::Done { usage: Some(_), .. })
    ));
}

// ---------------------------------------------------------------- streams that fail

#[tokio::test]
async fn a_stream_cut_before_done_is_incomplete() {
    let seen = Seen::default();
    let body = sse(&[&chat_chunk("Hel"), &chat_chunk("lo")]);
    let server =
        Server::start(Router::new().route("/v1/chat/completions", fixed(&seen, 200, &[SSE], body)));
    let events = collect(server.model().stream(&chat_request()).await.unwrap()).await;
    assert_eq!(events.len(), 3);
    assert!(matches!(
        events.last(),
        Some(Err(ModelError::Incomplete(_)))
    ));
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Ok(StreamEvent::Done { .. })))
    );
}

#[tokio::test]
async fn a_stream_whose_connection_breaks_is_incomplete() {
    // The server breaks the connection once the test has read the first delta (it says
    // so through `read`): the reset can never overtake that chunk, and no wait is needed.
    let read = Arc::new(tokio::sync::Notify::new());
    let signal = Arc::clone(&read);
    let app = Router::new().route(
        "/v1/chat/completions",
        post(move || {
            let read = Arc::clone(&signal);
            async move {
                let first: Result<Bytes, std::io::Error> =
                    Ok(Bytes::from(sse(&[&chat_chunk("Hel")])));
                let reset = futures::stream::once(async move {
                    read.notified().await;
                    Err(std::io::Error::other("reset"))
                });
                let chunks = futures::stream::iter(vec![first]).chain(reset);
                sse_stream_response(chunks)
            }
        }),
    );
    let server = Server::start(app);
    let mut stream = server.model().stream(&chat_request()).await.unwrap();
    assert_next_delta(&mut stream, "Hel").await;
    read.notify_one();
    let events = collect(stream).await;
    let last = events.last().unwrap();
    assert!(matches!(last, Err(ModelError::Incomplete(_))), "{last:?}");
    assert!(last.as_ref().unwrap_err().is_transient());
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Ok(StreamEvent::Done { .. })))
    );
}

/// Paused time: the idle timeout is tokio's, so the stall costs no wall time. The clock
/// is held (no auto-advance) until the first delta is in, so nothing can time out while
/// the client still waits for real I/O; released, it jumps straight to the idle timeout.
#[tokio::test(start_paused = true)]
async fn a_stalled_stream_times_out() {
    let app = Router::new().route(
        "/v1/chat/completions",
        post(|| async {
            let first: Result<Bytes, std::io::Error> = Ok(Bytes::from(sse(&[&chat_chunk("Hel")])));
            let body = futures::stream::iter(vec![first]).chain(futures::stream::pending());
            sse_stream_response(body)
        }),
    );
    let server = Server::start(app);
    // The request timeout is long: after the first event only the idle timeout counts.
    let model = server.model_with_timeouts(Duration::from_secs(60), Duration::from_millis(300));
    let held = Hold::new();
    let start = Instant::now();
    let mut stream = model.stream(&chat_request()).await.unwrap();
    assert_next_delta(&mut stream, "Hel").await;
    assert_eq!(start.elapsed(), Duration::ZERO);
    // The server will send nothing more: the next event is the timeout, 300 ms later.
    held.release().await;
    let rest = collect(stream).await;
    assert_eq!(start.elapsed(), Duration::from_millis(300));
    match rest.as_slice() {
        [
            Err(
                e @ ModelError::Timeout {
                    kind,
                    waited,
                    limit,
                },
            ),
        ] => {
            assert_eq!(*kind, TimeoutKind::Idle);
            assert_eq!(*waited, Duration::from_millis(300));
            assert_eq!(*limit, Duration::from_millis(300));
            assert!(
                e.to_string()
                    .contains("gave up after 300ms (the idle timeout is 300ms)"),
                "{e}"
            );
            assert!(e.is_transient());
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_error_object_inside_a_stream_is_an_error() {
    let seen = Seen::default();
    let body = sse(&[
        &chat_chunk("Hel"),
        r#"{"error":{"code":500,"message":"slot crashed","type":"server_error"}}"#,
    ]);
    let server =
        Server::start(Router::new().route("/v1/chat/completions", fixed(&seen, 200, &[SSE], body)));
    let events = collect(server.model().stream(&chat_request()).await.unwrap()).await;
    assert!(matches!(
        events.last(),
        Some(Err(ModelError::Server { status: 500, .. }))
    ));
}

/// Fails the test unless the stream's next event is the delta `text`.
async fn assert_next_delta(stream: &mut CompletionStream, text: &str) {
    let next = stream.next().await;
    assert!(
        matches!(&next, Some(Ok(StreamEvent::Delta(d))) if d == text),
        "{next:?}"
    );
}
