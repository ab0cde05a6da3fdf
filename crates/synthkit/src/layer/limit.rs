//! Limits: one shared budget of calls in flight, requests per minute and tokens per minute,
//! as a layer around any [`LanguageModel`](crate::model::LanguageModel).
//!
//! A [`Limiter`] is cheap to clone (an [`Arc`] inside): give clones of one limiter to every
//! [`LimitedModel`] of a process, and every step of every synthesis, whichever model or
//! synthesizer makes it, draws on the same budget.
//!
//! ```
//! # async fn demo() {
//! use std::sync::Arc;
//! use synthkit::layer::limit::{LimitedModel, Limiter, Limits};
//! use synthkit::{model::{LanguageModel, ModelInfo}, testing::ScriptedModel};
//!
//! let limiter = Limiter::new(
//!     Limits::default()
//!         .with_max_in_flight(4)
//!         .with_requests_per_minute(500)
//!         .with_tokens_per_minute(200_000),
//! );
//! let a = ScriptedModel::constant(ModelInfo::new("a"), "ok");
//! let b = ScriptedModel::constant(ModelInfo::new("b"), "ok");
//! // Both models share one budget: at most 4 calls in flight between them.
//! let a: Arc<dyn LanguageModel> = Arc::new(LimitedModel::new(a, limiter.clone()));
//! let b: Arc<dyn LanguageModel> = Arc::new(LimitedModel::new(b, limiter.clone()));
//! # let _ = (a, b); }
//! ```
//!
//! What a call waits for, in order:
//! 1. **A slot** (a [`tokio::sync::Semaphore`] permit), held for the whole call: for
//!    [`LanguageModel::stream`](crate::model::LanguageModel::stream), until the stream ends or is dropped.
//! 2. **The budgets**, one call at a time in arrival order (so a large call is never starved
//!    by a run of small ones): one request from the requests-per-minute budget, then the
//!    call's tokens from the tokens-per-minute budget.
//!
//! **The token charge** of a call is `request.prompt_tokens + request.max_tokens`, known
//! before it is sent: the prompt is counted exactly, and the completion is charged at its
//! maximum (`max_tokens`, the output reserve), since the real length is only known after.
//! The charge is therefore an upper bound of what the server counts (with the same
//! tokenizer), and the budget errs on the side of waiting.
//!
//! **The budgets** are GCRA rate limiters (the generic cell rate algorithm, as in the Redis budget): a budget of N per minute holds up
//! to N at once and refills continuously at N per minute, so a fresh limiter may spend a
//! whole minute's budget at once, then paces calls to the rate. A call whose charge is more
//! than the whole tokens-per-minute budget could never be sent: it fails at once with
//! [`LimitError::OverBudget`] (as a [`ModelError::Other`] through [`LimitedModel`]) instead
//! of waiting forever.
//!
//! Time is tokio's ([`tokio::time::Instant`], [`tokio::time::sleep`]), so tests can pause
//! and advance it. With [`retry`](super::retry), put the limiter inside the retries
//! (`RetryModel::new(LimitedModel::new(model, limiter), policy)`): every attempt is a
//! request and is charged.

use std::fmt;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore};

use super::gate::{Gate, Gated};
use crate::model::{ModelError, ModelRequest};

/// What a [`Limiter`] allows. The default allows everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    /// The most calls in flight at once (0: no cap).
    pub max_in_flight: usize,
    /// The requests-per-minute budget, if any.
    pub requests_per_minute: Option<NonZeroU32>,
    /// The tokens-per-minute budget (prompt plus output reserve), if any.
    pub tokens_per_minute: Option<NonZeroU32>,
}

impl Limits {
    setters! {
        /// At most `n` calls in flight at once (0: no cap).
        pub fn with_max_in_flight(n: usize) => max_in_flight;
    }

    /// At most `rpm` requests per minute (0: no budget).
    pub fn with_requests_per_minute(mut self, rpm: u32) -> Self {
        self.requests_per_minute = NonZeroU32::new(rpm);
        self
    }

    /// At most `tpm` tokens per minute, each call charged its prompt tokens plus its
    /// `max_tokens` (0: no budget).
    pub fn with_tokens_per_minute(mut self, tpm: u32) -> Self {
        self.tokens_per_minute = NonZeroU32::new(tpm);
        self
    }

    /// Whether these limits allow everything (no cap, no budget).
    pub fn is_unlimited(&self) -> bool {
        self.max_in_flight == 0
            && self.requests_per_minute.is_none()
            && self.tokens_per_minute.is_none()
    }
}

