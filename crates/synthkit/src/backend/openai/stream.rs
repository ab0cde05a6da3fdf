//! Server-sent-event streaming: chunks to [`StreamEvent`]s.
//!
//! A stream yields the text deltas, then exactly one [`StreamEvent::Done`] once the server
//! sent `[DONE]` (or, for servers that omit it, a `finish_reason`). A stream that ends
//! before either yields [`ModelError::Incomplete`], so a cut-off reply is never taken as a
//! complete one. `reasoning_content` deltas are ignored.

use std::collections::VecDeque;
use std::time::Duration;

use eventsource_stream::{EventStreamError, Eventsource};
use futures::StreamExt;
use futures::stream::BoxStream;
use secrecy::SecretString;

use super::error::{describe, from_error_object, redact};
use super::wire;
use crate::model::{CompletionStream, FinishReason, ModelError, StreamEvent, Usage, excerpt};

/// The state of one streamed reply, fed one SSE `data` payload at a time.
#[derive(Debug, Default)]
pub(crate) struct ChunkParser {
    usage: Option<Usage>,
    finish_reason: Option<FinishReason>,
    deltas: usize,
    key: Option<SecretString>,
}

/// What to emit after one payload.
pub(crate) type Emitted = VecDeque<Result<StreamEvent, ModelError>>;

impl ChunkParser {
    /// A parser that redacts `key` from errors.
    pub(crate) fn new(key: Option<SecretString>) -> Self {
        Self {
            key,
            ..Self::default()
        }
    }

    /// Handles one `data` payload; returns `true` when the stream is over (done or failed).
    pub(crate) fn feed(&mut self, data: &str, out: &mut Emitted) -> bool {
        let data = data.trim();
        if data.is_empty() {
            return false;
        }
        if data == "[DONE]" {
            out.push_back(Ok(self.done()));
            return true;
        }
        let chunk: wire::Response = match serde_json::from_str(data) {
            Ok(c) => c,
            Err(e) => {
                out.push_back(Err(ModelError::Malformed(format!(
                    "a streamed chunk is not valid JSON ({e}): {}",
                    redact(&excerpt(data, 200), self.key.as_ref())
                ))));
                return true;
            }
        };
        if let Some(err) = chunk.error.as_ref().filter(|e| !e.is_null()) {
            out.push_back(Err(from_error_object(err, self.key.as_ref())));
            return true;
        }
        for choice in chunk.choices.iter().flatten().filter(|c| c.is_first()) {
            if let Some(text) = choice.content().filter(|t| !t.is_empty()) {
                self.deltas += 1;
                out.push_back(Ok(StreamEvent::Delta(text.to_string())));
            }
            if let Some(reason) = choice.finish_reason.as_deref() {
                self.finish_reason = Some(wire::finish_reason(reason));
            }
        }
        if let Some(u) = chunk.usage {
            self.usage = Some(u.into());
        }
        false
    }

    /// What the end of the byte stream means: done if the server said it finished, else cut.
    pub(crate) fn end(&self) -> Result<StreamEvent, ModelError> {
        if self.finish_reason.is_some() {
            return Ok(self.done());
        }
        Err(ModelError::Incomplete(format!(
            "the stream ended before `[DONE]` or a finish reason, after {} deltas",
            self.deltas
        )))
    }

    fn done(&self) -> StreamEvent {
        let usage = self.usage.unwrap_or_default();
        tracing::debug!(
            deltas = self.deltas,
            prompt_tokens = usage.prompt_tokens,
            completion_tokens = usage.completion_tokens,
            finish_reason = ?self.finish_reason,
            "openai stream finished"
        );
        StreamEvent::Done {
            usage: self.usage,
            finish_reason: self.finish_reason,
        }
    }
}

type Events =
    BoxStream<'static, Result<eventsource_stream::Event, EventStreamError<reqwest::Error>>>;

struct State {
    events: Events,
    parser: ChunkParser,
    pending: Emitted,
    finished: bool,
    idle: Duration,
    key: Option<SecretString>,
}

/// The stream of a streamed reply. `idle` bounds the wait for each piece of the body.
pub(crate) fn sse_stream(
    response: reqwest::Response,
    idle: Duration,
    key: Option<SecretString>,
) -> CompletionStream {
    let events: Events = response.bytes_stream().eventsource().boxed();
    let state = State {
        events,
        parser: ChunkParser::new(key.clone()),
        pending: VecDeque::new(),
        finished: false,
        idle,
        key,
    };
    futures::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(item) = st.pending.pop_front() {
                return Some((item, st));
            }
            if st.finished {
                return None;
            }
            match tokio::time::timeout(st.idle, st.events.next()).await {
                Err(_) => {
                    st.finished = true;
                    st.pending.push_back(Err(ModelError::Timeout(st.idle)));
                }
                Ok(None) => {
                    st.finished = true;
                    st.pending.push_back(st.parser.end());
                }
                Ok(Some(Ok(event))) => {
                    st.finished = st.parser.feed(&event.data, &mut st.pending);
                }
                Ok(Some(Err(e))) => {
                    st.finished = true;
                    st.pending
                        .push_back(Err(stream_error(&e, st.idle, st.key.as_ref())));
                }
            }
        }
    })
    .boxed()
}

fn stream_error(
    e: &EventStreamError<reqwest::Error>,
    idle: Duration,
    key: Option<&SecretString>,
) -> ModelError {
    match e {
        EventStreamError::Transport(t) if t.is_timeout() => ModelError::Timeout(idle),
        EventStreamError::Transport(t) => ModelError::Incomplete(format!(
            "the connection failed during the reply: {}",
            redact(&describe(t), key)
        )),
        EventStreamError::Utf8(u) => {
            ModelError::Malformed(format!("the streamed reply is not valid UTF-8: {u}"))
        }
        EventStreamError::Parser(p) => {
            ModelError::Malformed(format!("the streamed reply is not valid SSE: {p}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(payloads: &[&str]) -> (Vec<Result<StreamEvent, ModelError>>, bool) {
        let mut p = ChunkParser::new(None);
        let mut out = Emitted::new();
        for d in payloads {
            if p.feed(d, &mut out) {
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
        let events: Vec<_> = events
            .into_iter()
            .map(|e| e.map_err(|e| e.to_string()))
            .collect();
        assert_eq!(
            events,
            vec![
                Ok(StreamEvent::Delta("Hel".into())),
                Ok(StreamEvent::Delta("lo".into())),
                Ok(StreamEvent::Done {
                    usage: Some(Usage {
                        prompt_tokens: 29,
                        completion_tokens: 2
                    }),
                    finish_reason: Some(FinishReason::Length)
                }),
            ]
        );
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
                    completion_tokens: 1
                }),
                finish_reason: Some(FinishReason::Stop)
            })
        );
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
