//! The shared limiter (`layer::limit`): one budget of calls in flight, requests per minute
//! and tokens per minute across models and synthesizers.
//!
//! Time is tokio's and paused (`start_paused`), so minutes of pacing run in milliseconds
//! and the timings are exact; one test runs on the real clock to check it works there too
//! (a 10 ms wait, checked only from below).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use synthkit::layer::limit::{LimitError, LimitedModel, Limiter, Limits};
use synthkit::model::{Completion, LanguageModel, ModelFuture, ModelInfo, ModelRequest};
use synthkit::prompt::RenderedPrompt;
use synthkit::testing::ScriptedModel;
use synthkit::{Concurrency, Node, ResponseMode, SynthError, Synthesizer};
use tokio::time::Instant;

/// Counts calls in flight (shared between models) and records each request's charge.
#[derive(Default)]
struct Counter {
    now: AtomicUsize,
    peak: AtomicUsize,
    calls: AtomicUsize,
    charged: AtomicU64,
}

/// A model that holds each call for `hold`, counting calls in flight in a shared counter.
struct Counting {
    counter: Arc<Counter>,
    hold: Duration,
}

/// A [`Counting`] model holding each call for `hold`, behind a limiter with `limits`:
/// the counter, the limiter and the limited model.
fn counting_behind(
    limits: Limits,
    hold: Duration,
) -> (Arc<Counter>, Limiter, Arc<dyn LanguageModel>) {
    let counter = Arc::new(Counter::default());
    let limiter = Limiter::new(limits);
    let counting = Counting {
        counter: Arc::clone(&counter),
        hold,
    };
    let model = Arc::new(LimitedModel::new(counting, limiter.clone()));
    (counter, limiter, model)
}

impl LanguageModel for Counting {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("counting")
    }

    fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, Completion> {
        Box::pin(async move {
            let c = &self.counter;
            let now = c.now.fetch_add(1, Ordering::SeqCst) + 1;
            c.peak.fetch_max(now, Ordering::SeqCst);
            c.calls.fetch_add(1, Ordering::SeqCst);
            c.charged.fetch_add(
                (request.prompt_tokens + request.max_tokens) as u64,
                Ordering::SeqCst,
            );
            tokio::time::sleep(self.hold).await;
            c.now.fetch_sub(1, Ordering::SeqCst);
            Ok(Completion::text("answer"))
        })
    }
}

fn nodes(prefix: &str, n: usize) -> Vec<Node> {
    (0..n)
        .map(|i| Node::new(format!("{prefix}{i}"), format!("Fact {i} about {prefix}.")))
        .collect()
}

fn synth(model: Arc<dyn LanguageModel>, mode: ResponseMode, concurrency: usize) -> Synthesizer {
    Synthesizer::builder(model)
        .mode(mode)
        .concurrency(Concurrency::limit(concurrency))
        .build()
        .unwrap()
}