/// Why a call may not go through the limiter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    /// The call alone needs more tokens than the tokens-per-minute budget holds, so it
    /// could never be sent.
    #[error(
        "a call needs {tokens} tokens (its prompt plus its output reserve), more than the whole tokens-per-minute budget of {tokens_per_minute}: raise the tokens-per-minute budget to at least {tokens}, or lower the output reserve (num_output) or the context window"
    )]
    OverBudget {
        /// The call's charge: prompt tokens plus `max_tokens`.
        tokens: u64,
        /// The tokens-per-minute budget.
        tokens_per_minute: u32,
    },
    /// The budget would hold the call past its deadline (the retry time limit, counted
    /// from the call's first send).
    #[error(
        "the rate budget would hold this call {} longer, past the time limit of its retries",
        fmt_secs(*.wait)
    )]
    Deadline {
        /// How long the budget would have made the call wait.
        wait: Duration,
    },
    /// The limiter's slots were closed.
    #[error("the rate limiter was shut down")]
    Closed,
}

fn fmt_secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

impl From<LimitError> for ModelError {
    fn from(e: LimitError) -> Self {
        ModelError::Layer {
            layer: "rate budget",
            source: Box::new(e),
        }
    }
}

/// The rate budget's error inside `error`, if the budget failed the call.
pub fn limit_error(error: &ModelError) -> Option<&LimitError> {
    match error {
        ModelError::Layer { source, .. } => source.downcast_ref::<LimitError>(),
        _ => None,
    }
}

/// Whether `error` says the rate budget would have held a call past its deadline.
pub fn is_deadline(error: &ModelError) -> bool {
    matches!(limit_error(error), Some(LimitError::Deadline { .. }))
}

/// What a limiter has let through so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimiterStats {
    /// Calls let through.
    pub requests: u64,
    /// Tokens charged (prompt tokens plus `max_tokens` of every call let through).
    pub tokens: u64,
    /// Calls in flight now.
    pub in_flight: usize,
    /// Total time calls spent waiting for the per-minute budgets (not for slots).
    pub budget_wait: Duration,
}

/// One per-minute budget: a GCRA (generic cell rate algorithm) limiter, the same arithmetic
/// as the Redis budget's script. It keeps one number, the theoretical arrival time `tat`:
/// the instant at which the budget would be full again. Taking `n` moves it `n` intervals
/// (a minute / `per_minute`) later, which is allowed while it stays within a minute of now.
///
/// Time is kept as nanoseconds times `per_minute` since the limiter was made, so that an
/// interval is exactly 60e9 of these units and no rounding builds up.
struct Budget {
    per_minute: NonZeroU32,
    base: tokio::time::Instant,
    /// The theoretical arrival time, in nanoseconds × `per_minute` since `base`.
    tat: std::sync::Mutex<u128>,
}

/// A minute in nanoseconds.
const MINUTE_NANOS: u128 = 60_000_000_000;

impl Budget {
    fn new(per_minute: NonZeroU32, base: tokio::time::Instant) -> Self {
        Self {
            per_minute,
            base,
            tat: std::sync::Mutex::new(0),
        }
    }

    /// Now, in the budget's units.
    fn now(&self) -> u128 {
        let nanos = tokio::time::Instant::now()
            .saturating_duration_since(self.base)
            .as_nanos();
        nanos * u128::from(self.per_minute.get())
    }

    /// Takes `n` if the budget has room now; otherwise says how long until it has.
    fn try_take(&self, n: NonZeroU32) -> Result<(), Duration> {
        let now = self.now();
        // The state is a plain number: a poisoned lock still holds a valid one.
        let mut tat = self.tat.lock().unwrap_or_else(|e| e.into_inner());
        let next = (*tat).max(now) + u128::from(n.get()) * MINUTE_NANOS;
        // The budget holds a minute's worth: `next` may be at most a minute ahead.
        let limit = now + u128::from(self.per_minute.get()) * MINUTE_NANOS;
        if next <= limit {
            *tat = next;
            return Ok(());
        }
        let wait_units = next - limit;
        let per_minute = u128::from(self.per_minute.get());
        let wait_nanos = wait_units.div_ceil(per_minute);
        Err(Duration::from_nanos(
            u64::try_from(wait_nanos).unwrap_or(u64::MAX),
        ))
    }

    /// Waits until `n` can be taken, and takes it. `Never` if it never can, `Deadline`
    /// if the wait would end past `deadline`.
    async fn take(&self, n: NonZeroU32, deadline: Option<tokio::time::Instant>) -> Take {
        if n > self.per_minute {
            return Take::Never;
        }
        // Each wait ends when the budget has room (the calls take the budget one at a time,
        // behind the limiter's gate), so this loops once or twice; the bound is a guard.
        for _ in 0..1_000 {
            match self.try_take(n) {
                Ok(()) => return Take::Taken,
                Err(wait) => {
                    if deadline.is_some_and(|d| tokio::time::Instant::now() + wait > d) {
                        return Take::Deadline(wait);
                    }
                    tokio::time::sleep(wait.max(Duration::from_millis(1))).await;
                }
            }
        }
        Take::Deadline(Duration::ZERO)
    }
}

