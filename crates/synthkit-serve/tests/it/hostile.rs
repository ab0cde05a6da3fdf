//! Hostile clients: idle connections beyond the cap, slow headers, cross-site requests,
//! every error route's JSON body, an over-limit body sent by a plain blocking client,
//! load shedding and probes that never reach the provider. All on loopback; every wait
//! has a deadline, and what is timed is compared with generous bounds.

use std::io::{Read, Write};
use std::time::Duration;

use serde_json::json;
use synthkit_serve::{
    AccessPolicy, ApiKeys, AppState, Backend, Metrics, ModelSetup, ServiceLimits,
};
use synthkit_testkit::gated::GatedOpenAi;
use synthkit_testkit::{FakeConfig, FakeOpenAi};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::common::raw::{Answer, addr_of, closed_within, read_answer, request, send};
use crate::common::{DEADLINE, Service, nodes, openai_backend};

fn synthesis_body() -> Vec<u8> {
    serde_json::to_vec(&json!({"query": "How often is the mirror cleaned?", "nodes": nodes()}))
        .unwrap()
}

async fn post_json(addr: &str, headers: &[(&str, &str)]) -> Answer {
    let mut all = vec![("Content-Type", "application/json")];
    all.extend_from_slice(headers);
    post(addr, &all, &synthesis_body()).await
}

/// `POST /v1/synthesize` with `headers` and `body`, as raw bytes.
async fn post(addr: &str, headers: &[(&str, &str)], body: &[u8]) -> Answer {
    send(addr, &request("POST", "/v1/synthesize", headers, body)).await
}

