//! A fake OpenAI-compatible model on 127.0.0.1, for the tests and the load program.
//!
//! `POST /v1/chat/completions` (plain or streamed) waits `delay`, then answers `reply`
//! with usage; `GET /v1/models` lists one model. Every completion request is recorded
//! with its arrival time and its charge (prompt tokens counted with cl100k_base over the
//! messages, plus `max_tokens`), so callers can measure what reached the model.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use synthkit::text::{BpeTokenizer, Tokenizer};

/// What the fake answers.
#[derive(Clone, Debug)]
pub struct FakeConfig {
    /// Time before the reply (before the first chunk of a stream).
    pub delay: Duration,
    /// The reply's text.
    pub reply: String,
    /// Status of every completion answer (200: normal).
    pub status: u16,
}

impl Default for FakeConfig {
    fn default() -> Self {
        Self {
            delay: Duration::ZERO,
            reply: "The primary mirror is cleaned every six months.".into(),
            status: 200,
        }
    }
}

/// One completion request as the fake saw it.
#[derive(Clone, Copy, Debug)]
pub struct Seen {
    pub at: Instant,
    pub prompt_tokens: u64,
    pub max_tokens: u64,
}

#[derive(Default)]
pub struct Record {
    /// `GET /v1/models` requests (readiness checks).
    pub models: AtomicUsize,
    pub started: AtomicUsize,
    pub finished: AtomicUsize,
    pub seen: Mutex<Vec<Seen>>,
}

#[derive(Clone)]
struct Fake {
    config: Arc<Mutex<FakeConfig>>,
    record: Arc<Record>,
}

/// A running fake; dropping it stops the server.
pub struct FakeLlm {
    /// `http://127.0.0.1:PORT/v1`.
    pub base: String,
    pub record: Arc<Record>,
    config: Arc<Mutex<FakeConfig>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeLlm {
    /// Starts a fake on the current runtime.
    pub async fn start(config: FakeConfig) -> Self {
        let fake = Fake {
            config: Arc::new(Mutex::new(config)),
            record: Arc::new(Record::default()),
        };
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/models", get(models))
            .with_state(fake.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            base: format!("http://{addr}/v1"),
            record: fake.record,
            config: fake.config,
            task,
        }
    }

    /// Completion requests that reached the fake.
    pub fn requests(&self) -> usize {
        self.record.started.load(Ordering::SeqCst)
    }

    /// Completion requests answered in full.
    pub fn finished(&self) -> usize {
        self.record.finished.load(Ordering::SeqCst)
    }

    /// `GET /v1/models` requests so far.
    pub fn models_calls(&self) -> usize {
        self.record.models.load(Ordering::SeqCst)
    }

    /// Every request seen so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.record.seen.lock().unwrap().clone()
    }

    /// Changes what the fake answers from now on.
    pub fn set(&self, config: FakeConfig) {
        *self.config.lock().unwrap() = config;
    }
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn models(State(fake): State<Fake>) -> Json<Value> {
    fake.record.models.fetch_add(1, Ordering::SeqCst);
    Json(json!({"object": "list", "data": [{"id": "fake-model", "object": "model"}]}))
}

/// Counts a chat body's prompt as OpenAI does: each message's content, plus 3 tokens a
/// message and 3 for the reply's priming.
fn prompt_tokens(body: &Value) -> u64 {
    let tokenizer = BpeTokenizer::cl100k_base();
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let content: usize = messages
        .iter()
        .map(|m| tokenizer.count(m["content"].as_str().unwrap_or("")) + 3)
        .sum();
    (content + 3) as u64
}

async fn chat(State(fake): State<Fake>, Json(body): Json<Value>) -> Response {
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
    });
    tokio::time::sleep(config.delay).await;
    if config.status != 200 {
        let status = StatusCode::from_u16(config.status).unwrap();
        return (status, Json(json!({"error": {"message": "fake failure"}}))).into_response();
    }
    let completion = BpeTokenizer::cl100k_base().count(&config.reply) as u64;
    let usage = json!({"prompt_tokens": prompt, "completion_tokens": completion,
        "total_tokens": prompt + completion});
    fake.record.finished.fetch_add(1, Ordering::SeqCst);
    if body["stream"].as_bool() == Some(true) {
        let mut out = String::new();
        for word in config.reply.split_inclusive(' ') {
            let chunk = json!({"choices":[{"index":0,"finish_reason":null,"delta":{"content":word}}],
                "object":"chat.completion.chunk","model":"fake-model"});
            out.push_str(&format!("data: {chunk}\n\n"));
        }
        let end = json!({"choices":[{"index":0,"finish_reason":"stop","delta":{}}],
            "object":"chat.completion.chunk","model":"fake-model"});
        let usage = json!({"choices":[],"object":"chat.completion.chunk","usage":usage});
        out.push_str(&format!("data: {end}\n\ndata: {usage}\n\ndata: [DONE]\n\n"));
        return Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .body(Body::from(out))
            .unwrap();
    }
    Json(json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": "fake-model",
        "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": config.reply}}],
        "usage": usage,
    }))
    .into_response()
}
