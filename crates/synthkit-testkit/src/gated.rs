//! [`GatedOpenAi`]: an OpenAI-compatible model that holds every completion until the test
//! opens its gate, so a request stays in flight exactly as long as the test needs: no
//! delay to guess, on a loaded machine or not.
//!
//! `POST /v1/chat/completions` (plain or streamed) is counted on arrival, waits for the
//! gate, then answers a short fixed reply; `GET /v1/models` lists `gated-model`. A request
//! still held when the server is dropped is cut off with it.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::openai::{chat_reply, chat_stream};
use crate::server::Server;

/// The reply once the gate is open.
pub const GATED_REPLY: &str = "The gate opened.";

#[derive(Clone)]
struct Gate {
    open: watch::Sender<bool>,
    arrived: watch::Sender<usize>,
    answered: watch::Sender<usize>,
}

/// A running gated model; dropping it stops the server.
pub struct GatedOpenAi {
    /// `http://127.0.0.1:PORT/v1`.
    pub base: String,
    gate: Gate,
    _server: Server,
}

impl GatedOpenAi {
    /// Starts one with its gate shut.
    pub fn start() -> Self {
        let gate = Gate {
            open: watch::channel(false).0,
            arrived: watch::channel(0).0,
            answered: watch::channel(0).0,
        };
        let server = Server::start_openai(post(chat), get(models), gate.clone());
        Self {
            base: server.base.clone(),
            gate,
            _server: server,
        }
    }

    /// Opens the gate: held completions are answered, later ones at once.
    pub fn open(&self) {
        self.gate.open.send_replace(true);
    }

    /// Completion requests that reached the model.
    pub fn arrived(&self) -> usize {
        *self.gate.arrived.borrow()
    }

    /// Completion requests answered (after the gate opened).
    pub fn answered(&self) -> usize {
        *self.gate.answered.borrow()
    }

    /// Waits until `n` completion requests have reached the model; panics after `limit`.
    pub async fn wait_arrived(&self, n: usize, limit: Duration) {
        let mut arrived = self.gate.arrived.subscribe();
        let reached = tokio::time::timeout(limit, arrived.wait_for(|a| *a >= n)).await;
        assert!(
            matches!(reached, Ok(Ok(_))),
            "{} of {n} completion requests reached the gated model within {limit:?}",
            self.arrived()
        );
    }
}

async fn models() -> Json<Value> {
    Json(json!({"object": "list", "data": [{"id": "gated-model", "object": "model"}]}))
}

async fn chat(State(gate): State<Gate>, Json(body): Json<Value>) -> Response {
    gate.arrived.send_modify(|n| *n += 1);
    let mut open = gate.open.subscribe();
    // The sender lives as long as the server: an error only comes with its end.
    let _ = open.wait_for(|o| *o).await;
    gate.answered.send_modify(|n| *n += 1);
    let usage = json!({"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14});
    if body["stream"].as_bool() == Some(true) {
        return chat_stream("gated-model", &["The gate ", "opened."], "stop", &usage);
    }
    Json(chat_reply("gated-model", GATED_REPLY, "stop", &usage)).into_response()
}
