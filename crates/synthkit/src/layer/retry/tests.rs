//! Unit tests of the retry layer: the schedule, and the loop against a scripted model on
//! paused tokio time.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;

use super::*;
use crate::model::{FinishReason, ModelFuture, ModelInfo, StreamEvent};
use crate::prompt::RenderedPrompt;

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
    fn complete<'a>(&'a self, _request: &'a ModelRequest) -> ModelFuture<'a, Completion> {
        let out = match self.next() {
            Step::Reply(t) => Ok(Completion::text(t)),
            Step::Fail(e) => Err(e),
            Step::Events(_) => Err(ModelError::Other("events in complete".into())),
        };
        Box::pin(async move { out })
    }
    fn stream<'a>(&'a self, _request: &'a ModelRequest) -> ModelFuture<'a, CompletionStream> {
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
    crate::testing::qa_request(RenderedPrompt::Text("hi".into()), 1, 8, None)
}

fn server(body: &str) -> ModelError {
    ModelError::Server {
        status: 503,
        body: body.into(),
    }
}

fn limited(secs: u64) -> ModelError {
    ModelError::RateLimited {
        status: 429,
        retry_after: Some(Duration::from_secs(secs)),
        body: String::new(),
    }
}

fn timeout(secs: u64) -> ModelError {
    ModelError::Timeout {
        kind: crate::model::TimeoutKind::Request,
        waited: Duration::from_secs(secs),
        limit: Duration::from_secs(secs),
    }
}

fn auth() -> ModelError {
    ModelError::Auth {
        status: 401,
        body: String::new(),
    }
}

/// `ModelError` has no `PartialEq`: errors are compared by their variant and message.
fn same(a: &ModelError, b: &ModelError) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b) && a.to_string() == b.to_string()
}

/// Stream events, comparable.
fn shown(events: &[Result<StreamEvent, ModelError>]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e {
            Ok(ev) => format!("{ev:?}"),
            Err(err) => format!("error: {err}"),
        })
        .collect()
}

fn fast() -> RetryPolicy {
    RetryPolicy::default()
        .with_initial_backoff(Duration::from_millis(100))
        .with_max_backoff(Duration::from_secs(1))
}

/// A model and a log of the retries its layer reported: (attempt, wait).
type Log = Arc<Mutex<Vec<(u32, Duration)>>>;

