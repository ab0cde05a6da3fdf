//! The OpenAI wire format: request bodies and the parts of responses we read.
//!
//! Responses are parsed leniently: every field is optional or defaulted and unknown fields
//! (`timings`, `system_fingerprint`, ...) are ignored; reasoning text
//! (`reasoning_content`, `reasoning`) is kept apart from the text, as the reply's thinking, so servers that
//! add their own fields keep working.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::backend::http::count::lenient_count;
use crate::model::{FinishReason, ModelRequest, Usage};
use crate::prompt::{ChatMessage, ContentPart, RenderedPrompt};

/// The messages of a chat request: chat prompts as they are, a text prompt as one user
/// message.
pub(crate) fn chat_messages(prompt: &RenderedPrompt) -> Vec<Value> {
    match prompt {
        RenderedPrompt::Chat(messages) => messages.iter().map(chat_message).collect(),
        RenderedPrompt::Text(text) => vec![json!({"role": "user", "content": text})],
    }
}

/// One chat message: its text as the content, or, when it holds images, its parts in
/// order: `text` parts and `image_url` parts with the image as a data URL.
pub(crate) fn chat_message(m: &ChatMessage) -> Value {
    if m.images.is_empty() {
        return json!({"role": m.role.as_str(), "content": m.content});
    }
    let parts: Vec<Value> = m
        .parts()
        .into_iter()
        .map(|part| match part {
            ContentPart::Text(text) => json!({"type": "text", "text": text}),
            ContentPart::Image(i) => {
                json!({"type": "image_url", "image_url": {"url": i.image.data_url()}})
            }
        })
        .collect();
    json!({"role": m.role.as_str(), "content": parts})
}

/// What a request body needs besides the request itself.
pub(crate) struct BodyOptions<'a> {
    pub model: &'a str,
    pub chat: bool,
    pub sampling: &'a crate::backend::http::Sampling,
    pub stream: bool,
    pub stream_usage: bool,
    /// The JSON schema to enforce server side, if any.
    pub schema: Option<&'a Value>,
    pub extra: &'a Map<String, Value>,
}

/// The JSON body of a `/chat/completions` or `/completions` request.
pub(crate) fn request_body(request: &ModelRequest, o: &BodyOptions<'_>) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), Value::from(o.model));
    if o.chat {
        body.insert(
            "messages".into(),
            Value::Array(chat_messages(&request.prompt)),
        );
    } else {
        body.insert("prompt".into(), Value::from(request.prompt.to_text()));
    }
    body.insert("max_tokens".into(), Value::from(request.max_tokens));
    o.sampling.write(&mut body, "stop");
    if o.stream {
        body.insert("stream".into(), Value::Bool(true));
        if o.stream_usage {
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
    }
    if let Some(schema) = o.schema {
        body.insert(
            "response_format".into(),
            json!({
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": schema, "strict": true}
            }),
        );
        if !o.chat {
            // llama.cpp ignores `response_format` on `/completions` but honours its own
            // `json_schema` field there; other servers ignore the unknown field.
            body.insert("json_schema".into(), schema.clone());
        }
    }
    crate::backend::http::body_with_extra(body, o.extra)
}

/// A completion response or one streamed chunk of it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Response {
    /// The model that answered, as the server names it (a string; anything else is
    /// ignored, see [`Response::model_name`]).
    pub model: Option<Value>,
    pub choices: Option<Vec<Choice>>,
    pub usage: Option<WireUsage>,
    /// llama.cpp's `timings` (read for `cache_n`, the prompt tokens its slot reused).
    pub timings: Option<Value>,
    /// An error object some servers send with status 200 or inside a stream.
    pub error: Option<Value>,
}

/// One choice of a response or chunk.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Choice {
    pub index: Option<u64>,
    /// Chat responses.
    pub message: Option<Message>,
    /// Chat stream chunks.
    pub delta: Option<Message>,
    /// Completion responses and chunks.
    pub text: Option<String>,
    pub finish_reason: Option<String>,
}

/// A chat message or delta. Besides the text, what tells a refusal or a reply without
/// text from an answer: `refusal`, tool calls, reasoning (each read leniently: a value
/// of another type counts as absent or present, never fails the reply).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Message {
    pub content: Option<String>,
    pub refusal: Option<Value>,
    pub tool_calls: Option<Value>,
    pub function_call: Option<Value>,
    /// llama.cpp's and DeepSeek's reasoning text.
    pub reasoning_content: Option<Value>,
    /// vLLM's and OpenRouter's.
    pub reasoning: Option<Value>,
}

