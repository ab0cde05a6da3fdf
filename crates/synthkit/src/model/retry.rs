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
//! use synthkit::model::retry::{RetryModel, RetryPolicy};
//! use synthkit::model::{ModelInfo, testing::ScriptedModel};
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
//!   longer than the time left). The layer never cuts an attempt short: each attempt is
//!   bounded by the model's own timeout, so a call takes at most `max_elapsed` plus one
//!   attempt.
//! - **Streams** ([`LanguageModel::stream`]): opening the stream and waiting for its first
//!   event are retried like any call (nothing has reached the caller yet). Once the first
//!   delta has been handed on, a failure is passed on as the stream's error, never retried:
//!   a reply is never replayed or stitched together from parts.
//!
//! Every retry is logged with `tracing::warn!` (attempt, wait, error: the error's `Display`
//! is free of secrets) and reported to the [`RetryModel::on_retry`] hook, if any.

use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use futures::StreamExt;
use futures::future::BoxFuture;

use crate::model::{
    Completion, CompletionStream, LanguageModel, ModelError, ModelInfo, ModelRequest, StepInfo,
    StructuredCompletion,
};
use crate::text::SharedTokenizer;

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

    /// Sets the most calls made for one request, the first one included.
    pub fn with_max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts;
        self
    }

    /// Sets the backoff ceiling before the first retry.
    pub fn with_initial_backoff(mut self, backoff: Duration) -> Self {
        self.initial_backoff = backoff;
        self
    }

    /// Sets the largest backoff ceiling.
    pub fn with_max_backoff(mut self, backoff: Duration) -> Self {
        self.max_backoff = backoff;
        self
    }

    /// Sets the total time budget.
    pub fn with_max_elapsed(mut self, budget: Duration) -> Self {
        self.max_elapsed = budget;
        self
    }

    /// Sets the jitter.
    pub fn with_jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = jitter;
        self
    }

    /// The most attempts, at least one.
    fn attempts(&self) -> u32 {
        self.max_attempts.max(1)
    }

    /// The backoff ceilings before retry 1, 2, ...: `initial_backoff` doubling, capped at
    /// `max_backoff`, without jitter. Endless; the attempt and time bounds stop retries.
    pub fn ceilings(&self) -> impl Iterator<Item = Duration> + Send + use<> {
        let max = self.max_backoff;
        // backon does not cap the first delay, so cap it here.
        ExponentialBuilder::new()
            .with_factor(2.0)
            .with_min_delay(self.initial_backoff.min(max))
            .with_max_delay(max)
            .without_max_times()
            .build()
            .map(move |d| d.min(max))
    }

    /// What to do after attempt number `attempt` (1-based) failed with `error`, `elapsed`
    /// after the first attempt started: wait and retry, or give up. `ceiling` is the
    /// backoff ceiling for this retry and `unit` a number in `[0, 1)` for the jitter.
    fn decide(
        &self,
        error: &ModelError,
        attempt: u32,
        elapsed: Duration,
        ceiling: Duration,
        unit: f64,
    ) -> Result<Duration, GiveUp> {
        if !error.is_transient() {
            return Err(GiveUp::NotTransient);
        }
        if attempt >= self.attempts() {
            return Err(GiveUp::Attempts);
        }
        let mut wait = match self.jitter {
            Jitter::Full => ceiling.mul_f64(unit.clamp(0.0, 1.0)),
            Jitter::None => ceiling,
        };
        if let ModelError::RateLimited {
            retry_after: Some(after),
            ..
        } = error
        {
            wait = wait.max(*after);
        }
        if elapsed.saturating_add(wait) >= self.max_elapsed {
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

    /// Runs `op` until it succeeds or the policy gives up; returns the last error then.
    async fn run<'a, T: Send>(
        &'a self,
        call: &'static str,
        request: &'a ModelRequest,
        op: impl Fn() -> BoxFuture<'a, Result<T, ModelError>> + Send + 'a,
    ) -> Result<T, ModelError> {
        let start = tokio::time::Instant::now();
        let mut ceilings = self.policy.ceilings();
        let max_attempts = self.policy.attempts();
        let mut attempt: u32 = 1;
        loop {
            let error = match op().await {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            let ceiling = ceilings.next().unwrap_or(self.policy.max_backoff);
            let decision =
                self.policy
                    .decide(&error, attempt, start.elapsed(), ceiling, unit_random());
            let wait = match decision {
                Ok(wait) => wait,
                Err(reason) => {
                    // A permanent error on the first attempt is the caller's to report.
                    if attempt > 1 || reason != GiveUp::NotTransient {
                        tracing::warn!(
                            call,
                            mode = request.step.mode,
                            step = request.step.step,
                            attempt,
                            max_attempts,
                            elapsed_ms = millis(start.elapsed()),
                            error = %error,
                            "model call failed; not retrying: {}",
                            reason.as_str()
                        );
                    }
                    return Err(error);
                }
            };
            tracing::warn!(
                call,
                mode = request.step.mode,
                step = request.step.step,
                attempt,
                max_attempts,
                wait_ms = millis(wait),
                error = %error,
                "model call failed; retrying"
            );
            if let Some(hook) = &self.hook {
                hook(&RetryEvent {
                    call,
                    step: request.step,
                    attempt,
                    max_attempts,
                    wait,
                    error: &error,
                });
            }
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
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

impl<M: LanguageModel> LanguageModel for RetryModel<M> {
    fn info(&self) -> ModelInfo {
        self.inner.info()
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<Completion, ModelError>> {
        Box::pin(self.run("complete", request, move || self.inner.complete(request)))
    }

    /// Retries opening the stream and failures before its first event; a failure after
    /// that is the stream's error, passed on as it is. The returned future therefore
    /// resolves once the first event (usually the first delta) has arrived.
    fn stream<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<CompletionStream, ModelError>> {
        Box::pin(self.run("stream", request, move || {
            Box::pin(open_stream(&self.inner, request))
        }))
    }

    fn structured<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<StructuredCompletion, ModelError>> {
        Box::pin(self.run("structured", request, move || {
            self.inner.structured(request)
        }))
    }

    fn tokenizer(&self) -> Option<SharedTokenizer> {
        self.inner.tokenizer()
    }
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Mutex;
    use std::sync::atomic::AtomicUsize;

    use super::*;
    use crate::model::{FinishReason, StreamEvent};
    use crate::prompt::{RenderedPrompt, TemplateKind};

    /// What the scripted model does on one call.
    enum Step {
        Reply(&'static str),
        Fail(ModelError),
        /// For `stream`: these events (opening succeeds).
        Events(Vec<Result<StreamEvent, ModelError>>),
    }

    /// A model that plays a script, one step per call, then answers "done".
    struct Scripted {
        script: Mutex<VecDeque<Step>>,
        calls: AtomicUsize,
    }

    impl Scripted {
        fn new(steps: Vec<Step>) -> Self {
            Self {
                script: Mutex::new(steps.into()),
                calls: AtomicUsize::new(0),
            }
        }
        fn calls(&self) -> usize {
            self.calls.load(Ordering::SeqCst)
        }
        fn next(&self) -> Step {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.script
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or(Step::Reply("done"))
        }
    }

    impl LanguageModel for Scripted {
        fn info(&self) -> ModelInfo {
            ModelInfo::new("scripted")
        }
        fn complete<'a>(
            &'a self,
            _request: &'a ModelRequest,
        ) -> BoxFuture<'a, Result<Completion, ModelError>> {
            let out = match self.next() {
                Step::Reply(t) => Ok(Completion::text(t)),
                Step::Fail(e) => Err(e),
                Step::Events(_) => Err(ModelError::Other("events in complete".into())),
            };
            Box::pin(async move { out })
        }
        fn stream<'a>(
            &'a self,
            _request: &'a ModelRequest,
        ) -> BoxFuture<'a, Result<CompletionStream, ModelError>> {
            let out = match self.next() {
                Step::Reply(t) => Ok(vec![Ok(StreamEvent::Delta(t.into())), Ok(done())]),
                Step::Fail(e) => Err(e),
                Step::Events(ev) => Ok(ev),
            };
            Box::pin(async move {
                let s: CompletionStream = Box::pin(futures::stream::iter(out?));
                Ok(s)
            })
        }
    }

    fn done() -> StreamEvent {
        StreamEvent::Done {
            usage: None,
            finish_reason: Some(FinishReason::Stop),
        }
    }

    fn request() -> ModelRequest {
        ModelRequest {
            prompt: RenderedPrompt::Text("hi".into()),
            kind: TemplateKind::Qa,
            variables: vec![],
            schema: None,
            max_tokens: 8,
            prompt_tokens: 1,
            step: StepInfo::new("compact", "qa"),
        }
    }

    fn server(body: &str) -> ModelError {
        ModelError::Server {
            status: 503,
            body: body.into(),
        }
    }

    fn fast() -> RetryPolicy {
        RetryPolicy::default()
            .with_initial_backoff(Duration::from_millis(100))
            .with_max_backoff(Duration::from_secs(1))
    }

    /// A model and a log of the retries its layer reported: (attempt, wait).
    type Log = Arc<Mutex<Vec<(u32, Duration)>>>;

    fn layer(
        steps: Vec<Step>,
        policy: RetryPolicy,
    ) -> (RetryModel<Arc<Scripted>>, Arc<Scripted>, Log) {
        let inner = Arc::new(Scripted::new(steps));
        let log: Log = Arc::default();
        let l = Arc::clone(&log);
        let model = RetryModel::new(Arc::clone(&inner), policy).on_retry(move |e| {
            l.lock().unwrap().push((e.attempt, e.wait));
        });
        (model, inner, log)
    }

    #[test]
    fn defaults_and_ceilings() {
        let p = RetryPolicy::default();
        assert_eq!(p.max_attempts, 4);
        assert_eq!(p.initial_backoff, Duration::from_millis(500));
        assert_eq!(p.max_backoff, Duration::from_secs(20));
        assert_eq!(p.max_elapsed, Duration::from_secs(120));
        assert_eq!(p.jitter, Jitter::Full);
        let c: Vec<_> = p.ceilings().take(8).map(|d| d.as_millis()).collect();
        assert_eq!(c, [500, 1000, 2000, 4000, 8000, 16000, 20000, 20000]);
        // An initial backoff above the cap is capped too.
        let p = p.with_initial_backoff(Duration::from_secs(60));
        assert_eq!(p.ceilings().next(), Some(Duration::from_secs(20)));
    }

    #[test]
    fn full_jitter_stays_under_the_ceiling() {
        let p = RetryPolicy::default();
        let ceiling = Duration::from_secs(4);
        let e = server("x");
        let mut waits = Vec::new();
        for _ in 0..200 {
            let w = p
                .decide(&e, 1, Duration::ZERO, ceiling, unit_random())
                .unwrap();
            assert!(w <= ceiling);
            waits.push(w);
        }
        // Spread over the range, not all equal.
        assert!(waits.iter().any(|w| *w < Duration::from_secs(1)));
        assert!(waits.iter().any(|w| *w > Duration::from_secs(3)));
        let no_jitter = p.with_jitter(Jitter::None);
        assert_eq!(
            no_jitter.decide(&e, 1, Duration::ZERO, ceiling, 0.3),
            Ok(ceiling)
        );
    }

    #[test]
    fn decisions() {
        let p = RetryPolicy::default().with_jitter(Jitter::None);
        let c = Duration::from_secs(1);
        let zero = Duration::ZERO;
        assert_eq!(p.decide(&server("x"), 3, zero, c, 0.5), Ok(c));
        assert_eq!(
            p.decide(&server("x"), 4, zero, c, 0.5),
            Err(GiveUp::Attempts)
        );
        let auth = ModelError::Auth {
            status: 401,
            body: String::new(),
        };
        assert_eq!(p.decide(&auth, 1, zero, c, 0.5), Err(GiveUp::NotTransient));
        let limited = |s| ModelError::RateLimited {
            status: 429,
            retry_after: Some(Duration::from_secs(s)),
            body: String::new(),
        };
        assert_eq!(
            p.decide(&limited(7), 1, zero, c, 0.5),
            Ok(Duration::from_secs(7))
        );
        // Longer than the time left: give up now rather than wait for nothing.
        assert_eq!(
            p.decide(&limited(7), 1, Duration::from_secs(115), c, 0.5),
            Err(GiveUp::Time)
        );
        assert_eq!(
            p.decide(&server("x"), 1, Duration::from_secs(119), c, 0.5),
            Err(GiveUp::Time)
        );
        // Zero or one attempt: never retry.
        for n in [0, 1] {
            let p = p.with_max_attempts(n);
            assert_eq!(
                p.decide(&server("x"), 1, zero, c, 0.5),
                Err(GiveUp::Attempts)
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn retries_then_succeeds() {
        let (model, inner, log) = layer(
            vec![
                Step::Fail(server("a")),
                Step::Fail(ModelError::Timeout(Duration::from_secs(1))),
                Step::Fail(ModelError::Connection("reset".into())),
                Step::Reply("hello"),
            ],
            fast(),
        );
        let c = model.complete(&request()).await.unwrap();
        assert_eq!(c.text, "hello");
        assert_eq!(inner.calls(), 4);
        let log = log.lock().unwrap();
        assert_eq!(log.iter().map(|(a, _)| *a).collect::<Vec<_>>(), [1, 2, 3]);
        // Full jitter: each wait within its ceiling (100, 200, 400 ms).
        for ((_, w), c) in log.iter().zip([100, 200, 400]) {
            assert!(*w <= Duration::from_millis(c), "{w:?} > {c} ms");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_after_max_attempts_with_the_last_error() {
        let (model, inner, log) = layer(
            vec![
                Step::Fail(server("1")),
                Step::Fail(server("2")),
                Step::Fail(server("3")),
                Step::Reply("too late"),
            ],
            fast().with_max_attempts(3),
        );
        let e = model.complete(&request()).await.unwrap_err();
        assert_eq!(e, server("3"));
        assert_eq!(inner.calls(), 3);
        assert_eq!(log.lock().unwrap().len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn respects_retry_after() {
        let after = Duration::from_secs(5);
        let (model, inner, log) = layer(
            vec![
                Step::Fail(ModelError::RateLimited {
                    status: 429,
                    retry_after: Some(after),
                    body: String::new(),
                }),
                Step::Reply("ok"),
            ],
            fast(),
        );
        let start = tokio::time::Instant::now();
        assert_eq!(model.complete(&request()).await.unwrap().text, "ok");
        let elapsed = start.elapsed();
        assert!(elapsed >= after, "{elapsed:?}");
        assert!(elapsed < after + Duration::from_secs(1), "{elapsed:?}");
        assert_eq!(inner.calls(), 2);
        assert_eq!(log.lock().unwrap().first().map(|(_, w)| *w), Some(after));
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_after_past_the_budget_gives_up_at_once() {
        let limited = ModelError::RateLimited {
            status: 429,
            retry_after: Some(Duration::from_secs(600)),
            body: String::new(),
        };
        let (model, inner, _) = layer(vec![Step::Fail(limited.clone())], fast());
        let start = tokio::time::Instant::now();
        assert_eq!(model.complete(&request()).await.unwrap_err(), limited);
        assert_eq!(start.elapsed(), Duration::ZERO);
        assert_eq!(inner.calls(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn never_retries_permanent_errors() {
        let permanent = [
            ModelError::Auth {
                status: 401,
                body: "no".into(),
            },
            ModelError::ContextTooLong {
                message: "too long".into(),
                prompt_tokens: Some(10),
                context_window: Some(5),
            },
            ModelError::BadRequest {
                status: 400,
                body: "bad".into(),
            },
            ModelError::Malformed("junk".into()),
            ModelError::Structured("not json".into()),
            ModelError::Other("else".into()),
        ];
        for e in permanent {
            let (model, inner, log) = layer(vec![Step::Fail(e.clone())], fast());
            assert_eq!(model.complete(&request()).await.unwrap_err(), e);
            assert_eq!(inner.calls(), 1, "{e:?}");
            assert!(log.lock().unwrap().is_empty());
            // Structured calls too (the default implementation goes through complete).
            let (model, inner, _) = layer(vec![Step::Fail(e.clone())], fast());
            assert_eq!(model.structured(&request()).await.unwrap_err(), e);
            assert_eq!(inner.calls(), 1, "{e:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn total_time_is_bounded() {
        let policy = RetryPolicy::default()
            .with_max_attempts(1000)
            .with_initial_backoff(Duration::from_secs(1))
            .with_max_backoff(Duration::from_secs(1))
            .with_max_elapsed(Duration::from_secs(5))
            .with_jitter(Jitter::None);
        let steps = (0..1000)
            .map(|i| Step::Fail(server(&i.to_string())))
            .collect();
        let (model, inner, _) = layer(steps, policy);
        let start = tokio::time::Instant::now();
        let e = model.complete(&request()).await.unwrap_err();
        let elapsed = start.elapsed();
        assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
        // Attempts at 0, 1, 2, 3 and 4 s; a wait after the fifth would reach 5 s.
        assert_eq!(inner.calls(), 5);
        assert_eq!(e, server("4"));
    }

    #[tokio::test(start_paused = true)]
    async fn streams_retry_only_before_the_first_delta() {
        let cut = || ModelError::Incomplete("cut".into());
        // A failure to open, then a stream cut before any delta: both retried.
        let (model, inner, _) = layer(
            vec![
                Step::Fail(server("down")),
                Step::Events(vec![Err(cut())]),
                Step::Events(vec![]),
                Step::Events(vec![
                    Ok(StreamEvent::Delta("Hel".into())),
                    Ok(StreamEvent::Delta("lo".into())),
                    Ok(done()),
                ]),
            ],
            fast(),
        );
        let events: Vec<_> = model.stream(&request()).await.unwrap().collect().await;
        assert_eq!(
            events,
            vec![
                Ok(StreamEvent::Delta("Hel".into())),
                Ok(StreamEvent::Delta("lo".into())),
                Ok(done())
            ]
        );
        assert_eq!(inner.calls(), 4);

        // A cut after a delta is passed on, never retried or completed.
        let (model, inner, log) = layer(
            vec![
                Step::Events(vec![Ok(StreamEvent::Delta("Hel".into())), Err(cut())]),
                Step::Reply("a whole other answer"),
            ],
            fast(),
        );
        let events: Vec<_> = model.stream(&request()).await.unwrap().collect().await;
        assert_eq!(
            events,
            vec![Ok(StreamEvent::Delta("Hel".into())), Err(cut())]
        );
        assert_eq!(inner.calls(), 1);
        assert!(log.lock().unwrap().is_empty());

        // A permanent failure before the first delta: one attempt, the error returned.
        let auth = ModelError::Auth {
            status: 401,
            body: String::new(),
        };
        let (model, inner, _) = layer(vec![Step::Events(vec![Err(auth.clone())])], fast());
        assert_eq!(model.stream(&request()).await.err(), Some(auth));
        assert_eq!(inner.calls(), 1);
    }

    #[test]
    fn debug_shows_the_policy() {
        let model = RetryModel::new(Arc::new(Scripted::new(vec![])), RetryPolicy::none());
        assert_eq!(model.policy().max_attempts, 1);
        assert_eq!(model.info().name, "scripted");
        let inner = crate::model::testing::ScriptedModel::constant(ModelInfo::new("s"), "x");
        let m = RetryModel::new(inner, RetryPolicy::default());
        let shown = format!("{m:?}");
        assert!(
            shown.contains("RetryModel") && shown.contains("max_attempts: 4"),
            "{shown}"
        );
    }
}
