//! What model servers send back when they misbehave (issue 29): huge `Retry-After`s,
//! streams that keep the connection busy without a token, base URLs with a query,
//! refusals and replies without text, nonsense token counts and context windows, and
//! extra body fields that would cost more than the budget charges. Each server is a
//! `synthkit_testkit::hostile::HostilePeer` on loopback.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use synthkit::backend::anthropic::{AnthropicConfig, AnthropicModel};
use synthkit::backend::openai::{OpenAiConfig, OpenAiModel};
use synthkit::layer::retry::{RetryModel, RetryPolicy};
use synthkit::model::{LanguageModel, ModelError, ModelRequest, StreamEvent, TimeoutKind};
use synthkit::prompt::RenderedPrompt;
use synthkit_testkit::hostile::{HostilePeer, json_with_headers, sse_then_repeat};
use synthkit_testkit::openai::chat_reply;

use crate::common::fixtures::collect;

fn request() -> ModelRequest {
    ModelRequest::new(RenderedPrompt::Text("What is cleaned?".into())).with_max_tokens(16)
}

fn openai(base: &str) -> OpenAiModel {
    OpenAiModel::new(
        OpenAiConfig::new("m")
            .with_base_url(base)
            .with_context_window(4096),
    )
    .unwrap()
}

fn anthropic(base: &str) -> AnthropicModel {
    AnthropicModel::new(
        AnthropicConfig::new("m")
            .with_base_url(base)
            .with_context_window(4096),
    )
    .unwrap()
}

fn usage() -> Value {
    json!({"prompt_tokens": 5, "completion_tokens": 2})
}

// ------------------------------------------------------------------ Retry-After

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_retry_afters_are_capped_never_a_panic() {
    for (status, header, value) in [
        (429, "retry-after", "1e20"),
        (429, "retry-after", "1e308"),
        (429, "retry-after", "19000000000000000000"),
        (429, "retry-after-ms", "1e30"),
        (429, "retry-after", "-3"),
        (429, "retry-after", "NaN"),
    ] {
        let peer = HostilePeer::start(move |_, _| {
            json_with_headers(
                status,
                &[(header, value)],
                &json!({"error": {"message": "slow"}}),
            )
        });
        let err = openai(&peer.base).complete(&request()).await.unwrap_err();
        match err {
            ModelError::RateLimited { retry_after, .. } => assert!(
                retry_after.is_none_or(|d| d <= Duration::from_secs(86_400)),
                "{header}: {value}: {retry_after:?}"
            ),
            e => panic!("{header}: {value}: {e}"),
        }
    }
    // Anthropic's 529 with the same header, behind the retry layer: it gives up at once
    // (the wait is past any budget) instead of panicking or sleeping for ages. Counted,
    // not timed: one send, and no retry (so no wait) was ever scheduled; the timeout only
    // turns a hang into a failure.
    let peer = HostilePeer::start(|_, _| {
        json_with_headers(
            529,
            &[("retry-after", "1e20")],
            &json!({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}),
        )
    });
    let waits = Arc::new(std::sync::Mutex::new(Vec::new()));
    let recorded = Arc::clone(&waits);
    let model = RetryModel::new(
        anthropic(&peer.base),
        RetryPolicy::default().with_max_elapsed(Duration::from_secs(60)),
    )
    .on_retry(move |e| recorded.lock().unwrap().push(e.wait));
    let err = tokio::time::timeout(Duration::from_secs(120), model.complete(&request()))
        .await
        .expect("the retry layer slept on a huge Retry-After")
        .unwrap_err();
    assert!(
        matches!(err, ModelError::RateLimited { status: 529, .. }),
        "{err}"
    );
    assert_eq!(peer.targets().len(), 1, "{:?}", peer.targets());
    assert!(
        waits.lock().unwrap().is_empty(),
        "retries scheduled: {:?}",
        waits.lock().unwrap()
    );
}

// ------------------------------------------------------------------ idle timeout

/// The idle timeout of the idle-timeout tests.
const IDLE: Duration = Duration::from_secs(1);

