//! Unit tests of the Messages API backend: config, headers, reply parsing.

use super::*;
use crate::backend::http::test_support::{assert_malformed, lookup_in};
use crate::model::FinishReason;
use crate::model::LanguageModel;

#[test]
fn urls_with_or_without_v1() {
    for base in [
        "http://h:1",
        "http://h:1/",
        "http://h:1/v1",
        "http://h:1/v1/",
    ] {
        let c = AnthropicConfig::new("m").with_base_url(base);
        assert_eq!(c.root_url(), "http://h:1", "{base}");
        assert_eq!(c.endpoint(), "http://h:1/v1/messages", "{base}");
        assert_eq!(
            c.count_tokens_url(),
            "http://h:1/v1/messages/count_tokens",
            "{base}"
        );
    }
    assert_eq!(
        AnthropicConfig::default().endpoint(),
        "https://api.anthropic.com/v1/messages"
    );
}

#[test]
fn env_lookup_and_the_key_kept_secret() {
    let vars = [
        ("ANTHROPIC_BASE_URL", "http://a/v1"),
        ("ANTHROPIC_API_KEY", "sk-ant-secret-1"),
    ];
    let c = AnthropicConfig::from_lookup(AnthropicConfig::DEFAULT_KEY_VAR, lookup_in(&vars));
    assert_eq!(c.transport.base_url, "http://a/v1");
    assert_eq!(c.model, AnthropicConfig::DEFAULT_MODEL);
    assert!(c.transport.api_key.is_some());
    assert!(!format!("{c:?}").contains("sk-ant-secret-1"));
    let model = AnthropicModel::new(c.clone()).unwrap_or_else(|e| unreachable!("{e}"));
    assert!(!format!("{model:?}").contains("sk-ant-secret-1"));
    let headers = api_headers(&c).unwrap_or_default();
    assert!(
        headers
            .get("x-api-key")
            .is_some_and(HeaderValue::is_sensitive)
    );
    assert!(!format!("{headers:?}").contains("sk-ant-secret-1"));
    assert_eq!(
        headers
            .get("anthropic-version")
            .and_then(|v| v.to_str().ok()),
        Some("2023-06-01")
    );
}

#[test]
fn replies_parse() {
    let ok = br#"{"id":"x","type":"message","role":"assistant","content":[{"type":"thinking","thinking":"hm"},{"type":"text","text":"Hel"},{"type":"text","text":"lo"}],"model":"tiny.gguf","stop_reason":"max_tokens","usage":{"cache_read_input_tokens":2,"input_tokens":46,"output_tokens":8}}"#;
    let Ok((c, served)) = parse_message(ok, None) else {
        unreachable!()
    };
    assert_eq!(c.text, "Hello");
    assert_eq!(c.finish_reason, Some(FinishReason::Length));
    assert_eq!(
        c.usage.map(|u| (u.prompt_tokens, u.completion_tokens)),
        Some((48, 8))
    );
    assert_eq!(served.as_deref(), Some("tiny.gguf"));
    let overloaded =
        br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    assert!(matches!(
        parse_message(overloaded, None),
        Err(ModelError::RateLimited { status: 529, .. })
    ));
    assert_malformed(parse_message, &[b"{}", b"<html>"]);
}

#[test]
fn info_and_cache_identity() {
    let c = AnthropicConfig::new("m")
        .with_context_window(1000)
        .with_num_output(64)
        .with_top_p(0.9);
    let model = AnthropicModel::new(c.clone()).unwrap_or_else(|e| unreachable!("{e}"));
    let info = model.info();
    assert_eq!(
        (info.context_window, info.num_output, info.is_chat),
        (1000, 64, true)
    );
    let id = c.cache_identity();
    assert!(
        id.backend
            .starts_with("anthropic https://api.anthropic.com/v1/messages")
    );
    assert!(id.params.contains("top_p=0.9") && id.params.contains("version=2023-06-01"));
}

