//! The Messages API wire format: request bodies and the parts of replies we read.
//!
//! Replies are parsed leniently: every field is optional and unknown fields and content
//! blocks (`tool_use`, `cache_creation`, ...) are ignored; thinking blocks are kept apart
//! from the text, as the reply's thinking.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::AnthropicConfig;
use crate::backend::http::count::lenient_count;
use crate::model::{FinishReason, ModelRequest, Usage};
use crate::prompt::{ChatMessage, ContentPart, PromptPrefix, RenderedPrompt, Role};
use crate::text::thinking::{MAX_THINKING_BYTES, push_capped};

/// The `system` text and the `messages` of a prompt: a text prompt is one user message;
/// a chat's system messages are joined into `system` (the API has no system role), the
/// others sent as they are. A chat of system messages only is sent as one user message.
pub(crate) fn system_and_messages(prompt: &RenderedPrompt) -> (Option<String>, Vec<Value>) {
    let message = |role: &str, content: &str| json!({"role": role, "content": content});
    let chat = match prompt {
        RenderedPrompt::Text(text) => return (None, vec![message("user", text)]),
        RenderedPrompt::Chat(chat) => chat,
    };
    let system: Vec<&str> = chat
        .iter()
        .filter(|m| m.role == Role::System)
        .map(|m| m.content.as_str())
        .collect();
    let messages: Vec<Value> = chat
        .iter()
        .filter(|m| m.role != Role::System)
        .map(|m| match m.images.is_empty() {
            true => message(m.role.as_str(), &m.content),
            false => json!({"role": m.role.as_str(), "content": blocks(m)}),
        })
        .collect();
    let system = (!system.is_empty()).then(|| system.join("\n\n"));
    match (system, messages.is_empty()) {
        (Some(s), true) => (None, vec![message("user", &s)]),
        (system, _) => (system, messages),
    }
}

/// The content blocks of a message with images, in order: `text` blocks and `image`
/// blocks with a base64 source.
fn blocks(m: &ChatMessage) -> Vec<Value> {
    m.parts()
        .into_iter()
        .map(|part| match part {
            ContentPart::Text(text) => json!({"type": "text", "text": text}),
            ContentPart::Image(i) => json!({
                "type": "image",
                "source": {
                    "type": "base64",
                    "media_type": i.image.mime_type(),
                    "data": i.image.base64(),
                },
            }),
        })
        .collect()
}

/// A prompt as a count cache's key: its count body, with each image as its fingerprint
/// (a key never holds image data).
pub(crate) fn count_key(prompt: &RenderedPrompt) -> String {
    let mut key = count_body("", &prompt.without_images()).to_string();
    key.push_str(&prompt.image_key());
    key
}

/// The body of a `/v1/messages/count_tokens` request for `prompt`.
pub(crate) fn count_body(model: &str, prompt: &RenderedPrompt) -> Value {
    let (system, messages) = system_and_messages(prompt);
    let mut body = Map::new();
    body.insert("model".into(), Value::from(model));
    if let Some(s) = system {
        body.insert("system".into(), Value::from(s));
    }
    body.insert("messages".into(), Value::Array(messages));
    Value::Object(body)
}

/// The body of a `/v1/messages` request. `max_tokens` is the request's, or the config's
/// output reserve when the request asks for 0 (the API requires a positive one). The
/// request's schema is not sent: a structured call's prompt already says which JSON to
/// write, and the engine checks the reply (see the module documentation).
pub(crate) fn request_body(
    request: &ModelRequest,
    config: &AnthropicConfig,
    stream: bool,
) -> Value {
    let mut body = match count_body(&config.model, &request.prompt) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let max_tokens = match request.max_tokens {
        0 => config.num_output.max(1),
        n => n,
    };
    body.insert("max_tokens".into(), Value::from(max_tokens));
    config.sampling.write(&mut body, "stop_sequences");
    if stream {
        body.insert("stream".into(), Value::Bool(true));
    }
    crate::backend::http::body_with_extra(body, &config.extra_body)
}

