//! Shared test helpers: the fake model, a running service, SSE parsing.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, missing_docs)]

pub mod raw;

use std::time::Duration;

use serde_json::Value;
use synthkit::backend::openai::OpenAiConfig;
use synthkit_serve::{ApiKeys, AppState, Backend, BackendConfig, Metrics, ServiceLimits, serve};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A running service on 127.0.0.1.
pub struct Service {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    pub state: AppState,
    stop: Option<oneshot::Sender<()>>,
    pub task: Option<JoinHandle<Result<(), synthkit_serve::ServeError>>>,
}

impl Service {
    /// Starts the service for `backend` with `limits` and optional keys.
    pub async fn start(backend: BackendConfig, limits: ServiceLimits, keys: Option<&str>) -> Self {
        let metrics = Metrics::new();
        let stack = Backend::build(backend, metrics.clone()).await.unwrap();
        let keys = keys.map(|k| ApiKeys::parse(k).unwrap());
        let state = AppState::new(stack, limits, keys, metrics);
        Self::start_state(state).await
    }

    /// Starts the service on `state`.
    pub async fn start_state(state: AppState) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stop_rx) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(listener, state.clone(), async move {
            let _ = stop_rx.await;
        }));
        Self {
            url: format!("http://{addr}"),
            state,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Triggers the graceful shutdown; returns the serve task.
    pub fn shutdown(&mut self) -> JoinHandle<Result<(), synthkit_serve::ServeError>> {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        self.task.take().unwrap()
    }

    pub fn synthesize_url(&self) -> String {
        format!("{}/v1/synthesize", self.url)
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(t) = &self.task {
            t.abort();
        }
    }
}

/// The OpenAI backend for a fake model at `base`: no retries, no discovery of the
/// tokenizer, a short timeout.
pub fn openai_backend(base: &str) -> BackendConfig {
    let config = OpenAiConfig::new("fake-model")
        .with_base_url(base)
        .with_timeout(Duration::from_secs(20))
        .with_context_window(4096);
    let mut backend = BackendConfig::openai(config).with_retry(None);
    backend.server_tokenizer = false;
    backend
}

/// Parses an SSE body into `(event, data)` pairs (comments skipped).
pub fn parse_sse(body: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for block in body.split("\n\n") {
        let mut event = String::from("message");
        let mut data = String::new();
        for line in block.lines() {
            if let Some(e) = line.strip_prefix("event:") {
                event = e.trim().to_string();
            } else if let Some(d) = line.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(d.strip_prefix(' ').unwrap_or(d));
            }
        }
        if !data.is_empty() {
            out.push((event, serde_json::from_str(&data).unwrap()));
        }
    }
    out
}

/// Sample nodes: four short documents about a telescope.
pub fn nodes() -> Value {
    serde_json::json!([
        "The dome opens at dusk when the humidity is below 80 percent.",
        {"id": "mirror", "text": "The primary mirror is cleaned every six months with CO2 snow.",
         "metadata": {"file": "maintenance.md"}, "score": 0.9},
        {"node": {"id_": "li", "text": "The secondary mirror is aligned every year.",
                  "metadata": {}}, "score": 0.7},
        {"id_": "ccd", "text": "The camera is cooled to minus 100 degrees Celsius."}
    ])
}