#[test]
fn thinking_blocks_are_kept_apart_from_the_text() {
    let body = br#"{"type":"message","model":"m","content":[
        {"type":"thinking","thinking":"The user asks when.","signature":"x"},
        {"type":"redacted_thinking","data":"zzz"},
        {"type":"text","text":"Every six months."}],
        "stop_reason":"end_turn","usage":{"input_tokens":9,"output_tokens":30}}"#;
    let (c, _) = parse_message(body, None).unwrap_or_default();
    assert_eq!(c.text, "Every six months.");
    assert_eq!(c.thinking, "The user asks when.");
    // A thinking block of another type is no thinking, never a failure.
    let body = br#"{"type":"message","content":[{"type":"thinking","thinking":7},
        {"type":"text","text":"ok"}],"stop_reason":"end_turn"}"#;
    let (c, _) = parse_message(body, None).unwrap_or_default();
    assert_eq!((c.text.as_str(), c.thinking.as_str()), ("ok", ""));
}

#[test]
fn images_are_base64_image_blocks_at_their_places() {
    use crate::node::NodeImage;
    use crate::prompt::{ChatMessage, PromptImage, RenderedPrompt, Role};
    let image = NodeImage::from_base64("iVBORw0KGgoAAAANSUhEUg==", None).unwrap();
    let mut m = ChatMessage::new(Role::User, "caption\n\nafter");
    m.images.push(PromptImage {
        at: 9,
        image,
        tokens: 3,
    });
    let prompt = RenderedPrompt::Chat(vec![ChatMessage::new(Role::System, "s"), m]);
    let (system, messages) = super::wire::system_and_messages(&prompt);
    assert_eq!(system.as_deref(), Some("s"));
    assert_eq!(
        messages,
        vec![serde_json::json!({"role": "user", "content": [
            {"type": "text", "text": "caption\n\n"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgoAAAANSUhEUg=="}},
            {"type": "text", "text": "after"},
        ]})]
    );
    // Count keys hold no image data.
    let key = super::wire::count_key(&prompt);
    assert!(!key.contains("iVBORw0KGgo"), "{key}");
    assert!(key.contains("image/png"), "{key}");
}

#[test]
fn breakpoints_go_on_the_last_whole_block_of_the_prefix() {
    use crate::prompt::{ChatMessage, PromptPrefix, RenderedPrompt, Role};
    let config = AnthropicConfig::new("claude-sonnet-4-5");
    let chat = |messages: Vec<(Role, &str)>| {
        RenderedPrompt::Chat(
            messages
                .into_iter()
                .map(|(r, t)| ChatMessage::new(r, t))
                .collect(),
        )
    };
    let mark = |prompt: &RenderedPrompt, whole: usize, tokens: usize| {
        let request = ModelRequest::new(prompt.clone());
        let mut body = wire::request_body(&request, &config, false);
        let prefix = PromptPrefix::leading(prompt, whole, 0, tokens).unwrap();
        let marked = wire::mark_prefix(&mut body, prompt, &prefix, config.min_cached_tokens());
        (marked, body)
    };
    // A system message and a fixed user turn held whole: the breakpoint is on the user
    // turn (which caches the system too).
    let p = chat(vec![
        (Role::System, "Be brief."),
        (Role::User, "Here are the rules."),
        (Role::Assistant, "Understood."),
        (Role::User, "The passages."),
    ]);
    let (marked, body) = mark(&p, 2, 1024);
    assert!(marked);
    assert_eq!(body["system"], "Be brief.");
    assert_eq!(
        body["messages"][0]["content"][0]["cache_control"]["type"],
        "ephemeral"
    );
    assert_eq!(body.to_string().matches("cache_control").count(), 1);
    // Under the minimum, nothing.
    assert!(!mark(&p, 2, 1023).0);
    // A system message after the prefix would change the `system` the API sends first.
    let late = chat(vec![
        (Role::System, "Be brief."),
        (Role::User, "The passages."),
        (Role::System, "Cite."),
    ]);
    assert!(!mark(&late, 1, 5000).0);
    // A completion prompt has no whole message to mark.
    let text = RenderedPrompt::Text("Context: x".into());
    let request = ModelRequest::new(text.clone());
    let mut body = wire::request_body(&request, &config, false);
    let prefix = PromptPrefix::leading(&text, 0, 8, 0).unwrap();
    assert!(!wire::mark_prefix(&mut body, &text, &prefix, 0));
    // Haiku models cache from 2048 tokens.
    assert_eq!(
        AnthropicConfig::new("claude-haiku-4-5").min_cached_tokens(),
        2048
    );
}