fn request(prompt_tokens: usize, max_tokens: usize) -> ModelRequest {
    synthkit::testing::qa_request(
        RenderedPrompt::Text("Q".into()),
        prompt_tokens,
        max_tokens,
        None,
    )
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// A scripted model `name` answering `answer`, behind a limiter with `limits`; and the
/// limiter.
fn limited(limits: Limits, name: &str, answer: &str) -> (LimitedModel<ScriptedModel>, Limiter) {
    let limiter = Limiter::new(limits);
    let model = ScriptedModel::constant(ModelInfo::new(name), answer);
    (LimitedModel::new(model, limiter.clone()), limiter)
}

/// Two synthesizers (accumulate and tree_summarize, each allowed 8 calls at once) over two
/// models that share one limiter of 3 slots: never more than 3 calls in flight in all.
/// Without the limiter the same jobs reach 16.
#[tokio::test(start_paused = true)]
async fn concurrency_cap_is_shared_by_two_synthesizers() {
    async fn run(limiter: Option<Limiter>) -> Arc<Counter> {
        let counter = Arc::new(Counter::default());
        let model = |c: &Arc<Counter>| -> Arc<dyn LanguageModel> {
            let m = Counting {
                counter: Arc::clone(c),
                hold: Duration::from_millis(100),
            };
            match &limiter {
                Some(l) => Arc::new(LimitedModel::new(m, l.clone())),
                None => Arc::new(m),
            }
        };
        let a = synth(model(&counter), ResponseMode::Accumulate, 8);
        let b = synth(model(&counter), ResponseMode::Accumulate, 8);
        let (ra, rb) = tokio::join!(
            a.synthesize("What about a?", nodes("a", 20)),
            b.synthesize("What about b?", nodes("b", 20)),
        );
        ra.unwrap();
        rb.unwrap();
        counter
    }

    let free = run(None).await;
    assert_eq!(
        free.peak.load(Ordering::SeqCst),
        16,
        "the jobs alone overlap"
    );

    let limiter = Limiter::new(Limits::default().with_max_in_flight(3));
    let start = Instant::now();
    let capped = run(Some(limiter.clone())).await;
    assert_eq!(capped.calls.load(Ordering::SeqCst), 40);
    assert_eq!(capped.peak.load(Ordering::SeqCst), 3, "peak in flight");
    // 40 calls of 100 ms, 3 at a time: 14 rounds.
    assert_eq!(start.elapsed(), Duration::from_millis(1400));
    let stats = limiter.stats();
    assert_eq!((stats.requests, stats.in_flight), (40, 0));
    assert_eq!(stats.tokens, capped.charged.load(Ordering::SeqCst));
}

/// tree_summarize levels through the limiter: the cap holds across levels too.
#[tokio::test(start_paused = true)]
async fn concurrency_cap_holds_in_tree_summarize() {
    let (counter, _, model) = counting_behind(
        Limits::default().with_max_in_flight(2),
        Duration::from_millis(10),
    );
    let s = Synthesizer::builder(model)
        .mode(ResponseMode::TreeSummarize)
        .budget(synthkit::prompt::PromptBudget::new(300, 50).unwrap())
        .concurrency(Concurrency::Unlimited)
        .build()
        .unwrap();
    let long: Vec<Node> = (0..12)
        .map(|i| Node::new(format!("n{i}"), format!("{i} ").repeat(120)))
        .collect();
    s.synthesize("Summarize.", long).await.unwrap();
    assert!(counter.calls.load(Ordering::SeqCst) > 4);
    assert_eq!(counter.peak.load(Ordering::SeqCst), 2);
}

/// A stream holds its slot until it is consumed or dropped.
#[tokio::test(start_paused = true)]
async fn stream_holds_its_slot_until_it_ends() {
    let (model, limiter) = limited(
        Limits::default().with_max_in_flight(1),
        "s",
        "one two three",
    );
    let req = request(10, 10);
    let mut stream = model.stream(&req).await.unwrap();
    assert_eq!(limiter.stats().in_flight, 1);
    // The slot is taken: a second call waits (here: for an hour of paused time).
    let blocked = tokio::time::timeout(Duration::from_secs(3600), model.complete(&req)).await;
    assert!(
        blocked.is_err(),
        "a second call went through during the stream"
    );
    // Read it to the end: the slot is freed.
    let mut text = String::new();
    while let Some(ev) = stream.next().await {
        if let synthkit::model::StreamEvent::Delta(d) = ev.unwrap() {
            text.push_str(&d);
        }
    }
    assert_eq!(text, "one two three");
    assert_eq!(limiter.stats().in_flight, 0);
    assert!(model.complete(&req).await.is_ok());
    // Dropping a stream half read frees it too.
    let mut s2 = model.stream(&req).await.unwrap();
    let _ = s2.next().await;
    assert_eq!(limiter.stats().in_flight, 1);
    drop(s2);
    assert_eq!(limiter.stats().in_flight, 0);
    assert!(model.complete(&req).await.is_ok());
}

/// rpm 600 = 10 per second, with a burst of a whole minute's budget: 620 calls take
/// (620 - 600) / 10 = 2 seconds, split between two models sharing the limiter.
#[tokio::test(start_paused = true)]
async fn requests_per_minute_paces_calls() {
    let limiter = Limiter::new(Limits::default().with_requests_per_minute(600));
    let a = LimitedModel::new(
        ScriptedModel::constant(ModelInfo::new("a"), "x"),
        limiter.clone(),
    );
    let b = LimitedModel::new(
        ScriptedModel::constant(ModelInfo::new("b"), "x"),
        limiter.clone(),
    );
    let req = request(5, 5);
    let start = Instant::now();
    let mut times = Vec::new();
    for i in 0..620 {
        let m = if i % 2 == 0 { &a } else { &b };
        m.complete(&req).await.unwrap();
        times.push(start.elapsed());
    }
    // The burst goes at once; then one call every 100 ms.
    assert_eq!(times[599], Duration::ZERO);
    assert_eq!(times[600], Duration::from_millis(100));
    let total = secs(start.elapsed());
    assert!((total - 2.0).abs() < 1e-6, "620 calls took {total}s");
    let stats = limiter.stats();
    assert_eq!(stats.requests, 620);
    assert_eq!(stats.budget_wait, Duration::from_secs(2));
}

/// Through two synthesizers at once: rpm 60 (1 per second), 80 calls in all: 20 seconds.
#[tokio::test(start_paused = true)]
async fn requests_per_minute_is_shared_by_two_synthesizers() {
    let limiter = Limiter::new(
        Limits::default()
            .with_requests_per_minute(60)
            .with_max_in_flight(4),
    );
    let model = |name: &str| -> Arc<dyn LanguageModel> {
        Arc::new(LimitedModel::new(
            ScriptedModel::constant(ModelInfo::new(name), "ok"),
            limiter.clone(),
        ))
    };
    let a = synth(model("a"), ResponseMode::Accumulate, 8);
    let b = synth(model("b"), ResponseMode::Accumulate, 8);
    let start = Instant::now();
    let (ra, rb) = tokio::join!(
        a.synthesize("a?", nodes("a", 40)),
        b.synthesize("b?", nodes("b", 40)),
    );
    assert_eq!(ra.unwrap().usage.calls + rb.unwrap().usage.calls, 80);
    let total = secs(start.elapsed());
    assert!(
        (total - 20.0).abs() < 1e-6,
        "80 calls at rpm 60 took {total}s"
    );
}

/// The token charge of a call is exactly prompt_tokens + max_tokens, and the budget paces
/// by it: tpm 300 (5 per second) with 150-token calls: two at once, then one per 30 s.
#[tokio::test(start_paused = true)]
async fn tokens_per_minute_charges_prompt_plus_max_tokens() {
    let (model, limiter) = limited(Limits::default().with_tokens_per_minute(300), "t", "x");
    let req = request(100, 50);
    assert_eq!(Limiter::charge(&req), 150);
    let start = Instant::now();
    model.complete(&req).await.unwrap();
    assert_eq!(limiter.stats().tokens, 150);
    model.complete(&req).await.unwrap();
    assert_eq!(start.elapsed(), Duration::ZERO);
    model.complete(&req).await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(30));
    // A small call after a big one waits only for its own tokens: 15 tokens = 3 s.
    model.complete(&request(10, 5)).await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(33));
    assert_eq!(limiter.stats().tokens, 465);
    assert_eq!(limiter.stats().requests, 4);
}

