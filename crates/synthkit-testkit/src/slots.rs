//! [`SlotServer`]: a llama.cpp-like server with slots, on 127.0.0.1, that records what
//! each request asked of them.
//!
//! `GET /props` reports `total_slots` (or nothing, as servers without slots do);
//! `POST /v1/chat/completions` and `POST /v1/messages` wait [`SlotConfig::delay`] and
//! answer a short reply with usage, or, when [`SlotConfig::refuse`] names a field the
//! body carries, an HTTP 400 naming it (as a server that validates its fields does).
//! Every call is recorded in arrival order ([`SlotCall`]: the body's `id_slot`, its
//! messages, the whole body, whether it was refused), with how many were in flight at
//! once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::openai::{chat_reply, error_reply};
use crate::server::Server;

/// What the server reports and does.
#[derive(Clone, Debug, Default)]
pub struct SlotConfig {
    /// `total_slots` in `/props`; `None`: `/props` says nothing of slots.
    pub slots: Option<usize>,
    /// A body field the server refuses with HTTP 400, at any depth of the body
    /// (`id_slot`, `prompt_cache_key`, `cache_control`...).
    pub refuse: Option<String>,
    /// Time before each reply.
    pub delay: Duration,
}

/// One model call as the server saw it.
#[derive(Clone, Debug)]
pub struct SlotCall {
    /// The path (`/v1/chat/completions`, `/v1/messages`).
    pub path: String,
    /// The body's `id_slot`, when it carried one.
    pub id_slot: Option<u64>,
    /// The body's messages.
    pub messages: Vec<Value>,
    /// The whole body.
    pub body: Value,
    /// Whether the server refused it (the field [`SlotConfig::refuse`] names).
    pub refused: bool,
}

struct Shared {
    config: SlotConfig,
    calls: Mutex<Vec<SlotCall>>,
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
}

/// A running slot server; dropping it stops it.
pub struct SlotServer {
    /// The loopback server (`base` is `http://127.0.0.1:PORT/v1`).
    pub server: Server,
    state: Arc<Shared>,
}

impl SlotServer {
    /// Starts a server with `config` on a free loopback port.
    pub fn start(config: SlotConfig) -> Self {
        let state = Arc::new(Shared {
            config,
            calls: Mutex::default(),
            in_flight: AtomicUsize::new(0),
            most_in_flight: AtomicUsize::new(0),
        });
        let app = Router::new()
            .route("/props", get(props))
            .route("/v1/chat/completions", post(call))
            .route("/v1/messages", post(call))
            .with_state(Arc::clone(&state));
        Self {
            server: Server::start(app),
            state,
        }
    }

    /// The base URL, `http://127.0.0.1:PORT/v1`.
    pub fn base(&self) -> &str {
        &self.server.base
    }

    /// Every call so far, in arrival order.
    pub fn calls(&self) -> Vec<SlotCall> {
        self.state.calls.lock().unwrap().clone()
    }

    /// The most calls that were in flight at once.
    pub fn most_in_flight(&self) -> usize {
        self.state.most_in_flight.load(Ordering::SeqCst)
    }
}

async fn props(State(state): State<Arc<Shared>>) -> Json<Value> {
    let mut props = json!({"default_generation_settings": {"n_ctx": 4096}});
    if let Some(n) = state.config.slots {
        props["total_slots"] = json!(n);
    }
    Json(props)
}

async fn call(
    State(state): State<Arc<Shared>>,
    uri: axum::http::Uri,
    Json(body): Json<Value>,
) -> Response {
    let refused = state
        .config
        .refuse
        .as_deref()
        .is_some_and(|field| body.to_string().contains(&format!("\"{field}\":")));
    let path = uri.path().to_string();
    state.calls.lock().unwrap().push(SlotCall {
        path: path.clone(),
        id_slot: body.get("id_slot").and_then(Value::as_u64),
        messages: body["messages"].as_array().cloned().unwrap_or_default(),
        body: body.clone(),
        refused,
    });
    if refused {
        let field = state.config.refuse.clone().unwrap_or_default();
        return error_reply(400, None, &format!("Unknown field: {field}"));
    }
    let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    state.most_in_flight.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(state.config.delay).await;
    state.in_flight.fetch_sub(1, Ordering::SeqCst);
    if path.ends_with("/messages") {
        return Json(crate::anthropic::message_reply("Every six months.", 20, 4)).into_response();
    }
    let usage = json!({"prompt_tokens": 20, "completion_tokens": 4, "total_tokens": 24});
    Json(chat_reply("slots", "Every six months.", "stop", &usage)).into_response()
}
