//! Unit tests of the OpenAI-compatible backend: config, discovery, reply parsing.

use super::*;
use serde_json::json;

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
    let lookup = |k: &str| {
        vars.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    };
    let c = OpenAiConfig::from_lookup("MY_KEY", lookup);
    assert_eq!(
        (c.base_url.as_str(), c.model.as_str()),
        ("http://o/v1", "tiny")
    );
    assert!(c.api_key.is_some());
    assert!(!format!("{c:?}").contains("sk-123"));
    let c = OpenAiConfig::from_lookup("OPENAI_API_KEY", |_| None);
    assert_eq!(c.base_url, OpenAiConfig::DEFAULT_BASE_URL);
    assert_eq!(c.model, OpenAiConfig::DEFAULT_MODEL);
    assert!(c.api_key.is_none());
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
    assert!(matches!(&c, Ok(c) if c.text == "hi"), "{c:?}");
    assert!(matches!(
        parse_completion(br#"{"choices":[]}"#, None),
        Err(ModelError::Malformed(_))
    ));
    assert!(matches!(
        parse_completion(b"\xff\xfe", None),
        Err(ModelError::Malformed(_))
    ));
    assert!(matches!(
        parse_completion(b"<html>", None),
        Err(ModelError::Malformed(_))
    ));
}
