//! Replies of Anthropic's Messages API, for the suites' loopback servers.

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
