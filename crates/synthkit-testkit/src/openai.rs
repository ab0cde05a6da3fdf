//! [`FakeOpenAi`]: an OpenAI-compatible model on 127.0.0.1.
//!
//! `POST /v1/chat/completions` (plain or streamed) waits [`FakeConfig::delay`], then
//! answers [`FakeConfig::reply`] with usage and [`FakeConfig::finish_reason`], or fails
//! with [`FakeConfig::status`] (with `Retry-After` when [`FakeConfig::retry_after`] is
//! set); `GET /v1/models` lists [`FakeConfig::model`]. Every completion request is
//! recorded with its arrival time, its charge (prompt tokens counted with cl100k_base over
//! the messages, plus `max_tokens`) and its body, so a test can count what reached the
//! model. What it answers can be changed while it runs ([`FakeOpenAi::set`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::server::Server;

/// What the fake answers.
#[derive(Clone, Debug)]
pub struct FakeConfig {
    /// Time before the reply (before the first chunk of a stream).
    pub delay: Duration,
    /// The reply's text.
    pub reply: String,
    /// Status of every completion answer (200: normal).
    pub status: u16,
    /// `Retry-After` seconds sent with a failure status, if any.
    pub retry_after: Option<u64>,
    /// The finish reason of a successful reply (`stop`; `length` for a cut reply).
    pub finish_reason: String,
    /// The model id listed by `/models` and named in replies.
    pub model: String,
}

impl Default for FakeConfig {
    fn default() -> Self {
        Self {
            delay: Duration::ZERO,
            reply: "The primary mirror is cleaned every six months.".into(),
            status: 200,
            retry_after: None,
            finish_reason: "stop".into(),
            model: "fake-model".into(),
        }
    }
}

impl FakeConfig {
    /// Answers every completion with `reply`.
    pub fn replying(reply: &str) -> Self {
        Self {
            reply: reply.into(),
            ..Self::default()
        }
    }

    /// Fails every completion with `status` (and `Retry-After: retry_after` if given).
    pub fn failing(status: u16, retry_after: Option<u64>) -> Self {
        Self {
            status,
            retry_after,
            ..Self::default()
        }
    }
}

/// One completion request as the fake saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    /// When it arrived.
    pub at: Instant,
    /// Its prompt, counted as OpenAI counts chat messages.
    pub prompt_tokens: u64,
    /// Its `max_tokens` (or `max_completion_tokens`), 0 when absent.
    pub max_tokens: u64,
    /// The request body.
    pub body: Value,
    /// The request's `Authorization` header, if any.
    pub authorization: Option<String>,
}

#[derive(Default)]
struct Record {
    models: AtomicUsize,
    started: AtomicUsize,
    finished: AtomicUsize,
    seen: Mutex<Vec<Seen>>,
}

#[derive(Clone)]
struct Fake {
    config: Arc<Mutex<FakeConfig>>,
    record: Arc<Record>,
}

/// A running fake; dropping it stops the server.
pub struct FakeOpenAi {
    /// `http://127.0.0.1:PORT/v1`.
    pub base: String,
    fake: Fake,
    server: Server,
}

impl FakeOpenAi {
    /// Starts a fake on a loopback port, on a thread of its own (usable from synchronous
    /// and asynchronous tests alike).
    pub fn start(config: FakeConfig) -> Self {
        let fake = Fake {
            config: Arc::new(Mutex::new(config)),
            record: Arc::new(Record::default()),
        };
        let server = Server::start_openai(post(chat), get(models), fake.clone());
        Self {
            base: server.base.clone(),
            fake,
            server,
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.server.port()
    }

    /// Completion requests that reached the fake.
    pub fn requests(&self) -> usize {
        self.fake.record.started.load(Ordering::SeqCst)
    }

    /// Completion requests answered in full.
    pub fn finished(&self) -> usize {
        self.fake.record.finished.load(Ordering::SeqCst)
    }

    /// `GET /v1/models` requests so far.
    pub fn models_calls(&self) -> usize {
        self.fake.record.models.load(Ordering::SeqCst)
    }

    /// Every completion request seen so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.fake.record.seen.lock().unwrap().clone()
    }

    /// The bodies of every completion request seen so far.
    pub fn bodies(&self) -> Vec<Value> {
        self.seen().into_iter().map(|s| s.body).collect()
    }

    /// Changes what the fake answers from now on.
    pub fn set(&self, config: FakeConfig) {
        *self.fake.config.lock().unwrap() = config;
    }

    /// Stops the server now; later connections are refused.
    pub fn stop(&mut self) {
        self.server.stop();
    }

