//! The Anthropic Messages API backend end to end: against a real llama.cpp
//! `llama-server` (which serves `/v1/messages` and `/v1/messages/count_tokens`) with a
//! tiny random-weight model, and against a loopback fake for overloads and secrets.
//!
//! The server: `SYNTHKIT_LLAMA_SERVER` (a base URL) if set; else each test starts its own
//! with `scripts/llama-server.sh PORT 512` and stops it when done. When llama-server
//! cannot be built here the tests print a skip message, unless `CI` is set: then they fail.

use synthkit_testkit::llama;
use synthkit_testkit::server;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use serde_json::json;
use synthkit::backend::anthropic::{AnthropicConfig, AnthropicModel};
use synthkit::layer::retry::{Jitter, RetryPolicy};
use synthkit::layer::stack::ModelStack;
use synthkit::model::{FinishReason, LanguageModel, ModelError, ModelRequest, StreamEvent};
use synthkit::prompt::{ChatMessage, RenderedPrompt, Role};
use synthkit::{Node, ResponseMode, Synthesizer};

use llama::server_with_ctx;

/// The context size of the servers these tests start.
const CTX: usize = 512;
/// Small outputs: the model is slow-ish on 2 cores.
const NUM_OUTPUT: usize = 8;

/// Starts (or finds) the server, or ends the test with a skip message.
macro_rules! server {
    () => {
        match server_with_ctx(CTX) {
            Some(s) => s,
            None => return,
        }
    };
}

fn config(base: &str) -> AnthropicConfig {
    AnthropicConfig::new("tiny")
        .with_base_url(base)
        .with_num_output(NUM_OUTPUT)
        .with_timeout(Duration::from_secs(120))
}

fn chat(text: &str, max_tokens: usize) -> ModelRequest {
    ModelRequest::new(RenderedPrompt::Chat(vec![
        ChatMessage::new(Role::System, "You answer briefly."),
        ChatMessage::new(Role::User, text),
    ]))
    .with_max_tokens(max_tokens)
}

use crate::common::fixtures::{Counts, collect};