async fn service_with(limits: ServiceLimits, access: AccessPolicy, keys: Option<&str>) -> Service {
    let metrics = Metrics::new();
    let stack = Backend::build(ModelSetup::extractive(), metrics.clone())
        .await
        .unwrap();
    let keys = keys.map(|k| ApiKeys::parse(k).unwrap());
    let state = AppState::new(stack, limits, keys, metrics).with_access(access);
    Service::start_state(state).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_route_answers_the_json_error_body() {
    let limits = ServiceLimits::default()
        .with_max_body_bytes(1_000)
        .with_max_uri_bytes(200)
        .with_max_headers(10)
        .with_max_header_bytes(1_000);
    let service = Service::extractive(limits).await;
    let addr = addr_of(&service.url);

    send(&addr, &request("GET", "/nope", &[], b""))
        .await
        .assert_error(404, "not_found");
    send(&addr, &request("POST", "/v2/anything", &[], b"{}"))
        .await
        .assert_error(404, "not_found");

    let a = send(&addr, &request("GET", "/v1/synthesize", &[], b"")).await;
    a.assert_error(405, "method_not_allowed");
    assert!(
        a.header("allow").is_some_and(|v| v.contains("POST")),
        "{a:?}"
    );
    send(&addr, &request("DELETE", "/healthz", &[], b""))
        .await
        .assert_error(405, "method_not_allowed");

    let big = vec![b'x'; 2_000];
    let a = post(&addr, &[("Content-Type", "application/json")], &big).await;
    a.assert_error(413, "body_too_large");
    assert!(
        a.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("1000 bytes")
    );

    let long = format!("/healthz?pad={}", "a".repeat(300));
    send(&addr, &request("GET", &long, &[], b""))
        .await
        .assert_error(414, "uri_too_long");

    let a = post(&addr, &[("Content-Type", "text/plain")], &synthesis_body()).await;
    a.assert_error(415, "unsupported_media_type");

    let many: Vec<(String, String)> = (0..20)
        .map(|i| (format!("X-Pad-{i}"), "1".into()))
        .collect();
    let many: Vec<(&str, &str)> = many.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    send(&addr, &request("GET", "/healthz", &many, b""))
        .await
        .assert_error(431, "headers_too_large");
    let wide = "w".repeat(1_500);
    send(
        &addr,
        &request("GET", "/healthz", &[("X-Wide", &wide)], b""),
    )
    .await
    .assert_error(431, "headers_too_large");

    // The limits leave ordinary requests alone.
    let a = send(&addr, &request("GET", "/healthz", &[], b"")).await;
    assert_eq!(a.status, 200, "{a:?}");
    let m = service.state.metrics();
    assert_eq!(m.requests("other", 404), 2);
    assert_eq!(m.requests("/v1/synthesize", 413), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_service_sheds_with_503_and_retry_after() {
    // The first request holds the only slot until the test opens the model's gate.
    let model = GatedOpenAi::start();
    let limits = ServiceLimits::default().with_max_requests(1);
    let service = Service::start(openai_backend(&model.base), limits, None).await;
    let addr = addr_of(&service.url);
    let slow = tokio::spawn({
        let addr = addr.clone();
        async move { post_json(&addr, &[]).await }
    });
    model.wait_arrived(1, DEADLINE).await;
    let a = post_json(&addr, &[]).await;
    a.assert_error(503, "overloaded");
    assert_eq!(a.header("retry-after"), Some("1"));
    // Probes are not behind the request limit.
    assert_eq!(
        send(&addr, &request("GET", "/healthz", &[], b""))
            .await
            .status,
        200
    );
    assert!(
        !slow.is_finished(),
        "the first request ended at a shut gate"
    );
    model.open();
    assert_eq!(slow.await.unwrap().status, 200);
    assert_eq!(
        post_json(&addr, &[]).await.status,
        200,
        "the slot is free again"
    );
}

/// A synthesis request whose body comes a byte every 200 ms (`Content-Length: 1000`,
/// never all sent): the task ends with the service's answer, or `None` if the connection
/// closed without one. The task is aborted (and its connection closed) when dropped.
fn slow_body(addr: &str) -> tokio_util::task::AbortOnDropHandle<Option<Answer>> {
    let addr = addr.to_string();
    tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
        let stream = TcpStream::connect(&addr).await.ok()?;
        let (mut reader, mut writer) = stream.into_split();
        let head = "POST /v1/synthesize HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n";
        writer.write_all(head.as_bytes()).await.ok()?;
        let drip = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
            for _ in 0..1000 {
                tokio::time::sleep(Duration::from_millis(200)).await;
                if writer.write_all(b" ").await.is_err() {
                    return;
                }
            }
        }));
        let answer = read_answer(&mut reader).await;
        drop(drip);
        Some(answer)
    }))
}

/// Issue 42, item 3: a request took its `max_requests` slot before its body was read, so
/// two bodies sent a byte at a time held both slots of `max_requests 2` (for the whole
/// 300 s request timeout) and every other request got 503. Bodies are read first now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_bodies_hold_no_request_slot() {
    // A body deadline longer than the test: the slow bodies stay open throughout.
    let limits = ServiceLimits::default()
        .with_max_requests(2)
        .with_body_timeout(Duration::from_secs(3600));
    let service = Service::extractive(limits).await;
    let addr = addr_of(&service.url);
    let slow = [slow_body(&addr), slow_body(&addr)];
    let metrics = service.state.metrics().clone();
    crate::common::wait_until("both slow bodies are in flight", || {
        metrics
            .requests_in_flight
            .load(std::sync::atomic::Ordering::SeqCst)
            == 2
    })
    .await;
    for _ in 0..3 {
        let a = post_json(&addr, &[]).await;
        assert_eq!(
            a.status, 200,
            "an ordinary request beside two slow bodies: {a:?}"
        );
    }
    assert!(
        slow.iter().all(|s| !s.is_finished()),
        "the slow bodies are still being read"
    );
}

