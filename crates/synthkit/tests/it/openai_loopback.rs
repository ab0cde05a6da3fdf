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
    FinishReason, LanguageModel, ModelError, ModelRequest, PromptCounter, StreamEvent, TimeoutKind,
    Usage,
};
use synthkit::prompt::{ChatMessage, RenderedPrompt, Role};

use clock::Hold;
use server::Server;
use tokio::time::Instant;

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
}

/// What these tests ask of a loopback server: a client configured for it.
trait Client {
    fn config(&self) -> OpenAiConfig;
    fn model(&self) -> OpenAiModel;
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
}

fn request(prompt: RenderedPrompt, max_tokens: usize) -> ModelRequest {
    crate::common::fixtures::qa_request(prompt, 10, max_tokens, Some("q"))
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
            completion_tokens: 8
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
                Ok::<_, ModelError>(StreamEvent::Delta(" randomized".into())),
                Ok::<_, ModelError>(StreamEvent::Delta("emade".into())),
                Ok::<_, ModelError>(StreamEvent::Done {
                    usage: Some(Usage {
                        prompt_tokens: 29,
                        completion_tokens: 2
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
                    completion_tokens: 2
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
    assert_eq!(events.len(), 2);
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
                Response::builder()
                    .header(header::CONTENT_TYPE, "text/event-stream")
                    .body(Body::from_stream(chunks))
                    .unwrap()
            }
        }),
    );
    let server = Server::start(app);
    let mut stream = server.model().stream(&chat_request()).await.unwrap();
    let first = stream.next().await;
    assert_eq!(
        format!("{first:?}"),
        format!(
            "{:?}",
            Some(Ok::<_, ModelError>(StreamEvent::Delta("Hel".into())))
        )
    );
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
            Response::builder()
                .header(header::CONTENT_TYPE, "text/event-stream")
                .body(Body::from_stream(body))
                .unwrap()
        }),
    );
    let server = Server::start(app);
    // The request timeout is long: after the first event only the idle timeout counts.
    let model = OpenAiModel::new(
        server
            .config()
            .with_timeout(Duration::from_secs(60))
            .with_idle_timeout(Duration::from_millis(300)),
    )
    .unwrap();
    let held = Hold::new();
    let start = Instant::now();
    let mut stream = model.stream(&chat_request()).await.unwrap();
    let first = stream.next().await;
    assert_eq!(
        format!("{first:?}"),
        format!(
            "{:?}",
            Some(Ok::<_, ModelError>(StreamEvent::Delta("Hel".into())))
        )
    );
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

// ---------------------------------------------------------------- error classes

const CONTEXT_ERROR: &str = r#"{"error":{"code":400,"message":"request (3027 tokens) exceeds the available context size (2048 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":3027,"n_ctx":2048}}"#;

async fn error_for(
    status: u16,
    headers: &[(&'static str, &'static str)],
    body: &'static str,
) -> ModelError {
    let seen = Seen::default();
    let server = Server::start(
        Router::new().route("/v1/chat/completions", fixed(&seen, status, headers, body)),
    );
    server.model().complete(&chat_request()).await.unwrap_err()
}

#[tokio::test]
async fn status_401_and_403_are_auth_errors() {
    let e = error_for(
        401,
        &[JSON],
        r#"{"error":{"message":"Invalid API Key","type":"authentication_error","code":401}}"#,
    )
    .await;
    assert!(matches!(e, ModelError::Auth { status: 401, .. }), "{e:?}");
    assert!(!e.is_transient());
    let e = error_for(403, &[], "forbidden").await;
    assert!(matches!(e, ModelError::Auth { status: 403, .. }), "{e:?}");
}

#[tokio::test]
async fn status_429_is_rate_limited_with_retry_after() {
    let e = error_for(429, &[("retry-after", "3")], "slow down").await;
    assert_eq!(
        format!("{:?}", e),
        format!(
            "{:?}",
            ModelError::RateLimited {
                status: 429,
                retry_after: Some(Duration::from_secs(3)),
                body: "slow down".into()
            }
        )
    );
    assert!(e.is_transient());
    // An HTTP date in the past means "now".
    let e = error_for(429, &[("retry-after", "Sun, 06 Nov 1994 08:49:37 GMT")], "").await;
    assert!(
        matches!(e, ModelError::RateLimited { retry_after: Some(d), .. } if d == Duration::ZERO),
        "{e:?}"
    );
    let e = error_for(429, &[], "").await;
    assert!(
        matches!(
            e,
            ModelError::RateLimited {
                retry_after: None,
                ..
            }
        ),
        "{e:?}"
    );
}

