//! What an output schema may cost: a small schema that doubles at each `$ref` is refused
//! with a 400 at once, and a costly schema that is allowed is checked off the runtime's
//! threads, so `/healthz` answers while replies are being checked.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use synthkit_serve::ServiceLimits;
use synthkit_testkit::{FakeConfig, FakeOpenAi};

use crate::common::{Service, assert_error_body, nodes};

/// `$defs` `l0 .. l{depth}`: `l{i}` is `anyOf[$ref l{i+1}, $ref l{i+1}]`, the last an
/// integer: checking a value that is not an integer tries 2^depth paths.
fn doubling_defs(depth: usize) -> serde_json::Map<String, Value> {
    let mut defs = serde_json::Map::new();
    for i in 0..depth {
        let next = format!("#/$defs/l{}", i + 1);
        defs.insert(
            format!("l{i}"),
            json!({"anyOf": [{"$ref": next}, {"$ref": next}]}),
        );
    }
    defs.insert(format!("l{depth}"), json!({"type": "integer"}));
    defs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_that_doubles_at_each_reference_is_refused_with_400_at_once() {
    // The reply is not an integer: checking it would try 2^22 paths (35 s of CPU).
    let fake = FakeOpenAi::start(FakeConfig::replying("\"text\""));
    let service = Service::openai(&fake, ServiceLimits::default()).await;
    let schema = json!({"$defs": doubling_defs(22), "$ref": "#/$defs/l0"});
    assert!(schema.to_string().len() < 2_000);
    let started = Instant::now();
    let (status, e) = service
        .post(&json!({"query": "q?", "nodes": nodes(), "output_schema": schema}))
        .await;
    assert_eq!(status, 400, "{e}");
    assert_error_body(&e, "invalid_option", "10000");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(fake.seen().is_empty(), "no call is made");

    for looping in [json!({"$ref": "#"}), json!({"not": {"$ref": "#"}})] {
        let (status, e) = service
            .post(&json!({"query": "q?", "nodes": nodes(), "output_schema": looping}))
            .await;
        assert_eq!(status, 400, "{e}");
        assert_error_body(&e, "invalid_option", "leads back to itself");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_answers_while_costly_replies_are_checked() {
    // Each of 100,000 items tries the 2^11 paths of `l0` before matching `string`.
    let items = vec!["a"; 100_000];
    let fake = FakeOpenAi::start(FakeConfig::replying(&json!(items).to_string()));
    let service = Service::openai(&fake, ServiceLimits::default()).await;
    let schema = json!({"$defs": doubling_defs(11), "type": "array",
        "items": {"anyOf": [{"$ref": "#/$defs/l0"}, {"type": "string"}]}});
    let body = json!({"query": "q?", "nodes": ["One fact."], "output_schema": schema});
    // More requests than the runtime has threads: checked on them, they would hold all.
    let requests: Vec<_> = (0..4)
        .map(|_| {
            let url = service.synthesize_url();
            let body = body.clone();
            tokio::spawn(async move {
                let r = reqwest::Client::new()
                    .post(url)
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
                r.status().as_u16()
            })
        })
        .collect();
    crate::common::wait_until("the calls reach the model", || fake.seen().len() == 4).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    for _ in 0..3 {
        let started = Instant::now();
        let health = client
            .get(format!("{}/healthz", service.url))
            .send()
            .await
            .expect("/healthz answers while replies are checked");
        assert_eq!(health.status(), 200);
        assert!(started.elapsed() < Duration::from_secs(2));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for r in requests {
        assert_eq!(r.await.unwrap(), 200);
    }
}
