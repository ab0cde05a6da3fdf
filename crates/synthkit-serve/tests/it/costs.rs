//! Per-request cost caps (issue 29): every request that calls the model is planned first
//! (the library's plan, no model call); a plan over `--max-calls-per-request` or
//! `--max-prompt-tokens-per-request` is refused with 422 `too_costly` and the plan, and
//! `"plan": true` answers the plan alone.

use serde_json::{Value, json};
use synthkit_serve::ServiceLimits;
use synthkit_testkit::{FakeConfig, FakeOpenAi};

use crate::common::{Service, assert_error_body};

/// `refine` over `n` short nodes: one call per node.
fn refine(n: usize) -> Value {
    let nodes: Vec<String> = (0..n)
        .map(|i| format!("Fact {i}: the mirror was inspected on day {i}."))
        .collect();
    json!({"query": "When was the mirror inspected?", "nodes": nodes, "mode": "refine"})
}

/// The plan's shape: its steps and totals, and the caps it was checked against.
fn assert_plan(plan: &Value, calls: u64, caps: (u64, u64)) {
    assert_eq!(plan["mode"], "refine", "{plan}");
    assert_eq!(plan["total"]["calls"], calls, "{plan}");
    let steps = plan["steps"].as_array().unwrap();
    assert_eq!(steps[0]["step"], "qa");
    assert_eq!(steps[0]["exact"], true);
    assert_eq!(steps[1]["step"], "refine");
    assert_eq!(steps[1]["exact"], false, "later steps are upper bounds");
    let rows: u64 = steps.iter().map(|s| s["calls"].as_u64().unwrap()).sum();
    assert_eq!(rows, calls);
    let tokens: u64 = steps
        .iter()
        .map(|s| s["prompt_tokens"].as_u64().unwrap())
        .sum();
    assert_eq!(plan["total"]["prompt_tokens"], tokens);
    assert_eq!(plan["total"]["exact"], false);
    assert_eq!(plan["caps"]["max_calls_per_request"], caps.0);
    assert_eq!(plan["caps"]["max_prompt_tokens_per_request"], caps.1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_over_the_call_cap_is_refused_with_its_plan_before_any_call() {
    let fake = FakeOpenAi::start(FakeConfig::replying("On day 3."));
    let limits = ServiceLimits::default().with_max_calls_per_request(5);
    let service = Service::openai(&fake, limits).await;

    let (status, e) = service.post(&refine(8)).await;
    assert_eq!(status, 422, "{e}");
    assert_error_body(
        &e,
        "too_costly",
        "at most 8 model calls (--max-calls-per-request 5)",
    );
    assert_plan(&e["plan"], 8, (5, 200_000));
    assert_eq!(e["plan"]["within_caps"], false);
    assert_eq!(fake.requests(), 0, "refused before any model call");

    // A stream is refused the same way, before its first event.
    let mut streamed = refine(8);
    streamed["stream"] = json!(true);
    let (status, e) = service.post(&streamed).await;
    assert_eq!(status, 422, "{e}");
    assert_eq!(e["error"]["kind"], "too_costly");
    assert_eq!(fake.requests(), 0);

    // Within the cap the request runs, and makes the calls planned.
    let (status, r) = service.post(&refine(5)).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(fake.requests(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_over_the_prompt_token_cap_is_refused() {
    let fake = FakeOpenAi::start(FakeConfig::replying("On day 3."));
    let limits = ServiceLimits::default().with_max_prompt_tokens_per_request(100);
    let service = Service::openai(&fake, limits).await;
    let (status, e) = service.post(&refine(4)).await;
    assert_eq!(status, 422, "{e}");
    assert_error_body(
        &e,
        "too_costly",
        "prompt tokens (--max-prompt-tokens-per-request 100)",
    );
    assert!(
        !e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("model calls (")
    );
    assert!(e["plan"]["total"]["prompt_tokens"].as_u64().unwrap() > 100);
    assert_eq!(fake.requests(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_true_answers_the_plan_without_a_call() {
    let fake = FakeOpenAi::start(FakeConfig::replying("On day 3."));
    let limits = ServiceLimits::default().with_max_calls_per_request(5);
    let service = Service::openai(&fake, limits).await;
    for (n, within) in [(8, false), (3, true)] {
        let mut body = refine(n);
        body["plan"] = json!(true);
        let (status, plan) = service.post(&body).await;
        assert_eq!(status, 200, "{plan}");
        assert_plan(&plan, n as u64, (5, 200_000));
        assert_eq!(plan["within_caps"], within, "{plan}");
    }
    assert_eq!(fake.requests(), 0, "a plan calls no model");
    // The defaults are ask's: 40 calls, 200,000 prompt tokens.
    let defaults = ServiceLimits::default();
    assert_eq!(defaults.max_calls_per_request, 40);
    assert_eq!(defaults.max_prompt_tokens_per_request, 200_000);
}