    /// Serves again on the same port after [`FakeOpenAi::stop`] (a server that was down
    /// and is back), with the same record and configuration.
    pub fn restart(&mut self) {
        self.server.stop();
        let port = self.server.port();
        self.server = Server::start_openai_on(port, post(chat), get(models), self.fake.clone());
    }
}

async fn models(State(fake): State<Fake>) -> Json<Value> {
    fake.record.models.fetch_add(1, Ordering::SeqCst);
    let model = fake.config.lock().unwrap().model.clone();
    Json(json!({"object": "list", "data": [{"id": model, "object": "model"}]}))
}

/// Counts a chat body's prompt as OpenAI does: each message's content, plus 3 tokens a
/// message and 3 for the reply's priming.
pub fn prompt_tokens(body: &Value) -> u64 {
    let bpe = bpe_openai::cl100k_base();
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let content: usize = messages
        .iter()
        .map(|m| bpe.count(m["content"].as_str().unwrap_or("")) + 3)
        .sum();
    (content + 3) as u64
}

/// A complete chat-completion reply.
pub fn chat_reply(model: &str, text: &str, finish_reason: &str, usage: &Value) -> Value {
    json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "finish_reason": finish_reason,
            "message": {"role": "assistant", "content": text}}],
        "usage": usage,
    })
}

/// The URLs of the `image_url` parts of a chat request `body`, in message order.
pub fn image_urls(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|p| p["type"] == "image_url")
        .filter_map(|p| p["image_url"]["url"].as_str().map(str::to_string))
        .collect()
}

/// A streamed chat completion: one chunk per delta, the finish reason, the usage, `[DONE]`.
pub fn chat_stream(model: &str, deltas: &[&str], finish_reason: &str, usage: &Value) -> Response {
    let deltas: Vec<Value> = deltas.iter().map(|d| json!({"content": d})).collect();
    chat_stream_deltas(model, &deltas, finish_reason, usage)
}

/// A streamed chat completion of whole `delta` objects (`{"reasoning_content": ...}`,
/// `{"content": ...}`), one chunk each, then the finish reason, the usage and `[DONE]`.
pub fn chat_stream_deltas(
    model: &str,
    deltas: &[Value],
    finish_reason: &str,
    usage: &Value,
) -> Response {
    let mut out = String::new();
    for delta in deltas {
        let chunk = json!({"choices":[{"index":0,"finish_reason":null,"delta":delta}],
            "object":"chat.completion.chunk","model":model});
        out.push_str(&format!("data: {chunk}\n\n"));
    }
    let end = json!({"choices":[{"index":0,"finish_reason":finish_reason,"delta":{}}],
        "object":"chat.completion.chunk","model":model});
    let usage = json!({"choices":[],"object":"chat.completion.chunk","usage":usage});
    out.push_str(&format!("data: {end}\n\ndata: {usage}\n\ndata: [DONE]\n\n"));
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from(out))
        .unwrap()
}

/// An OpenAI-style error reply with `status` (and `Retry-After` if given).
pub fn error_reply(status: u16, retry_after: Option<u64>, message: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap();
    let body = Json(json!({"error": {"message": message, "type": "fake_error"}}));
    match retry_after {
        Some(secs) => (status, [("retry-after", secs.to_string())], body).into_response(),
        None => (status, body).into_response(),
    }
}

async fn chat(
    State(fake): State<Fake>,
    headers: axum::http::HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let config = fake.config.lock().unwrap().clone();
    let prompt = prompt_tokens(&body);
    let max_tokens = body["max_tokens"]
        .as_u64()
        .or_else(|| body["max_completion_tokens"].as_u64())
        .unwrap_or(0);
    fake.record.started.fetch_add(1, Ordering::SeqCst);
    fake.record.seen.lock().unwrap().push(Seen {
        at: Instant::now(),
        prompt_tokens: prompt,
        max_tokens,
        authorization: headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        body: body.clone(),
    });
    tokio::time::sleep(config.delay).await;
    if config.status != 200 {
        return error_reply(config.status, config.retry_after, "fake failure");
    }
    let completion = bpe_openai::cl100k_base().count(&config.reply) as u64;
    let usage = json!({"prompt_tokens": prompt, "completion_tokens": completion,
        "total_tokens": prompt + completion});
    fake.record.finished.fetch_add(1, Ordering::SeqCst);
    if body["stream"].as_bool() == Some(true) {
        let words: Vec<&str> = config.reply.split_inclusive(' ').collect();
        return chat_stream(&config.model, &words, &config.finish_reason, &usage);
    }
    Json(chat_reply(
        &config.model,
        &config.reply,
        &config.finish_reason,
        &usage,
    ))
    .into_response()
}
