//! Metering: a layer that reports every attempt at the backend (start, end, latency,
//! failure) to a [`CallMeter`], such as a service's metrics or [`StackCounters`].

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use serde::Serialize;

use super::retry::RetryEvent;
use crate::model::{Completion, CompletionStream, LanguageModel, ModelError, ModelRequest};

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

/// A model whose every call is reported to a [`CallMeter`].
pub struct MeteredModel<M> {
    inner: M,
    meter: Arc<dyn CallMeter>,
}

impl<M: fmt::Debug> fmt::Debug for MeteredModel<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MeteredModel")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<M: LanguageModel> MeteredModel<M> {
    /// Meters `inner` into `meter`.
    pub fn new(inner: M, meter: Arc<dyn CallMeter>) -> Self {
        Self { inner, meter }
    }
}

/// One attempt in flight; dropping it ends the attempt (cancelled: not a failure).
struct Attempt {
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

impl<M: LanguageModel> crate::model::ModelLayer for MeteredModel<M> {
    type Inner = M;

    fn inner(&self) -> &M {
        &self.inner
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<Completion, ModelError>> {
        Box::pin(async move {
            let mut attempt = Attempt::start(&self.meter);
            let result = self.inner.complete(request).await;
            attempt.end(result.as_ref().err());
            result
        })
    }

    /// The attempt lasts until the stream ends (its `Done` or an error) or is dropped.
    fn stream<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<CompletionStream, ModelError>> {
        Box::pin(async move {
            let mut attempt = Attempt::start(&self.meter);
            match self.inner.stream(request).await {
                Ok(stream) => {
                    let stream = stream.map(move |item| {
                        match &item {
                            Err(e) => attempt.end(Some(e)),
                            Ok(crate::model::StreamEvent::Done { .. }) => attempt.end(None),
                            Ok(_) => {}
                        }
                        item
                    });
                    Ok(Box::pin(stream) as CompletionStream)
                }
                Err(e) => {
                    attempt.end(Some(&e));
                    Err(e)
                }
            }
        })
    }
}
