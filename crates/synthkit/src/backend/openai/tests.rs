//! Unit tests of the OpenAI-compatible backend: config, discovery, reply parsing.

use super::*;
use crate::backend::http::discovery::{
    first_model_id, models_context_window, props_context_window,
};
use crate::backend::http::test_support::{assert_malformed, lookup_in};
use crate::model::TimeoutKind;
use serde_json::json;
use std::time::Duration;

#[test]
fn urls() {
    let c = OpenAiConfig::new("m").with_base_url("http://h:1/v1/");
    assert_eq!(c.base(), "http://h:1/v1");
    assert_eq!(c.root_url(), "http://h:1");
    assert_eq!(c.endpoint(), "http://h:1/v1/chat/completions");
    assert_eq!(c.with_chat(false).endpoint(), "http://h:1/v1/completions");
    let c = OpenAiConfig::new("m").with_base_url("http://h:1");
    assert_eq!(c.root_url(), "http://h:1");
}

#[test]
fn env_lookup() {
    let vars = [
        ("OPENAI_BASE_URL", "http://o/v1"),
        ("SYNTHKIT_MODEL", "tiny"),
        ("MY_KEY", "sk-123"),
    ];
    let c = OpenAiConfig::from_lookup("MY_KEY", lookup_in(&vars));
    assert_eq!(
        (c.transport.base_url.as_str(), c.model.as_str()),
        ("http://o/v1", "tiny")
    );
    assert!(c.transport.api_key.is_some());
    assert!(!format!("{c:?}").contains("sk-123"));
    let c = OpenAiConfig::from_lookup("OPENAI_API_KEY", |_| None);
    assert_eq!(c.transport.base_url, OpenAiConfig::DEFAULT_BASE_URL);
    assert_eq!(c.model, OpenAiConfig::DEFAULT_MODEL);
    assert!(c.transport.api_key.is_none());
}

#[test]
fn context_from_props_and_models() {
    let props = json!({"default_generation_settings": {"n_ctx": 512}, "n_ctx": 2048});
    assert_eq!(props_context_window(&props), Some(512));
    assert_eq!(props_context_window(&json!({"n_ctx": 2048})), Some(2048));
    assert_eq!(props_context_window(&json!({})), None);
    let vllm =
        json!({"data": [{"id": "lora", "max_model_len": 100}, {"id": "m", "max_model_len": 8192}]});
    assert_eq!(models_context_window(&vllm, "m"), Some(8192));
    assert_eq!(models_context_window(&vllm, "other"), Some(100));
    let llama = json!({"data": [{"id": "x", "meta": {"n_ctx": 2048, "n_ctx_train": 4096}}]});
    assert_eq!(models_context_window(&llama, "m"), Some(2048));
    assert_eq!(
        models_context_window(&json!({"data": [{"id": "gpt"}]}), "gpt"),
        None
    );
}