/// Issue 42, item 3: a body that does not arrive within `body_timeout` is answered 408
/// `body_timeout` (JSON), and the service goes on answering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_body_is_answered_408() {
    let limits = ServiceLimits::default()
        .with_max_requests(2)
        .with_body_timeout(Duration::from_secs(1));
    let service = Service::extractive(limits).await;
    let addr = addr_of(&service.url);
    let slow = [slow_body(&addr), slow_body(&addr)];
    for s in slow {
        let a = s
            .await
            .unwrap()
            .expect("the service answered the slow body");
        a.assert_error(408, "body_timeout");
        assert!(
            a.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("--body-timeout"),
            "{a:?}"
        );
        assert_eq!(a.header("connection"), Some("close"), "{a:?}");
    }
    assert_eq!(post_json(&addr, &[]).await.status, 200);
    assert_eq!(service.state.metrics().requests("/v1/synthesize", 408), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_site_requests_are_refused_on_loopback() {
    let service = Service::extractive(ServiceLimits::default()).await;
    let addr = addr_of(&service.url);
    let body = synthesis_body();

    // A form post: browsers send it cross-site without asking.
    for content_type in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        let a = post(&addr, &[("Content-Type", content_type)], &body).await;
        a.assert_error(415, "unsupported_media_type");
    }
    let a = post(&addr, &[], &body).await;
    a.assert_error(415, "unsupported_media_type");

    // DNS rebinding: the page's own host name now points at 127.0.0.1.
    post_json(&addr, &[("Host", "evil.example")])
        .await
        .assert_error(421, "host_not_allowed");
    post_json(&addr, &[("Host", "evil.example:8080")])
        .await
        .assert_error(421, "host_not_allowed");
    send(
        &addr,
        &request("GET", "/metrics", &[("Host", "evil.example")], b""),
    )
    .await
    .assert_error(421, "host_not_allowed");
    // Probes answer any Host (they address a pod by its IP).
    assert_eq!(
        send(
            &addr,
            &request("GET", "/healthz", &[("Host", "10.1.2.3:8080")], b"")
        )
        .await
        .status,
        200
    );
    for host in ["localhost", "localhost:8080", "127.0.0.1:9", "[::1]:8080"] {
        let a = post_json(&addr, &[("Host", host)]).await;
        assert_eq!(a.status, 200, "{host}: {a:?}");
    }

    // A fetch from another origin, and its preflight.
    let a = post_json(&addr, &[("Origin", "https://evil.example")]).await;
    a.assert_error(403, "origin_not_allowed");
    assert!(a.header("access-control-allow-origin").is_none());
    let preflight = request(
        "OPTIONS",
        "/v1/synthesize",
        &[
            ("Origin", "https://evil.example"),
            ("Access-Control-Request-Method", "POST"),
            ("Access-Control-Request-Headers", "content-type"),
        ],
        b"",
    );
    let a = send(&addr, &preflight).await;
    a.assert_error(403, "origin_not_allowed");
    assert!(a.header("access-control-allow-origin").is_none());
    assert_eq!(
        service.state.metrics().requests("/v1/synthesize", 200),
        4,
        "only the loopback posts were served"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listed_origins_and_hosts_are_answered_with_cors_headers() {
    let access = AccessPolicy::new()
        .allow_origin("https://app.example")
        .unwrap()
        .allow_host("synthkit.internal")
        .unwrap();
    let service = service_with(ServiceLimits::default(), access, Some("k-1")).await;
    let addr = addr_of(&service.url);
    let origin = ("Origin", "https://app.example");

    // The preflight carries no key, and needs none.
    let preflight = request(
        "OPTIONS",
        "/v1/synthesize",
        &[
            origin,
            ("Access-Control-Request-Method", "POST"),
            (
                "Access-Control-Request-Headers",
                "authorization, content-type",
            ),
        ],
        b"",
    );
    let a = send(&addr, &preflight).await;
    assert_eq!(a.status, 200, "{a:?}");
    a.assert_allows_origin("https://app.example");
    assert!(
        a.header("access-control-allow-methods")
            .is_some_and(|m| m.contains("POST")),
        "{a:?}"
    );
    let allowed = a
        .header("access-control-allow-headers")
        .unwrap_or("")
        .to_ascii_lowercase();
    assert!(
        allowed.contains("authorization") && allowed.contains("content-type"),
        "{a:?}"
    );

    // The request itself needs the key (any case of the scheme) and gets CORS headers,
    // its errors too.
    let a = post_json(&addr, &[origin]).await;
    a.assert_error(401, "unauthorized");
    a.assert_allows_origin("https://app.example");
    let a = post_json(&addr, &[origin, ("Authorization", "BEARER k-1")]).await;
    assert_eq!(a.status, 200, "{a:?}");
    a.assert_allows_origin("https://app.example");
    assert!(
        a.header("vary")
            .is_some_and(|v| v.to_ascii_lowercase().contains("origin")),
        "{a:?}"
    );

    let a = post_json(
        &addr,
        &[
            ("Host", "synthkit.internal:443"),
            ("Authorization", "bearer k-1"),
        ],
    )
    .await;
    assert_eq!(a.status, 200, "{a:?}");
    post_json(
        &addr,
        &[("Host", "other.internal"), ("Authorization", "Bearer k-1")],
    )
    .await
    .assert_error(421, "host_not_allowed");
    post_json(
        &addr,
        &[
            ("Origin", "https://app.example.evil"),
            ("Authorization", "Bearer k-1"),
        ],
    )
    .await
    .assert_error(403, "origin_not_allowed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_silent_clients_are_cut_off_after_the_header_timeout() {
    let header_timeout = Duration::from_secs(1);
    let limits = ServiceLimits::default().with_header_timeout(header_timeout);
    let service = Service::extractive(limits).await;
    let addr = addr_of(&service.url);
    // How long a connection may stay open before the test calls it never cut off: a
    // safety net far past the header timeout, not a bound on how soon it is cut.
    let bound = DEADLINE;

    // Slowloris: a header line every 200 ms, never the blank line that ends them, for as
    // long as the connection lasts (so only the header timeout can end it).
    let stream = TcpStream::connect(&addr).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let drip = tokio::spawn(async move {
        if writer
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n")
            .await
            .is_err()
        {
            return;
        }
        for i in 0.. {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if writer
                .write_all(format!("X-Drip-{i}: 1\r\n").as_bytes())
                .await
                .is_err()
            {
                return;
            }
        }
    });
    let closed = closed_within(&mut reader, bound).await;
    drip.abort();
    let took = closed.expect("a client dripping headers was never cut off");
    assert!(
        took >= header_timeout / 2,
        "cut off before the header timeout: {took:?}"
    );

    // A client that sends nothing, and one that starts an HTTP/2 preface and stops.
    let mut silent = TcpStream::connect(&addr).await.unwrap();
    let mut half_h2 = TcpStream::connect(&addr).await.unwrap();
    half_h2.write_all(b"PRI * HTTP/2.0\r\n").await.unwrap();
    assert!(
        closed_within(&mut silent, bound).await.is_some(),
        "a silent connection stayed open"
    );
    assert!(
        closed_within(&mut half_h2, bound).await.is_some(),
        "a half HTTP/2 preface stayed open"
    );

    // An idle keep-alive connection is closed too, after its answer.
    let mut kept = TcpStream::connect(&addr).await.unwrap();
    kept.write_all(&request("GET", "/healthz", &[], b""))
        .await
        .unwrap();
    assert_eq!(read_answer(&mut kept).await.status, 200);
    assert!(
        closed_within(&mut kept, bound).await.is_some(),
        "an idle keep-alive connection stayed open"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_beyond_the_cap_do_not_stop_health_for_long() {
    let cap = 8;
    let header_timeout = Duration::from_secs(1);
    let limits = ServiceLimits::default()
        .with_max_connections(cap)
        .with_header_timeout(header_timeout);
    let service = Service::extractive(limits).await;
    let addr = addr_of(&service.url);

    // Thirty connections that never send a byte: the first eight take every slot, the
    // rest wait in the kernel's backlog.
    let mut idle = Vec::new();
    for _ in 0..30 {
        idle.push(TcpStream::connect(&addr).await.unwrap());
    }
    // Each batch of eight is closed after the header timeout, so /healthz is answered
    // once the batches ahead of it are (events: its answer, each idle connection's end
    // and the service's count of idle ones closed; no bound on how soon).
    let a = send(
        &addr,
        &request("GET", "/healthz", &[("Connection", "close")], b""),
    )
    .await;
    assert_eq!(a.status, 200, "{a:?}");
    for (i, stream) in idle.iter_mut().enumerate() {
        assert!(
            closed_within(stream, DEADLINE).await.is_some(),
            "idle connection {i} was never closed"
        );
    }
    let metrics = service.state.metrics().render();
    assert!(
        metrics.contains("synthkit_http_connections_idle_closed_total 30"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_client_sending_an_oversized_body_reads_the_413() {
    let service = Service::extractive(ServiceLimits::default()).await;
    let addr = addr_of(&service.url);
    // As Python's urllib does: the whole body first, then the answer; blocking I/O.
    let answer = tokio::task::spawn_blocking(move || {
        let body = vec![b' '; 11 * 1024 * 1024];
        let mut stream = std::net::TcpStream::connect(&addr).unwrap();
        stream.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let head = format!(
            "POST /v1/synthesize HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream
            .write_all(&body)
            .expect("the service closed the connection while the body was being sent");
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).unwrap();
        String::from_utf8_lossy(&answer).to_string()
    })
    .await
    .unwrap();
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("\"kind\":\"body_too_large\""), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_read_the_timed_readiness_and_never_ask_the_provider() {
    let fake = FakeOpenAi::start(FakeConfig::default());
    let limits = ServiceLimits::default().with_readiness_interval(Duration::from_secs(3600));
    let service = Service::openai(&fake, limits).await;
    let mut changes = service.state.readiness_changes();
    tokio::time::timeout(DEADLINE, changes.wait_for(|s| s.is_ready()))
        .await
        .expect("the first readiness check did not come")
        .unwrap();
    let before = fake.models_calls();
    let client = reqwest::Client::new();
    for _ in 0..50 {
        let r = service.get(&client, "/readyz").await;
        assert_eq!(r.status(), 200);
    }
    assert_eq!(fake.models_calls(), before, "a probe asked the provider");
    assert_eq!(before, 1, "one check at start, the next after the interval");
}

/// A model that refuses: the request fails with 502 `model_refused` (not a 200 with
/// "Empty Response"), and a huge `Retry-After` is an answer, never a dropped request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusing_or_hostile_model_gets_its_own_errors() {
    use synthkit_testkit::hostile::{HostilePeer, json_with_headers};
    let refusing = HostilePeer::start(|_, _| {
        json_with_headers(
            200,
            &[],
            &json!({"choices": [{"index": 0, "finish_reason": "content_filter",
                "message": {"role": "assistant", "content": "Part"}}]}),
        )
    });
    let service = Service::start(
        openai_backend(&refusing.base),
        ServiceLimits::default(),
        None,
    )
    .await;
    let answer = post_json(&addr_of(&service.url), &[]).await;
    answer.assert_error(502, "model_refused");

    let slow = HostilePeer::start(|_, _| {
        json_with_headers(
            429,
            &[("retry-after", "1e20")],
            &json!({"error": {"message": "slow"}}),
        )
    });
    let service = Service::start(openai_backend(&slow.base), ServiceLimits::default(), None).await;
    let answer = tokio::time::timeout(DEADLINE, post_json(&addr_of(&service.url), &[]))
        .await
        .expect("the request must be answered");
    answer.assert_error(503, "model_rate_limited");
}
