//! Streamed answers as server-sent events: `delta` events (`{"text": ...}`), then exactly
//! one `response` event (the whole response: sources, usage, truncation) or one `error`
//! event (`{"error": {"kind", "message"}}`). A stream never just stops: a failure, the
//! time limit and the shutdown deadline all end it with an `error` event. Comments are
//! sent every 15 s while nothing else is, so idle proxies keep the connection.
//!
//! Nothing is spawned: the synthesis runs inside the response body's stream, so a client
//! that disconnects drops the stream, and with it the synthesis and its model calls; the
//! request is then counted as 499 ([`crate::accounting`]).

use std::convert::Infallible;
use std::time::Duration;
use tracing::Instrument;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use futures::{Stream, StreamExt};
use synthkit::{StreamingResponse, SynthError, SynthesisInput, Synthesizer};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::api::DeltaEvent;
use crate::cost::Cost;
use crate::error::ApiError;
use crate::state::AppState;

/// How often a keep-alive comment is sent on a silent stream.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

enum Phase {
    /// The synthesis runs up to its final call, which opens the stream.
    Opening(BoxFuture<'static, Result<StreamingResponse, SynthError>>),
    /// Deltas flow.
    Streaming(Box<StreamingResponse>),
    /// The last event was sent.
    Finished,
}

struct Flow {
    phase: Phase,
    /// The prices the final response is priced at.
    cost: Cost,
    state: AppState,
    deadline: Instant,
    limit: Duration,
}

/// The SSE response for a checked streaming request: `synth` over `input`.
pub(crate) fn respond(
    state: AppState,
    synth: Synthesizer,
    input: SynthesisInput,
    cost: Cost,
) -> Response {
    let limit = state.inner.limits.request_timeout;
    let opening: BoxFuture<'static, Result<StreamingResponse, SynthError>> = Box::pin(
        async move { synth.stream_input(input).await }.instrument(tracing::Span::current()),
    );
    let flow = Flow {
        phase: Phase::Opening(opening),
        cost,
        state,
        deadline: Instant::now() + limit,
        limit,
    };
    Sse::new(events(flow))
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

/// Why a step of the flow stopped early.
enum Stop {
    Timeout,
    Shutdown,
}

fn events(flow: Flow) -> impl Stream<Item = Result<Event, Infallible>> + Send {
    futures::stream::unfold(flow, |mut flow| async move {
        loop {
            match std::mem::replace(&mut flow.phase, Phase::Finished) {
                Phase::Finished => return None,
                Phase::Opening(opening) => {
                    match guarded(flow.deadline, &flow.state.inner.cancel, opening).await {
                        Ok(Ok(s)) => flow.phase = Phase::Streaming(Box::new(s)),
                        Ok(Err(e)) => return Some((error_event(&ApiError::from(e)), flow)),
                        Err(stop) => return Some((stop_event(&flow, stop), flow)),
                    }
                }
                Phase::Streaming(mut s) => {
                    match guarded(flow.deadline, &flow.state.inner.cancel, s.next()).await {
                        Ok(Some(Ok(text))) => {
                            flow.phase = Phase::Streaming(s);
                            if text.is_empty() {
                                continue;
                            }
                            return Some((delta_event(text), flow));
                        }
                        Ok(Some(Err(e))) => return Some((error_event(&ApiError::from(e)), flow)),
                        Ok(None) => {
                            let event = match s.finish().await {
                                Ok(mut response) => {
                                    flow.cost.price(&flow.state, &mut response.usage);
                                    json_event("response", &response)
                                }
                                Err(e) => error_event(&ApiError::from(e)),
                            };
                            return Some((event, flow));
                        }
                        Err(stop) => return Some((stop_event(&flow, stop), flow)),
                    }
                }
            }
        }
    })
}

/// Runs `work` until the request's deadline or the shutdown deadline, whichever first.
async fn guarded<T>(
    deadline: Instant,
    cancel: &CancellationToken,
    work: impl Future<Output = T>,
) -> Result<T, Stop> {
    tokio::select! {
        r = work => Ok(r),
        () = tokio::time::sleep_until(deadline) => Err(Stop::Timeout),
        () = cancel.cancelled() => Err(Stop::Shutdown),
    }
}

fn stop_event(flow: &Flow, stop: Stop) -> Result<Event, Infallible> {
    let error = match stop {
        Stop::Timeout => ApiError::Timeout {
            secs: flow.limit.as_secs().max(1),
        },
        Stop::Shutdown => ApiError::ShuttingDown,
    };
    error_event(&error)
}

fn delta_event(text: String) -> Result<Event, Infallible> {
    json_event("delta", &DeltaEvent { text })
}

fn error_event(error: &ApiError) -> Result<Event, Infallible> {
    if matches!(error, ApiError::Synthesis(_)) {
        tracing::warn!(error = %error, "streamed synthesis failed");
    }
    json_event("error", &error.body())
}

fn json_event<T: serde::Serialize>(name: &str, value: &T) -> Result<Event, Infallible> {
    let data = serde_json::to_string(value).unwrap_or_else(|e| {
        format!(
            "{{\"error\":{{\"kind\":\"internal\",\"message\":\"cannot serialize the event: {e}\"}}}}"
        )
    });
    Ok(Event::default().event(name).data(data))
}
