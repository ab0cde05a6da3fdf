//! Per-request cost caps (issues 29 and 42): every request that calls the model is planned
//! first (the library's plan, no model call); a plan over `--max-calls-per-request`,
//! `--max-prompt-tokens-per-request` or `--max-completion-tokens-per-request` is refused
//! with 422 `too_costly` and the plan, and `"plan": true` answers the plan alone. A
//! `thinking_reserve` over `--max-thinking-reserve` is refused (422).

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
    assert_eq!(defaults.max_completion_tokens_per_request, 50_000);
    assert_eq!(defaults.max_thinking_reserve, 4096);
}

/// Issue 42, item 4: `thinking_reserve` lifted every call's `max_tokens` above the
/// service's output reserve for any client (`--num-output 256` sent `max_tokens: 7256`
/// for a request asking 7000), and the caps counted calls and prompt tokens only. The
/// reserve is capped, and the planned completion tokens (every call's `max_tokens`, the
/// reserve included) are checked with the other caps before any call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_thinking_reserve_is_capped_and_counted_in_the_completion_tokens() {
    let fake = FakeOpenAi::start(FakeConfig::replying("On day 3."));
    let limits = ServiceLimits::default()
        .with_max_thinking_reserve(1000)
        .with_max_completion_tokens_per_request(2000);
    let service = Service::openai(&fake, limits).await;

    // Within the window (4096, output reserve 256), so only the cap refuses it.
    let mut greedy = refine(1);
    greedy["thinking_reserve"] = json!(2000);
    let (status, e) = service.post(&greedy).await;
    assert_eq!(status, 422, "{e}");
    assert_error_body(&e, "thinking_reserve_too_large", "--max-thinking-reserve");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("1000"),
        "{e}"
    );
    assert_eq!(fake.requests(), 0, "refused before any model call");

    // The plan counts each call's reserve in its completion tokens, beside the cap.
    let planned = |reserve: u64| {
        let mut body = refine(3);
        body["plan"] = json!(true);
        body["thinking_reserve"] = json!(reserve);
        body
    };
    let (status, without) = service.post(&planned(0)).await;
    assert_eq!(status, 200, "{without}");
    let (status, with) = service.post(&planned(1000)).await;
    assert_eq!(status, 200, "{with}");
    assert_eq!(with["total"]["calls"], 3, "{with}");
    let completion = |p: &Value| p["total"]["max_completion_tokens"].as_u64().unwrap();
    assert_eq!(completion(&with), completion(&without) + 3 * 1000, "{with}");
    assert_eq!(with["caps"]["max_completion_tokens_per_request"], 2000);
    assert_eq!(
        (&without["within_caps"], &with["within_caps"]),
        (&json!(true), &json!(false))
    );

    // Run, the same request is refused as too costly, naming the cap; without the reserve
    // it runs.
    let mut costly = refine(3);
    costly["thinking_reserve"] = json!(1000);
    let (status, e) = service.post(&costly).await;
    assert_eq!(status, 422, "{e}");
    assert_error_body(
        &e,
        "too_costly",
        "completion tokens (--max-completion-tokens-per-request 2000)",
    );
    assert_eq!(completion(&e["plan"]), completion(&with));
    assert_eq!(fake.requests(), 0);
    let (status, r) = service.post(&refine(3)).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(fake.requests(), 3);
}
