//! Retries: a layer around any [`LanguageModel`].
//!
//! [`RetryModel`] wraps a model and sends a failed call again when the failure is
//! transient ([`ModelError::is_transient`]: rate limits, 5xx, timeouts, broken
//! connections, a stream cut before its first delta). Everything else (bad credentials,
//! a prompt too long for the context, a rejected request, a reply that cannot be
//! understood) is returned at once: sending the same request again cannot help.
//!
//! ```
//! # async fn demo() -> Result<(), synthkit::model::ModelError> {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use synthkit::layer::retry::{RetryModel, RetryPolicy};
//! use synthkit::{model::ModelInfo, testing::ScriptedModel};
//!
//! let inner = ScriptedModel::constant(ModelInfo::new("demo"), "ok");
//! let policy = RetryPolicy::default()
//!     .with_max_attempts(5)
//!     .with_max_elapsed(Duration::from_secs(60));
//! let model = Arc::new(RetryModel::new(inner, policy).on_retry(|e| {
//!     eprintln!("attempt {} failed, waiting {:?}: {}", e.attempt, e.wait, e.error);
//! }));
//! // Use `model` wherever an `Arc<dyn LanguageModel>` goes (`Synthesizer::builder`).
//! # let _ = model; Ok(()) }
//! ```
//!
//! The schedule:
//! - **Exponential backoff with full jitter.** Before retry *n* the ceiling is
//!   `initial_backoff * 2^(n-1)`, capped at `max_backoff` (backon's [`ExponentialBuilder`]
//!   computes the ceilings); the wait is drawn uniformly from `[0, ceiling]` ("full jitter",
//!   which spreads the retries of many concurrent calls, such as the leaves of a
//!   `tree_summarize` level, instead of sending them back in lockstep).
//! - **Retry-After.** A [`ModelError::RateLimited`] with `retry_after` waits at least that
//!   long (the larger of it and the jittered backoff).
//! - **Bounded attempts**: at most `max_attempts` calls in all (the first one included).
//! - **Bounded total time**: a retry is only scheduled if its wait ends before
//!   `max_elapsed` has passed since the first attempt started; otherwise the last error is
//!   returned at once rather than sleeping for nothing (in particular when a Retry-After is
//!   longer than the time left). After a [`ModelError::Timeout`] the next attempt must
//!   also have time to wait as long as the timed-out one did (its `waited`) within
//!   `max_elapsed`, so a hanging server is not waited on for several timeouts past the
//!   budget. The layer never cuts an attempt short: each attempt is bounded by the
//!   model's own timeout, so a call takes at most `max_elapsed` plus one attempt.
//! - **Streams** ([`LanguageModel::stream`]): opening the stream and waiting for its first
//!   event are retried like any call (nothing has reached the caller yet). Once the first
//!   delta has been handed on, a failure is passed on as the stream's error, never retried:
//!   a reply is never replayed or stitched together from parts.
//!
//! Every retry is logged with `tracing::warn!` (attempt, wait, error: the error's `Display`
//! is free of secrets) and reported to the [`RetryModel::on_retry`] hook, if any.
//!
//! The loop itself is backon's [`Retryable`]: `.when` retries transient errors only, the
//! backoff (jittered ceilings, `max_attempts - 1` of them) ends the attempts, `.adjust`
//! applies Retry-After and the time budget, `.notify` logs and calls the hook, and
//! `.sleep(tokio::time::sleep)` waits on tokio's clock (so paused test time works).

use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use backon::{Backoff, BackoffBuilder, ExponentialBuilder, Retryable};
use futures::StreamExt;
use futures::future::BoxFuture;

use crate::model::{
    Completion, CompletionStream, LanguageModel, ModelError, ModelFuture, ModelRequest, StepInfo,
};

/// How the waits between attempts are randomised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Jitter {
    /// Full jitter (the default): each wait is uniform in `[0, ceiling]`.
    #[default]
    Full,
    /// No jitter: each wait is the ceiling itself. Deterministic; for tests and demos.
    None,
}

impl Jitter {
    /// The wait for `ceiling`, with `unit` a number in `[0, 1)` for the jitter.
    fn apply(self, ceiling: Duration, unit: f64) -> Duration {
        match self {
            Jitter::Full => ceiling.mul_f64(unit.clamp(0.0, 1.0)),
            Jitter::None => ceiling,
        }
    }
}