/// Through a synthesizer: the limiter charges every request the model sees its prompt
/// tokens plus max_tokens, no more, no less.
#[tokio::test(start_paused = true)]
async fn tokens_per_minute_charge_matches_requests_of_a_synthesis() {
    let (counter, limiter, model) = counting_behind(
        Limits::default().with_tokens_per_minute(1_000_000),
        Duration::ZERO,
    );
    let s = synth(model, ResponseMode::Refine, 8);
    let r = s.synthesize("What?", nodes("r", 6)).await.unwrap();
    assert_eq!(r.usage.calls, 6);
    let seen = counter.charged.load(Ordering::SeqCst);
    // Each call charges its prompt and its output limit: 256 for the last, at least 64
    // for the five before it (their output is bounded by their input).
    assert!(seen > 256 + 5 * 64, "{seen}");
    assert_eq!(limiter.stats().tokens, seen);
}

/// Calls take the budget in arrival order: a big call is not starved by small ones.
#[tokio::test(start_paused = true)]
async fn big_call_is_not_starved() {
    let limiter = Limiter::new(Limits::default().with_tokens_per_minute(600));
    // Empty the budget.
    drop(limiter.acquire(600).await.unwrap());
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for (i, tokens) in [(0usize, 600u64), (1, 10), (2, 10), (3, 10)] {
        let l = limiter.clone();
        let o = Arc::clone(&order);
        tasks.push(tokio::spawn(async move {
            let _p = l.acquire(tokens).await.unwrap();
            o.lock().unwrap().push(i);
        }));
        tokio::task::yield_now().await;
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3]);
}

