//! Metering: a layer that reports every attempt at the backend (start, end, latency,
//! failure) to a [`CallMeter`], such as a service's metrics or [`StackCounters`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;

use super::gate::{Gate, Gated};
use super::retry::RetryEvent;
use crate::model::{ModelError, ModelRequest, StreamEvent};

/// Told of every attempt at the backend and of every retry. Every method has an empty
/// default.
pub trait CallMeter: Send + Sync {
    /// An attempt was sent to the backend.
    fn attempt_started(&self) {}
    /// An attempt ended (for a stream: when it ended or was dropped) after `elapsed`;
    /// `error` is its failure, if it failed.
    fn attempt_finished(&self, _elapsed: Duration, _error: Option<&ModelError>) {}
    /// The retry layer is about to send a call again.
    fn retrying(&self, _event: &RetryEvent<'_>) {}
}

/// What a stack has done so far: attempts at the backend, their failures, retries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct StackStats {
    /// Attempts sent to the backend (every send, first attempts and retries).
    pub attempts: u64,
    /// Attempts that failed.
    pub failures: u64,
    /// Attempts that were sends again of a failed one (the retry layer's).
    pub retries: u64,
    /// Attempts in flight now.
    pub in_flight: u64,
}

/// Live counters behind [`StackStats`]; clones share them.
#[derive(Debug, Clone, Default)]
pub struct StackCounters {
    inner: Arc<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    attempts: AtomicU64,
    failures: AtomicU64,
    retries: AtomicU64,
    in_flight: AtomicU64,
}

impl StackCounters {
    /// The counts now.
    pub fn snapshot(&self) -> StackStats {
        let c = &self.inner;
        StackStats {
            attempts: c.attempts.load(Ordering::Relaxed),
            failures: c.failures.load(Ordering::Relaxed),
            retries: c.retries.load(Ordering::Relaxed),
            in_flight: c.in_flight.load(Ordering::Relaxed),
        }
    }
}

impl CallMeter for StackCounters {
    fn attempt_started(&self) {
        self.inner.attempts.fetch_add(1, Ordering::Relaxed);
        self.inner.in_flight.fetch_add(1, Ordering::Relaxed);
    }

    fn attempt_finished(&self, _elapsed: Duration, error: Option<&ModelError>) {
        self.inner.in_flight.fetch_sub(1, Ordering::Relaxed);
        if error.is_some() {
            self.inner.failures.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn retrying(&self, _event: &RetryEvent<'_>) {
        self.inner.retries.fetch_add(1, Ordering::Relaxed);
    }
}

/// Several meters told in turn.
pub(crate) struct Meters(pub(crate) Vec<Arc<dyn CallMeter>>);

impl CallMeter for Meters {
    fn attempt_started(&self) {
        self.0.iter().for_each(|m| m.attempt_started());
    }
    fn attempt_finished(&self, elapsed: Duration, error: Option<&ModelError>) {
        self.0
            .iter()
            .for_each(|m| m.attempt_finished(elapsed, error));
    }
    fn retrying(&self, event: &RetryEvent<'_>) {
        self.0.iter().for_each(|m| m.retrying(event));
    }
}

/// A model whose every call is reported to a [`CallMeter`]: an attempt lasts until the
/// call ends (a stream: until its `Done`, an error, or until it is dropped).
pub type MeteredModel<M> = Gated<M, Arc<dyn CallMeter>>;

impl Gate for Arc<dyn CallMeter> {
    type Pass = Attempt;

    fn enter(
        &self,
        _request: &ModelRequest,
    ) -> impl Future<Output = Result<Attempt, ModelError>> + Send {
        std::future::ready(Ok(Attempt::start(self)))
    }

    /// A failure ends the attempt; a completion's attempt ends when it is dropped, a
    /// stream's when the stream ends.
    fn settle(&self, mut attempt: Attempt, error: Option<&ModelError>) -> Option<Attempt> {
        match error {
            Some(e) => {
                attempt.end(Some(e));
                None
            }
            None => Some(attempt),
        }
    }

    fn streamed(attempt: &mut Attempt, event: &Result<StreamEvent, ModelError>) {
        match event {
            Err(e) => attempt.end(Some(e)),
            Ok(StreamEvent::Done { .. }) => attempt.end(None),
            Ok(_) => {}
        }
    }
}

/// One attempt of a [`MeteredModel`] in flight; dropping it ends the attempt (cancelled,
/// or a completion that succeeded: not a failure).
pub struct Attempt {
    meter: Arc<dyn CallMeter>,
    started: tokio::time::Instant,
    ended: bool,
}

impl Attempt {
    fn start(meter: &Arc<dyn CallMeter>) -> Self {
        meter.attempt_started();
        Self {
            meter: Arc::clone(meter),
            started: tokio::time::Instant::now(),
            ended: false,
        }
    }

    fn end(&mut self, error: Option<&ModelError>) {
        if !self.ended {
            self.ended = true;
            self.meter.attempt_finished(self.started.elapsed(), error);
        }
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        // Dropped without an end: cancelled, or a stream dropped before its end.
        self.end(None);
    }
}