#[test]
fn completions_parse() {
    let ok = br#"{"choices":[{"finish_reason":"length","index":0,"message":{"role":"assistant","content":"hi","reasoning_content":"x"}}],"usage":{"completion_tokens":8,"prompt_tokens":29,"total_tokens":37},"timings":{}}"#;
    let c = parse_completion(ok, None);
    assert!(matches!(&c, Ok((c, None)) if c.text == "hi"), "{c:?}");
    let named = br#"{"model":"qwen2.5-1.5b-instruct-q4_k_m.gguf","choices":[{"index":0,"message":{"content":"hi"}}]}"#;
    assert!(matches!(
        parse_completion(named, None),
        Ok((_, Some(m))) if m == "qwen2.5-1.5b-instruct-q4_k_m.gguf"
    ));
    assert_malformed(
        parse_completion,
        &[br#"{"choices":[]}"#, b"\xff\xfe", b"<html>"],
    );
}

#[test]
fn first_model_in_a_listing() {
    let openai = json!({"object": "list", "data": [{"id": "qwen"}, {"id": "other"}]});
    assert_eq!(first_model_id(&openai).as_deref(), Some("qwen"));
    let llama = json!({"models": [{"name": "m.gguf", "model": "m.gguf"}], "data": [{"id": "m.gguf", "meta": {}}]});
    assert_eq!(first_model_id(&llama).as_deref(), Some("m.gguf"));
    let only_models = json!({"models": [{"name": "llama3:8b"}]});
    assert_eq!(first_model_id(&only_models).as_deref(), Some("llama3:8b"));
    assert_eq!(first_model_id(&json!({"data": []})), None);
    assert_eq!(first_model_id(&json!({"data": [{"id": " "}]})), None);
    assert_eq!(first_model_id(&json!([1])), None);
}

#[test]
fn defaults_and_new_options() {
    let c = OpenAiConfig::new("m");
    assert_eq!(c.transport.timeout, Duration::from_secs(600));
    assert_eq!(c.transport.connect_timeout, Duration::from_secs(10));
    assert_eq!(c.transport.idle_timeout, Duration::from_secs(120));
    assert_eq!(
        (c.sampling.top_p, c.sampling.seed, c.discover_model),
        (None, None, false)
    );
    let mut extra = serde_json::Map::new();
    extra.insert("min_p".into(), json!(0.05));
    let c = c
        .with_top_p(0.9)
        .with_seed(42)
        .with_connect_timeout(Duration::from_secs(2))
        .with_idle_timeout(Duration::from_secs(30))
        .with_model_discovery(true)
        .with_extra_body("cache_prompt", json!(true))
        .with_extra_body_fields(extra)
        .with_api_key("sk-hidden-1");
    assert_eq!((c.sampling.top_p, c.sampling.seed), (Some(0.9), Some(42)));
    assert_eq!(c.extra_body.len(), 2);
    let debug = format!("{c:?}");
    assert!(debug.contains("idle_timeout: 30s") && debug.contains("top_p: Some(0.9)"));
    assert!(!debug.contains("sk-hidden-1"));
}

#[test]
fn timeout_messages_name_the_timeout_and_the_time_waited() {
    let e = ModelError::Timeout {
        kind: TimeoutKind::Request,
        waited: Duration::from_millis(600_049),
        limit: Duration::from_secs(600),
    };
    assert_eq!(
        e.to_string(),
        "no answer from the model: gave up after 600.0s (the request timeout is 600.0s): raise the request timeout (`OpenAiConfig::with_timeout`) for long prompts or slow servers, or check the server"
    );
    let e = ModelError::Timeout {
        kind: TimeoutKind::Idle,
        waited: Duration::from_millis(301),
        limit: Duration::from_millis(300),
    };
    assert!(
        e.to_string()
            .contains("stalled: gave up after 301ms (the idle timeout is 300ms)")
    );
    assert!(e.to_string().contains("with_idle_timeout"));
    let e = ModelError::Timeout {
        kind: TimeoutKind::Connect,
        waited: Duration::from_secs(10),
        limit: Duration::from_secs(10),
    };
    assert!(e.to_string().contains("could not connect"));
    assert!(e.to_string().contains("with_connect_timeout"));
    assert!(e.is_transient());
}

#[test]
fn reasoning_content_and_reasoning_tokens_are_read() {
    let body = br#"{"model":"m","choices":[{"index":0,"finish_reason":"stop",
        "message":{"content":"Every six months.","reasoning_content":"The user asks."}}],
        "usage":{"prompt_tokens":9,"completion_tokens":30,
        "completion_tokens_details":{"reasoning_tokens":21}}}"#;
    let (c, _) = parse_completion(body, None).unwrap_or_default();
    assert_eq!(c.text, "Every six months.");
    assert_eq!(c.thinking, "The user asks.");
    assert_eq!(c.usage.map(|u| u.reasoning_tokens), Some(21));
    // Details of another shape count as none, never a failure.
    let body = br#"{"choices":[{"index":0,"message":{"content":"ok"}}],
        "usage":{"prompt_tokens":1,"completion_tokens":2,"completion_tokens_details":"x"}}"#;
    let (c, _) = parse_completion(body, None).unwrap_or_default();
    assert_eq!(
        (c.text.as_str(), c.usage.map(|u| u.reasoning_tokens)),
        ("ok", Some(0))
    );
}

#[test]
fn images_are_image_url_parts_at_their_places() {
    use crate::node::NodeImage;
    use crate::prompt::{ChatMessage, PromptImage, RenderedPrompt, Role};
    let image = NodeImage::from_base64("iVBORw0KGgoAAAANSUhEUg==", None).unwrap();
    let mut m = ChatMessage::new(Role::User, "one\n\ntwo");
    m.images.push(PromptImage {
        at: 5,
        image: image.clone(),
        tokens: 3,
    });
    let messages = super::wire::chat_messages(&RenderedPrompt::Chat(vec![
        ChatMessage::new(Role::System, "s"),
        m,
    ]));
    assert_eq!(
        messages,
        vec![
            serde_json::json!({"role": "system", "content": "s"}),
            serde_json::json!({"role": "user", "content": [
                {"type": "text", "text": "one\n\n"},
                {"type": "image_url", "image_url": {"url": image.data_url()}},
                {"type": "text", "text": "two"},
            ]}),
        ]
    );
}
