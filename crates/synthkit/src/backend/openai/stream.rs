//! Server-sent-event streaming: chunks to [`StreamEvent`]s.
//!
//! A stream yields the text deltas, then exactly one [`StreamEvent::Done`] once the server
//! sent `[DONE]` (or, for servers that omit it, a `finish_reason`). A stream that ends
//! before either yields [`ModelError::Incomplete`], so a cut-off reply is never taken as a
//! complete one. `reasoning_content` deltas are ignored.
//!
//! Timeouts: the first event must come within what is left of the request timeout (the
//! server reads the whole prompt first), each next one within the idle timeout of the
//! wait for it. There is no total time limit, so a stream that keeps producing is never
//! cut for time; the bytes read in all are capped (`OpenAiConfig::max_reply_bytes`),
//! counted before the SSE parser, which buffers a line until its end.

use std::collections::VecDeque;
use std::time::Duration;

use eventsource_stream::{EventStreamError, Eventsource};
use futures::StreamExt;
use futures::stream::BoxStream;
use secrecy::SecretString;

use super::body::{BodyError, capped_stream};
use super::error::{describe, from_error_object, redact};
use super::{CallClock, ServedModel, wire};
use crate::model::{
    CompletionStream, FinishReason, ModelError, StreamEvent, TimeoutKind, Usage, excerpt,
};

/// The state of one streamed reply, fed one SSE `data` payload at a time.
#[derive(Debug, Default)]
pub(crate) struct ChunkParser {
    usage: Option<Usage>,
    finish_reason: Option<FinishReason>,
    deltas: usize,
    key: Option<SecretString>,
    /// Where the model named by the chunks is recorded.
    served: ServedModel,
}

/// What to emit after one payload.
pub(crate) type Emitted = VecDeque<Result<StreamEvent, ModelError>>;

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
        if let Some(name) = chunk.model_name() {
            self.served.set(name);
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

type Events = BoxStream<'static, Result<eventsource_stream::Event, EventStreamError<BodyError>>>;

/// The time limits of one stream.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// The call's clock: the first event must come before the request timeout runs out.
    pub clock: CallClock,
    /// The most time to wait for each event after the first.
    pub idle: Duration,
    /// The most bytes read of the body in all.
    pub max_bytes: usize,
}

impl Limits {
    /// How long to wait for the next event, and the error if it does not come.
    fn next_wait(&self, first: bool) -> (Duration, impl FnOnce() -> ModelError + use<>) {
        let clock = self.clock;
        let idle = self.idle;
        let waiting = tokio::time::Instant::now();
        let wait = if first { clock.request_left() } else { idle };
        (wait, move || {
            if first {
                clock.request_timed_out()
            } else {
                ModelError::Timeout {
                    kind: TimeoutKind::Idle,
                    waited: waiting.elapsed(),
                    limit: idle,
                }
            }
        })
    }
}

struct State {
    events: Events,
    parser: ChunkParser,
    pending: Emitted,
    finished: bool,
    /// Whether an event has come yet.
    started: bool,
    limits: Limits,
    key: Option<SecretString>,
}

/// The stream of a streamed reply, bounded by `limits`; the model the chunks name is
/// recorded in `served`.
pub(crate) fn sse_stream(
    response: reqwest::Response,
    limits: Limits,
    key: Option<SecretString>,
    served: ServedModel,
) -> CompletionStream {
    let events: Events = capped_stream(response, limits.max_bytes)
        .eventsource()
        .boxed();
    let state = State {
        events,
        parser: ChunkParser::new(key.clone(), served),
        pending: VecDeque::new(),
        finished: false,
        started: false,
        limits,
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
            let (wait, timed_out) = st.limits.next_wait(!st.started);
            match tokio::time::timeout(wait, st.events.next()).await {
                Err(_) => {
                    st.finished = true;
                    st.pending.push_back(Err(timed_out()));
                }
                Ok(None) => {
                    st.finished = true;
                    st.pending.push_back(st.parser.end());
                }
                Ok(Some(Ok(event))) => {
                    st.started = true;
                    st.finished = st.parser.feed(&event.data, &mut st.pending);
                }
                Ok(Some(Err(e))) => {
                    st.finished = true;
                    st.pending
                        .push_back(Err(stream_error(&e, timed_out, st.key.as_ref())));
                }
            }
        }
    })
    .boxed()
}

fn stream_error(
    e: &EventStreamError<BodyError>,
    timed_out: impl FnOnce() -> ModelError,
    key: Option<&SecretString>,
) -> ModelError {
    match e {
        EventStreamError::Transport(BodyError::TooLarge { limit }) => {
            ModelError::ReplyTooLarge { limit: *limit }
        }
        EventStreamError::Transport(BodyError::Transport(t)) if t.is_timeout() => timed_out(),
        EventStreamError::Transport(BodyError::Transport(t)) => ModelError::Incomplete(format!(
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
        let mut p = ChunkParser::new(None, ServedModel::default());
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
    fn the_model_named_by_the_chunks_is_recorded() {
        let served = ServedModel::default();
        let mut p = ChunkParser::new(None, served.clone());
        let mut out = Emitted::new();
        p.feed(
            r#"{"choices":[{"index":0,"delta":{"content":"a"}}]}"#,
            &mut out,
        );
        assert_eq!(served.get(), None);
        p.feed(
            r#"{"model":"qwen2.5-1.5b","choices":[{"index":0,"delta":{"content":"b"}}]}"#,
            &mut out,
        );
        assert_eq!(served.get().as_deref(), Some("qwen2.5-1.5b"));
        // A non-string name is ignored, not an error.
        p.feed(r#"{"model":7,"choices":[]}"#, &mut out);
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