/// Streams from `model` (built with a 1 s idle timeout); the events, which must end in
/// the idle timeout, or a failure when the stream did not end within 60 s.
async fn stream_idle(model: &dyn LanguageModel) -> Vec<Result<StreamEvent, ModelError>> {
    let stream = model.stream(&request()).await.unwrap();
    let events = tokio::time::timeout(Duration::from_secs(60), collect(stream))
        .await
        .expect("a stream without tokens must end at the idle timeout");
    assert!(
        matches!(
            events.last(),
            Some(Err(ModelError::Timeout {
                kind: TimeoutKind::Idle,
                ..
            }))
        ),
        "{events:?}"
    );
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_deltas_do_not_hold_off_the_idle_timeout() {
    let peer = HostilePeer::start(|_, _| {
        sse_then_repeat(
            &[
                r#"data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}"#.into(),
                r#"data: {"choices":[{"index":0,"delta":{"content":"Hello"}}]}"#.into(),
            ],
            "data: {\"choices\":[{\"index\":0,\"delta\":{}}]}\n\n: keep-alive",
            Duration::from_millis(200),
        )
    });
    let model = OpenAiModel::new(
        OpenAiConfig::new("m")
            .with_base_url(&peer.base)
            .with_context_window(4096)
            .with_idle_timeout(IDLE),
    )
    .unwrap();
    let events = stream_idle(&model).await;
    assert!(matches!(events.first(), Some(Ok(StreamEvent::Delta(t))) if t == "Hello"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_pings_do_not_hold_off_the_idle_timeout() {
    let peer = HostilePeer::start(|_, _| {
        sse_then_repeat(
            &[
                r#"event: message_start
data: {"type":"message_start","message":{"model":"m","usage":{"input_tokens":5}}}"#
                    .into(),
                r#"event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}"#
                    .into(),
            ],
            "event: ping\ndata: {\"type\":\"ping\"}",
            Duration::from_millis(200),
        )
    });
    let model = AnthropicModel::new(
        AnthropicConfig::new("m")
            .with_base_url(&peer.base)
            .with_context_window(4096)
            .with_idle_timeout(IDLE),
    )
    .unwrap();
    stream_idle(&model).await;
}

// ------------------------------------------------------------------ base URL queries

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_base_url_query_goes_on_every_request_and_is_never_shown() {
    const QUERY: &str = "api-version=2024-06-01&key=qs-SECRET-77";
    let peer = HostilePeer::start(|path, _| match path {
        "/v1/models" => json_with_headers(200, &[], &json!({"data": [{"id": "listed"}]})),
        "/props" => json_with_headers(200, &[], &json!({"n_ctx": 4096, "total_slots": 1})),
        _ => json_with_headers(
            200,
            &[],
            &chat_reply("m", "Every six months.", "stop", &usage()),
        ),
    });
    let base = format!("{}?{QUERY}", peer.base);
    let config = OpenAiConfig::new("m")
        .with_base_url(&base)
        .with_model_discovery(true);
    assert!(!format!("{config:?}").contains("SECRET"));
    let model = OpenAiModel::connect(config).await.unwrap();
    let reply = model.complete(&request()).await.unwrap();
    assert_eq!(reply.text, "Every six months.");
    let targets = peer.targets();
    for path in ["/v1/models", "/props", "/v1/chat/completions"] {
        let want = format!("{path}?{QUERY}");
        assert!(targets.contains(&want), "{want} not in {targets:?}");
    }
    assert!(targets.iter().all(|t| t.ends_with(QUERY)), "{targets:?}");

    // A failed connection names the URL without its query.
    let closed = format!(
        "http://127.0.0.1:{}/v1?{QUERY}",
        synthkit_testkit::server::free_port()
    );
    let err = openai(&closed).complete(&request()).await.unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains("SECRET"), "{shown}");
}

// ------------------------------------------------------------------ refusals

async fn openai_reply(body: Value) -> Result<String, ModelError> {
    let peer = HostilePeer::start(move |_, _| json_with_headers(200, &[], &body));
    openai(&peer.base)
        .complete(&request())
        .await
        .map(|c| c.text)
}

fn chat_message(message: Value, finish: &str) -> Value {
    json!({"choices": [{"index": 0, "finish_reason": finish, "message": message}],
           "usage": {"prompt_tokens": 5, "completion_tokens": 2}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_and_replies_without_text_are_errors() {
    let refused = openai_reply(chat_message(
        json!({"role": "assistant", "content": null, "refusal": "I can't help with that."}),
        "stop",
    ))
    .await;
    assert!(
        matches!(&refused, Err(ModelError::Refused { reason }) if reason.contains("I can't help")),
        "{refused:?}"
    );
    let filtered = openai_reply(chat_message(
        json!({"role": "assistant", "content": "Partial"}),
        "content_filter",
    ))
    .await;
    assert!(
        matches!(filtered, Err(ModelError::Refused { .. })),
        "{filtered:?}"
    );
    let tools = openai_reply(chat_message(
        json!({"role": "assistant", "content": null,
               "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}),
        "tool_calls",
    ))
    .await;
    assert!(
        matches!(&tools, Err(ModelError::NoText { what }) if what == "tool calls"),
        "{tools:?}"
    );
    let thinking = openai_reply(chat_message(
        json!({"role": "assistant", "content": "", "reasoning_content": "Let me think..."}),
        "length",
    ))
    .await;
    assert!(
        matches!(thinking, Err(ModelError::NoText { .. })),
        "{thinking:?}"
    );
    for e in [refused, tools] {
        assert!(!e.unwrap_err().is_transient());
    }
    // An empty answer with nothing else stays an answer (the engine's "Empty Response").
    assert_eq!(
        openai_reply(chat_message(
            json!({"role": "assistant", "content": ""}),
            "stop"
        ))
        .await
        .unwrap(),
        ""
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_refusals_and_reasoning_only_replies_are_errors() {
    let stream_of = |chunks: Vec<&'static str>| {
        HostilePeer::start(move |_, _| {
            let mut body = String::new();
            for c in &chunks {
                body.push_str(&format!("data: {c}\n\n"));
            }
            body.push_str("data: [DONE]\n\n");
            axum::response::Response::builder()
                .header("content-type", "text/event-stream")
                .body(axum::body::Body::from(body))
                .unwrap()
        })
    };
    let refusal = stream_of(vec![
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","refusal":""}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"refusal":"I can't"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"refusal":" help."}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
    ]);
    let events = collect(openai(&refusal.base).stream(&request()).await.unwrap()).await;
    assert!(
        matches!(events.last(), Some(Err(ModelError::Refused { reason })) if reason.contains("I can't help.")),
        "{events:?}"
    );
    let reasoning = stream_of(vec![
        r#"{"choices":[{"index":0,"delta":{"reasoning_content":"Hmm"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#,
    ]);
    let events = collect(openai(&reasoning.base).stream(&request()).await.unwrap()).await;
    assert!(
        matches!(events.last(), Some(Err(ModelError::NoText { .. }))),
        "{events:?}"
    );
    let filtered = stream_of(vec![
        r#"{"choices":[{"index":0,"delta":{"content":"Part"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"content_filter"}]}"#,
    ]);
    let events = collect(openai(&filtered.base).stream(&request()).await.unwrap()).await;
    assert!(
        matches!(events.last(), Some(Err(ModelError::Refused { .. }))),
        "{events:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_refusals_and_thinking_only_replies_are_errors() {
    let reply = |content: Value, stop: &'static str| {
        let body = json!({"type": "message", "role": "assistant", "model": "m",
            "content": content, "stop_reason": stop,
            "usage": {"input_tokens": 5, "output_tokens": 2}});
        HostilePeer::start(move |_, _| json_with_headers(200, &[], &body))
    };
    let refused = reply(json!([{"type": "text", "text": "I"}]), "refusal");
    let err = anthropic(&refused.base)
        .complete(&request())
        .await
        .unwrap_err();
    assert!(matches!(err, ModelError::Refused { .. }), "{err}");
    let thinking = reply(
        json!([{"type": "thinking", "thinking": "Let me see", "signature": "x"}]),
        "max_tokens",
    );
    let err = anthropic(&thinking.base)
        .complete(&request())
        .await
        .unwrap_err();
    assert!(matches!(err, ModelError::NoText { .. }), "{err}");
    let tools = reply(
        json!([{"type": "tool_use", "id": "t", "name": "f", "input": {}}]),
        "tool_use",
    );
    let err = anthropic(&tools.base)
        .complete(&request())
        .await
        .unwrap_err();
    assert!(matches!(err, ModelError::NoText { .. }), "{err}");
}

// ------------------------------------------------------------------ usage counts

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nonsense_usage_counts_are_ignored_and_the_reply_kept() {
    for bad in [json!(-5), json!(2.5), json!("7"), json!(1e30)] {
        let body = json!({"choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "Kept."}}],
            "usage": {"prompt_tokens": bad, "completion_tokens": 3}});
        let reply = openai_reply_full(body).await.unwrap();
        assert_eq!(reply.text, "Kept.", "{bad}");
        let usage = reply.usage.unwrap();
        assert_eq!(
            (usage.prompt_tokens, usage.completion_tokens),
            (0, 3),
            "{bad}"
        );
    }
    // Sums saturate instead of wrapping.
    let mut total = synthkit::model::Usage {
        prompt_tokens: u64::MAX - 1,
        completion_tokens: u64::MAX,
        ..Default::default()
    };
    total += total;
    assert_eq!(total.total(), u64::MAX);
}

async fn openai_reply_full(body: Value) -> Result<synthkit::model::Completion, ModelError> {
    let peer = HostilePeer::start(move |_, _| json_with_headers(200, &[], &body));
    openai(&peer.base).complete(&request()).await
}

// ------------------------------------------------------------------ extra body, windows

#[test]
fn extra_body_fields_that_change_the_charge_are_refused() {
    for (key, value) in [
        ("max_tokens", json!(100_000)),
        ("max_completion_tokens", json!(5)),
        ("n_predict", json!(9)),
        ("n", json!(4)),
        ("best_of", json!(2)),
    ] {
        let config = OpenAiConfig::new("m").with_extra_body(key, value.clone());
        let err = OpenAiModel::new(config).err().map(|e| e.to_string());
        assert!(
            err.as_deref().is_some_and(|e| e.contains(key)),
            "{key}: {err:?}"
        );
        let config = AnthropicConfig::new("m").with_extra_body(key, value);
        assert!(AnthropicModel::new(config).is_err(), "{key}");
    }
    let err =
        OpenAiModel::new(OpenAiConfig::new("m").with_extra_body("max_tokens", json!(1))).err();
    assert!(err.is_some_and(|e| e.to_string().contains("--num-output")));
    assert!(OpenAiModel::new(OpenAiConfig::new("m").with_extra_body("n", json!(1))).is_ok());
    assert!(OpenAiModel::new(OpenAiConfig::new("m").with_extra_body("top_k", json!(40))).is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nonsense_window_in_props_names_the_server_and_the_flag() {
    for props in [
        json!({"default_generation_settings": {"n_ctx": 0}}),
        json!({"n_ctx": -1}),
    ] {
        let answer = props.clone();
        let peer = HostilePeer::start(move |path, _| match path {
            "/props" => json_with_headers(200, &[], &answer),
            _ => json_with_headers(404, &[], &json!({})),
        });
        let err = OpenAiModel::connect(OpenAiConfig::new("m").with_base_url(&peer.base))
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("--context-window") && err.contains("n_ctx"),
            "{props}: {err}"
        );
        // Naming the window is the way out.
        let ok = OpenAiModel::connect(
            OpenAiConfig::new("m")
                .with_base_url(&peer.base)
                .with_context_window(4096),
        )
        .await;
        assert!(ok.is_ok());
    }
}