/// What taking from a budget came to.
enum Take {
    Taken,
    Never,
    Deadline(Duration),
}

struct Inner {
    limits: Limits,
    slots: Option<Arc<Semaphore>>,
    /// Calls take the budgets one at a time, in arrival order (tokio's mutex is fair).
    gate: Mutex<()>,
    rpm: Option<Budget>,
    tpm: Option<Budget>,
    requests: AtomicU64,
    tokens: AtomicU64,
    in_flight: AtomicUsize,
    wait_nanos: AtomicU64,
}

/// A shared budget: calls in flight, requests per minute and tokens per minute.
///
/// Cheap to clone; clones share one budget. See the [module documentation](self).
#[derive(Clone)]
pub struct Limiter {
    inner: Arc<Inner>,
}

debug_fields!(Limiter {
    limits: inner.limits,
    stats: stats(),
});

impl Limiter {
    /// A limiter allowing what `limits` says.
    pub fn new(limits: Limits) -> Self {
        let base = tokio::time::Instant::now();
        let slots = (limits.max_in_flight > 0).then(|| {
            Arc::new(Semaphore::new(
                limits.max_in_flight.min(Semaphore::MAX_PERMITS),
            ))
        });
        Self {
            inner: Arc::new(Inner {
                limits,
                slots,
                gate: Mutex::new(()),
                rpm: limits.requests_per_minute.map(|n| Budget::new(n, base)),
                tpm: limits.tokens_per_minute.map(|n| Budget::new(n, base)),
                requests: AtomicU64::new(0),
                tokens: AtomicU64::new(0),
                in_flight: AtomicUsize::new(0),
                wait_nanos: AtomicU64::new(0),
            }),
        }
    }

    /// The limits.
    pub fn limits(&self) -> Limits {
        self.inner.limits
    }

    /// What has been let through so far.
    pub fn stats(&self) -> LimiterStats {
        LimiterStats {
            requests: self.inner.requests.load(Ordering::Relaxed),
            tokens: self.inner.tokens.load(Ordering::Relaxed),
            in_flight: self.inner.in_flight.load(Ordering::Relaxed),
            budget_wait: Duration::from_nanos(self.inner.wait_nanos.load(Ordering::Relaxed)),
        }
    }

    /// The tokens a request is charged: its prompt tokens plus its `max_tokens` (the
    /// completion at its maximum).
    pub fn charge(request: &ModelRequest) -> u64 {
        (request.prompt_tokens as u64).saturating_add(request.max_tokens as u64)
    }

    /// Waits for a slot and for one request and [`Limiter::charge`] tokens of budget; the
    /// slot is held until the permit is dropped.
    pub(crate) async fn acquire_for(
        &self,
        request: &ModelRequest,
    ) -> Result<LimitPermit, LimitError> {
        self.acquire(Self::charge(request)).await
    }

    /// Waits for a slot and for one request and `tokens` tokens of budget; the slot is
    /// held until the permit is dropped. Fails at once when `tokens` is more than the
    /// whole tokens-per-minute budget.
    pub async fn acquire(&self, tokens: u64) -> Result<LimitPermit, LimitError> {
        self.acquire_until(tokens, None).await
    }

    /// [`Limiter::acquire`], but fails with [`LimitError::Deadline`] instead of waiting
    /// for the budgets past `deadline`.
    pub(crate) async fn acquire_until(
        &self,
        tokens: u64,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<LimitPermit, LimitError> {
        let inner = &self.inner;
        // Check first: a call that can never fit must not wait for a slot.
        let token_cells = match &inner.tpm {
            Some(b) if tokens > u64::from(b.per_minute.get()) => {
                return Err(LimitError::OverBudget {
                    tokens,
                    tokens_per_minute: b.per_minute.get(),
                });
            }
            Some(_) => u32::try_from(tokens).ok().and_then(NonZeroU32::new),
            None => None,
        };
        let slot = match &inner.slots {
            Some(s) => Some(
                Arc::clone(s)
                    .acquire_owned()
                    .await
                    .map_err(|_| LimitError::Closed)?,
            ),
            None => None,
        };
        if inner.rpm.is_some() || token_cells.is_some() {
            let _turn = inner.gate.lock().await;
            let start = tokio::time::Instant::now();
            if let Some(rpm) = &inner.rpm {
                // A budget of at least 1 always has room for 1: it is taken or too late.
                if let Take::Deadline(wait) = rpm.take(NonZeroU32::MIN, deadline).await {
                    return Err(LimitError::Deadline { wait });
                }
            }
            if let (Some(tpm), Some(n)) = (&inner.tpm, token_cells) {
                match tpm.take(n, deadline).await {
                    Take::Taken => {}
                    Take::Never => {
                        return Err(LimitError::OverBudget {
                            tokens,
                            tokens_per_minute: tpm.per_minute.get(),
                        });
                    }
                    Take::Deadline(wait) => return Err(LimitError::Deadline { wait }),
                }
            }
            let waited = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
            inner.wait_nanos.fetch_add(waited, Ordering::Relaxed);
        }
        inner.requests.fetch_add(1, Ordering::Relaxed);
        inner.tokens.fetch_add(tokens, Ordering::Relaxed);
        inner.in_flight.fetch_add(1, Ordering::Relaxed);
        Ok(LimitPermit {
            _slot: slot,
            limiter: self.clone(),
        })
    }
}

/// A call's place in the limiter: its slot is freed when this is dropped.
pub struct LimitPermit {
    _slot: Option<OwnedSemaphorePermit>,
    limiter: Limiter,
}

impl fmt::Debug for LimitPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LimitPermit").finish_non_exhaustive()
    }
}

