//! The circuit breaker in front of Redis: after [`FAILURES_TO_OPEN`] round trips in a row
//! fail, it opens for [`RETRY_INTERVAL`], and every call that needs Redis is answered at
//! once (the budget fails it, the cache takes it as a miss) instead of waiting for Redis's
//! timeout; then one call probes (half-open): its success closes the breaker, its failure
//! opens it for another interval.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// Round trips that fail in a row before the breaker opens.
pub const FAILURES_TO_OPEN: u32 = 3;

/// How long the breaker stays open before one call tries Redis again.
pub const RETRY_INTERVAL: Duration = Duration::from_secs(5);

/// Redis failed [`FAILURES_TO_OPEN`] times in a row; calls that need it fail at once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Redis is not answering ({failures} round trips in a row failed): calls that need it fail at once until the next try in {retry_in_ms} ms; check that the Redis server is up and reachable"
)]
#[non_exhaustive]
pub struct RedisUnavailable {
    /// Failures in a row.
    pub failures: u32,
    /// Milliseconds until a call tries Redis again.
    pub retry_in_ms: u64,
}

/// See the [module documentation](self).
#[derive(Debug, Default)]
pub(crate) struct Breaker {
    failures: AtomicU32,
    /// When the open breaker lets one call try again.
    retry_at: Mutex<Option<Instant>>,
    /// Whether the one trying call of the half-open breaker is out.
    probing: AtomicBool,
    /// Woken when the breaker opens (calls queued behind a round trip stop waiting).
    opened: Notify,
}

/// Leave to make one round trip; say how it went ([`Permit::success`],
/// [`Permit::failure`]). A probe dropped unresolved (its call was cancelled) lets the next
/// call probe.
pub(crate) struct Permit<'a> {
    breaker: &'a Breaker,
    probe: bool,
}

impl Breaker {
    fn retry_at(&self) -> Option<Instant> {
        *self
            .retry_at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Why calls fail at once now.
    pub(crate) fn unavailable(&self, now: Instant) -> RedisUnavailable {
        let retry_in = self
            .retry_at()
            .map_or(Duration::ZERO, |at| at.saturating_duration_since(now));
        RedisUnavailable {
            failures: self.failures.load(Ordering::Relaxed),
            retry_in_ms: u64::try_from(retry_in.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// Leave for a round trip, or why not (the breaker is open, or half-open with its
    /// probe out).
    pub(crate) fn allow(&self) -> Result<Permit<'_>, RedisUnavailable> {
        if self.failures.load(Ordering::Acquire) < FAILURES_TO_OPEN {
            return Ok(Permit {
                breaker: self,
                probe: false,
            });
        }
        let now = Instant::now();
        let due = self.retry_at().is_none_or(|at| now >= at);
        if due
            && self
                .probing
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            return Ok(Permit {
                breaker: self,
                probe: true,
            });
        }
        Err(self.unavailable(now))
    }

    /// `Err` while the breaker is open (or half-open), saying why.
    pub(crate) fn state(&self) -> Result<(), RedisUnavailable> {
        if self.failures.load(Ordering::Acquire) < FAILURES_TO_OPEN {
            Ok(())
        } else {
            Err(self.unavailable(Instant::now()))
        }
    }

    /// Resolves when the breaker opens next.
    pub(crate) async fn opened(&self) {
        self.opened.notified().await;
    }
}

impl Permit<'_> {
    /// The round trip worked: the breaker closes.
    pub(crate) fn success(mut self) {
        let b = self.breaker;
        if b.failures.swap(0, Ordering::AcqRel) >= FAILURES_TO_OPEN {
            tracing::info!("Redis answers again");
        }
        self.release();
    }

    /// The round trip failed: one more in a row; at [`FAILURES_TO_OPEN`] (or when a probe
    /// fails) the breaker opens for [`RETRY_INTERVAL`].
    pub(crate) fn failure(mut self) {
        let b = self.breaker;
        let n = b.failures.fetch_add(1, Ordering::AcqRel).saturating_add(1);
        if n >= FAILURES_TO_OPEN {
            let mut at = b
                .retry_at
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            *at = Some(Instant::now() + RETRY_INTERVAL);
            drop(at);
            if n == FAILURES_TO_OPEN || self.probe {
                tracing::warn!(
                    failures = n,
                    "Redis is not answering: calls that need it fail at once for {} s, then one tries again",
                    RETRY_INTERVAL.as_secs()
                );
            }
            b.opened.notify_waiters();
        }
        self.release();
    }

    fn release(&mut self) {
        if self.probe {
            self.probe = false;
            self.breaker.probing.store(false, Ordering::Release);
        }
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn opens_after_failures_in_a_row_then_lets_one_probe() {
        let b = Breaker::default();
        for _ in 0..FAILURES_TO_OPEN - 1 {
            b.allow().unwrap().failure();
        }
        b.allow().unwrap().success();
        for _ in 0..FAILURES_TO_OPEN {
            b.allow().unwrap().failure();
        }
        let e = b.allow().err().unwrap();
        assert_eq!(e.failures, FAILURES_TO_OPEN);
        assert!(b.state().is_err());
        tokio::time::advance(RETRY_INTERVAL).await;
        let probe = b.allow().unwrap();
        assert!(b.allow().is_err(), "one probe at a time");
        drop(probe);
        let probe = b.allow().unwrap();
        probe.failure();
        assert!(b.allow().is_err(), "a failed probe opens it again");
        tokio::time::advance(RETRY_INTERVAL).await;
        b.allow().unwrap().success();
        assert!(b.state().is_ok() && b.allow().is_ok());
    }
}