/// Marks the end of `prefix` in `body` (the body of `prompt`) with a `cache_control`
/// breakpoint when its whole leading messages hold at least `min_tokens`: on `system`
/// when they are system messages only, else on the last of them among the `messages`.
/// Returns whether it marked one. A prompt whose system messages are not all in the
/// prefix is not marked (the API sends every system message first, so its start would
/// not be the prefix); nor is a body whose `system` or message content is not as
/// [`request_body`] wrote it.
pub(crate) fn mark_prefix(
    body: &mut Value,
    prompt: &RenderedPrompt,
    prefix: &PromptPrefix,
    min_tokens: usize,
) -> bool {
    let RenderedPrompt::Chat(chat) = prompt else {
        return false;
    };
    let lead = prefix.whole_messages.min(chat.len());
    if lead == 0
        || prefix.whole_message_tokens < min_tokens
        || chat.iter().skip(lead).any(|m| m.role == Role::System)
    {
        return false;
    }
    let others = chat
        .iter()
        .take(lead)
        .filter(|m| m.role != Role::System)
        .count();
    let Value::Object(fields) = body else {
        return false;
    };
    let target = match others.checked_sub(1) {
        None => fields.get_mut("system"),
        Some(last) => fields
            .get_mut("messages")
            .and_then(|m| m.get_mut(last))
            .and_then(|m| m.get_mut("content")),
    };
    let Some(target) = target else {
        return false;
    };
    let mark = json!({"type": "ephemeral"});
    if let Value::String(text) = target {
        let text = std::mem::take(text);
        *target = json!([{"type": "text", "text": text, "cache_control": mark}]);
        return true;
    }
    match target.as_array_mut().and_then(|b| b.last_mut()) {
        Some(Value::Object(block)) => {
            block.insert("cache_control".into(), mark);
            true
        }
        _ => false,
    }
}

/// A reply (`"type": "message"`), or the `message` of a stream's `message_start`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Message {
    /// The model that answered (a string; anything else is ignored).
    pub model: Option<Value>,
    pub content: Option<Vec<Block>>,
    pub stop_reason: Option<String>,
    pub usage: Option<WireUsage>,
    /// An error object (`"type": "error"` replies).
    pub error: Option<Value>,
}

/// One content block; only `text` blocks are read.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Block {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub text: Option<String>,
    /// A `thinking` block's (or a stream's `thinking_delta`'s) text.
    pub thinking: Option<Value>,
}

impl Block {
    /// Records what the block is in `held`: text, a tool call, or thinking.
    pub fn note(&self, held: &mut crate::backend::http::verdict::Held) {
        match self.kind.as_deref() {
            Some("text" | "text_delta") => held.text(self.text.as_deref().unwrap_or_default()),
            Some("tool_use" | "server_tool_use") => held.tool_calls = true,
            Some("thinking" | "redacted_thinking" | "thinking_delta") => held.reasoning = true,
            _ => {}
        }
    }

    /// The block's thinking, when it is a thinking block (`thinking`, or a stream's
    /// `thinking_delta`); a value of another type counts as none.
    pub fn thinking(&self) -> Option<&str> {
        match self.kind.as_deref() {
            Some("thinking" | "thinking_delta") => self.thinking.as_ref().and_then(Value::as_str),
            _ => None,
        }
    }

    /// The block's text, when it is a text block (`text`, or a stream's `text_delta`).
    pub fn text(&self) -> Option<&str> {
        match self.kind.as_deref() {
            Some("text" | "text_delta") => self.text.as_deref(),
            _ => None,
        }
    }
}

/// Token usage as the API reports it. Cached prompt tokens are counted apart from
/// `input_tokens` (prompt caching), so the prompt is their sum.
#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(default)]
pub(crate) struct WireUsage {
    #[serde(deserialize_with = "lenient_count")]
    pub input_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient_count")]
    pub output_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient_count")]
    pub cache_read_input_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient_count")]
    pub cache_creation_input_tokens: Option<u64>,
}