#[tokio::test]
async fn status_5xx_is_a_server_error() {
    let e = error_for(500, &[], "internal").await;
    assert_eq!(
        format!("{:?}", e),
        format!(
            "{:?}",
            ModelError::Server {
                status: 500,
                body: "internal".into()
            }
        )
    );
    let e = error_for(
        503,
        &[JSON],
        r#"{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}"#,
    )
    .await;
    assert!(matches!(e, ModelError::Server { status: 503, .. }));
}

#[tokio::test]
async fn llama_cpp_context_error_is_context_too_long_with_numbers() {
    let e = error_for(400, &[JSON], CONTEXT_ERROR).await;
    assert_eq!(format!("{:?}", e), format!("{:?}", ModelError::ContextTooLong {
            message: "request (3027 tokens) exceeds the available context size (2048 tokens), try increasing it".into(),
            prompt_tokens: Some(3027),
            context_window: Some(2048),
        }));
    assert!(e.to_string().contains("3027 tokens > 2048"));
    // The same error on a stream request surfaces from `stream()` itself.
    let seen = Seen::default();
    let server = Server::start(Router::new().route(
        "/v1/chat/completions",
        fixed(&seen, 400, &[JSON], CONTEXT_ERROR),
    ));
    let e = server.model().stream(&chat_request()).await.err().unwrap();
    assert!(matches!(
        e,
        ModelError::ContextTooLong {
            prompt_tokens: Some(3027),
            ..
        }
    ));
}

