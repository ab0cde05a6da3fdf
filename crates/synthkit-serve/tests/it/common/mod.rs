//! Shared test helpers: a running service, the backend for a fake model, requests and
//! their answers (JSON or SSE), polling with a deadline, the examples' numeric flags.
//! Also compiled into the example programs (`examples/load.rs`, `examples/slow_bodies.rs`),
//! which use only part of it.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, missing_docs)]

pub mod raw;

use std::time::Duration;

use serde_json::{Value, json};
use synthkit::backend::connect::Counting;
use synthkit::backend::openai::OpenAiConfig;
use synthkit::layer::retry::RetryPolicy;
use synthkit_serve::{ApiKeys, AppState, Backend, Metrics, ModelSetup, ServiceLimits, serve};
use synthkit_testkit::{FakeConfig, FakeOpenAi};
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
    pub async fn start(backend: ModelSetup, limits: ServiceLimits, keys: Option<&str>) -> Self {
        let metrics = Metrics::new();
        let stack = Backend::build(backend, metrics.clone()).await.unwrap();
        let keys = keys.map(|k| ApiKeys::parse(k).unwrap());
        let state = AppState::new(stack, limits, keys, metrics);
        Self::start_state(state).await
    }

    /// The offline (extractive) backend with `limits`, no keys.
    pub async fn extractive(limits: ServiceLimits) -> Self {
        Self::start(ModelSetup::extractive(), limits, None).await
    }

    /// The offline (extractive) backend with the default limits, asking for one of `keys`
    /// (an API key file's text).
    pub async fn extractive_with_keys(keys: &str) -> Self {
        Self::start(
            ModelSetup::extractive(),
            ServiceLimits::default(),
            Some(keys),
        )
        .await
    }

    /// The fake model `fake` behind the service, with `limits`, no keys.
    pub async fn openai(fake: &FakeOpenAi, limits: ServiceLimits) -> Self {
        Self::start(openai_backend(&fake.base), limits, None).await
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

    /// `GET {path}` (`/readyz`, `/healthz`, ...) with `client`: the response.
    pub async fn get(&self, client: &reqwest::Client, path: &str) -> reqwest::Response {
        client
            .get(format!("{}{path}", self.url))
            .send()
            .await
            .unwrap()
    }

    /// `POST /v1/synthesize` with `body`: the status and the JSON answer.
    pub async fn post(&self, body: &Value) -> (u16, Value) {
        let r = reqwest::Client::new()
            .post(self.synthesize_url())
            .json(body)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap())
    }

    /// `POST /v1/synthesize` with `body` and `"stream": true`: the status, the content
    /// type and the events.
    pub async fn post_stream(&self, body: &Value) -> (u16, String, Vec<(String, Value)>) {
        let mut body = body.clone();
        body["stream"] = json!(true);
        let r = reqwest::Client::new()
            .post(self.synthesize_url())
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let content_type = r
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        (status, content_type, parse_sse(&r.text().await.unwrap()))
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
pub fn openai_backend(base: &str) -> ModelSetup {
    let config = OpenAiConfig::new("fake-model")
        .with_base_url(base)
        .with_timeout(Duration::from_secs(20))
        .with_context_window(4096);
    ModelSetup::openai(config)
        .with_counting(Counting::AsConfigured)
        .map_stack(|s| s.with_retry(RetryPolicy::none()))
}

/// The ids of a response's `source_nodes`, in order.
pub fn source_ids(response: &Value) -> Vec<&str> {
    response["source_nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect()
}

/// Checks an error body: its `kind`, and a message that contains `needle`.
pub fn assert_error_body(e: &Value, kind: &str, needle: &str) {
    assert_eq!(e["error"]["kind"], kind, "{e}");
    let message = e["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains(needle), "no {needle:?} in {e}");
}

/// A fake model that waits `delay` before each reply.
pub fn slow_fake(delay: Duration) -> FakeOpenAi {
    FakeOpenAi::start(FakeConfig {
        delay,
        ..FakeConfig::default()
    })
}

/// The longest a test waits for something that must happen: a safety net that turns a
/// hang into a failure, far past how long anything takes on a healthy run (never a bound
/// on speed).
pub const DEADLINE: Duration = Duration::from_secs(60);

/// Polls `done` every 10 ms until it holds; fails naming `what` after [`DEADLINE`].
pub async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not within {DEADLINE:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
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

/// The number after the program's flag `name` (`--secs 10`), or `default` when the flag
/// is not given or what follows it is not a number.
pub fn arg(name: &str, default: f64) -> f64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
