//! The Messages API's server-sent events to [`StreamEvent`]s.
//!
//! Events: `message_start` (the model and the prompt's usage), `content_block_start`,
//! `content_block_delta` (`text_delta`s are the reply; other deltas, such as
//! `input_json_delta` and `thinking_delta`, are not text; a `thinking_delta` comes as
//! [`StreamEvent::Thinking`] and restarts the idle timeout), `content_block_stop`,
//! `message_delta` (the `stop_reason` and the final usage), `message_stop` (the end),
//! `ping`, and `error`. A stream yields the text deltas, then exactly one
//! [`StreamEvent::Done`] at `message_stop` (or, when the server omits it, at the end of a
//! stream that had a `stop_reason`); one that ends before either is
//! [`ModelError::Incomplete`]. An `error` event ends it with the mapped error (an
//! `overloaded_error` is an overload, as a 529 is).

use eventsource_stream::Event;
use secrecy::SecretString;
use serde::Deserialize;

use super::wire::{self, Block, Message, WireUsage};
use crate::backend::http::clock::ServedModel;
use crate::backend::http::errors::from_error_object;
use crate::backend::http::sse::{Emitted, EventParser, event_json, stream_end};
use crate::backend::http::verdict::Held;
use crate::model::{FinishReason, ModelError, StreamEvent};

/// One event's data; the fields of every event type, each optional.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Data {
    #[serde(rename = "type")]
    kind: Option<String>,
    /// `message_start`.
    message: Option<Message>,
    /// `content_block_start`.
    content_block: Option<Block>,
    /// `content_block_delta` (a block delta) and `message_delta` (the stop reason).
    delta: Option<Delta>,
    /// `message_delta`.
    usage: Option<WireUsage>,
    /// `error`.
    error: Option<serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Delta {
    #[serde(rename = "type")]
    kind: Option<String>,
    text: Option<String>,
    /// A `thinking_delta`'s text (read leniently: a value of another type is none).
    thinking: Option<serde_json::Value>,
    stop_reason: Option<String>,
}

/// The state of one streamed reply.
#[derive(Debug, Default)]
pub struct MessageParser {
    usage: Option<WireUsage>,
    finish_reason: Option<FinishReason>,
    deltas: usize,
    /// What the reply held besides text (tool calls, thinking, a refusal).
    held: Held,
    /// Thinking came since the idle timeout last asked ([`EventParser::progressed`]).
    thought: bool,
    key: Option<SecretString>,
    served: ServedModel,
}

impl MessageParser {
    /// A parser that redacts `key` from errors and records the model the stream names
    /// in `served`.
    pub(crate) fn new(key: Option<SecretString>, served: ServedModel) -> Self {
        Self {
            key,
            served,
            ..Self::default()
        }
    }

    fn text(&mut self, text: Option<&str>, out: &mut Emitted) {
        if let Some(t) = text.filter(|t| !t.is_empty()) {
            self.deltas += 1;
            self.held.text(t);
            out.push_back(Ok(StreamEvent::Delta(t.to_string())));
        }
    }

    fn usage(&mut self, later: Option<WireUsage>) {
        if let Some(u) = later {
            self.usage = Some(self.usage.unwrap_or_default().updated(u));
        }
    }

    /// The final event: `Done`, or the error for a refusal or a reply without text.
    fn done(&self) -> Result<StreamEvent, ModelError> {
        self.held.verdict()?;
        let usage = self.usage.map(crate::model::Usage::from);
        tracing::debug!(
            deltas = self.deltas,
            ?usage,
            finish_reason = ?self.finish_reason,
            "anthropic stream finished"
        );
        Ok(StreamEvent::Done {
            usage,
            finish_reason: self.finish_reason,
        })
    }
}