impl Drop for LimitPermit {
    fn drop(&mut self) {
        self.limiter.inner.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A model whose every call first waits for a [`Limiter`]: share clones of one limiter to
/// share one budget. The slot is held until the call ends (a stream: until it ends or is
/// dropped).
pub type LimitedModel<M> = Gated<M, Limiter>;

impl<M> LimitedModel<M> {
    /// The limiter.
    pub fn limiter(&self) -> &Limiter {
        self.gate()
    }
}

impl Gate for Limiter {
    type Pass = LimitPermit;

    async fn enter(&self, request: &ModelRequest) -> Result<LimitPermit, ModelError> {
        Ok(self.acquire_for(request).await?)
    }

    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_builder() {
        let l = Limits::default()
            .with_max_in_flight(3)
            .with_requests_per_minute(0)
            .with_tokens_per_minute(10);
        assert_eq!(l.max_in_flight, 3);
        assert_eq!(l.requests_per_minute, None);
        assert_eq!(l.tokens_per_minute, NonZeroU32::new(10));
        assert!(!l.is_unlimited());
        assert!(Limits::default().is_unlimited());
    }

    /// The GCRA budget: a fresh budget spends the whole minute at once, then refills at
    /// exactly `per_minute` a minute, with no drift over many takes.
    #[tokio::test(start_paused = true)]
    async fn budget_bursts_then_paces_exactly() {
        let per_minute = NonZeroU32::new(7).unwrap();
        let budget = Budget::new(per_minute, tokio::time::Instant::now());
        for _ in 0..7 {
            assert_eq!(budget.try_take(NonZeroU32::MIN), Ok(()));
        }
        // One interval is 60/7 s = 8.571428572 s (rounded up to the nanosecond).
        let wait = budget.try_take(NonZeroU32::MIN).unwrap_err();
        assert_eq!(wait, Duration::from_nanos(8_571_428_572));
        let start = tokio::time::Instant::now();
        for _ in 0..700 {
            assert!(matches!(
                budget.take(NonZeroU32::MIN, None).await,
                Take::Taken
            ));
        }
        // 700 more at 7 a minute: 100 minutes, to the millisecond (sleeps round up to 1 ms).
        let took = start.elapsed();
        assert!(took >= Duration::from_secs(6_000), "{took:?}");
        assert!(took < Duration::from_secs(6_001), "{took:?}");
        // More than the whole budget can never be taken; a deadline is honoured.
        assert!(matches!(
            budget.take(NonZeroU32::new(8).unwrap(), None).await,
            Take::Never
        ));
        let soon = tokio::time::Instant::now() + Duration::from_secs(1);
        assert!(matches!(
            budget.take(NonZeroU32::MIN, Some(soon)).await,
            Take::Deadline(w) if w > Duration::from_secs(1)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn over_budget_fails_at_once() {
        let limiter = Limiter::new(Limits::default().with_tokens_per_minute(100));
        let e = limiter.acquire(101).await.err();
        assert_eq!(
            e,
            Some(LimitError::OverBudget {
                tokens: 101,
                tokens_per_minute: 100
            })
        );
        let msg = ModelError::from(LimitError::OverBudget {
            tokens: 101,
            tokens_per_minute: 100,
        })
        .to_string();
        assert!(msg.contains("budget to at least 101"), "{msg}");
        assert!(limiter.acquire(100).await.is_ok());
        assert!(limiter.acquire(0).await.is_ok());
        assert_eq!(limiter.stats().requests, 2);
        assert_eq!(limiter.stats().in_flight, 0);
    }
}
