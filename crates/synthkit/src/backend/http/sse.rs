//! Reading a server-sent-event reply as a [`CompletionStream`], for every HTTP backend.
//!
//! The backend brings an [`EventParser`] that turns each SSE event into
//! [`StreamEvent`]s; this module drives it under the call's limits:
//!
//! - the first event must come within what is left of the request timeout (the server
//!   reads the whole prompt first); after it, the reply must make progress (a text delta,
//!   or reasoning the parser reports with [`EventParser::progressed`]) within the idle
//!   timeout of the last progress. Events without a token (empty deltas, role-only
//!   chunks, Anthropic `ping`s; SSE comments are no events at all) do not restart it, so
//!   a server that keeps the connection busy without producing is cut. There is no total
//!   time limit, so a stream that keeps producing is never cut for time;
//! - the bytes read in all are capped (`max_reply_bytes`), counted before the SSE parser,
//!   which buffers a line until its end, so a line without end is stopped too;
//! - a byte stream that ends before the parser says the reply is over is the parser's
//!   [`EventParser::end`] (an [`ModelError::Incomplete`] for a cut reply).

use std::collections::VecDeque;
use std::time::Duration;

use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures::StreamExt;
use futures::stream::BoxStream;
use secrecy::SecretString;

use super::body::{BodyError, capped_stream};
use super::clock::CallClock;
use super::errors::{describe, redact};
use crate::model::{CompletionStream, ModelError, StreamEvent, TimeoutKind};

/// What to emit after one event.
pub type Emitted = VecDeque<Result<StreamEvent, ModelError>>;

/// A backend's reading of its SSE events.
pub trait EventParser: Send + 'static {
    /// Handles one event (its `event` name and `data`), pushing what to emit; returns
    /// `true` when the stream is over (done or failed): nothing more is read.
    fn feed(&mut self, event: &Event, out: &mut Emitted) -> bool;

    /// What the end of the byte stream means when [`EventParser::feed`] never said the
    /// stream was over: the final `Done` if the server said it finished, else an error.
    fn end(&self) -> Result<StreamEvent, ModelError>;

    /// Whether the events fed since the last call carried model output that is no text
    /// delta (reasoning), which restarts the idle timeout as a delta does. Cleared by
    /// the call.
    fn progressed(&mut self) -> bool {
        false
    }
}

/// Parses one event's `data` as the JSON `T`; what is not (`what` names it in the error,
/// "event" or "chunk") is [`ModelError::Malformed`] with the start of the data, `key`
/// redacted.
pub(crate) fn event_json<T: serde::de::DeserializeOwned>(
    data: &str,
    what: &str,
    key: Option<&SecretString>,
) -> Result<T, ModelError> {
    serde_json::from_str(data).map_err(|e| {
        ModelError::Malformed(format!(
            "a streamed {what} is not valid JSON ({e}): {}",
            redact(&crate::model::excerpt(data, 200), key)
        ))
    })
}

/// [`EventParser::end`] for a parser that has its final `Done` (`done`) when the server
/// said why it stopped; without it, [`ModelError::Incomplete`] saying which end
/// (`awaited`) never came and how many deltas did.
pub(crate) fn stream_end(
    done: Option<Result<StreamEvent, ModelError>>,
    awaited: &str,
    deltas: usize,
) -> Result<StreamEvent, ModelError> {
    done.unwrap_or_else(|| {
        Err(ModelError::Incomplete(format!(
            "the stream ended before {awaited}, after {deltas} deltas"
        )))
    })
}

type Events = BoxStream<'static, Result<Event, EventStreamError<BodyError>>>;

/// The limits of one stream.
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
    /// How long to wait for the next event, and the error if it does not come: the rest
    /// of the request timeout before the first event (`progress` is `None`), else the
    /// rest of the idle timeout since the last progress.
    fn next_wait(
        &self,
        progress: Option<tokio::time::Instant>,
    ) -> (Duration, impl FnOnce() -> ModelError + use<>) {
        let clock = self.clock;
        let idle = self.idle;
        let wait = match progress {
            None => clock.request_left(),
            Some(since) => idle.saturating_sub(since.elapsed()),
        };
        (wait, move || match progress {
            None => clock.request_timed_out(),
            Some(since) => ModelError::Timeout {
                kind: TimeoutKind::Idle,
                waited: since.elapsed(),
                limit: idle,
            },
        })
    }
}

struct State<P> {
    events: Events,
    parser: P,
    pending: Emitted,
    finished: bool,
    /// When the reply last made progress (its first event, then each delta or
    /// reasoning); `None` before the first event.
    progress: Option<tokio::time::Instant>,
    limits: Limits,
    key: Option<SecretString>,
}

/// The stream of a streamed reply read by `parser`, bounded by `limits`; `key` is
/// redacted from connection errors.
pub(crate) fn sse_stream<P: EventParser>(
    response: reqwest::Response,
    limits: Limits,
    key: Option<SecretString>,
    parser: P,
) -> CompletionStream {
    let events: Events = capped_stream(response, limits.max_bytes)
        .eventsource()
        .boxed();
    let state = State {
        events,
        parser,
        pending: VecDeque::new(),
        finished: false,
        progress: None,
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
            let (wait, timed_out) = st.limits.next_wait(st.progress);
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
                    let before = st.pending.len();
                    st.finished = st.parser.feed(&event, &mut st.pending);
                    let delta = st
                        .pending
                        .iter()
                        .skip(before)
                        .any(|e| matches!(e, Ok(StreamEvent::Delta(_))));
                    // Only output restarts the idle timeout (the first event starts it).
                    if st.parser.progressed() || delta || st.progress.is_none() {
                        st.progress = Some(tokio::time::Instant::now());
                    }
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

/// Fails the test unless `events` are what a reply `Hel` `lo` cut at the length limit,
/// with 29 prompt and 2 completion tokens, streams as (both backends' stream tests).
#[cfg(test)]
#[track_caller]
pub(crate) fn assert_hello_cut_at_length<E: std::fmt::Display>(
    events: impl IntoIterator<Item = Result<StreamEvent, E>>,
) {
    let events: Vec<_> = events
        .into_iter()
        .map(|e| e.map_err(|e| e.to_string()))
        .collect();
    let expected = vec![
        Ok(StreamEvent::Delta("Hel".into())),
        Ok(StreamEvent::Delta("lo".into())),
        Ok(StreamEvent::Done {
            usage: Some(crate::model::Usage {
                prompt_tokens: 29,
                completion_tokens: 2,
                ..Default::default()
            }),
            finish_reason: Some(crate::model::FinishReason::Length),
        }),
    ];
    assert_eq!(events, expected);
}
