//! Auth, request limits, client disconnects and graceful shutdown.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::{Service, nodes, openai_backend, parse_sse};
use serde_json::{Value, json};
use synthkit_serve::{BackendConfig, ServiceLimits};
use synthkit_testkit::{FakeConfig, FakeOpenAi as FakeLlm};

const KEYS: &str = "# test keys\nkey-alpha\nkey-beta\n";

fn body() -> Value {
    json!({"query": "How often is the mirror cleaned?", "nodes": nodes()})
}

/// Many sequential calls: refine over many nodes, each call taking `delay`.
fn long_refine() -> Value {
    let nodes: Vec<String> = (0..40)
        .map(|i| format!("Fact {i}: the mirror was inspected on day {i}."))
        .collect();
    json!({"query": "When was the mirror inspected?", "nodes": nodes, "mode": "refine"})
}

async fn error_of(r: reqwest::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    (status, r.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_keys_are_required_when_configured() {
    let service = Service::start(
        BackendConfig::extractive(),
        ServiceLimits::default(),
        Some(KEYS),
    )
    .await;
    let client = reqwest::Client::new();
    let url = service.synthesize_url();

    let r = client.post(&url).json(&body()).send().await.unwrap();
    assert_eq!(
        r.headers().get("www-authenticate").unwrap(),
        "Bearer",
        "401 names the scheme"
    );
    let (status, e) = error_of(r).await;
    assert_eq!(
        (status, e["error"]["kind"].as_str()),
        (401, Some("unauthorized"))
    );
    assert!(e["error"]["message"].as_str().unwrap().contains("missing"));

    let r = client
        .post(&url)
        .bearer_auth("key-gamma")
        .json(&body())
        .send()
        .await
        .unwrap();
    let (status, e) = error_of(r).await;
    assert_eq!(status, 401);
    assert!(
        !e.to_string().contains("key-gamma"),
        "the key is not echoed"
    );

    for key in ["key-alpha", "key-beta"] {
        let r = client
            .post(&url)
            .bearer_auth(key)
            .json(&body())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    // Health stays open for probes; metrics need a key.
    let get = |p: &str| client.get(format!("{}{p}", service.url));
    assert_eq!(get("/healthz").send().await.unwrap().status(), 200);
    assert_eq!(get("/readyz").send().await.unwrap().status(), 200);
    assert_eq!(get("/metrics").send().await.unwrap().status(), 401);
    let r = get("/metrics")
        .bearer_auth("key-beta")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn body_and_node_limits_are_json_errors() {
    let limits = ServiceLimits::default()
        .with_max_body_bytes(2_000)
        .with_max_nodes(3);
    let service = Service::start(BackendConfig::extractive(), limits, None).await;
    let client = reqwest::Client::new();

    let big = json!({"query": "q", "nodes": ["x".repeat(5_000)]});
    let r = client
        .post(service.synthesize_url())
        .json(&big)
        .send()
        .await
        .unwrap();
    let (status, e) = error_of(r).await;
    assert_eq!(status, 413);
    assert_eq!(e["error"]["kind"], "body_too_large");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("2000 bytes")
    );

    // Without a Content-Length (chunked), the limit holds while reading.
    let chunks =
        futures::stream::iter((0..10).map(|_| Ok::<_, std::io::Error>(bytes_of(&"y".repeat(500)))));
    let r = client
        .post(service.synthesize_url())
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(chunks))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);

    let (status, e) = error_of(
        client
            .post(service.synthesize_url())
            .json(&body())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 422);
    assert_eq!(e["error"]["kind"], "too_many_nodes");
    assert!(e["error"]["message"].as_str().unwrap().contains("4 nodes"));
}

fn bytes_of(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_time_limit_is_a_504_or_an_error_event() {
    let fake = FakeLlm::start(FakeConfig {
        delay: Duration::from_millis(300),
        ..FakeConfig::default()
    });
    let limits = ServiceLimits::default().with_request_timeout(Duration::from_millis(700));
    let service = Service::start(openai_backend(&fake.base), limits, None).await;
    let client = reqwest::Client::new();
    let r = client
        .post(service.synthesize_url())
        .json(&long_refine())
        .send()
        .await
        .unwrap();
    let (status, e) = error_of(r).await;
    assert_eq!(status, 504);
    assert_eq!(e["error"]["kind"], "timeout");

    let mut streamed = long_refine();
    streamed["stream"] = json!(true);
    let r = client
        .post(service.synthesize_url())
        .json(&streamed)
        .send()
        .await
        .unwrap();
    let events = parse_sse(&r.text().await.unwrap());
    let (name, data) = events.last().unwrap();
    assert_eq!(name, "error");
    assert_eq!(data["error"]["kind"], "timeout");
}

/// Sends `body`, waits until the fake has seen a first request, drops the client, and
/// checks that no further request reaches the fake.
async fn disconnect_stops_upstream_calls(stream: bool) {
    let fake = FakeLlm::start(FakeConfig {
        delay: Duration::from_millis(200),
        ..FakeConfig::default()
    });
    let service = Service::start(openai_backend(&fake.base), ServiceLimits::default(), None).await;
    let mut body = long_refine();
    body["stream"] = json!(stream);
    let url = service.synthesize_url();
    let client_task = tokio::spawn(async move {
        let r = reqwest::Client::new().post(url).json(&body).send().await;
        if let Ok(r) = r {
            let _ = r.text().await;
        }
    });
    while fake.requests() < 2 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    client_task.abort();
    let _ = client_task.await;
    // The call in flight when the client left may still arrive; nothing after it.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let at_drop = fake.requests();
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert_eq!(
        fake.requests(),
        at_drop,
        "the model kept being called after the client left (stream: {stream})"
    );
    assert!(
        at_drop < 10,
        "{at_drop} calls: the synthesis was not cancelled"
    );
    let metrics = service.state.metrics().render();
    assert!(
        metrics.contains("synthkit_http_requests_in_flight 0"),
        "{metrics}"
    );
    // The request the client dropped is counted as 499, not as the 200 its stream began
    // with.
    let m = service.state.metrics();
    assert_eq!(m.requests("/v1/synthesize", 499), 1, "{metrics}");
    assert_eq!(m.requests("/v1/synthesize", 200), 0, "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_disconnects_cancels_its_model_calls() {
    disconnect_stops_upstream_calls(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_client_that_disconnects_cancels_its_model_calls() {
    disconnect_stops_upstream_calls(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_finishes_the_request_in_flight() {
    let fake = FakeLlm::start(FakeConfig {
        delay: Duration::from_millis(400),
        ..FakeConfig::default()
    });
    let limits = ServiceLimits::default().with_shutdown_grace(Duration::from_secs(10));
    let mut service = Service::start(openai_backend(&fake.base), limits, None).await;
    let url = service.synthesize_url();
    let in_flight = tokio::spawn(async move {
        let body = json!({"query": "q", "nodes": nodes(), "mode": "refine"});
        let r = reqwest::Client::new()
            .post(url)
            .json(&body)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json::<Value>().await.unwrap())
    });
    while fake.requests() < 1 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let server = service.shutdown();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !service.state.is_draining() {
        assert!(
            std::time::Instant::now() < deadline,
            "shutdown did not start"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // While the request in flight goes on, probes still get through and see the drain,
    // and a new synthesis is refused with a hint to retry elsewhere.
    let client = reqwest::Client::new();
    let r = client
        .get(format!("{}/readyz", service.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["connection"], "close");
    assert_eq!(r.json::<Value>().await.unwrap()["status"], "draining");
    let r = client
        .get(format!("{}/healthz", service.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = client
        .post(service.synthesize_url())
        .json(&body())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["retry-after"], "1");
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["kind"], "shutting_down");
    assert!(
        !in_flight.is_finished(),
        "the request in flight was cut short"
    );
    let (status, response) = in_flight.await.unwrap();
    assert_eq!(status, 200, "{response}");
    assert_eq!(response["usage"]["calls"], json!(4));
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("serve returns once drained")
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_still_running_after_the_grace_are_cancelled() {
    let fake = FakeLlm::start(FakeConfig {
        delay: Duration::from_millis(200),
        ..FakeConfig::default()
    });
    let limits = ServiceLimits::default().with_shutdown_grace(Duration::from_millis(500));
    let mut service = Service::start(openai_backend(&fake.base), limits, None).await;
    let url = service.synthesize_url();
    let plain = tokio::spawn({
        let url = url.clone();
        async move {
            let r = reqwest::Client::new()
                .post(url)
                .json(&long_refine())
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    });
    let streamed = tokio::spawn(async move {
        let mut body = long_refine();
        body["stream"] = json!(true);
        let r = reqwest::Client::new()
            .post(url)
            .json(&body)
            .send()
            .await
            .unwrap();
        parse_sse(&r.text().await.unwrap())
    });
    while fake.requests() < 2 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let started = std::time::Instant::now();
    let server = service.shutdown();
    let (status, e) = plain.await.unwrap();
    assert_eq!(status, 503, "{e}");
    assert_eq!(e["error"]["kind"], "shutting_down");
    let events = streamed.await.unwrap();
    let (name, data) = events.last().unwrap();
    assert_eq!(name, "error");
    assert_eq!(data["error"]["kind"], "shutting_down");
    server.await.unwrap().unwrap();
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(450) && took < Duration::from_secs(4),
        "{took:?}"
    );
}