impl EventParser for MessageParser {
    fn feed(&mut self, event: &Event, out: &mut Emitted) -> bool {
        let payload = event.data.trim();
        if payload.is_empty() {
            return false;
        }
        let data: Data = match event_json(payload, "event", self.key.as_ref()) {
            Ok(d) => d,
            Err(e) => {
                out.push_back(Err(e));
                return true;
            }
        };
        // The data's own `type` names the event; the SSE `event:` line says the same.
        let kind = data.kind.as_deref().unwrap_or(event.event.as_str());
        match kind {
            "message_start" => {
                if let Some(m) = &data.message {
                    if let Some(name) = m.model_name() {
                        self.served.set(name);
                    }
                    self.usage(m.usage);
                }
            }
            "content_block_start" => {
                if let Some(block) = &data.content_block {
                    block.note(&mut self.held);
                    if let Some(t) = block.thinking().filter(|t| !t.is_empty()) {
                        out.push_back(Ok(StreamEvent::Thinking(t.to_string())));
                    }
                }
                let text = data.content_block.as_ref().and_then(Block::text);
                self.text(text, out);
            }
            "content_block_delta" => {
                let delta = data.delta.as_ref();
                match delta.and_then(|d| d.kind.as_deref()) {
                    Some("text_delta") => self.text(delta.and_then(|d| d.text.as_deref()), out),
                    // Thinking is output: it restarts the idle timeout.
                    Some("thinking_delta") => {
                        self.held.reasoning = true;
                        self.thought = true;
                        let t = delta.and_then(|d| d.thinking.as_ref()?.as_str());
                        if let Some(t) = t.filter(|t| !t.is_empty()) {
                            out.push_back(Ok(StreamEvent::Thinking(t.to_string())));
                        }
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = data.delta.as_ref().and_then(|d| d.stop_reason.as_deref()) {
                    self.held.stop_reason(reason);
                    self.finish_reason = Some(wire::finish_reason(reason));
                }
                self.usage(data.usage);
            }
            "message_stop" => {
                out.push_back(self.done());
                return true;
            }
            "error" => {
                let error = data.error.unwrap_or_default();
                out.push_back(Err(from_error_object(&error, self.key.as_ref())));
                return true;
            }
            // `ping`, `content_block_stop` and event types added later.
            _ => {}
        }
        false
    }

    fn end(&self) -> Result<StreamEvent, ModelError> {
        let done = self.finish_reason.is_some().then(|| self.done());
        stream_end(done, "`message_stop` or a stop reason", self.deltas)
    }

    fn progressed(&mut self) -> bool {
        std::mem::take(&mut self.thought)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::http::sse::assert_hello_cut_at_length;

    fn run(events: &[(&str, &str)]) -> Vec<Result<StreamEvent, String>> {
        let mut p = MessageParser::new(None, ServedModel::default());
        let mut out = Emitted::new();
        let mut over = false;
        for (name, data) in events {
            let e = Event {
                event: (*name).to_string(),
                data: (*data).to_string(),
                ..Event::default()
            };
            if p.feed(&e, &mut out) {
                over = true;
                break;
            }
        }
        if !over {
            out.push_back(p.end());
        }
        out.into_iter()
            .map(|e| e.map_err(|e| e.to_string()))
            .collect()
    }

    #[test]
    fn llama_server_stream() {
        let events = run(&[
            (
                "message_start",
                r#"{"type":"message_start","message":{"id":"x","type":"message","role":"assistant","content":[],"model":"tiny.gguf","stop_reason":null,"usage":{"cache_read_input_tokens":7,"input_tokens":22,"output_tokens":0}}}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            ),
            ("ping", r#"{"type": "ping"}"#),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":0}"#,
            ),
            (
                "message_delta",
                r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":2}}"#,
            ),
            ("message_stop", r#"{"type":"message_stop"}"#),
        ]);
        // The thinking comes apart, never as text.
        let thinking = |e: &Result<StreamEvent, String>| matches!(e, Ok(StreamEvent::Thinking(t)) if t == "hmm");
        assert_eq!(events.iter().filter(|e| thinking(e)).count(), 1);
        // The 7 prompt tokens read from the cache are counted, within the 29.
        let events = events
            .into_iter()
            .filter(|e| !thinking(e))
            .map(|e| match e {
                Ok(StreamEvent::Done {
                    usage: Some(mut u),
                    finish_reason,
                }) => {
                    assert_eq!(u.cached_prompt_tokens, 7, "{u:?}");
                    u.cached_prompt_tokens = 0;
                    Ok(StreamEvent::Done {
                        usage: Some(u),
                        finish_reason,
                    })
                }
                other => other,
            });
        assert_hello_cut_at_length(events);
    }

    #[test]
    fn cut_streams_and_errors() {
        let events = run(&[(
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}"#,
        )]);
        assert!(
            matches!(events.last(), Some(Err(e)) if e.contains("cut off")),
            "{events:?}"
        );
        // A stop reason without `message_stop` is a complete reply.
        let events = run(&[(
            "message_delta",
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"}}"#,
        )]);
        assert!(matches!(
            events.last(),
            Some(Ok(StreamEvent::Done {
                finish_reason: Some(FinishReason::Stop),
                ..
            }))
        ));
        let events = run(&[(
            "error",
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        )]);
        assert!(
            matches!(events.last(), Some(Err(e)) if e.contains("HTTP 529")),
            "{events:?}"
        );
        let events = run(&[("message_start", "{oops")]);
        assert!(matches!(events.last(), Some(Err(e)) if e.contains("not valid JSON")));
    }
}
