//! Server-sent-event streaming: chunks to [`StreamEvent`]s.
//!
//! A stream yields the text deltas, then exactly one [`StreamEvent::Done`] once the server
//! sent `[DONE]` (or, for servers that omit it, a `finish_reason`). A stream that ends
//! before either yields [`ModelError::Incomplete`], so a cut-off reply is never taken as a
//! complete one. `reasoning_content` (or `reasoning`) deltas are not text: they come as
//! [`StreamEvent::Thinking`], and restart the idle timeout; a
//! reply that is a refusal (`refusal` deltas, `finish_reason: content_filter`) ends with
//! [`ModelError::Refused`], and one of tool calls or reasoning only with
//! [`ModelError::NoText`], in place of its `Done`.
//!
//! Timeouts and the reply size cap are the shared SSE reader's
//! ([`crate::backend::http::sse`]).

use secrecy::SecretString;

use super::wire;
use crate::backend::http::clock::ServedModel;
use crate::backend::http::errors::from_error_object;
pub(crate) use crate::backend::http::sse::Emitted;
use crate::backend::http::sse::{EventParser, event_json, stream_end};
use crate::backend::http::verdict::Held;
use crate::model::{FinishReason, ModelError, StreamEvent, Usage};

/// The state of one streamed reply, fed one SSE `data` payload at a time.
#[derive(Debug, Default)]
pub struct ChunkParser {
    usage: Option<Usage>,
    /// llama.cpp's `timings.cache_n` of the last chunk that had one (its final chunk may
    /// carry it apart from the usage).
    cache_n: Option<u64>,
    finish_reason: Option<FinishReason>,
    deltas: usize,
    /// What the reply held besides text (a refusal, tool calls, reasoning).
    held: Held,
    /// Reasoning came since the idle timeout last asked ([`EventParser::progressed`]).
    reasoned: bool,
    key: Option<SecretString>,
    /// Where the model named by the chunks is recorded.
    served: ServedModel,
}

impl EventParser for ChunkParser {
    fn feed(&mut self, event: &eventsource_stream::Event, out: &mut Emitted) -> bool {
        self.feed_data(&event.data, out)
    }

    fn end(&self) -> Result<StreamEvent, ModelError> {
        let done = self.finish_reason.is_some().then(|| self.done());
        stream_end(done, "`[DONE]` or a finish reason", self.deltas)
    }

    fn progressed(&mut self) -> bool {
        std::mem::take(&mut self.reasoned)
    }
}

impl ChunkParser {
    /// A parser that redacts `key` from errors and records the model the chunks name
    /// in `served`.
    pub(crate) fn new(key: Option<SecretString>, served: ServedModel) -> Self {
        Self {
            key,
            served,
            ..Self::default()
        }
    }

    /// Handles one `data` payload; returns `true` when the stream is over (done or failed).
    pub(crate) fn feed_data(&mut self, data: &str, out: &mut Emitted) -> bool {
        let data = data.trim();
        if data.is_empty() {
            return false;
        }
        if data == "[DONE]" {
            out.push_back(self.done());
            return true;
        }
        let chunk: wire::Response = match event_json(data, "chunk", self.key.as_ref()) {
            Ok(c) => c,
            Err(e) => {
                out.push_back(Err(e));
                return true;
            }
        };
        if let Some(err) = chunk.error.as_ref().filter(|e| !e.is_null()) {
            out.push_back(Err(from_error_object(err, self.key.as_ref())));
            return true;
        }
        if let Some(name) = chunk.model_name() {
            self.served.set(name);
        }
        for choice in chunk.choices.iter().flatten().filter(|c| c.is_first()) {
            // Reasoning comes apart from the text, as the reply's thinking.
            if let Some(t) = choice.message().and_then(wire::Message::reasoning_text) {
                out.push_back(Ok(StreamEvent::Thinking(t.to_string())));
            }
            if let Some(text) = choice.content().filter(|t| !t.is_empty()) {
                self.deltas += 1;
                self.held.text(text);
                out.push_back(Ok(StreamEvent::Delta(text.to_string())));
            }
            if let Some(m) = choice.message() {
                m.note(&mut self.held);
                // Reasoning and a refusal are output: they restart the idle timeout.
                self.reasoned |= m.has_reasoning() || m.refusal().is_some_and(|r| !r.is_empty());
            }
            if let Some(reason) = choice.finish_reason.as_deref() {
                self.held.stop_reason(reason);
                self.finish_reason = Some(wire::finish_reason(reason));
            }
        }
        if let Some(n) = chunk.timings_cache_n() {
            self.cache_n = Some(n);
        }
        if let Some(u) = chunk.usage_reported() {
            self.usage = Some(u);
        }
        false
    }

