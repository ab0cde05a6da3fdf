//! Scale-out through Redis: two replicas (two services in this process) share one
//! requests-per-minute budget and one response cache in a real `redis-server` started on
//! a loopback port. Skipped with a message when `redis-server` is not installed, except
//! in CI (`CI` set), where that is a failure.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use synthkit::layer::retry::RetryPolicy;
use synthkit::layer::sharing::Sharing;
use synthkit_serve::redis::{ConnectionManager, RedisBudget, RedisCache, connect};
use synthkit_serve::{ModelSetup, ServiceLimits};
use synthkit_testkit::redis::RedisServer;
use synthkit_testkit::{FakeConfig, FakeOpenAi};

use crate::common::{Service, nodes, openai_backend};

/// A real `redis-server`, a fake model and two replicas of the service on it.
struct Cluster {
    redis: RedisServer,
    fake: FakeOpenAi,
    replicas: Vec<Service>,
}

/// Starts a [`Cluster`] whose replicas each get the backend `with` makes of the fake and
/// a fresh connection to Redis; `None` (the test is skipped) without `redis-server`.
async fn cluster(with: impl Fn(ModelSetup, ConnectionManager) -> ModelSetup) -> Option<Cluster> {
    let redis = RedisServer::for_test()?;
    let fake = FakeOpenAi::start(FakeConfig::default());
    let mut replicas = Vec::new();
    for _ in 0..2 {
        let conn = connect(&redis.url).await.unwrap();
        let backend = with(openai_backend(&fake.base), conn);
        replicas.push(Service::start(backend, ServiceLimits::default(), None).await);
    }
    Some(Cluster {
        redis,
        fake,
        replicas,
    })
}

/// The offline backend with no retries (a failure is seen at once) and `with` applied.
async fn offline(with: impl FnOnce(ModelSetup) -> ModelSetup) -> Service {
    Service::start(
        with(ModelSetup::extractive().map_stack(|s| s.with_retry(RetryPolicy::none()))),
        ServiceLimits::default(),
        None,
    )
    .await
}

/// Asks the service a short question (evidence off: these tests are about the calls that
/// reach the model, and the question matches no sentence): the status and the answer.
async fn ask(service: &Service) -> (u16, Value) {
    service
        .post(&json!({"query": "q?", "nodes": nodes(), "evidence": false}))
        .await
}