/// A call larger than the whole tokens-per-minute budget fails at once, naming --tpm,
/// directly and through a synthesizer, for complete and stream alike.
#[tokio::test(start_paused = true)]
async fn oversized_call_errors_instead_of_hanging() {
    let (model, limiter) = limited(
        Limits::default()
            .with_tokens_per_minute(100)
            .with_max_in_flight(1),
        "o",
        "x",
    );
    let start = Instant::now();
    let big = request(90, 20);
    let e = tokio::time::timeout(Duration::from_secs(3600), model.complete(&big))
        .await
        .expect("an oversized call hung")
        .unwrap_err();
    assert!(
        matches!(
            synthkit::layer::limit::limit_error(&e),
            Some(synthkit::layer::limit::LimitError::OverBudget { tokens: 110, .. })
        ) && e.to_string().contains("budget to at least 110"),
        "{e}"
    );
    assert!(!e.is_transient());
    let e = tokio::time::timeout(Duration::from_secs(3600), model.stream(&big))
        .await
        .expect("an oversized stream hung")
        .err()
        .unwrap();
    assert!(e.to_string().contains("tokens-per-minute budget"), "{e}");
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(limiter.stats().requests, 0);
    // Exactly the budget is fine.
    model.complete(&request(80, 20)).await.unwrap();
    // Even while the only slot is taken, an oversized call fails at once.
    let _held = limiter.acquire(0).await.unwrap();
    assert_eq!(
        limiter.acquire(101).await.err(),
        Some(LimitError::OverBudget {
            tokens: 101,
            tokens_per_minute: 100
        })
    );

    // Through a synthesizer (default budget: every call reserves 256 output tokens).
    let limiter = Limiter::new(Limits::default().with_tokens_per_minute(200));
    let model: Arc<dyn LanguageModel> = Arc::new(LimitedModel::new(
        ScriptedModel::constant(ModelInfo::new("o"), "x"),
        limiter,
    ));
    let s = synth(model, ResponseMode::Compact, 8);
    let e = tokio::time::timeout(
        Duration::from_secs(3600),
        s.synthesize("Why?", nodes("o", 3)),
    )
    .await
    .expect("an oversized synthesis hung")
    .unwrap_err();
    assert!(matches!(e, SynthError::Model { .. }), "{e:?}");
    assert!(e.to_string().contains("tokens-per-minute budget"), "{e}");
}

/// A call given up while it waits for the budget leaves no trace: the next call goes.
#[tokio::test(start_paused = true)]
async fn cancelled_wait_frees_its_place() {
    let limiter = Limiter::new(
        Limits::default()
            .with_tokens_per_minute(100)
            .with_max_in_flight(1),
    );
    drop(limiter.acquire(100).await.unwrap());
    // Needs 60 s of refill; give up after 1 s.
    let waited = tokio::time::timeout(Duration::from_secs(1), limiter.acquire(100)).await;
    assert!(waited.is_err());
    assert_eq!(limiter.stats().in_flight, 0);
    // A 10-token call needs 6 s of refill from the start: 5 s more.
    let start = Instant::now();
    drop(limiter.acquire(10).await.unwrap());
    assert_eq!(start.elapsed(), Duration::from_secs(5));
}

/// No limits: calls go straight through.
#[tokio::test(start_paused = true)]
async fn unlimited_passes_through() {
    let limiter = Limiter::new(Limits::default());
    assert!(limiter.limits().is_unlimited());
    let model = LimitedModel::new(
        ScriptedModel::constant(ModelInfo::new("u").with_context_window(1000), "x"),
        limiter.clone(),
    );
    assert_eq!(model.info().context_window, 1000);
    for _ in 0..1000 {
        model
            .complete(&request(1_000_000, 1_000_000))
            .await
            .unwrap();
    }
    assert_eq!(limiter.stats().requests, 1000);
    assert_eq!(limiter.stats().budget_wait, Duration::ZERO);
}

/// tpm 6000 = 100 tokens per second: after the burst, a 50-token call waits exactly half
/// a second (paused time).
#[tokio::test(start_paused = true)]
async fn paces_after_a_burst() {
    let limiter = Limiter::new(Limits::default().with_tokens_per_minute(6000));
    drop(limiter.acquire(6000).await.unwrap());
    let start = Instant::now();
    drop(limiter.acquire(50).await.unwrap());
    assert_eq!(start.elapsed(), Duration::from_millis(500));
    assert_eq!(limiter.stats().budget_wait, Duration::from_millis(500));
}

/// On the real clock (not paused), the limiter paces too: tpm 60000 = one token per
/// millisecond, so after a burst of the whole minute's budget, 10 more tokens are granted
/// no sooner than 10 ms after the burst. Only that lower bound is checked, timed from
/// before the burst: it holds however slowly the machine runs (no upper bound that a busy
/// machine could break; the minute-long guard only turns a hang into a failure).
#[tokio::test]
async fn real_clock_paces() {
    let limiter = Limiter::new(Limits::default().with_tokens_per_minute(60_000));
    let start = std::time::Instant::now();
    let paced = async {
        drop(limiter.acquire(60_000).await.unwrap());
        drop(limiter.acquire(10).await.unwrap());
    };
    tokio::time::timeout(Duration::from_secs(60), paced)
        .await
        .expect("the limiter never let the call through");
    let took = start.elapsed();
    // 10 ms, less sub-millisecond rounding.
    assert!(took >= Duration::from_millis(9), "took {took:?}");
    assert_eq!(limiter.stats().requests, 2);
}