    /// The final event: `Done`, or the error for a refusal or a reply without text.
    fn done(&self) -> Result<StreamEvent, ModelError> {
        self.held.verdict()?;
        let mut reported = self.usage;
        if let (Some(u), Some(n)) = (reported.as_mut(), self.cache_n)
            && u.cached_prompt_tokens == 0
        {
            u.cached_prompt_tokens = n.min(u.prompt_tokens);
        }
        let usage = reported.unwrap_or_default();
        tracing::debug!(
            deltas = self.deltas,
            prompt_tokens = usage.prompt_tokens,
            completion_tokens = usage.completion_tokens,
            finish_reason = ?self.finish_reason,
            "openai stream finished"
        );
        Ok(StreamEvent::Done {
            usage: reported,
            finish_reason: self.finish_reason,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::http::sse::assert_hello_cut_at_length;

    fn run(payloads: &[&str]) -> (Vec<Result<StreamEvent, ModelError>>, bool) {
        let mut p = ChunkParser::new(None, ServedModel::default());
        let mut out = Emitted::new();
        for d in payloads {
            if p.feed_data(d, &mut out) {
                return (out.into_iter().collect(), true);
            }
        }
        out.push_back(p.end());
        (out.into_iter().collect(), false)
    }

    #[test]
    fn chat_stream_with_usage_chunk() {
        let (events, finished) = run(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"reasoning_content":"thinking"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"lo"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":29,"completion_tokens":2}}"#,
            "[DONE]",
            r#"{"choices":[{"index":0,"delta":{"content":"after"}}]}"#,
        ]);
        assert!(finished);
        // The reasoning comes apart, as thinking, never as text.
        assert!(matches!(&events[0], Ok(StreamEvent::Thinking(t)) if t == "thinking"));
        assert_hello_cut_at_length(events.into_iter().skip(1));
    }

    #[test]
    fn the_model_named_by_the_chunks_is_recorded() {
        let served = ServedModel::default();
        let mut p = ChunkParser::new(None, served.clone());
        let mut out = Emitted::new();
        p.feed_data(
            r#"{"choices":[{"index":0,"delta":{"content":"a"}}]}"#,
            &mut out,
        );
        assert_eq!(served.get(), None);
        p.feed_data(
            r#"{"model":"qwen2.5-1.5b","choices":[{"index":0,"delta":{"content":"b"}}]}"#,
            &mut out,
        );
        assert_eq!(served.get().as_deref(), Some("qwen2.5-1.5b"));
        // A non-string name is ignored, not an error.
        p.feed_data(r#"{"model":7,"choices":[]}"#, &mut out);
        assert_eq!(served.get().as_deref(), Some("qwen2.5-1.5b"));
        assert!(out.iter().all(Result::is_ok));
    }

    #[test]
    fn completion_stream_usage_on_last_chunk() {
        let (events, _) = run(&[
            r#"{"choices":[{"text":" a","index":0,"finish_reason":null}]}"#,
            r#"{"choices":[{"text":"","index":0,"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":1}}"#,
            "[DONE]",
        ]);
        assert_eq!(events.len(), 2);
        assert_eq!(
            events.last().and_then(|e| e.as_ref().ok()),
            Some(&StreamEvent::Done {
                usage: Some(Usage {
                    prompt_tokens: 2,
                    completion_tokens: 1,
                    ..Default::default()
                }),
                finish_reason: Some(FinishReason::Stop)
            })
        );
    }

    /// Issue 45: a stream's cached prompt tokens, from `prompt_tokens_details` or, where
    /// the usage lacks them, from llama.cpp's `timings.cache_n` (on another chunk too).
    #[test]
    fn a_stream_counts_the_prompt_tokens_the_server_reused() {
        let done_usage = |payloads: &[&str]| {
            let (events, _) = run(payloads);
            match events.last() {
                Some(Ok(StreamEvent::Done { usage, .. })) => *usage,
                other => panic!("{other:?}"),
            }
        };
        let usage = done_usage(&[
            r#"{"choices":[{"text":"a","index":0,"finish_reason":"stop"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":62,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":55}}}"#,
            "[DONE]",
        ])
        .unwrap();
        assert_eq!((usage.prompt_tokens, usage.cached_prompt_tokens), (62, 55));
        let usage = done_usage(&[
            r#"{"choices":[{"text":"a","index":0,"finish_reason":"stop"}],"timings":{"cache_n":55,"prompt_n":7}}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":62,"completion_tokens":1}}"#,
            "[DONE]",
        ])
        .unwrap();
        assert_eq!(usage.cached_prompt_tokens, 55);
        // Never more than the prompt, whatever a server says.
        let usage = done_usage(&[
            r#"{"choices":[{"text":"a","index":0,"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1},"timings":{"cache_n":900}}"#,
            "[DONE]",
        ])
        .unwrap();
        assert_eq!(usage.cached_prompt_tokens, 5);
    }

    #[test]
    fn cut_stream_is_incomplete_but_finish_reason_without_done_is_complete() {
        let (events, _) = run(&[r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#]);
        assert!(matches!(
            events.last(),
            Some(Err(ModelError::Incomplete(_)))
        ));
        let (events, _) = run(&[
            r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        ]);
        assert!(matches!(events.last(), Some(Ok(StreamEvent::Done { .. }))));
    }

    #[test]
    fn errors_in_stream() {
        let (events, finished) = run(&["{not json"]);
        assert!(finished);
        assert!(matches!(events.last(), Some(Err(ModelError::Malformed(_)))));
        let (events, _) = run(&[
            r#"{"error":{"code":400,"message":"request (3027 tokens) exceeds the available context size (2048 tokens)","type":"exceed_context_size_error","n_prompt_tokens":3027,"n_ctx":2048}}"#,
        ]);
        assert!(matches!(
            events.last(),
            Some(Err(ModelError::ContextTooLong {
                prompt_tokens: Some(3027),
                ..
            }))
        ));
    }
}
