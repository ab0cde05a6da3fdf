//! The model stack under real provider behaviour: one retry loop (the adaptive layer
//! never sends again), every send charged to the rate budget, `max_attempts` meaning
//! sends, the time bound covering Retry-After, concurrency that grows back once the
//! server stops being overloaded, and structured replies checked like any other reply.
//! Paused time throughout: waits are exact.

use crate::common::fixtures::Events;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use synthkit::layer::retry::{Jitter, RetryPolicy};
use synthkit::layer::stack::{ModelStack, ceiling};
use synthkit::model::{FinishReason, LanguageModel, ModelError, ModelInfo, ModelRequest};
use synthkit::testing::ScriptedModel;
use synthkit::{Node, OnTruncation, ResponseMode, SynthError, SynthEvent, Synthesizer};
use tokio::time::Instant;

fn info() -> ModelInfo {
    crate::common::fixtures::scripted(4096, 64)
}

fn rate_limited() -> ModelError {
    ModelError::RateLimited {
        status: 429,
        retry_after: Some(Duration::from_secs(1)),
        body: "slow down".into(),
    }
}

/// A server that answers every call with 429 (Retry-After: 1), recording when each send
/// arrived.
fn always_429(sends: &Arc<Mutex<Vec<Duration>>>, t0: Instant) -> ScriptedModel {
    let sends = Arc::clone(sends);
    ScriptedModel::new(info(), move |_| {
        sends.lock().unwrap().push(t0.elapsed());
        Err(rate_limited())
    })
}

fn policy(attempts: u32) -> RetryPolicy {
    RetryPolicy::default()
        .with_max_attempts(attempts)
        .with_jitter(Jitter::None)
}

async fn one_call(stack: &ModelStack) -> ModelError {
    let synth = Synthesizer::builder(stack.model())
        .mode(ResponseMode::Compact)
        .build()
        .unwrap();
    match synth
        .synthesize("q", vec![Node::new("a", "some text")])
        .await
    {
        Err(SynthError::Model { source, .. }) => source,
        other => panic!("expected a model error, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_429_forever_server_gets_exactly_max_attempts_sends() {
    for attempts in [1, 4] {
        let sends = Arc::new(Mutex::new(Vec::new()));
        let stack = ModelStack::builder(always_429(&sends, Instant::now()))
            .retry(policy(attempts))
            .build();
        let e = one_call(&stack).await;
        assert!(matches!(e, ModelError::RateLimited { .. }), "{e:?}");
        let n = sends.lock().unwrap().len();
        assert_eq!(
            n, attempts as usize,
            "--retries {attempts} means {attempts} sends"
        );
        let stats = stack.stats();
        assert_eq!(stats.attempts, u64::from(attempts));
        assert_eq!(stats.retries, u64::from(attempts - 1));
        assert_eq!(stats.failures, u64::from(attempts));
        assert!(stack.adaptive().overloads >= u64::from(attempts));
    }
}

/// One call to a model that always says 429, through a budget of two requests a minute
/// and `attempts` sends within `max_elapsed`: the second of each send, and how long the
/// call took.
async fn sends_under_budget(attempts: u32, max_elapsed: Duration) -> (Vec<u64>, Duration) {
    let t0 = Instant::now();
    let sends = Arc::new(Mutex::new(Vec::new()));
    let stack = ModelStack::builder(always_429(&sends, t0))
        .rates_per_minute(2, 0)
        .retry(policy(attempts).with_max_elapsed(max_elapsed))
        .build();
    let _ = one_call(&stack).await;
    let at = sends
        .lock()
        .unwrap()
        .iter()
        .map(Duration::as_secs)
        .collect();
    (at, t0.elapsed())
}

#[tokio::test(start_paused = true)]
async fn every_send_is_charged_to_the_rate_budget() {
    // Two requests a minute: the first two sends go at once (the budget's burst), the
    // next ones wait for the budget, 30 s apart, on top of Retry-After.
    let (at, _) = sends_under_budget(4, Duration::from_secs(600)).await;
    assert_eq!(
        at,
        vec![0, 1, 30, 60],
        "each send waited for its share of the budget"
    );
}

#[tokio::test(start_paused = true)]
async fn the_time_bound_covers_retry_after_and_budget_waits() {
    // The same budget, but 45 s for the whole call: the third send would start at 30 s,
    // the fourth at 60 s, past the bound, so it is never sent.
    let (at, took) = sends_under_budget(10, Duration::from_secs(45)).await;
    assert_eq!(at.last().copied(), Some(30), "{at:?}");
    assert!(took <= Duration::from_secs(45), "{took:?}");
}

#[tokio::test(start_paused = true)]
async fn concurrency_grows_back_once_the_server_recovers() {
    // Overloaded for the first 8 calls, then fine.
    let calls = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&calls);
    let model = ScriptedModel::new(info(), move |_| {
        if c.fetch_add(1, Ordering::SeqCst) < 8 {
            Err(ModelError::Server {
                status: 503,
                body: "overloaded".into(),
            })
        } else {
            Ok("fine".into())
        }
    });
    let stack = ModelStack::builder(model)
        .max_in_flight(8)
        .retry(RetryPolicy::none())
        .build();
    let m = stack.model();
    let request = request();
    for _ in 0..8 {
        let _ = m.complete(&request).await;
    }
    let low = stack.adaptive();
    assert_eq!(low.limit, 1, "{low:?}");
    // Overloaded recently (even with one call in flight): not raised yet.
    m.complete(&request).await.unwrap();
    assert_eq!(stack.adaptive().limit, 1);
    // After a quiet spell (time and a few rounds of successes) every success adds one,
    // back to the ceiling.
    tokio::time::advance(synthkit::layer::adaptive::RECOVERY_QUIET).await;
    for _ in 0..12 {
        m.complete(&request).await.unwrap();
    }
    assert_eq!(stack.adaptive().limit, 8, "{:?}", stack.adaptive());
}

fn request() -> ModelRequest {
    synthkit::testing::qa_request(
        synthkit::prompt::RenderedPrompt::Text("hello".into()),
        1,
        16,
        None,
    )
}

#[test]
fn the_ceiling_respects_the_servers_slots() {
    assert_eq!(ceiling(8, Some(4)), 4);
    assert_eq!(ceiling(2, Some(4)), 2);
    assert_eq!(ceiling(0, Some(4)), 4);
    assert_eq!(
        ceiling(0, None),
        synthkit::layer::stack::UNLIMITED_IN_FLIGHT
    );
    assert_eq!(ceiling(6, None), 6);
}

// ------------------------------------------------------------- structured replies

fn answer_schema() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"]
    })
}