#[tokio::test]
async fn openai_context_error_is_context_too_long() {
    let e = error_for(400, &[JSON], r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#).await;
    assert!(
        matches!(
            e,
            ModelError::ContextTooLong {
                prompt_tokens: Some(9000),
                context_window: Some(8192),
                ..
            }
        ),
        "{e:?}"
    );
}

#[tokio::test]
async fn other_4xx_is_a_bad_request_and_bodies_are_cut() {
    let e = error_for(400, &[JSON], r#"{"error":{"code":400,"message":"Expected 'messages' to be an array","type":"invalid_request_error"}}"#).await;
    assert!(
        matches!(&e, ModelError::BadRequest { status: 400, body } if body.contains("Expected 'messages'")),
        "{e:?}"
    );
    let long: &'static str = Box::leak("x".repeat(100_000).into_boxed_str());
    let e = error_for(422, &[], long).await;
    match e {
        ModelError::BadRequest { status: 422, body } => {
            assert!(body.len() < 2200, "{}", body.len())
        }
        e => panic!("{e:?}"),
    }
}

#[tokio::test]
async fn unparsable_replies_are_malformed() {
    for body in [
        "{\"choices\": [",
        "<html>oops</html>",
        r#"{"choices":[],"usage":{"prompt_tokens":1}}"#,
        r#"{"object":"chat.completion"}"#,
    ] {
        let e = error_for(200, &[JSON], body).await;
        assert!(matches!(e, ModelError::Malformed(_)), "{body}: {e:?}");
    }
    let seen = Seen::default();
    let server = Server::start(Router::new().route(
        "/v1/chat/completions",
        fixed(
            &seen,
            200,
            &[JSON],
            &b"{\"choices\":[{\"message\":{\"content\":\"\xff\xfe\"}}]}"[..],
        ),
    ));
    let e = server.model().complete(&chat_request()).await.unwrap_err();
    assert!(matches!(e, ModelError::Malformed(_)), "{e:?}");
}

/// Paused time: the timeout is tokio's. Each call runs with the clock held (no
/// auto-advance) until the server has its request, so the timeout cannot fire early while
/// the request is on its way; released, the clock jumps straight to the timeout (the
/// server never answers), and the call fails exactly 300 ms after it started.
#[tokio::test(start_paused = true)]
async fn a_slow_server_times_out_within_the_configured_timeout() {
    let arrived = Arc::new(tokio::sync::Notify::new());
    let signal = Arc::clone(&arrived);
    let app = Router::new().route(
        "/v1/chat/completions",
        post(move || {
            let arrived = Arc::clone(&signal);
            async move {
                arrived.notify_one();
                // Never answers (the server stops when dropped).
                std::future::pending::<()>().await;
                CHAT_OK
            }
        }),
    );
    let server = Server::start(app);
    let model = OpenAiModel::new(server.config().with_timeout(Duration::from_millis(300))).unwrap();

    let held = Hold::new();
    let start = Instant::now();
    let (e, ()) = tokio::join!(
        async { model.complete(&chat_request()).await.unwrap_err() },
        async {
            arrived.notified().await;
            held.release().await;
        }
    );
    assert!(is_request_timeout(&e, Duration::from_millis(300)), "{e:?}");
    assert!(e.is_transient());
    assert_eq!(start.elapsed(), Duration::from_millis(300));

    let held = Hold::new();
    let start = Instant::now();
    let (e, ()) = tokio::join!(
        async { model.stream(&chat_request()).await.err().unwrap() },
        async {
            arrived.notified().await;
            held.release().await;
        }
    );
    // Before its first event a stream is bounded by the request timeout.
    assert!(is_request_timeout(&e, Duration::from_millis(300)), "{e:?}");
    assert_eq!(start.elapsed(), Duration::from_millis(300));
}

/// Whether `e` is the request timeout of `limit`, having waited exactly that long, and
/// says so.
fn is_request_timeout(e: &ModelError, limit: Duration) -> bool {
    matches!(e, ModelError::Timeout { kind: TimeoutKind::Request, waited, limit: l }
        if *waited == limit && *l == limit)
        && e.to_string().contains(&format!(
            "gave up after {}ms (the request timeout is {}ms)",
            limit.as_millis(),
            limit.as_millis()
        ))
}

/// A server that takes every request and never answers (until the test drops it), and
/// tells when a request has arrived.
fn black_hole() -> (Server, Arc<tokio::sync::Notify>) {
    let arrived = Arc::new(tokio::sync::Notify::new());
    let signal = Arc::clone(&arrived);
    let app = Router::new().fallback(move || {
        let arrived = Arc::clone(&signal);
        async move {
            arrived.notify_one();
            std::future::pending::<()>().await;
            StatusCode::OK
        }
    });
    (Server::start(app), arrived)
}

/// Real time: a server that accepts the connection and never answers fails a
/// non-streamed call (and a stream before its first event) once the request timeout has
/// passed, with a message naming the time actually waited.
#[tokio::test]
async fn a_server_that_never_answers_fails_after_the_request_timeout() {
    let (hole, _) = black_hole();
    let config = OpenAiConfig::new("m")
        .with_base_url(&hole.base)
        .with_timeout(Duration::from_millis(300))
        .with_idle_timeout(Duration::from_secs(60));
    let model = OpenAiModel::new(config).unwrap();
    for streamed in [false, true] {
        let start = Instant::now();
        let e = if streamed {
            model.stream(&chat_request()).await.err().unwrap()
        } else {
            model.complete(&chat_request()).await.unwrap_err()
        };
        let elapsed = start.elapsed();
        let ModelError::Timeout {
            kind,
            waited,
            limit,
        } = &e
        else {
            panic!("{e:?}")
        };
        assert_eq!(*kind, TimeoutKind::Request, "streamed: {streamed}");
        assert_eq!(*limit, Duration::from_millis(300));
        assert!(
            *waited >= Duration::from_millis(300) && *waited <= elapsed,
            "{waited:?}"
        );
        assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
        let message = e.to_string();
        assert!(
            message.contains(&format!("gave up after {}ms", waited.as_millis()))
                && message.contains("the request timeout is 300ms")
                && message.contains("OpenAiConfig::with_timeout"),
            "{message}"
        );
    }
}

/// Real time: a token every 100 ms for a second, with a 500 ms request timeout and a
/// 300 ms idle timeout. The request timeout bounds only the wait for the first event, so
/// a stream that keeps producing runs past it to the end.
#[tokio::test]
async fn a_stream_that_keeps_producing_is_never_cut_by_the_request_timeout() {
    let app = Router::new().route(
        "/v1/chat/completions",
        post(|| async {
            let ticks = futures::stream::iter(0..10).then(|i| async move {
                tokio::time::sleep(Duration::from_millis(100)).await;
                Ok::<_, std::io::Error>(Bytes::from(sse(&[&chat_chunk(&format!("t{i} "))])))
            });
            let end = futures::stream::iter([Ok(Bytes::from(sse(&[
                r#"{"model":"served.gguf","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
                "[DONE]",
            ])))]);
            Response::builder()
                .header(header::CONTENT_TYPE, "text/event-stream")
                .body(Body::from_stream(ticks.chain(end)))
                .unwrap()
        }),
    );
    let server = Server::start(app);
    let model = OpenAiModel::new(
        server
            .config()
            .with_timeout(Duration::from_millis(500))
            .with_idle_timeout(Duration::from_millis(300)),
    )
    .unwrap();
    let start = Instant::now();
    let events = collect(model.stream(&chat_request()).await.unwrap()).await;
    let elapsed = start.elapsed();
    let text = delta_text(&events);
    assert_eq!(text, "t0 t1 t2 t3 t4 t5 t6 t7 t8 t9 ", "{events:?}");
    assert!(
        matches!(events.last(), Some(Ok(StreamEvent::Done { .. }))),
        "{events:?}"
    );
    assert!(elapsed >= Duration::from_secs(1), "{elapsed:?}");
    // The model the chunks named is recorded.
    assert_eq!(model.served_model().as_deref(), Some("served.gguf"));
}

/// A server that does not answer discovery costs one discovery timeout: the rest of
/// discovery and the `/tokenize` probe are skipped (before, each waited in turn). Paused
/// time, held until the first request reached the server: discovery takes exactly one
/// timeout (each further request would add its own).
#[tokio::test(start_paused = true)]
async fn a_hanging_server_costs_one_discovery_timeout() {
    let (hole, arrived) = black_hole();
    let config = OpenAiConfig::new("m")
        .with_base_url(&hole.base)
        .with_timeout(Duration::from_millis(400))
        .with_model_discovery(true)
        .with_server_tokenizer(true);
    let held = Hold::new();
    let start = Instant::now();
    let (model, ()) = tokio::join!(
        async { OpenAiModel::connect(config).await.unwrap() },
        async {
            arrived.notified().await;
            held.release().await;
        }
    );
    let mut model = model;
    // One timeout, not five (/models, /props, /tokenize twice, /models again).
    assert_eq!(start.elapsed(), Duration::from_millis(400));
    assert_eq!(model.info().name, "m");
    assert!(model.counter().is_none());
    assert!(!model.use_server_counter().await);
}

#[tokio::test]
async fn a_refused_connection_is_a_connection_error() {
    let config = OpenAiConfig::new("m")
        .with_base_url(format!("http://127.0.0.1:{}/v1", server::free_port()))
        .with_api_key(KEY)
        .with_timeout(Duration::from_secs(5));
    let model = OpenAiModel::new(config).unwrap();
    let e = model.complete(&chat_request()).await.unwrap_err();
    assert!(matches!(e, ModelError::Connection(_)), "{e:?}");
    assert!(e.is_transient());
    assert!(!format!("{e} {e:?}").contains(KEY));
}

// ---------------------------------------------------------------- structured

#[tokio::test]
async fn structured_sends_response_format_and_parses_the_reply() {
    let seen = Seen::default();
    let reply = json!({"choices":[{"finish_reason":"stop","index":0,"message":{"role":"assistant","content":"Sure: {\"answer\":\"yes\",\"n\" : 3\n}"}}],"usage":{"completion_tokens":9,"prompt_tokens":20}}).to_string();
    let server = Server::start(
        Router::new().route("/v1/chat/completions", fixed(&seen, 200, &[JSON], reply)),
    );
    let schema = json!({"type":"object","properties":{"answer":{"type":"string"},"n":{"type":"integer"}},"required":["answer","n"]});
    let mut req = chat_request();
    req.schema = Some(Arc::new(schema.clone()));

    let model = server.model();
    let c = model.complete(&req).await.unwrap();
    let value = synthkit::model::parse_json_reply(&c.text).unwrap();
    assert_eq!(value, json!({"answer": "yes", "n": 3}));
    assert_eq!(c.usage.map(|u| u.completion_tokens), Some(9));
    let (_, _, body) = seen.last();
    let format = json!({"type":"json_schema","json_schema":{"name":"response","schema":schema,"strict":true}});
    assert_eq!(body["response_format"], format);

    // A streamed structured call asks for the format too (the server answers JSON here,
    // which the stream handles).
    let _ = model.stream(&req).await.unwrap();
    assert_eq!(seen.last().2["response_format"], format);

    // Without server-side schemas: no response_format.
    let model = OpenAiModel::new(server.config().with_json_schema(false)).unwrap();
    let c = model.complete(&req).await.unwrap();
    assert_eq!(
        synthkit::model::parse_json_reply(&c.text).unwrap()["answer"],
        "yes"
    );
    let (_, _, body) = seen.last();
    assert!(body.get("response_format").is_none());

    // A request without a schema never asks for a format.
    req.schema = None;
    server.model().complete(&req).await.unwrap();
    assert!(seen.last().2.get("response_format").is_none());
}

// ---------------------------------------------------------------- discovery

#[tokio::test]
async fn discovery_reads_llama_cpp_props() {
    let app = Router::new()
        .route("/props", get(|| async { axum::Json(json!({"default_generation_settings": {"n_ctx": 1024, "params": {}}, "total_slots": 4, "n_ctx": 4096})) }));
    let server = Server::start(app);
    let mut model = server.model();
    assert_eq!(
        model.info().context_window,
        synthkit::model::ModelInfo::DEFAULT_CONTEXT_WINDOW
    );
    assert_eq!(model.discover().await, Some(1024));
    assert_eq!(model.info().context_window, 1024);
    assert_eq!(model.discovered_context_window(), Some(1024));
    // An explicit window wins over discovery, and `connect` does not ask then.
    let model = OpenAiModel::connect(server.config().with_context_window(777))
        .await
        .unwrap();
    assert_eq!(model.info().context_window, 777);
    assert_eq!(model.discovered_context_window(), None);
    // `connect` discovers.
    let model = OpenAiModel::connect(server.config()).await.unwrap();
    assert_eq!(model.info().context_window, 1024);
}

#[tokio::test]
async fn discovery_reads_vllm_models_when_there_are_no_props() {
    let seen = Seen::default();
    let s2 = seen.clone();
    let app = Router::new().route(
        "/v1/models",
        get(move |h: HeaderMap| {
            let seen = s2.clone();
            async move {
                seen.push("/v1/models", &h, &Bytes::new());
                axum::Json(json!({"object":"list","data":[
                    {"id":"adapter","object":"model","max_model_len":1000},
                    {"id":"test-model","object":"model","owned_by":"vllm","root":"test-model","max_model_len":8192}]}))
            }
        }),
    );
    let server = Server::start(app);
    let mut model = server.model();
    assert_eq!(model.discover().await, Some(8192));
    assert_eq!(model.info().context_window, 8192);
    let (_, headers, _) = seen.last();
    assert_eq!(
        headers.get(header::AUTHORIZATION).unwrap(),
        &format!("Bearer {KEY}")
    );
}

/// `GET /v1/models` as llama.cpp answers it: the served model's id (its file name or
/// alias), whatever the client configured.
fn served_models_app(seen: &Seen) -> Router {
    Router::new()
        .route(
            "/v1/models",
            get(|| async {
                axum::Json(json!({"object": "list", "data": [
                    {"id": "qwen2.5-1.5b-instruct-q4_k_m.gguf", "object": "model", "owned_by": "llamacpp", "meta": {"n_ctx": 8192}},
                    {"id": "second", "object": "model"}]}))
            }),
        )
        .route("/v1/chat/completions", fixed(seen, 200, &[JSON], CHAT_OK))
}

#[tokio::test]
async fn model_discovery_uses_the_first_listed_id() {
    let seen = Seen::default();
    let server = Server::start(served_models_app(&seen));
    // Explicitly.
    let mut model = server.model();
    assert_eq!(
        model.discover_model().await.as_deref(),
        Some("qwen2.5-1.5b-instruct-q4_k_m.gguf")
    );
    assert_eq!(model.info().name, "qwen2.5-1.5b-instruct-q4_k_m.gguf");
    // Through `connect`: the listing also gives the window, and requests name the model.
    let model = OpenAiModel::connect(server.config().with_model_discovery(true))
        .await
        .unwrap();
    assert_eq!(model.info().name, "qwen2.5-1.5b-instruct-q4_k_m.gguf");
    assert_eq!(model.config().model, "qwen2.5-1.5b-instruct-q4_k_m.gguf");
    assert_eq!(model.info().context_window, 8192);
    assert_eq!(model.served_model(), None);
    model.complete(&chat_request()).await.unwrap();
    assert_eq!(seen.last().2["model"], "qwen2.5-1.5b-instruct-q4_k_m.gguf");
    // The reply names the model that answered (CHAT_OK says `tiny.gguf`).
    assert_eq!(model.served_model().as_deref(), Some("tiny.gguf"));
    // Without discovery the configured name stays.
    let model = OpenAiModel::connect(server.config()).await.unwrap();
    assert_eq!(model.info().name, "test-model");
    // A server without a listing keeps the configured name.
    let mut model = Server::start(Router::new()).model();
    assert_eq!(model.discover_model().await, None);
    assert_eq!(model.info().name, "test-model");
}

#[tokio::test]
async fn top_p_seed_and_extra_body_are_sent_in_chat_and_completion_requests() {
    let seen = Seen::default();
    let completion = r#"{"choices":[{"text":"x","index":0,"finish_reason":"stop"}]}"#;
    let streamed = sse(&[
        &chat_chunk("x"),
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    let app = Router::new()
        .route("/v1/chat/completions", fixed(&seen, 200, &[JSON], CHAT_OK))
        .route("/v1/completions", fixed(&seen, 200, &[JSON], completion))
        .route("/v2/chat/completions", fixed(&seen, 200, &[SSE], streamed));
    let server = Server::start(app);
    let mut extra = serde_json::Map::new();
    extra.insert("min_p".into(), json!(0.05));
    extra.insert("cache_prompt".into(), json!(true));
    let config = server
        .config()
        .with_temperature(0.7)
        .with_top_p(0.9)
        .with_seed(1234)
        .with_extra_body_fields(extra);
    let check = |body: &Value| {
        assert!(
            (body["temperature"].as_f64().unwrap() - 0.7).abs() < 1e-6,
            "{body}"
        );
        assert!(
            (body["top_p"].as_f64().unwrap() - 0.9).abs() < 1e-6,
            "{body}"
        );
        assert_eq!(body["seed"], 1234, "{body}");
        assert_eq!(body["min_p"], 0.05, "{body}");
        assert_eq!(body["cache_prompt"], true, "{body}");
    };
    let chat = OpenAiModel::new(config.clone()).unwrap();
    chat.complete(&chat_request()).await.unwrap();
    check(&seen.last().2);
    let completions = OpenAiModel::new(config.clone().with_chat(false)).unwrap();
    completions.complete(&chat_request()).await.unwrap();
    let (path, _, body) = seen.last();
    assert_eq!(path, "/v1/completions");
    check(&body);
    let base = config.base().replace("/v1", "/v2");
    let streaming = OpenAiModel::new(config.with_base_url(base)).unwrap();
    collect(streaming.stream(&chat_request()).await.unwrap()).await;
    let (path, _, body) = seen.last();
    assert_eq!(
        (path.as_str(), &body["stream"]),
        ("/v2/chat/completions", &json!(true))
    );
    check(&body);
    // Unset, they are left out.
    server.model().complete(&chat_request()).await.unwrap();
    let (_, _, body) = seen.last();
    assert!(
        body.get("top_p").is_none() && body.get("seed").is_none(),
        "{body}"
    );
}

#[tokio::test]
async fn discovery_without_answers_keeps_the_default() {
    let server = Server::start(Router::new());
    let mut model = server.model();
    assert_eq!(model.discover().await, None);
    assert_eq!(
        model.info().context_window,
        synthkit::model::ModelInfo::DEFAULT_CONTEXT_WINDOW
    );
}

// ---------------------------------------------------------------- server tokenizer

/// A fake llama.cpp `/tokenize`: one token per whitespace-separated word.
fn llama_tokenize_app(calls: Arc<AtomicUsize>) -> Router {
    Router::new()
        .route(
            "/tokenize",
            post(move |body: axum::Json<Value>| {
                let calls = calls.clone();
                async move {
                    calls.fetch_add(1, Ordering::SeqCst);
                    match body.get("content").and_then(Value::as_str) {
                        Some(text) => {
                            let tokens: Vec<u32> =
                                text.split_whitespace().map(|w| w.len() as u32).collect();
                            axum::Json(json!({"tokens": tokens})).into_response()
                        }
                        None => axum::Json(json!({"tokens": []})).into_response(),
                    }
                }
            }),
        )
        .route(
            // A ChatML template: `<|im_start|>ROLE CONTENT<|im_end|>` per message, then the
            // reply's opening.
            "/apply-template",
            post(|body: axum::Json<Value>| async move {
                let mut prompt = String::new();
                for m in body["messages"].as_array().unwrap() {
                    prompt.push_str(&format!(
                        "<|im_start|>{} {} <|im_end|> ",
                        m["role"].as_str().unwrap(),
                        m["content"].as_str().unwrap()
                    ));
                }
                prompt.push_str("<|im_start|>assistant");
                axum::Json(json!({ "prompt": prompt }))
            }),
        )
        .route(
            "/detokenize",
            post(|body: axum::Json<Value>| async move {
                let words: Vec<String> = body["tokens"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| "x".repeat(t.as_u64().unwrap() as usize))
                    .collect();
                axum::Json(json!({"content": words.join(" ")}))
            }),
        )
}

#[tokio::test]
async fn llama_cpp_counter_counts_batches_caches_and_fails_loudly() {
    let calls = Arc::new(AtomicUsize::new(0));
    let mut server = Server::start(llama_tokenize_app(calls.clone()));
    let counter = ServerCounter::probe(&server.config()).await.expect("probe");
    assert_eq!(counter.dialect(), TokenizeDialect::LlamaCpp);
    assert_eq!(counter.name(), "llama.cpp:/tokenize");
    let text = "one two three four five";
    assert_eq!(counter.count(text).await.unwrap(), 5);
    let before = calls.load(Ordering::SeqCst);
    assert_eq!(counter.count(text).await.unwrap(), 5);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        before,
        "the second count is cached"
    );
    assert_eq!(counter.cached(), 1);
    assert_eq!(counter.count("").await.unwrap(), 0);
    assert_eq!(counter.encode("ab cde").await.unwrap(), vec![2, 3]);
    assert_eq!(counter.decode(&[2, 3]).await.unwrap(), "xx xxx");
    // A batch: distinct texts once each, in order, repeated ones from the cache.
    let before = calls.load(Ordering::SeqCst);
    let counts = counter
        .count_texts(&["w w", "w w w", "w w", text, ""])
        .await
        .unwrap();
    assert_eq!(counts, vec![2, 3, 2, 5, 0]);
    assert_eq!(calls.load(Ordering::SeqCst), before + 2);
    // Whole prompts, as the packing path asks: a chat prompt through the chat template
    // (`<|im_start|>user a b <|im_end|> <|im_start|>assistant` is 5 words).
    let prompts = [
        RenderedPrompt::Text("a b c".into()),
        RenderedPrompt::Chat(vec![ChatMessage::new(Role::User, "a b")]),
    ];
    let counts = counter.count_prompts(&prompts).await.unwrap();
    assert_eq!(counts, vec![3, 5]);

    // The model hands it out as its exact counter.
    let mut model = server.model();
    assert!(model.counter().is_none());
    assert!(model.use_server_counter().await);
    assert_eq!(model.counter().unwrap().name(), "llama.cpp:/tokenize");
    let model = OpenAiModel::connect(server.config().with_server_tokenizer(true))
        .await
        .unwrap();
    assert!(model.counter().is_some());

    // Server gone: a count is an error (never a silent switch to another tokenizer);
    // cached counts still hold.
    server.stop();
    let uncached = "a completely new text to count";
    assert!(counter.count(uncached).await.is_err());
    assert_eq!(counter.count(text).await.unwrap(), 5);
}

#[tokio::test]
async fn vllm_tokenize_dialect() {
    let seen = Seen::default();
    let s2 = seen.clone();
    let app = Router::new().route(
        "/tokenize",
        post(move |h: HeaderMap, b: Bytes| {
            let seen = s2.clone();
            async move {
                seen.push("/tokenize", &h, &b);
                let v: Value = serde_json::from_slice(&b).unwrap();
                match v.get("prompt").and_then(Value::as_str) {
                    Some(p) => {
                        let tokens: Vec<u32> = p.split_whitespace().map(|_| 7).collect();
                        axum::Json(json!({"count": tokens.len(), "max_model_len": 8192, "tokens": tokens, "token_strs": null})).into_response()
                    }
                    None => (StatusCode::BAD_REQUEST, axum::Json(json!({"object":"error","message":"Field required: prompt","type":"BadRequestError","code":400}))).into_response(),
                }
            }
        }),
    );
    let server = Server::start(app);
    let counter = ServerCounter::probe(&server.config()).await.expect("probe");
    assert_eq!(counter.dialect(), TokenizeDialect::Vllm);
    assert_eq!(counter.count("a b c d").await.unwrap(), 4);
    let (_, headers, body) = seen.last();
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["prompt"], "a b c d");
    assert_eq!(
        headers.get(header::AUTHORIZATION).unwrap(),
        &format!("Bearer {KEY}")
    );
}

#[tokio::test]
async fn no_tokenize_endpoint_means_no_server_tokenizer() {
    let server = Server::start(Router::new());
    assert!(ServerCounter::probe(&server.config()).await.is_none());
    let mut model = server.model();
    assert!(!model.use_server_counter().await);
    let model = OpenAiModel::connect(server.config().with_server_tokenizer(true))
        .await
        .unwrap();
    assert!(model.counter().is_none());
}

// ---------------------------------------------------------------- secrets

#[tokio::test]
async fn the_api_key_never_shows() {
    let config = OpenAiConfig::new("m").with_api_key(KEY);
    let model = OpenAiModel::new(config.clone()).unwrap();
    for text in [
        format!("{config:?}"),
        format!("{config:#?}"),
        format!("{model:?}"),
    ] {
        assert!(!text.contains(KEY), "{text}");
        assert!(!text.contains("SECRET"), "{text}");
    }
    assert!(format!("{config:?}").contains("[REDACTED]"));

    // Servers that echo the key back in their error bodies.
    let echo: &'static str =
        Box::leak(format!("{{\"error\":{{\"message\":\"bad key {KEY}\"}}}}").into_boxed_str());
    let ctx: &'static str = Box::leak(
        format!(r#"{{"error":{{"code":400,"message":"{KEY}: This model's maximum context length is 10 tokens","type":"invalid_request_error"}}}}"#)
            .into_boxed_str(),
    );
    let malformed: &'static str = Box::leak(format!("<html>{KEY}").into_boxed_str());
    let cases: Vec<(u16, &'static str)> = vec![
        (401, echo),
        (429, echo),
        (500, echo),
        (404, echo),
        (400, ctx),
        (200, malformed),
        (200, echo),
    ];
    for (status, body) in cases {
        let e = error_for(status, &[], body).await;
        let shown = format!("{e} {e:?}");
        assert!(!shown.contains(KEY), "{status}: {shown}");
        assert!(shown.contains("[REDACTED]"), "{status}: {shown}");
    }
    // In a stream too.
    let seen = Seen::default();
    let body = sse(&[&format!(r#"{{"error":{{"code":500,"message":"{KEY}"}}}}"#)]);
    let server =
        Server::start(Router::new().route("/v1/chat/completions", fixed(&seen, 200, &[SSE], body)));
    let events = collect(server.model().stream(&chat_request()).await.unwrap()).await;
    let shown = format!("{events:?}");
    assert!(
        !shown.contains(KEY) && shown.contains("[REDACTED]"),
        "{shown}"
    );
    // The key still went out where it belongs.
    assert_eq!(
        seen.last().1.get(header::AUTHORIZATION).unwrap(),
        &format!("Bearer {KEY}")
    );
    assert!(seen.len() >= 1);
}
