//! Replies of Anthropic's Messages API, for the suites' loopback servers.

use axum::body::Body;
use axum::http::header;
use axum::response::Response;
use serde_json::{Value, json};

/// A whole Messages API reply (`"type": "message"`, model `fake`, `end_turn`) with `text`
/// and the usage `input_tokens` / `output_tokens`.
pub fn message_reply(text: &str, input_tokens: u64, output_tokens: u64) -> Value {
    json!({
        "type": "message", "role": "assistant", "model": "fake",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}
    })
}

/// A streamed Messages API reply: for each `(kind, text)` block (`"thinking"` or
/// `"text"`), its start, one delta (`thinking_delta` or `text_delta`) and its stop; then
/// `stop_reason` with `output_tokens`, and `message_stop`.
pub fn message_stream(blocks: &[(&str, &str)], stop_reason: &str, output_tokens: u64) -> Response {
    let mut events = vec![
        json!({"type": "message_start", "message": {"type": "message",
        "role": "assistant", "model": "fake", "content": [],
        "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    ];
    for (i, (kind, text)) in blocks.iter().enumerate() {
        let (start, delta) = if *kind == "thinking" {
            (
                json!({"type": "thinking", "thinking": ""}),
                json!({"type": "thinking_delta", "thinking": text}),
            )
        } else {
            (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": text}),
            )
        };
        events.push(json!({"type": "content_block_start", "index": i, "content_block": start}));
        events.push(json!({"type": "content_block_delta", "index": i, "delta": delta}));
        events.push(json!({"type": "content_block_stop", "index": i}));
    }
    events.push(
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason},
        "usage": {"output_tokens": output_tokens}}),
    );
    events.push(json!({"type": "message_stop"}));
    let mut out = String::new();
    for e in &events {
        out.push_str(&format!(
            "event: {}\ndata: {e}\n\n",
            e["type"].as_str().unwrap()
        ));
    }
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from(out))
        .unwrap()
}