/// When and how often [`RetryModel`] retries.
///
/// Build with [`RetryPolicy::default`] (or [`RetryPolicy::new`]) and the `with_*` methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// The most calls made for one request, the first one included (default 4; 0 and 1
    /// both mean no retry).
    pub max_attempts: u32,
    /// The backoff ceiling before the first retry (default 500 ms); it doubles with each
    /// retry.
    pub initial_backoff: Duration,
    /// The largest backoff ceiling (default 20 s). A longer Retry-After is still honoured.
    pub max_backoff: Duration,
    /// The total time budget (default 120 s): no retry is scheduled whose wait would end
    /// later than this after the first attempt started.
    pub max_elapsed: Duration,
    /// How waits are randomised (default [`Jitter::Full`]).
    pub jitter: Jitter,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: Self::DEFAULT_MAX_ATTEMPTS,
            initial_backoff: Self::DEFAULT_INITIAL_BACKOFF,
            max_backoff: Self::DEFAULT_MAX_BACKOFF,
            max_elapsed: Self::DEFAULT_MAX_ELAPSED,
            jitter: Jitter::Full,
        }
    }
}

impl RetryPolicy {
    /// The default number of attempts.
    pub const DEFAULT_MAX_ATTEMPTS: u32 = 4;
    /// The default first backoff ceiling.
    pub const DEFAULT_INITIAL_BACKOFF: Duration = Duration::from_millis(500);
    /// The default largest backoff ceiling.
    pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(20);
    /// The default total time budget.
    pub const DEFAULT_MAX_ELAPSED: Duration = Duration::from_secs(120);

    /// The default policy.
    pub fn new() -> Self {
        Self::default()
    }

    /// A policy that never retries (one attempt).
    pub fn none() -> Self {
        Self::default().with_max_attempts(1)
    }

    setters! {
        /// Sets the most calls made for one request, the first one included.
        pub fn with_max_attempts(attempts: u32) => max_attempts;

        /// Sets the backoff ceiling before the first retry.
        pub fn with_initial_backoff(backoff: Duration) => initial_backoff;

        /// Sets the largest backoff ceiling.
        pub fn with_max_backoff(backoff: Duration) => max_backoff;

        /// Sets the total time budget.
        pub fn with_max_elapsed(budget: Duration) => max_elapsed;

        /// Sets the jitter.
        pub fn with_jitter(jitter: Jitter) => jitter;
    }

    /// The most attempts, at least one.
    fn attempts(&self) -> u32 {
        self.max_attempts.max(1)
    }

    /// The backoff ceilings before retry 1, 2, ...: `initial_backoff` doubling, capped at
    /// `max_backoff`, without jitter. Endless; the attempt and time bounds stop retries.
    #[cfg(test)]
    pub(crate) fn ceilings(&self) -> impl Iterator<Item = Duration> + Send + Sync + Unpin + use<> {
        self.exponential(None)
    }

    /// backon's exponential backoff for the ceilings, ending after `retries` of them
    /// (`None`: endless).
    fn exponential(&self, retries: Option<usize>) -> impl Backoff + use<> {
        let max = self.max_backoff;
        let builder = ExponentialBuilder::new()
            .with_factor(2.0)
            .with_min_delay(self.initial_backoff.min(max))
            .with_max_delay(max);
        let builder = match retries {
            Some(n) => builder.with_max_times(n),
            None => builder.without_max_times(),
        };
        // backon does not cap the first delay, so cap it here; it multiplies in `f32`
        // (100 ms * 2 = 200.000003 ms), so round to whole microseconds.
        builder.build().map(move |d| whole_micros(d).min(max))
    }

    /// The waits before retry 1, 2, ...: the ceilings with the jitter applied, one for
    /// each retry `max_attempts` allows; `None` after the last one (no attempts left).
    fn backoff(&self) -> impl Backoff + use<> {
        let jitter = self.jitter;
        let retries = usize::try_from(self.attempts() - 1).unwrap_or(usize::MAX);
        self.exponential(Some(retries))
            .map(move |ceiling| jitter.apply(ceiling, unit_random()))
    }

