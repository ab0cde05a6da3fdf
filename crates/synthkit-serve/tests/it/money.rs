//! Issue 45, budgets in money: with the service's prices, each response's usage says what
//! it cost and `synthkit_model_cost_usd_total` sums them; a request's `max_cost` (at most
//! the service's cap) refuses a request whose plan may cost more (422 `too_costly`, the
//! plan's figure beside the cap) before any call; `max_cost` without prices, or above the
//! cap, is a 400.

use serde_json::{Value, json};
use synthkit::cost::Prices;
use synthkit_serve::{AppState, Backend, Metrics, ServiceLimits};
use synthkit_testkit::{FakeConfig, FakeOpenAi};

use crate::common::{Service, openai_backend};

/// The service on `fake` with prices of 1,000 USD per million tokens each way (so that
/// small requests cost measurable amounts) and a cap of `cap` a request.
async fn priced(fake: &FakeOpenAi, cap: Option<f64>) -> Service {
    let metrics = Metrics::new();
    let stack = Backend::build(openai_backend(&fake.base), metrics.clone())
        .await
        .unwrap();
    let state = AppState::new(stack, ServiceLimits::default(), None, metrics)
        .with_prices(Prices::new(1000.0, 1000.0).unwrap(), cap);
    Service::start_state(state).await
}

fn request(max_cost: Option<f64>) -> Value {
    let mut r = json!({"query": "When is the mirror cleaned?",
                       "nodes": ["The mirror is cleaned every three months."],
                       "evidence": false, "on_unsupported": "warn"});
    if let Some(c) = max_cost {
        r["max_cost"] = json!(c);
    }
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_say_what_they_cost_and_the_metric_sums_them() {
    let fake = FakeOpenAi::start(FakeConfig::replying("Every three months."));
    let service = priced(&fake, None).await;
    let (status, r) = service.post(&request(None)).await;
    assert_eq!(status, 200, "{r}");
    let usage = &r["usage"];
    let tokens =
        usage["prompt_tokens"].as_f64().unwrap() + usage["completion_tokens"].as_f64().unwrap();
    let cost = usage["cost_usd"].as_f64().unwrap();
    assert!((cost - tokens * 1000.0 / 1e6).abs() < 1e-6, "{r}");
    // A stream's final response is priced too.
    let (_, _, events) = service.post_stream(&request(None)).await;
    let (_, last) = events.iter().find(|(name, _)| name == "response").unwrap();
    assert!(last["usage"]["cost_usd"].as_f64().unwrap() > 0.0, "{last}");
    let metrics = reqwest::get(format!("{}/metrics", service.url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let line = metrics
        .lines()
        .find(|l| l.starts_with("synthkit_model_cost_usd_total "))
        .unwrap();
    let total: f64 = line.split(' ').nth(1).unwrap().parse().unwrap();
    assert!(total >= cost * 2.0 - 1e-6, "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_whose_plan_may_pass_its_cap_is_refused_before_any_call() {
    let fake = FakeOpenAi::start(FakeConfig::replying("Every three months."));
    let service = priced(&fake, Some(1.0)).await;
    let (status, e) = service.post(&request(Some(0.001))).await;
    assert_eq!(status, 422, "{e}");
    assert_eq!(e["error"]["kind"], "too_costly", "{e}");
    let plan = &e["plan"];
    assert!(
        plan["total"]["max_cost_usd"].as_f64().unwrap() > 0.001,
        "{plan}"
    );
    assert_eq!(plan["caps"]["max_cost"], 0.001, "{plan}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("a cost cap of $0.001"),
        "{e}"
    );
    assert_eq!(fake.requests(), 0);
    // Above the service's cap, and where there are no prices: the request's shape is wrong.
    let (status, e) = service.post(&request(Some(5.0))).await;
    assert_eq!(status, 400, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("above this front end's cap of 1"),
        "{e}"
    );
    let unpriced = Service::openai(&fake, ServiceLimits::default()).await;
    let (status, e) = unpriced.post(&request(Some(1.0))).await;
    assert_eq!(status, 400, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`max_cost` needs prices"),
        "{e}"
    );
    // Within the cap it runs.
    let (status, r) = service.post(&request(Some(1.0))).await;
    assert_eq!(status, 200, "{r}");
    assert!(fake.requests() >= 1);
}
