//! The scope of one call inside the retry layer: when its first send went out, and the
//! deadline that [`RetryPolicy::max_elapsed`](super::RetryPolicy::max_elapsed) puts on it.
//!
//! The retry layer runs every attempt inside the scope (a tokio task-local), so the
//! layers below it can see it: the rate-budget and adaptive layers mark the first send,
//! the budget refuses to wait past the deadline, and the adaptive layer reports the time
//! an attempt queued for a place among the calls in flight. The time limit counts from
//! the first send and leaves out the queueing behind the job's own calls: it bounds the
//! retrying (failed attempts, Retry-After and backoff sleeps, waits for the provider's
//! rate budget), not the job's length.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

tokio::task_local! {
    static CALL: Arc<CallScope>;
}

/// One call's clock.
#[derive(Debug)]
pub(crate) struct CallScope {
    started: Instant,
    first_send: Mutex<Option<Instant>>,
    /// Time spent queueing for a place after the first send.
    queued: Mutex<Duration>,
    max_elapsed: Duration,
}

impl CallScope {
    pub(crate) fn new(max_elapsed: Duration) -> Arc<Self> {
        Arc::new(Self {
            started: Instant::now(),
            first_send: Mutex::new(None),
            queued: Mutex::new(Duration::ZERO),
            max_elapsed,
        })
    }

    /// When the call's first send went out, else when the call started.
    fn origin(&self) -> Instant {
        self.first_send
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .unwrap_or(self.started)
    }

    fn queued(&self) -> Duration {
        *self.queued.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Time since the first send (or the start), less the queueing after it.
    pub(crate) fn elapsed(&self) -> Duration {
        self.origin().elapsed().saturating_sub(self.queued())
    }

    /// Runs `attempt` inside this scope.
    pub(crate) async fn run<F: std::future::Future>(self: &Arc<Self>, attempt: F) -> F::Output {
        CALL.scope(Arc::clone(self), attempt).await
    }
}

/// The deadline of the call whose attempt is running: its first send plus the retry
/// time limit. `None` outside a retry layer, and before the call's first send (the
/// first send may wait as long as the budget needs).
pub fn deadline() -> Option<Instant> {
    CALL.try_with(|scope| {
        let first = *scope
            .first_send
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        first.map(|t| t + scope.max_elapsed + scope.queued())
    })
    .ok()
    .flatten()
}

/// Records that the running call's send is going out now (the first one starts the
/// call's time limit). Does nothing outside a retry layer.
pub(crate) fn mark_send() {
    let _ = CALL.try_with(|scope| {
        let mut first = scope
            .first_send
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        first.get_or_insert_with(Instant::now);
    });
}

/// Records that the running call queued for a place among the calls in flight from
/// `since` until now; the part after its first send is left out of its time limit. Does
/// nothing outside a retry layer.
pub(crate) fn queued_since(since: Instant) {
    let _ = CALL.try_with(|scope| {
        let first = *scope
            .first_send
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(first) = first {
            let waited = Instant::now().saturating_duration_since(since.max(first));
            *scope.queued.lock().unwrap_or_else(PoisonError::into_inner) += waited;
        }
    });
}