    /// The wait before the next attempt, or why there is none, after an attempt failed
    /// with the transient `error`, `elapsed` after the first attempt started. `backoff` is
    /// the jittered backoff for this retry (`None`: no attempts left). Retry-After makes
    /// the wait longer, never shorter; a wait that would end past `max_elapsed` gives up,
    /// and after a timeout so does one whose attempt could not wait as long as the last.
    fn schedule(
        &self,
        error: &ModelError,
        backoff: Option<Duration>,
        elapsed: Duration,
    ) -> Result<Duration, GiveUp> {
        let mut wait = backoff.ok_or(GiveUp::Attempts)?;
        if let ModelError::RateLimited {
            retry_after: Some(after),
            ..
        } = error
        {
            wait = wait.max(*after);
        }
        // A call that timed out will likely hang as long again: schedule it only if it
        // could, and still end within the budget (else a hanging server would take up to
        // `max_attempts` timeouts while each error names one).
        let next_ends = match error {
            ModelError::Timeout { waited, .. } => wait.saturating_add(*waited),
            _ => wait,
        };
        if elapsed.saturating_add(next_ends) >= self.max_elapsed {
            return Err(GiveUp::Time);
        }
        Ok(wait)
    }
}

/// Why the retry loop stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GiveUp {
    NotTransient,
    Attempts,
    Time,
}

impl GiveUp {
    fn as_str(self) -> &'static str {
        match self {
            GiveUp::NotTransient => "the error is not transient",
            GiveUp::Attempts => "no attempts left",
            GiveUp::Time => "the next wait would pass the time budget",
        }
    }
}

/// One retry about to happen, as reported to the [`RetryModel::on_retry`] hook.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct RetryEvent<'a> {
    /// The call: `complete`, `stream` or `structured`.
    pub call: &'static str,
    /// The step of the request being retried.
    pub step: StepInfo,
    /// The attempt that failed (1 for the first call).
    pub attempt: u32,
    /// The most attempts the policy allows.
    pub max_attempts: u32,
    /// How long the layer waits before the next attempt.
    pub wait: Duration,
    /// Why the attempt failed.
    pub error: &'a ModelError,
}

/// A function told of every retry (metrics, progress, tests).
pub type RetryHook = Arc<dyn Fn(&RetryEvent<'_>) + Send + Sync>;

/// A model that retries its inner model's transient failures; see the [module](self) docs.
/// Implements [`LanguageModel`]; `info` and `tokenizer` are the inner model's.
#[derive(Clone)]
pub struct RetryModel<M> {
    inner: M,
    policy: RetryPolicy,
    hook: Option<RetryHook>,
}

impl<M: fmt::Debug> fmt::Debug for RetryModel<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryModel")
            .field("inner", &self.inner)
            .field("policy", &self.policy)
            .field("on_retry", &self.hook.is_some())
            .finish()
    }
}

impl<M: LanguageModel> RetryModel<M> {
    /// Wraps `inner`, retrying as `policy` says.
    pub fn new(inner: M, policy: RetryPolicy) -> Self {
        Self {
            inner,
            policy,
            hook: None,
        }
    }

    /// Calls `hook` before every retry (after the warning is logged, before the wait).
    pub fn on_retry(mut self, hook: impl Fn(&RetryEvent<'_>) + Send + Sync + 'static) -> Self {
        self.hook = Some(Arc::new(hook));
        self
    }

    /// The policy.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// The wrapped model.
    pub fn inner(&self) -> &M {
        &self.inner
    }

    /// The wrapped model, unwrapped.
    pub fn into_inner(self) -> M {
        self.inner
    }

    /// Runs `op` with backon until it succeeds or the policy gives up; returns the last
    /// error then. Every attempt runs in the call's [`scope`], so the layers below see
    /// its deadline; an attempt refused because the rate budget would hold it past the
    /// deadline ends the retries with the error of the attempt before it.
    async fn run<'a, T: Send>(
        &'a self,
        call: &'static str,
        request: &'a ModelRequest,
        mut op: impl FnMut() -> BoxFuture<'a, Result<T, ModelError>> + Send + 'a,
    ) -> Result<T, ModelError> {
        let policy = self.policy;
        let start = tokio::time::Instant::now();
        let clock = scope::CallScope::new(policy.max_elapsed);
        // The error that led to the latest retry (shared with backon's hooks).
        let previous: std::sync::Mutex<Option<Arc<ModelError>>> = std::sync::Mutex::new(None);
        // The attempts started so far. backon runs the closures below one at a time
        // (attempt, then `when`, `adjust`, `notify` on its error), so the count read by
        // the hooks is the attempt that just failed.
        let attempts = AtomicU32::new(0);
        let log = Log {
            call,
            step: request.step(),
            max_attempts: policy.attempts(),
            attempts: &attempts,
            start,
        };
        let outcome = (|| {
            attempts.fetch_add(1, Ordering::Relaxed);
            let attempt = op();
            let clock = Arc::clone(&clock);
            async move { clock.run(attempt).await.map_err(Arc::new) }
        })
        .retry(policy.backoff())
        .sleep(tokio::time::sleep)
        .when(|error: &Arc<ModelError>| {
            let transient = error.is_transient();
            // A permanent error on the first attempt is the caller's to report.
            if !transient && log.attempt() > 1 {
                log.failed(error, Err(GiveUp::NotTransient));
            }
            transient
        })
        .adjust(|error: &Arc<ModelError>, backoff| {
            match policy.schedule(error, backoff, clock.elapsed()) {
                Ok(wait) => Some(wait),
                Err(reason) => {
                    log.failed(error, Err(reason));
                    None
                }
            }
        })
        .notify(|error: &Arc<ModelError>, wait| {
            log.failed(error, Ok(wait));
            crate::observe::note_retry();
            *previous
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::clone(error));
            if let Some(hook) = &self.hook {
                hook(&RetryEvent {
                    call,
                    step: request.step(),
                    attempt: log.attempt(),
                    max_attempts: log.max_attempts,
                    wait,
                    error,
                });
            }
        })
        .await;
        let error = match outcome {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        let previous = previous
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let error = match previous {
            Some(p) if super::limit::is_deadline(&error) => p,
            _ => error,
        };
        Err(Arc::try_unwrap(error).unwrap_or_else(|shared| ModelError::Other(shared.to_string())))
    }
}

