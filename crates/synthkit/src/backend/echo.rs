//! A third HTTP API, for tests only: what adding an API takes. This module (an
//! [`HttpApi`] impl and its wire format) plus its arm in
//! [`ServerSettings`](super::connect::ServerSettings) is all: the config, its builders
//! and constructors, the model, discovery, streaming under the transport's limits and
//! [`Connect`](super::connect::Connect) come from `backend::http`.
//!
//! The "echo" API: `POST {base}/echo` with `{"model", "prompt", "max_tokens"}` (and
//! `"stream": true` for a stream) answers `{"model", "text", "prompt_tokens",
//! "completion_tokens", "stop"}`; a stream is SSE `data` events `{"delta": ...}`, then
//! one with the `stop` and the usage. The key is sent as `Authorization: Bearer`. It has
//! no exact prompt counter.

use secrecy::SecretString;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::backend::http::clock::ServedModel;
use crate::backend::http::server::{model_name, parse_reply};
use crate::backend::http::sse::{Emitted, EventParser, event_json, stream_end};
use crate::backend::http::{HttpApi, HttpConfig, HttpModel, body_with_extra};
use crate::model::{
    Completion, FinishReason, ModelError, ModelFuture, ModelRequest, PromptCounter, StreamEvent,
    Usage,
};
use crate::prompt::RenderedPrompt;

/// The echo API.
#[derive(Debug, Clone, Copy)]
pub enum Echo {}

/// Its config.
pub type EchoConfig = HttpConfig<Echo>;

/// Its model.
pub type EchoModel = HttpModel<Echo>;

/// The counter of an API without one (never made).
#[derive(Debug, Clone)]
pub enum NoCounter {}

impl PromptCounter for NoCounter {
    fn name(&self) -> &str {
        match *self {}
    }

    fn count_prompts<'a>(&'a self, _: &'a [RenderedPrompt]) -> ModelFuture<'a, Vec<usize>> {
        match *self {}
    }
}

/// A reply, or one streamed event.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Reply {
    model: Option<Value>,
    text: Option<String>,
    delta: Option<String>,
    stop: Option<String>,
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    error: Option<Value>,
}

impl Reply {
    fn usage(&self) -> Option<Usage> {
        Some(Usage {
            prompt_tokens: self.prompt_tokens?,
            completion_tokens: self.completion_tokens.unwrap_or_default(),
            ..Default::default()
        })
    }

    fn finish_reason(&self) -> Option<FinishReason> {
        self.stop.as_deref().map(|s| match s {
            "end" => FinishReason::Stop,
            "length" => FinishReason::Length,
            _ => FinishReason::Other,
        })
    }
}

/// Reads a stream's events.
#[derive(Debug)]
pub struct EchoParser {
    key: Option<SecretString>,
    served: ServedModel,
    deltas: usize,
}

impl EventParser for EchoParser {
    fn feed(&mut self, event: &eventsource_stream::Event, out: &mut Emitted) -> bool {
        let reply: Reply = match event_json(&event.data, "event", self.key.as_ref()) {
            Ok(r) => r,
            Err(e) => {
                out.push_back(Err(e));
                return true;
            }
        };
        if let Some(name) = model_name(reply.model.as_ref()) {
            self.served.set(name);
        }
        if let Some(delta) = reply.delta.clone().filter(|d| !d.is_empty()) {
            self.deltas += 1;
            out.push_back(Ok(StreamEvent::Delta(delta)));
        }
        if reply.stop.is_some() {
            let done = StreamEvent::Done {
                usage: reply.usage(),
                finish_reason: reply.finish_reason(),
            };
            out.push_back(Ok(done));
            return true;
        }
        false
    }

    fn end(&self) -> Result<StreamEvent, ModelError> {
        stream_end(None, "a `stop` event", self.deltas)
    }
}

impl HttpApi for Echo {
    const NAME: &'static str = "echo";
    const CONFIG_NAME: &'static str = "EchoConfig";
    const MODEL_NAME: &'static str = "EchoModel";
    const DEFAULT_BASE_URL: &'static str = "https://echo.invalid/v1";
    const DEFAULT_MODEL: &'static str = "echo";
    const DEFAULT_KEY_VAR: &'static str = "ECHO_API_KEY";
    const BASE_URL_VAR: &'static str = "ECHO_BASE_URL";
    type Options = ();
    type Counter = NoCounter;
    type StreamParser = EchoParser;
    const MODELS_PATH: &'static str = "/models";
    const WINDOW_FROM_LISTING: bool = true;
    const COUNTER_PATH: &'static str = "counter";

    fn endpoint(config: &EchoConfig) -> String {
        config.api_url("/echo")
    }