impl Message {
    /// The refusal's text, if any.
    pub fn refusal(&self) -> Option<&str> {
        self.refusal.as_ref().and_then(Value::as_str)
    }

    /// Whether it holds tool calls.
    pub(crate) fn has_tool_calls(&self) -> bool {
        let present = |v: &Option<Value>| match v {
            None | Some(Value::Null) => false,
            Some(Value::Array(a)) => !a.is_empty(),
            Some(_) => true,
        };
        present(&self.tool_calls) || present(&self.function_call)
    }

    /// Its reasoning text (`reasoning_content`, else `reasoning`), if any.
    pub(crate) fn reasoning_text(&self) -> Option<&str> {
        [&self.reasoning_content, &self.reasoning]
            .into_iter()
            .filter_map(|v| v.as_ref().and_then(Value::as_str))
            .find(|t| !t.is_empty())
    }

    /// Whether it holds reasoning text.
    pub(crate) fn has_reasoning(&self) -> bool {
        [&self.reasoning_content, &self.reasoning].iter().any(|v| {
            v.as_ref()
                .and_then(Value::as_str)
                .is_some_and(|t| !t.is_empty())
        })
    }

    /// Records what it holds besides text in `held`.
    pub fn note(&self, held: &mut crate::backend::http::verdict::Held) {
        if let Some(r) = self.refusal() {
            held.refusal(r);
        }
        held.tool_calls |= self.has_tool_calls();
        held.reasoning |= self.has_reasoning();
    }
}

/// Token usage as servers report it.
#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(default)]
pub(crate) struct WireUsage {
    #[serde(deserialize_with = "lenient_count")]
    pub prompt_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient_count")]
    pub completion_tokens: Option<u64>,
    /// Where OpenAI, vLLM and llama.cpp report the reasoning tokens
    /// (`completion_tokens_details.reasoning_tokens`; read leniently: anything but a
    /// count there counts as none).
    #[serde(
        rename = "completion_tokens_details",
        deserialize_with = "lenient_reasoning_tokens"
    )]
    pub reasoning_tokens: Option<u64>,
    /// Where OpenAI, vLLM and llama.cpp report the prompt tokens read from the prompt
    /// cache (`prompt_tokens_details.cached_tokens`; read leniently).
    #[serde(
        rename = "prompt_tokens_details",
        deserialize_with = "lenient_cached_tokens"
    )]
    pub cached_tokens: Option<u64>,
}

fn lenient_cached_tokens<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let v = Option::<Value>::deserialize(d)?;
    Ok(v.as_ref()
        .and_then(|v| v.get("cached_tokens"))
        .and_then(Value::as_u64))
}

fn lenient_reasoning_tokens<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<u64>, D::Error> {
    let v = Option::<Value>::deserialize(d)?;
    Ok(v.as_ref()
        .and_then(|v| v.get("reasoning_tokens"))
        .and_then(Value::as_u64))
}

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Self {
        Usage {
            prompt_tokens: u.prompt_tokens.unwrap_or(0),
            completion_tokens: u.completion_tokens.unwrap_or(0),
            reasoning_tokens: u.reasoning_tokens.unwrap_or(0),
            cached_prompt_tokens: u.cached_tokens.unwrap_or(0),
            cache_write_tokens: 0,
        }
    }
}

impl Response {
    /// The prompt tokens llama.cpp's slot reused (`timings.cache_n`), when it says.
    pub fn timings_cache_n(&self) -> Option<u64> {
        self.timings.as_ref()?.get("cache_n")?.as_u64()
    }

    /// The usage of this response or chunk: its `usage`, with the cached prompt tokens of
    /// `timings.cache_n` where `usage` does not report them (older llama.cpp), capped at
    /// the prompt.
    pub fn usage_reported(&self) -> Option<Usage> {
        let mut usage: Usage = self.usage?.into();
        if usage.cached_prompt_tokens == 0
            && let Some(n) = self.timings_cache_n()
        {
            usage.cached_prompt_tokens = n.min(usage.prompt_tokens);
        }
        Some(usage)
    }

    /// The model that answered, when the server names it.
    pub fn model_name(&self) -> Option<&str> {
        crate::backend::http::server::model_name(self.model.as_ref())
    }
}

impl Choice {
    /// The choice's text: the message (or delta) content, else the completion text.
    pub fn content(&self) -> Option<&str> {
        self.message
            .as_ref()
            .or(self.delta.as_ref())
            .and_then(|m| m.content.as_deref())
            .or(self.text.as_deref())
    }

    /// The chat message or delta, if any.
    pub fn message(&self) -> Option<&Message> {
        self.message.as_ref().or(self.delta.as_ref())
    }

