//! Scale-out through Redis: two replicas (two services in this process) share one
//! requests-per-minute budget and one response cache in a real `redis-server` started on
//! a loopback port. Skipped with a message when `redis-server` is not installed, except
//! in CI (`CI` set), where that is a failure.
#![cfg(feature = "redis")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Service, nodes, openai_backend};
use serde_json::{Value, json};
use synthkit_serve::redis::{RedisBudget, RedisCache, connect};
use synthkit_serve::{BackendConfig, CacheChoice, ServiceLimits};
use synthkit_testkit::{FakeConfig, FakeOpenAi as FakeLlm};

/// A `redis-server` on a free loopback port, killed on drop.
struct RedisServer {
    url: String,
    child: Child,
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn redis_server() -> Option<RedisServer> {
    let found = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "redis-server is not installed: CI must install it (apt-get install -y redis-server)"
        );
        eprintln!("skipping: redis-server is not installed (apt-get install -y redis-server)");
        return None;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let server = RedisServer {
        url: format!("redis://127.0.0.1:{port}/"),
        child,
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(server)
}

async fn post(service: &Service, body: &Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(service.synthesize_url())
        .json(body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_hold_one_combined_request_rate() {
    let Some(redis) = redis_server() else { return };
    let fake = FakeLlm::start(FakeConfig::default());
    // 240 requests a minute (4 a second), a burst of one second's worth.
    let mut replicas = Vec::new();
    for _ in 0..2 {
        let conn = connect(&redis.url).await.unwrap();
        let budget = RedisBudget::new(conn, "rate-test", 240, 0).with_burst(Duration::from_secs(1));
        let backend = openai_backend(&fake.base).with_shared_budget(Arc::new(budget));
        replicas.push(Service::start(backend, ServiceLimits::default(), None).await);
    }
    let started = Instant::now();
    let bodies: Vec<Value> = (0..12)
        .map(|i| json!({"query": format!("question {i}?"), "nodes": ["One short fact."]}))
        .collect();
    let requests = bodies
        .iter()
        .enumerate()
        .map(|(i, body)| post(&replicas[i % 2], body));
    let answers = futures::future::join_all(requests).await;
    for (status, body) in &answers {
        assert_eq!(*status, 200, "{body}");
    }
    let seen = fake.seen();
    assert_eq!(seen.len(), 12);
    let first = seen.iter().map(|s| s.at).min().unwrap();
    let last = seen.iter().map(|s| s.at).max().unwrap();
    // 4 at once, then 8 more at 4 a second: the last one no sooner than ~2 s after the
    // first. Two separate per-replica budgets would have finished in about 1 s.
    let spread = last - first;
    assert!(spread >= Duration::from_millis(1_800), "{spread:?}");
    assert!(started.elapsed() < Duration::from_secs(6));
    // No second in the run saw more than the burst plus a second's rate.
    for s in &seen {
        let in_window = seen
            .iter()
            .filter(|o| o.at >= s.at && o.at < s.at + Duration::from_secs(1))
            .count();
        assert!(in_window <= 8, "{in_window} calls within one second");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_cached_by_one_replica_is_served_by_the_other() {
    let Some(redis) = redis_server() else { return };
    let fake = FakeLlm::start(FakeConfig::default());
    let mut replicas = Vec::new();
    for _ in 0..2 {
        let conn = connect(&redis.url).await.unwrap();
        let cache = RedisCache::new(conn, "cache-test", Duration::from_secs(120));
        let backend = openai_backend(&fake.base).with_cache(CacheChoice::Store(Arc::new(cache)));
        replicas.push(Service::start(backend, ServiceLimits::default(), None).await);
    }
    let body = json!({"query": "How often is the primary mirror cleaned?", "nodes": nodes()});
    let (status, first) = post(&replicas[0], &body).await;
    assert_eq!(status, 200, "{first}");
    let calls = fake.requests();
    assert!(calls >= 1);
    let (status, second) = post(&replicas[1], &body).await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(
        fake.requests(),
        calls,
        "the second replica asked the model again"
    );
    assert_eq!(first["text"], second["text"]);
    let metrics = replicas[1].state.metrics().render();
    assert!(metrics.contains("synthkit_cache_hits_total 1"), "{metrics}");

    // Entries expire.
    let client = redis::Client::open(redis.url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("cache-test:cache:*")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(keys.len(), calls);
    let ttl: i64 = redis::cmd("TTL")
        .arg(&keys[0])
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!((1..=120).contains(&ttl), "ttl {ttl}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_larger_than_the_token_budget_fails_with_the_flag_to_raise() {
    let Some(redis) = redis_server() else { return };
    let conn = connect(&redis.url).await.unwrap();
    let budget = RedisBudget::new(conn, "over-test", 0, 50);
    let backend = BackendConfig::extractive()
        .with_retry(None)
        .with_shared_budget(Arc::new(budget));
    let service = Service::start(backend, ServiceLimits::default(), None).await;
    let (status, e) = post(&service, &json!({"query": "q?", "nodes": nodes()})).await;
    assert_eq!(status, 502, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("raise --tpm"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_redis_the_budget_fails_calls_and_the_cache_misses() {
    let Some(redis) = redis_server() else { return };
    let conn = connect(&redis.url).await.unwrap();
    let budget = RedisBudget::new(conn.clone(), "down-test", 600, 0);
    let cache = RedisCache::new(conn, "down-test", Duration::from_secs(60));
    drop(redis);
    let cached = BackendConfig::extractive()
        .with_retry(None)
        .with_cache(CacheChoice::Store(Arc::new(cache)));
    let service = Service::start(cached, ServiceLimits::default(), None).await;
    let (status, r) = post(&service, &json!({"query": "q?", "nodes": nodes()})).await;
    assert_eq!(status, 200, "a cache that cannot be reached is a miss: {r}");

    let limited = BackendConfig::extractive()
        .with_retry(None)
        .with_shared_budget(Arc::new(budget));
    let service = Service::start(limited, ServiceLimits::default(), None).await;
    let (status, e) = post(&service, &json!({"query": "q?", "nodes": nodes()})).await;
    assert_eq!(status, 502, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("redis budget"),
        "{e}"
    );
}