    fn body(config: &EchoConfig, request: &ModelRequest, stream: bool) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), json!(config.model));
        body.insert("prompt".into(), json!(request.prompt.to_text()));
        body.insert("max_tokens".into(), json!(request.max_tokens));
        if stream {
            body.insert("stream".into(), Value::Bool(true));
        }
        body_with_extra(body, &config.extra_body)
    }

    fn parse_reply(
        bytes: &[u8],
        key: Option<&SecretString>,
    ) -> Result<(Completion, Option<String>), ModelError> {
        let (reply, _) = parse_reply(bytes, key, |r: &Reply| r.error.as_ref())?;
        let completion = Completion {
            text: reply.text.clone().unwrap_or_default(),
            usage: reply.usage(),
            finish_reason: reply.finish_reason(),
            thinking: String::new(),
        };
        Ok((
            completion,
            model_name(reply.model.as_ref()).map(str::to_string),
        ))
    }

    fn stream_parser(key: Option<SecretString>, served: ServedModel) -> EchoParser {
        EchoParser {
            key,
            served,
            deltas: 0,
        }
    }

    async fn probe_counter(_: &EchoConfig) -> Option<NoCounter> {
        None
    }
}

#[cfg(test)]
mod tests {
    use axum::Json;
    use axum::Router;
    use axum::response::IntoResponse;
    use axum::routing::{get, post};
    use futures::StreamExt;

    use super::*;
    use crate::backend::connect::{Connect, Counting};
    use crate::model::LanguageModel;

    /// An echo server: replies with the prompt, streamed word by word when asked; lists
    /// one model and says its window at `/props`.
    async fn echo_server() -> String {
        async fn echo(Json(body): Json<Value>) -> axum::response::Response {
            let prompt = body["prompt"].as_str().unwrap_or_default().to_string();
            let words = prompt.split_whitespace().count() as u64;
            if body["stream"] == json!(true) {
                let mut sse = String::new();
                for w in prompt.split_whitespace() {
                    sse.push_str(&format!("data: {}\n\n", json!({"delta": format!("{w} ")})));
                }
                let end = json!({"model": "echo-1", "stop": "end", "prompt_tokens": words, "completion_tokens": words});
                sse.push_str(&format!("data: {end}\n\n"));
                ([("content-type", "text/event-stream")], sse).into_response()
            } else {
                Json(json!({"model": "echo-1", "text": prompt, "stop": "end", "prompt_tokens": words, "completion_tokens": words}))
                    .into_response()
            }
        }
        let app = Router::new()
            .route("/v1/echo", post(echo))
            .route(
                "/v1/models",
                get(|| async { Json(json!({"data": [{"id": "echo-1"}]})) }),
            )
            .route(
                "/props",
                get(|| async { Json(json!({"n_ctx": 1234, "total_slots": 3})) }),
            );
        synthkit_testkit::here::serve(app).await
    }

    #[tokio::test]
    async fn a_third_api_connects_completes_and_streams_through_the_shared_machinery() {
        let base = echo_server().await;
        let config = EchoConfig::new("x")
            .with_base_url(base)
            .with_model_discovery(true)
            .with_api_key("sk-echo-secret");
        assert!(!format!("{config:?}").contains("sk-echo-secret"));
        let unconnected = EchoModel::new(config.clone()).unwrap_or_else(|e| unreachable!("{e}"));
        let debug = format!("{unconnected:?}");
        assert!(
            debug.starts_with("EchoModel { config: EchoConfig {")
                && !debug.contains("sk-echo-secret")
        );
        let server = Connect::new(config)
            .counting(Counting::ServerWhereAvailable)
            .connect()
            .await
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(server.server_slots, Some(3));
        assert!(server.identity.backend.starts_with("echo http://127.0.0.1"));
        let info = server.model.info();
        assert_eq!(
            (
                info.name.as_str(),
                info.context_window,
                info.provider.as_deref()
            ),
            ("echo-1", 1234, Some("echo"))
        );
        let request =
            ModelRequest::new(RenderedPrompt::Text("one two three".into())).with_max_tokens(16);
        let reply = server.model.complete(&request).await;
        let reply = reply.unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(reply.text, "one two three");
        assert_eq!(reply.usage.map(|u| u.prompt_tokens), Some(3));
        assert_eq!(server.served_model().as_deref(), Some("echo-1"));
        let mut stream = server
            .model
            .stream(&request)
            .await
            .unwrap_or_else(|e| unreachable!("{e}"));
        let mut text = String::new();
        let mut done = 0;
        while let Some(event) = stream.next().await {
            match event {
                Ok(StreamEvent::Delta(d)) => text.push_str(&d),
                Ok(StreamEvent::Thinking(_)) => {}
                Ok(StreamEvent::Done { finish_reason, .. }) => {
                    assert_eq!(finish_reason, Some(FinishReason::Stop));
                    done += 1;
                }
                Err(e) => unreachable!("{e}"),
            }
        }
        assert_eq!((text.as_str(), done), ("one two three ", 1));
    }
}