    /// Whether this is the first (or only) choice.
    pub(crate) fn is_first(&self) -> bool {
        self.index.unwrap_or(0) == 0
    }
}

/// Maps a server's finish reason.
pub(crate) fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" | "eos" | "end_turn" | "stop_sequence" => FinishReason::Stop,
        "length" | "max_tokens" => FinishReason::Length,
        _ => FinishReason::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::http::Sampling;

    use crate::prompt::{ChatMessage, Role};

    fn request(prompt: RenderedPrompt) -> ModelRequest {
        crate::testing::qa_request(prompt, 3, 16, None)
    }

    #[test]
    fn text_prompt_to_chat_is_one_user_message() {
        let extra = Map::new();
        let o = BodyOptions {
            model: "m",
            chat: true,
            sampling: &Sampling::default().with_temperature(0.5),
            stream: true,
            stream_usage: true,
            schema: None,
            extra: &extra,
        };
        let body = request_body(&request(RenderedPrompt::Text("hi".into())), &o);
        assert_eq!(
            body,
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                   "max_tokens": 16, "temperature": 0.5, "stream": true,
                   "stream_options": {"include_usage": true}})
        );
    }

    /// Issue 45: the prompt tokens a server read from its prompt cache, as OpenAI, vLLM
    /// and llama.cpp report them (`prompt_tokens_details.cached_tokens`), else
    /// llama.cpp's `timings.cache_n`; anything but a count there is none.
    #[test]
    fn cached_prompt_tokens_are_read_from_usage_or_timings() {
        let usage = |body: &str| {
            serde_json::from_str::<Response>(body)
                .unwrap()
                .usage_reported()
        };
        let u = usage(r#"{"choices":[],"usage":{"prompt_tokens":62,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":55}},"timings":{"cache_n":1}}"#).unwrap();
        assert_eq!((u.prompt_tokens, u.cached_prompt_tokens), (62, 55));
        let u = usage(r#"{"choices":[],"usage":{"prompt_tokens":62,"completion_tokens":3},"timings":{"cache_n":55,"prompt_n":7}}"#).unwrap();
        assert_eq!(u.cached_prompt_tokens, 55);
        let u = usage(r#"{"choices":[],"usage":{"prompt_tokens":62,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":"x"}},"timings":"y"}"#).unwrap();
        assert_eq!(u.cached_prompt_tokens, 0);
        assert_eq!(usage(r#"{"choices":[],"timings":{"cache_n":5}}"#), None);
        // Serialized, a zero stays out (a usage object is as before without a cache).
        let plain = serde_json::to_value(Usage {
            prompt_tokens: 1,
            ..Usage::default()
        })
        .unwrap();
        assert!(plain.get("cached_prompt_tokens").is_none(), "{plain}");
    }

    #[test]
    fn completion_body_with_schema_and_extra() {
        let mut extra = Map::new();
        extra.insert("cache_prompt".into(), Value::Bool(true));
        let schema = json!({"type": "object"});
        let o = BodyOptions {
            model: "m",
            chat: false,
            sampling: &Sampling::default()
                .with_temperature(None)
                .with_top_p(0.5)
                .with_seed(-1),
            stream: false,
            stream_usage: true,
            schema: Some(&schema),
            extra: &extra,
        };
        let p = RenderedPrompt::Chat(vec![ChatMessage::new(Role::User, "q")]);
        let body = request_body(&request(p), &o);
        assert_eq!(body["prompt"], "user: q\nassistant: ");
        assert_eq!(body["json_schema"], schema);
        assert_eq!(body["response_format"]["json_schema"]["schema"], schema);
        assert_eq!(body["cache_prompt"], true);
        assert_eq!(
            (body["top_p"].as_f64(), body["seed"].as_i64()),
            (Some(0.5), Some(-1))
        );
        assert!(body.get("stream").is_none() && body.get("temperature").is_none());
    }

    #[test]
    fn lenient_parse() {
        let r: Response = serde_json::from_str(
            r#"{"choices":[{"index":0,"delta":{"reasoning_content":"hmm","content":null},"finish_reason":null}],"timings":{}}"#,
        )
        .unwrap_or_default();
        let c = r.choices.unwrap_or_default();
        assert_eq!(c.len(), 1);
        assert_eq!(c.first().and_then(Choice::content), None);
        let r: Response = serde_json::from_str(
            r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":null}}"#,
        )
        .unwrap_or_default();
        assert_eq!(
            r.usage.map(Usage::from),
            Some(Usage {
                prompt_tokens: 3,
                completion_tokens: 0,
                ..Default::default()
            })
        );
    }
}