/// The error message of a 502 answer.
fn model_error(answer: &(u16, Value)) -> &str {
    let (status, e) = answer;
    assert_eq!(*status, 502, "{e}");
    e["error"]["message"].as_str().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_hold_one_combined_request_rate() {
    // 240 requests a minute (4 a second), a burst of one second's worth.
    let Some(Cluster {
        redis: _redis,
        fake,
        replicas,
    }) = cluster(|backend, conn| {
        let budget = RedisBudget::new(conn, "rate-test", 240, 0).with_burst(Duration::from_secs(1));
        backend.map_stack(|s| s.with_sharing(Sharing::default().with_budget(Arc::new(budget))))
    })
    .await
    else {
        return;
    };
    let bodies: Vec<Value> = (0..12)
        .map(|i| json!({"query": format!("question {i}?"), "nodes": ["One short fact."], "evidence": false}))
        .collect();
    let requests = bodies
        .iter()
        .enumerate()
        .map(|(i, body)| replicas[i % 2].post(body));
    let answers = futures::future::join_all(requests).await;
    for (status, body) in &answers {
        assert_eq!(*status, 200, "{body}");
    }
    let seen = fake.seen();
    assert_eq!(seen.len(), 12);
    let first = seen.iter().map(|s| s.at).min().unwrap();
    let last = seen.iter().map(|s| s.at).max().unwrap();
    // 4 at once, then 8 more at 4 a second: the last one no sooner than ~2 s after the
    // first. Two separate per-replica budgets would have finished in about 0.5 s. (Gaps
    // the limiter must make, as the fake saw them: load only lengthens them. There is no
    // bound on how long the whole run takes.)
    let spread = last - first;
    assert!(spread >= Duration::from_millis(1_500), "{spread:?}");
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
    let Some(Cluster {
        redis,
        fake,
        replicas,
    }) = cluster(|backend, conn| {
        let cache = RedisCache::new(conn, "cache-test", Duration::from_secs(120));
        backend.map_stack(|s| s.with_sharing(Sharing::default().with_cache(Arc::new(cache))))
    })
    .await
    else {
        return;
    };
    let body = json!({"query": "How often is the primary mirror cleaned?", "nodes": nodes(), "evidence": false});
    let (status, first) = replicas[0].post(&body).await;
    assert_eq!(status, 200, "{first}");
    let calls = fake.requests();
    assert!(calls >= 1);
    let (status, second) = replicas[1].post(&body).await;
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
    let Some(redis) = RedisServer::for_test() else {
        return;
    };
    let conn = connect(&redis.url).await.unwrap();
    let budget = RedisBudget::new(conn, "over-test", 0, 50);
    let service = offline(|b| {
        b.map_stack(|s| s.with_sharing(Sharing::default().with_budget(Arc::new(budget))))
    })
    .await;
    let answer = ask(&service).await;
    assert!(model_error(&answer).contains("raise --tpm"), "{answer:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_redis_the_budget_fails_calls_and_the_cache_misses() {
    let Some(redis) = RedisServer::for_test() else {
        return;
    };
    let conn = connect(&redis.url).await.unwrap();
    let budget = RedisBudget::new(conn.clone(), "down-test", 600, 0);
    let cache = RedisCache::new(conn, "down-test", Duration::from_secs(60));
    drop(redis);
    let service = offline(|b| {
        b.map_stack(|s| s.with_sharing(Sharing::default().with_cache(Arc::new(cache))))
    })
    .await;
    let (status, r) = ask(&service).await;
    assert_eq!(status, 200, "a cache that cannot be reached is a miss: {r}");

    let service = offline(|b| {
        b.map_stack(|s| s.with_sharing(Sharing::default().with_budget(Arc::new(budget))))
    })
    .await;
    let answer = ask(&service).await;
    assert!(model_error(&answer).contains("redis budget"), "{answer:?}");
}

/// Redis that accepts and never answers: 30 requests at once all fail, side by side, each
/// after at most its own round trip (before, each waited its turn behind the one before
/// it, 2 s each: the last after a minute), the error names Redis, `/readyz` says not
/// ready while the breaker is open, and a cache in the hung Redis costs a call no wait
/// once its breaker is open. Counted, not timed: the hung Redis records every command it
/// leaves unanswered (each one a round trip some call waited on until its timeout).
/// Needs no `redis-server` (the testkit's fake).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_redis_fails_calls_fast_and_readyz_says_not_ready() {
    use futures::StreamExt as _;
    use synthkit_testkit::redis::HungRedis;
    /// The budget's round trips (its script) among the unanswered commands.
    fn scripts(redis: &HungRedis) -> usize {
        let all = redis.unanswered();
        all.iter().filter(|c| c.starts_with("EVAL")).count()
    }
    /// The cache's round trips (reads and writes) among the unanswered commands.
    fn cache_trips(redis: &HungRedis) -> usize {
        let all = redis.unanswered();
        let cache = ["GET", "SET", "SETEX"];
        all.iter().filter(|c| cache.contains(&c.as_str())).count()
    }
    let redis = HungRedis::start();
    let conn = connect(&redis.url).await.unwrap();
    let budget = RedisBudget::new(conn.clone(), "hung-test", 6000, 0);
    let service = offline(|b| {
        b.map_stack(|s| s.with_sharing(Sharing::default().with_budget(Arc::new(budget))))
    })
    .await;
    let client = reqwest::Client::new();
    assert_eq!(service.get(&client, "/readyz").await.status(), 200);
    redis.hang();

    let mut pending: futures::stream::FuturesUnordered<_> =
        (0..30).map(|_| ask(&service)).collect();
    let first = pending.next().await.unwrap();
    // When the first call failed, more than one round trip was out: the calls asked Redis
    // side by side (calls taking turns would have had one out at a time).
    let out_at_first = scripts(&redis);
    let mut answers = vec![first];
    answers.extend(pending.collect::<Vec<_>>().await);
    for answer in &answers {
        let message = model_error(answer);
        assert!(message.to_lowercase().contains("redis"), "{message}");
    }
    assert!(
        out_at_first > 1,
        "{out_at_first} round trip(s) out when the first call failed"
    );
    // No call waited on more than its own round trip: the ones that found the breaker
    // open (after 3 failures) made none.
    let round_trips = scripts(&redis);
    assert!(round_trips <= 30, "{round_trips} round trips for 30 calls");
    let ready = service.get(&client, "/readyz").await;
    assert_eq!(ready.status(), 503);
    let body: Value = ready.json().await.unwrap();
    assert!(
        body["reason"]
            .as_str()
            .unwrap()
            .contains("Redis is not answering"),
        "{body}"
    );
    // With the breaker open a call fails at once, naming when Redis is tried again, and
    // asks Redis nothing.
    let message = model_error(&ask(&service).await).to_string();
    assert!(message.contains("until the next try"), "{message}");
    assert_eq!(scripts(&redis), round_trips, "{message}");

    // The cache: a few misses that wait for the timeout (3 round trips fail in a row and
    // the breaker opens), then none.
    let cache = RedisCache::new(conn, "hung-test", Duration::from_secs(60));
    let service = offline(|b| {
        b.map_stack(|s| s.with_sharing(Sharing::default().with_cache(Arc::new(cache))))
    })
    .await;
    let before = cache_trips(&redis);
    for _ in 0..3 {
        assert_eq!(ask(&service).await.0, 200);
    }
    let opened = cache_trips(&redis);
    assert!(opened > before, "the cache never asked the hung Redis");
    for _ in 0..5 {
        assert_eq!(ask(&service).await.0, 200);
    }
    // Five calls with the breaker open cost no round trip (one, if a machine so slow
    // that the retry interval passed meanwhile let the breaker's one probe through).
    let during = cache_trips(&redis) - opened;
    eprintln!(
        "hung Redis: {out_at_first} round trips out at the first failure, {round_trips} for \
         30 calls; the cache: {} before its breaker opened, {during} after",
        opened - before
    );
    assert!(
        during <= 1,
        "5 calls behind an open breaker made {during} round trips: {:?}",
        redis.unanswered()
    );
}
