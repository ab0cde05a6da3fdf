//! The scope of one call inside the retry layer: when its first send went out, and the
//! deadline that [`RetryPolicy::max_elapsed`](super::RetryPolicy::max_elapsed) puts on it.
//!
//! The retry layer runs every attempt inside the scope (a tokio task-local), so the
//! layers below it can see it: the rate-budget layer marks the first send and refuses to
//! wait for budget past the deadline. A call that queued for the budget before its first
//! send is not charged that wait: the time limit counts from the first send.

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
    max_elapsed: Duration,
}

impl CallScope {
    pub(crate) fn new(max_elapsed: Duration) -> Arc<Self> {
        Arc::new(Self {
            started: Instant::now(),
            first_send: Mutex::new(None),
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

    /// Time since the first send (or the start).
    pub(crate) fn elapsed(&self) -> Duration {
        self.origin().elapsed()
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
        first.map(|t| t + scope.max_elapsed)
    })
    .ok()
    .flatten()
}

/// Records that the running call's send is going out now (the first one starts the
/// call's time limit). Does nothing outside a retry layer.
pub fn mark_send() {
    let _ = CALL.try_with(|scope| {
        let mut first = scope
            .first_send
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        first.get_or_insert_with(Instant::now);
    });
}
