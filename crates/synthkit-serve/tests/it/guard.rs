//! Auth, request limits, client disconnects and graceful shutdown. A request that must
//! stay in flight waits on a [`GatedOpenAi`], whose gate the test opens (or never does):
//! no delay is guessed, and nothing is proved by sleeping.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};
use synthkit_serve::ServiceLimits;
use synthkit_testkit::gated::GatedOpenAi;

use crate::common::{
    DEADLINE, Service, assert_error_body, nodes, openai_backend, parse_sse, wait_until,
};

const KEYS: &str = "# test keys\nkey-alpha\nkey-beta\n";

fn body() -> Value {
    json!({"query": "How often is the mirror cleaned?", "nodes": nodes()})
}

/// Many sequential calls: refine over many nodes.
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
    let service = Service::extractive_with_keys(KEYS).await;
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
    let service = Service::extractive(limits).await;
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
    assert_error_body(&e, "body_too_large", "2000 bytes");

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
    assert_error_body(&e, "too_many_nodes", "4 nodes");
}

fn bytes_of(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

/// The gated model behind a service with `limits`.
async fn held(limits: ServiceLimits) -> (GatedOpenAi, Service) {
    let model = GatedOpenAi::start();
    let service = Service::start(openai_backend(&model.base), limits, None).await;
    (model, service)
}

/// Posts `body` to `url`.
async fn send(url: String, body: Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap()
}

/// Posts `body` from a task of its own: the status and the JSON answer.
fn spawn_json(url: String, body: Value) -> tokio::task::JoinHandle<(u16, Value)> {
    tokio::spawn(async move {
        let r = send(url, body).await;
        (r.status().as_u16(), r.json::<Value>().await.unwrap())
    })
}

/// Posts `body` as a stream from a task of its own: the events.
fn spawn_stream(url: String, mut body: Value) -> tokio::task::JoinHandle<Vec<(String, Value)>> {
    body["stream"] = json!(true);
    tokio::spawn(async move { parse_sse(&send(url, body).await.text().await.unwrap()) })
}

/// The last event of a stream is an error of `kind`.
fn assert_error_event(events: &[(String, Value)], kind: &str) {
    let (name, data) = events.last().unwrap();
    assert_eq!(name, "error", "{events:?}");
    assert_eq!(data["error"]["kind"], kind, "{events:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_time_limit_is_a_504_or_an_error_event() {
    // The model never answers: only the time limit can end the request.
    let limits = ServiceLimits::default().with_request_timeout(Duration::from_millis(700));
    let (_model, service) = held(limits).await;
    let (status, e) = spawn_json(service.synthesize_url(), long_refine())
        .await
        .unwrap();
    assert_eq!(status, 504, "{e}");
    assert_eq!(e["error"]["kind"], "timeout");
    let events = spawn_stream(service.synthesize_url(), long_refine())
        .await
        .unwrap();
    assert_error_event(&events, "timeout");
}

/// Sends `body`, waits until its first model call is held at the gate, drops the client,
/// and checks that the call was cancelled: the model call gauge falls to 0 although the
/// gate never opens (nothing else can end that call), so no later call can follow it.
async fn disconnect_stops_upstream_calls(stream: bool) {
    let (model, service) = held(ServiceLimits::default()).await;
    let mut body = long_refine();
    body["stream"] = json!(stream);
    let url = service.synthesize_url();
    let client_task = tokio::spawn(async move {
        let r = reqwest::Client::new().post(url).json(&body).send().await;
        if let Ok(r) = r {
            let _ = r.text().await;
        }
    });
    model.wait_arrived(1, DEADLINE).await;
    client_task.abort();
    let _ = client_task.await;
    let m = service.state.metrics().clone();
    // The request the client dropped is counted as 499, not as the 200 its stream began
    // with; then nothing of it is in flight, its model call included.
    wait_until("the dropped request counted as 499", || {
        m.requests("/v1/synthesize", 499) == 1
    })
    .await;
    wait_until("the dropped request's model call cancelled", || {
        m.requests_in_flight.load(Ordering::SeqCst) == 0
            && m.calls_in_flight.load(Ordering::SeqCst) == 0
    })
    .await;
    assert_eq!(m.requests("/v1/synthesize", 200), 0, "{}", m.render());
    assert_eq!(
        (model.arrived(), model.answered()),
        (1, 0),
        "stream: {stream}"
    );
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
    let limits = ServiceLimits::default().with_shutdown_grace(Duration::from_secs(30));
    let (model, mut service) = held(limits).await;
    let refine = json!({"query": "q", "nodes": nodes(), "mode": "refine", "evidence": false});
    let in_flight = spawn_json(service.synthesize_url(), refine);
    model.wait_arrived(1, DEADLINE).await;
    let server = service.shutdown();
    wait_until("shutdown started", || service.state.is_draining()).await;
    // While the request in flight goes on (held at the gate), probes still get through
    // and see the drain, and a new synthesis is refused with a hint to retry elsewhere.
    let client = reqwest::Client::new();
    let r = service.get(&client, "/readyz").await;
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["connection"], "close");
    assert_eq!(r.json::<Value>().await.unwrap()["status"], "draining");
    let r = service.get(&client, "/healthz").await;
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
    model.open();
    let (status, response) = in_flight.await.unwrap();
    assert_eq!(status, 200, "{response}");
    assert_eq!(response["usage"]["calls"], json!(4));
    tokio::time::timeout(DEADLINE, server)
        .await
        .expect("serve returns once drained")
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_still_running_after_the_grace_are_cancelled() {
    // The gate never opens: both requests are still running when the grace ends.
    let grace = Duration::from_millis(500);
    let limits = ServiceLimits::default().with_shutdown_grace(grace);
    let (model, mut service) = held(limits).await;
    let plain = spawn_json(service.synthesize_url(), long_refine());
    let streamed = spawn_stream(service.synthesize_url(), long_refine());
    model.wait_arrived(2, DEADLINE).await;
    let started = std::time::Instant::now();
    let server = service.shutdown();
    let (status, e) = plain.await.unwrap();
    assert_eq!(status, 503, "{e}");
    assert_eq!(e["error"]["kind"], "shutting_down");
    assert_error_event(&streamed.await.unwrap(), "shutting_down");
    tokio::time::timeout(DEADLINE, server)
        .await
        .expect("serve returns once the grace is over")
        .unwrap()
        .unwrap();
    let took = started.elapsed();
    assert!(
        took >= grace * 9 / 10,
        "cancelled before the grace: {took:?}"
    );
    assert_eq!(model.answered(), 0);
}