fn nodes(count: usize) -> Vec<Node> {
    (0..count)
        .map(|i| {
            Node::new(
                format!("n{i}"),
                format!(
                    "The dome of the observatory turns on wheel {i}; it was oiled in year {i}."
                ),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_response_mode_answers_with_exact_counts() {
    let server = server!();
    // The base URL is taken with or without its /v1.
    let base = server.base.trim_end_matches("/v1").to_string();
    let model = AnthropicModel::connect(config(&base).with_server_tokenizer(true))
        .await
        .unwrap();
    assert!(model.server_counter().is_some(), "llama-server counts");
    if server.pid.is_some() {
        assert_eq!(model.info().context_window, CTX, "the window from /props");
    }
    let model = Arc::new(model);
    // Every mode that calls the model (no_text and context_only make no call).
    for mode in ResponseMode::ALL.into_iter().filter(|m| m.calls_model()) {
        let (synth, counts) = Counts::synthesizer(model.clone(), mode);
        let r = synth
            .synthesize("When was the dome oiled?", nodes(3))
            .await
            .unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert!(!r.text.trim().is_empty(), "{mode}: an empty answer");
        let calls = counts.0.lock().unwrap().clone();
        assert!(!calls.is_empty(), "{mode}");
        for (step, ours, theirs, _) in calls {
            assert_eq!(
                ours as u64, theirs,
                "{mode} {step}: synthkit counted {ours}, the server charged {theirs}"
            );
        }
    }
}

#[tokio::test]
async fn streaming_yields_deltas_then_done_with_usage() {
    let server = server!();
    let model = AnthropicModel::new(config(&server.base)).unwrap();
    let events = collect(model.stream(&chat("Tell me a story", 6)).await.unwrap()).await;
    let usage = crate::common::fixtures::deltas_then_done(&events);
    assert!(
        events
            .iter()
            .all(|e| !matches!(e, Ok(StreamEvent::Delta(t)) if t.is_empty())),
        "{events:?}"
    );
    assert!((1..=6).contains(&usage.completion_tokens), "{usage:?}");
    assert!(model.served_model().is_some());
}

#[tokio::test]
async fn a_small_max_tokens_is_a_truncation() {
    let server = server!();
    let model = AnthropicModel::new(config(&server.base)).unwrap();
    // The random model never ends on its own within 3 tokens.
    let c = model.complete(&chat("Say hi", 3)).await.unwrap();
    assert_eq!(c.finish_reason, Some(FinishReason::Length), "{c:?}");
    assert_eq!(c.usage.map(|u| u.completion_tokens), Some(3));
    let events = collect(model.stream(&chat("Say hi", 3)).await.unwrap()).await;
    assert!(
        matches!(
            events.last(),
            Some(Ok(StreamEvent::Done {
                finish_reason: Some(FinishReason::Length),
                ..
            }))
        ),
        "{events:?}"
    );
    // The synthesis reports the cut answer as a truncation.
    let synth = Synthesizer::builder(Arc::new(model))
        .mode(ResponseMode::Compact)
        .build()
        .unwrap();
    let r = synth.synthesize("q", nodes(1)).await.unwrap();
    assert_eq!(r.usage.truncated_calls, 1, "{:?}", r.usage);
}

#[tokio::test]
async fn count_tokens_equals_the_input_tokens_the_server_charges() {
    let server = server!();
    let mut model = AnthropicModel::new(config(&server.base)).unwrap();
    assert!(model.use_server_counter().await);
    let counter = model.server_counter().unwrap().clone();
    let prompts = [
        chat("Say hello", 2),
        chat(
            "What is the capital of France? Answer in one word, please.",
            2,
        ),
        ModelRequest::new(RenderedPrompt::Text("Once upon a time".into())).with_max_tokens(2),
    ];
    for request in prompts {
        let counted = counter.count(&request.prompt).await.unwrap();
        let charged = model.complete(&request).await.unwrap().usage.unwrap();
        eprintln!(
            "count_tokens {counted}, usage input {}",
            charged.prompt_tokens
        );
        assert_eq!(
            counted as u64, charged.prompt_tokens,
            "{:?}",
            request.prompt
        );
    }
    assert_eq!(counter.cached(), 3);
}

/// A fake Messages API: answers `statuses` in turn (with `retry-after: 0`), then a
/// message; counts the requests and keeps the last request's headers.
fn fake(statuses: Vec<u16>) -> (server::Server, Arc<AtomicUsize>, Arc<Mutex<HeaderMap>>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(HeaderMap::new()));
    let (h, s) = (hits.clone(), seen.clone());
    let app = Router::new().route(
        "/v1/messages",
        post(move |headers: HeaderMap| {
            let n = h.fetch_add(1, Ordering::SeqCst);
            *s.lock().unwrap() = headers;
            let status = statuses.get(n).copied();
            async move {
                match status {
                    Some(code) => {
                        let kind = if code == 529 {
                            "overloaded_error"
                        } else {
                            "rate_limit_error"
                        };
                        (
                            StatusCode::from_u16(code).unwrap(),
                            [("retry-after", "0")],
                            json!({"type": "error", "error": {"type": kind, "message": "busy"}})
                                .to_string(),
                        )
                            .into_response()
                    }
                    None => axum::Json(json!({
                        "type": "message", "role": "assistant", "model": "fake",
                        "content": [{"type": "text", "text": "ok"}],
                        "stop_reason": "end_turn",
                        "usage": {"input_tokens": 5, "output_tokens": 1}
                    }))
                    .into_response(),
                }
            }
        }),
    );
    (server::Server::start(app), hits, seen)
}

fn retrying(model: AnthropicModel, attempts: u32) -> ModelStack {
    let policy = RetryPolicy::default()
        .with_max_attempts(attempts)
        .with_initial_backoff(Duration::from_millis(10))
        .with_jitter(Jitter::None);
    ModelStack::builder(model).retry(policy).build()
}

#[tokio::test]
async fn overloads_529_and_429_are_retried_within_the_attempts() {
    let (srv, hits, seen) = fake(vec![529, 429]);
    let model = AnthropicModel::new(config(&srv.base).with_api_key("sk-ant-test-key")).unwrap();
    let stack = retrying(model, 3);
    let c = stack.model().complete(&chat("q", 4)).await.unwrap();
    assert_eq!(c.text, "ok");
    assert_eq!(hits.load(Ordering::SeqCst), 3);
    let stats = stack.stats();
    assert_eq!((stats.attempts, stats.retries), (3, 2), "{stats:?}");
    let headers = seen.lock().unwrap().clone();
    assert_eq!(headers["x-api-key"], "sk-ant-test-key");
    assert_eq!(headers["anthropic-version"], "2023-06-01");

    // One attempt fewer than the overloads: the last overload is the error.
    let (srv, hits, _) = fake(vec![529, 529]);
    let stack = retrying(AnthropicModel::new(config(&srv.base)).unwrap(), 2);
    let e = stack.model().complete(&chat("q", 4)).await.unwrap_err();
    assert!(
        matches!(e, ModelError::RateLimited { status: 529, retry_after: Some(d), .. } if d.is_zero()),
        "{e:?}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn the_key_never_shows() {
    const KEY: &str = "sk-ant-very-secret-0123";
    // A server that echoes the key back in its error body.
    let app = Router::new().route(
        "/v1/messages",
        post(|headers: HeaderMap| async move {
            let key = headers["x-api-key"].to_str().unwrap().to_string();
            (
                StatusCode::UNAUTHORIZED,
                json!({"type": "error", "error": {"type": "authentication_error", "message": format!("invalid x-api-key: {key}")}})
                    .to_string(),
            )
        }),
    );
    let srv = server::Server::start(app);
    let config = config(&srv.base).with_api_key(KEY);
    assert!(!format!("{config:?}").contains(KEY));
    let model = AnthropicModel::new(config).unwrap();
    assert!(!format!("{model:?}").contains(KEY));
    let e = model.complete(&chat("q", 4)).await.unwrap_err();
    assert!(matches!(e, ModelError::Auth { status: 401, .. }), "{e:?}");
    let shown = format!("{e} {e:?}");
    assert!(!shown.contains(KEY), "{shown}");
    assert!(shown.contains("[REDACTED]"), "{shown}");
    let stream_error = match model.stream(&chat("q", 4)).await {
        Err(e) => format!("{e} {e:?}"),
        Ok(_) => panic!("a 401 stream"),
    };
    assert!(!stream_error.contains(KEY), "{stream_error}");
}