#[tokio::test]
async fn a_cut_structured_reply_is_a_truncation() {
    for policy in [OnTruncation::Warn, OnTruncation::Error] {
        let model = ScriptedModel::constant(info(), r#"{"answer": "the mirror is cleaned ev"#)
            .with_finish_reason(|_| FinishReason::Length);
        let events = Arc::new(Events::default());
        let synth = Synthesizer::builder(Arc::new(model))
            .mode(ResponseMode::Compact)
            .output_schema(answer_schema())
            .on_truncation(policy)
            .observer(events.clone())
            .build()
            .unwrap();
        let e = synth
            .synthesize("q", vec![Node::new("a", "text")])
            .await
            .unwrap_err();
        assert!(
            matches!(e, SynthError::Truncated { .. }),
            "{policy:?}: {e:?}"
        );
        assert!(e.to_string().contains("num_output"), "{e}");
        let seen = events.0.lock().unwrap();
        assert!(
            seen.iter()
                .any(|e| matches!(e, SynthEvent::ReplyTruncated { .. })),
            "{seen:?}"
        );
    }
}

/// A structured synthesis (the answer schema) whose model replies `reply`.
async fn answered_with(reply: &str) -> Result<synthkit::Response, SynthError> {
    let model = ScriptedModel::constant(info(), reply);
    let synth = Synthesizer::builder(Arc::new(model))
        .output_schema(answer_schema())
        .build()
        .unwrap();
    synth.synthesize("q", vec![Node::new("a", "text")]).await
}

#[tokio::test]
async fn replies_are_checked_against_the_schema() {
    let e = answered_with(r#"{"answer": 3}"#).await.unwrap_err();
    match e.model_error() {
        Some(ModelError::SchemaMismatch { path, .. }) => assert_eq!(path, "/answer"),
        other => panic!("expected a schema mismatch, got {other:?} ({e})"),
    }
    // A reply that follows the schema is the structured answer.
    let r = answered_with(r#"{"answer": "yes"}"#).await.unwrap();
    assert_eq!(r.structured, Some(json!({"answer": "yes"})));
}

#[test]
fn an_invalid_schema_is_refused_before_any_call() {
    let model = ScriptedModel::constant(info(), "{}");
    let Err(e) = Synthesizer::builder(Arc::new(model.clone()))
        .output_schema(json!({"type": 5}))
        .build()
    else {
        panic!("an invalid schema was accepted");
    };
    assert!(matches!(e, SynthError::Schema(_)), "{e:?}");
    assert!(e.to_string().contains("not a valid JSON schema"), "{e}");
    assert!(model.requests().is_empty());
}