fn layer(steps: Vec<Step>, policy: RetryPolicy) -> (RetryModel<Arc<Scripted>>, Arc<Scripted>, Log) {
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
fn the_backoff_has_one_wait_per_retry() {
    let p = RetryPolicy::default().with_jitter(Jitter::None);
    let waits: Vec<_> = p.backoff().map(|d| d.as_millis()).collect();
    assert_eq!(waits, [500, 1000, 2000]);
    for n in [0, 1] {
        assert_eq!(p.with_max_attempts(n).backoff().next(), None);
    }
    assert_eq!(p.with_max_attempts(10).backoff().count(), 9);
}

#[test]
fn full_jitter_stays_under_the_ceiling() {
    let ceiling = Duration::from_secs(4);
    let waits: Vec<_> = (0..200)
        .map(|_| Jitter::Full.apply(ceiling, unit_random()))
        .collect();
    assert!(waits.iter().all(|w| *w <= ceiling));
    // Spread over the range, not all equal.
    assert!(waits.iter().any(|w| *w < Duration::from_secs(1)));
    assert!(waits.iter().any(|w| *w > Duration::from_secs(3)));
    assert_eq!(Jitter::None.apply(ceiling, 0.3), ceiling);
    // The policy's backoff stays under its ceilings.
    let p = RetryPolicy::default().with_max_attempts(50);
    for (w, c) in p.backoff().zip(p.ceilings()) {
        assert!(w <= c, "{w:?} > {c:?}");
    }
}

#[test]
fn schedules() {
    let p = RetryPolicy::default();
    let c = Some(Duration::from_secs(1));
    let secs = Duration::from_secs;
    // (what failed, the jittered backoff, the time since the first attempt, the schedule)
    let cases = [
        (server("x"), c, secs(0), Ok(secs(1))),
        (server("x"), None, secs(0), Err(GiveUp::Attempts)),
        // Retry-After: at least that long, the backoff if it is longer.
        (limited(7), c, secs(0), Ok(secs(7))),
        (limited(1), Some(secs(3)), secs(0), Ok(secs(3))),
        // Longer than the time left: give up now rather than wait for nothing.
        (limited(7), c, secs(115), Err(GiveUp::Time)),
        (server("x"), c, secs(119), Err(GiveUp::Time)),
        // After a timeout the next attempt must have room to wait as long again: 30 s
        // in, a 30 s timeout and a 1 s wait end at 61 s; 90 s in they would end past
        // 120 s.
        (timeout(30), c, secs(30), Ok(secs(1))),
        (timeout(30), c, secs(90), Err(GiveUp::Time)),
        // Other errors at the same point are still retried.
        (server("x"), c, secs(90), Ok(secs(1))),
        // A timeout as long as the budget is not retried at all.
        (timeout(120), c, secs(120), Err(GiveUp::Time)),
    ];
    for (error, backoff, spent, expected) in cases {
        assert_eq!(
            p.schedule(&error, backoff, spent),
            expected,
            "{error} after {spent:?}"
        );
    }
    assert_eq!(
        GiveUp::Time.as_str(),
        "the next wait would pass the time budget"
    );
}

#[tokio::test(start_paused = true)]
async fn retries_then_succeeds() {
    let (model, inner, log) = layer(
        vec![
            Step::Fail(server("a")),
            Step::Fail(timeout(1)),
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
async fn waits_as_reported() {
    let (model, _, log) = layer(
        vec![Step::Fail(server("a")), Step::Fail(server("b"))],
        fast().with_jitter(Jitter::None),
    );
    let start = tokio::time::Instant::now();
    assert_eq!(model.complete(&request()).await.unwrap().text, "done");
    // The waits reported, slept on tokio's clock (which rounds deadlines up to its
    // millisecond ticks).
    let elapsed = start.elapsed();
    assert!(elapsed >= Duration::from_millis(300), "{elapsed:?}");
    assert!(elapsed < Duration::from_millis(310), "{elapsed:?}");
    let log = log.lock().unwrap();
    assert_eq!(
        *log,
        [
            (1, Duration::from_millis(100)),
            (2, Duration::from_millis(200))
        ]
    );
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
    assert!(same(&e, &server("3")), "{e:?}");
    assert_eq!(inner.calls(), 3);
    assert_eq!(log.lock().unwrap().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn one_attempt_never_retries() {
    for n in [0, 1] {
        let (model, inner, log) = layer(vec![Step::Fail(server("x"))], fast().with_max_attempts(n));
        let e = model.complete(&request()).await.unwrap_err();
        assert!(same(&e, &server("x")), "{e:?}");
        assert_eq!(inner.calls(), 1);
        assert!(log.lock().unwrap().is_empty());
    }
}

#[tokio::test(start_paused = true)]
async fn respects_retry_after() {
    let after = Duration::from_secs(5);
    let (model, inner, log) = layer(vec![Step::Fail(limited(5)), Step::Reply("ok")], fast());
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
    let (model, inner, log) = layer(vec![Step::Fail(limited(600))], fast());
    let start = tokio::time::Instant::now();
    let e = model.complete(&request()).await.unwrap_err();
    assert!(same(&e, &limited(600)), "{e:?}");
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(inner.calls(), 1);
    assert!(log.lock().unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn never_retries_permanent_errors() {
    let permanent = || {
        vec![
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
        ]
    };
    for (e, again) in permanent().into_iter().zip(permanent()) {
        let (model, inner, log) = layer(vec![Step::Fail(e)], fast());
        let got = model.complete(&request()).await.unwrap_err();
        assert!(same(&got, &again), "{got:?}");
        assert_eq!(inner.calls(), 1, "{again:?}");
        assert!(log.lock().unwrap().is_empty());
    }
}

#[tokio::test(start_paused = true)]
async fn a_permanent_error_after_retries_ends_them() {
    let (model, inner, log) = layer(vec![Step::Fail(server("a")), Step::Fail(auth())], fast());
    let e = model.complete(&request()).await.unwrap_err();
    assert!(same(&e, &auth()), "{e:?}");
    assert_eq!(inner.calls(), 2);
    assert_eq!(log.lock().unwrap().len(), 1);
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
    assert!(same(&e, &server("4")), "{e:?}");
}

#[tokio::test(start_paused = true)]
async fn streams_retry_only_before_the_first_delta() {
    let cut = || ModelError::Incomplete("cut".into());
    // A failure to open, then a stream cut before any delta, then an empty stream: all
    // retried.
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
        shown(&events),
        shown(&[
            Ok(StreamEvent::Delta("Hel".into())),
            Ok(StreamEvent::Delta("lo".into())),
            Ok(done())
        ])
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
        shown(&events),
        shown(&[Ok(StreamEvent::Delta("Hel".into())), Err(cut())])
    );
    assert_eq!(inner.calls(), 1);
    assert!(log.lock().unwrap().is_empty());

    // A permanent failure before the first delta: one attempt, the error returned.
    let (model, inner, _) = layer(vec![Step::Events(vec![Err(auth())])], fast());
    let e = model.stream(&request()).await.err().unwrap();
    assert!(same(&e, &auth()), "{e:?}");
    assert_eq!(inner.calls(), 1);
}

#[test]
fn debug_shows_the_policy() {
    let model = RetryModel::new(Arc::new(Scripted::new(vec![])), RetryPolicy::none());
    assert_eq!(model.policy().max_attempts, 1);
    assert_eq!(model.info().name, "scripted");
    let inner = crate::testing::ScriptedModel::constant(ModelInfo::new("s"), "x");
    let m = RetryModel::new(inner, RetryPolicy::default());
    let shown = format!("{m:?}");
    assert!(
        shown.contains("RetryModel") && shown.contains("max_attempts: 4"),
        "{shown}"
    );
}