/// What the retry loop's warnings say about the call.
#[derive(Clone, Copy)]
struct Log<'a> {
    call: &'static str,
    step: StepInfo,
    max_attempts: u32,
    attempts: &'a AtomicU32,
    start: tokio::time::Instant,
}

impl Log<'_> {
    /// The attempt that failed last (1-based).
    fn attempt(&self) -> u32 {
        self.attempts.load(Ordering::Relaxed)
    }

    /// Warns that the attempt failed, and what comes next: `Ok(wait)` before a retry,
    /// `Err(reason)` for giving up.
    fn failed(&self, error: &ModelError, next: Result<Duration, GiveUp>) {
        let (wait_ms, verdict) = match next {
            Ok(wait) => (Some(millis(wait)), "retrying".to_string()),
            Err(reason) => (None, format!("not retrying: {}", reason.as_str())),
        };
        tracing::warn!(
            call = self.call,
            mode = self.step.mode.as_str(),
            step = self.step.step.as_str(),
            attempt = self.attempt(),
            max_attempts = self.max_attempts,
            elapsed_ms = millis(self.start.elapsed()),
            wait_ms,
            error = %error,
            "model call failed; {verdict}"
        );
    }
}

/// Opens a stream and waits for its first event, so that a failure before anything was
/// handed on can be retried. The first event is put back in front of the rest.
async fn open_stream<M: LanguageModel>(
    inner: &M,
    request: &ModelRequest,
) -> Result<CompletionStream, ModelError> {
    let mut stream = inner.stream(request).await?;
    match stream.next().await {
        Some(Ok(first)) => {
            let s: CompletionStream = Box::pin(futures::stream::iter([Ok(first)]).chain(stream));
            Ok(s)
        }
        // Nothing reached the caller: the attempt failed as a whole.
        Some(Err(e)) => Err(e),
        None => Err(ModelError::Incomplete(
            "the stream ended before its first event".into(),
        )),
    }
}

impl<M: LanguageModel> crate::model::ModelLayer for RetryModel<M> {
    type Inner = M;

    fn inner(&self) -> &M {
        &self.inner
    }

    fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, Completion> {
        Box::pin(self.run("complete", request, move || self.inner.complete(request)))
    }

    /// Retries opening the stream and failures before its first event; a failure after
    /// that is the stream's error, passed on as it is. The returned future therefore
    /// resolves once the first event (usually the first delta) has arrived.
    fn stream<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, CompletionStream> {
        Box::pin(self.run("stream", request, move || {
            Box::pin(open_stream(&self.inner, request))
        }))
    }
}

/// `d` rounded to the nearest microsecond.
fn whole_micros(d: Duration) -> Duration {
    let micros = d.as_nanos().saturating_add(500) / 1000;
    Duration::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A number in `[0, 1)` for the jitter, from std's randomly keyed SipHash (no RNG crate
/// needed; quality is ample for spreading retries).
fn unit_random() -> f64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let bits = RandomState::new().hash_one(n) >> 11;
    // 53 random bits over 2^53: exactly representable, always below 1.
    bits as f64 / (1u64 << 53) as f64
}

pub mod scope;

#[cfg(test)]
mod tests;