impl WireUsage {
    /// `self` with the fields `later` reports replaced (a stream's `message_delta`
    /// reports the final counts, some of them only).
    pub fn updated(self, later: WireUsage) -> WireUsage {
        WireUsage {
            input_tokens: later.input_tokens.or(self.input_tokens),
            output_tokens: later.output_tokens.or(self.output_tokens),
            cache_read_input_tokens: later
                .cache_read_input_tokens
                .or(self.cache_read_input_tokens),
            cache_creation_input_tokens: later
                .cache_creation_input_tokens
                .or(self.cache_creation_input_tokens),
        }
    }
}

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Self {
        let prompt = [
            u.input_tokens,
            u.cache_read_input_tokens,
            u.cache_creation_input_tokens,
        ];
        Usage {
            prompt_tokens: prompt
                .iter()
                .flatten()
                .fold(0u64, |a, n| a.saturating_add(*n)),
            completion_tokens: u.output_tokens.unwrap_or(0),
            cached_prompt_tokens: u.cache_read_input_tokens.unwrap_or(0),
            cache_write_tokens: u.cache_creation_input_tokens.unwrap_or(0),
            ..Default::default()
        }
    }
}

impl Message {
    /// The model that answered, when the server names it.
    pub fn model_name(&self) -> Option<&str> {
        crate::backend::http::server::model_name(self.model.as_ref())
    }

    /// The text of all text blocks.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .flatten()
            .filter_map(Block::text)
            .collect()
    }

    /// The text of its thinking blocks, at most [`MAX_THINKING_BYTES`].
    pub fn thinking(&self) -> String {
        let mut out = String::new();
        for t in self.content.iter().flatten().filter_map(Block::thinking) {
            push_capped(&mut out, t, MAX_THINKING_BYTES);
        }
        out
    }
}

/// Maps a `stop_reason`: `max_tokens` (and a full context window) is a truncation.
pub(crate) fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        _ => FinishReason::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::ChatMessage;

    #[test]
    fn system_messages_go_to_system() {
        let p = RenderedPrompt::Chat(vec![
            ChatMessage::new(Role::System, "Be brief."),
            ChatMessage::new(Role::User, "q"),
            ChatMessage::new(Role::System, "Cite."),
        ]);
        let (system, messages) = system_and_messages(&p);
        assert_eq!(system.as_deref(), Some("Be brief.\n\nCite."));
        assert_eq!(messages, vec![json!({"role": "user", "content": "q"})]);
        let only = RenderedPrompt::Chat(vec![ChatMessage::new(Role::System, "s")]);
        assert_eq!(
            system_and_messages(&only),
            (None, vec![json!({"role": "user", "content": "s"})])
        );
    }

    #[test]
    fn request_body_has_the_sampling_and_a_positive_max_tokens() {
        let config = AnthropicConfig::new("m")
            .with_top_k(40)
            .with_stop_sequences(["END".to_string()]);
        let r = ModelRequest::new(RenderedPrompt::Text("hi".into())).with_max_tokens(0);
        let body = request_body(&r, &config, true);
        assert_eq!(
            body,
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                   "max_tokens": 256, "temperature": 0.1f32, "top_k": 40,
                   "stop_sequences": ["END"], "stream": true})
        );
        let body = request_body(&r.with_max_tokens(7), &config, false);
        assert_eq!(
            (body["max_tokens"].as_u64(), body.get("stream")),
            (Some(7), None)
        );
    }

    #[test]
    fn usage_adds_cached_prompt_tokens_and_updates() {
        let start: WireUsage = serde_json::from_value(
            json!({"input_tokens": 22, "cache_read_input_tokens": 7, "output_tokens": 0}),
        )
        .unwrap_or_default();
        let delta: WireUsage =
            serde_json::from_value(json!({"output_tokens": 4})).unwrap_or_default();
        assert_eq!(
            Usage::from(start.updated(delta)),
            Usage {
                prompt_tokens: 29,
                completion_tokens: 4,
                cached_prompt_tokens: 7,
                ..Default::default()
            }
        );
        // Cache writes are prompt tokens too, counted apart.
        let written: WireUsage = serde_json::from_value(
            json!({"input_tokens": 3, "cache_creation_input_tokens": 40, "output_tokens": 1}),
        )
        .unwrap_or_default();
        let u = Usage::from(written);
        assert_eq!(
            (
                u.prompt_tokens,
                u.cached_prompt_tokens,
                u.cache_write_tokens
            ),
            (43, 0, 40)
        );
    }
}
