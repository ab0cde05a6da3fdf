//! What an output schema may cost: a small schema that doubles at each `$ref` is refused
//! with a 400 before any call, and a reply whose check would take too long against a
//! recursive schema that branches is refused after its check is counted, before it is
//! checked.

use serde_json::{Value, json};
use synthkit::testing::doubling_schema;
use synthkit_serve::ServiceLimits;
use synthkit_testkit::{FakeConfig, FakeOpenAi};

use crate::common::{Service, assert_error_body, nodes};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_that_doubles_at_each_reference_is_refused_with_400_at_once() {
    // The reply is not an integer: checking it would try 2^22 paths (35 s of CPU).
    let fake = FakeOpenAi::start(FakeConfig::replying("\"text\""));
    let service = Service::openai(&fake, ServiceLimits::default()).await;
    let schema = doubling_schema(22);
    assert!(schema.to_string().len() < 2_000);
    let (status, e) = service
        .post(&json!({"query": "q?", "nodes": nodes(), "output_schema": schema}))
        .await;
    assert_eq!(status, 400, "{e}");
    assert_error_body(&e, "invalid_option", "10000");
    assert!(fake.seen().is_empty(), "no call is made");

    for looping in [json!({"$ref": "#"}), json!({"not": {"$ref": "#"}})] {
        let (status, e) = service
            .post(&json!({"query": "q?", "nodes": nodes(), "output_schema": looping}))
            .await;
        assert_eq!(status, 400, "{e}");
        assert_error_body(&e, "invalid_option", "leads back to itself");
    }
}

/// The issue's 152-byte schema: `n` is `allOf` of two copies of "an array whose items are
/// `n`", so checking a reply nested `depth` arrays deep walks 2^depth paths.
fn branching_recursion() -> Value {
    let branch = json!({"type": "array", "items": {"$ref": "#/$defs/n"}});
    json!({"$defs": {"n": {"allOf": [branch.clone(), branch]}}, "$ref": "#/$defs/n"})
}

fn nested_arrays(depth: usize) -> Value {
    let mut v = json!([]);
    for _ in 0..depth {
        v = json!([v]);
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_too_costly_to_check_is_refused_before_its_check_and_health_answers() {
    // Nested 40 arrays deep, the reply's check would take 2^40 paths (hours of CPU on the
    // blocking pool after the request timed out); it is counted first and refused.
    let schema = branching_recursion();
    assert!(schema.to_string().len() < 200);
    let fake = FakeOpenAi::start(FakeConfig::replying(&nested_arrays(40).to_string()));
    let service = Service::openai(&fake, ServiceLimits::default()).await;
    let body =
        json!({"query": "q?", "nodes": ["One fact."], "output_schema": schema, "evidence": false});
    // More requests than the runtime has threads: each is refused, none holds a thread.
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
                let status = r.status().as_u16();
                (status, r.json::<Value>().await.unwrap())
            })
        })
        .collect();
    for r in requests {
        let (status, e) = r.await.unwrap();
        assert_eq!(status, 502, "{e}");
        assert_error_body(&e, "schema_mismatch", "too costly to check");
    }
    let health = reqwest::get(format!("{}/healthz", service.url))
        .await
        .expect("/healthz answers");
    assert_eq!(health.status(), 200);
    // A shallow reply to the same schema is checked and answered.
    let fake = FakeOpenAi::start(FakeConfig::replying(&nested_arrays(5).to_string()));
    let service = Service::openai(&fake, ServiceLimits::default()).await;
    let (status, r) = service.post(&body).await;
    assert_eq!(status, 200, "{r}");
}
