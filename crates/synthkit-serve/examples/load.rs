//! Load program (a benchmark, not a test): K concurrent clients against the service and
//! a loopback fake OpenAI-compatible model that answers in 50 ms, then, with the `redis`
//! feature, two replicas sharing one tokens-per-minute budget in Redis.
//!
//! ```sh
//! cargo run --release -p synthkit-serve --features redis --example load -- [--secs 10] [--redis-secs 40] [--tpm 240000]
//! ```
//!
//! Everything (clients, service, fake model) runs in this one process on one tokio
//! runtime, so the figures include the clients' own cost. Peak RSS is the process's
//! high-water mark (`VmHWM` in /proc/self/status), read after each phase: it only grows.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

#[path = "../tests/it/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{Service, arg, openai_backend, slow_fake};
use serde_json::{Value, json};
use synthkit_serve::ServiceLimits;

/// What the clients saw.
#[derive(Default)]
struct Outcome {
    latencies: Vec<Duration>,
    statuses: BTreeMap<u16, usize>,
    failures: usize,
    elapsed: Duration,
}

impl Outcome {
    fn ok(&self) -> usize {
        self.statuses.get(&200).copied().unwrap_or(0)
    }
    fn errors(&self) -> usize {
        self.failures
            + self
                .statuses
                .iter()
                .filter(|(s, _)| **s != 200)
                .map(|(_, n)| n)
                .sum::<usize>()
    }
    fn percentile(&self, p: f64) -> Duration {
        let mut l = self.latencies.clone();
        l.sort();
        if l.is_empty() {
            return Duration::ZERO;
        }
        let i = ((l.len() as f64 - 1.0) * p).round() as usize;
        l[i.min(l.len() - 1)]
    }
}

/// The process's peak resident set, in MiB.
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

fn request_body(client: usize, n: usize) -> Value {
    json!({
        "query": format!("How often is the primary mirror cleaned? (client {client}, request {n})"),
        "nodes": [
            "The dome opens at dusk when the humidity is below 80 percent.",
            {"id": "mirror", "text": "The primary mirror is cleaned every six months with CO2 snow."},
            "The secondary mirror is aligned every year.",
            "The camera is cooled to minus 100 degrees Celsius."
        ],
        "mode": "compact"
    })
}

/// `k` clients, each sending requests one after another to `urls` (client i to
/// `urls[i % len]`) until `secs` have passed.
async fn drive(urls: &[String], k: usize, secs: f64) -> Outcome {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(k)
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let started = Instant::now();
    let tasks: Vec<_> = (0..k)
        .map(|i| {
            let client = client.clone();
            let url = urls[i % urls.len()].clone();
            tokio::spawn(async move {
                let mut out = Outcome::default();
                let mut n = 0;
                while Instant::now() < deadline {
                    n += 1;
                    let t = Instant::now();
                    match client.post(&url).json(&request_body(i, n)).send().await {
                        Ok(r) => {
                            let status = r.status().as_u16();
                            let _ = r.bytes().await;
                            out.latencies.push(t.elapsed());
                            *out.statuses.entry(status).or_default() += 1;
                        }
                        Err(_) => out.failures += 1,
                    }
                }
                out
            })
        })
        .collect();
    let mut total = Outcome::default();
    for t in tasks {
        let o = t.await.unwrap();
        total.latencies.extend(o.latencies);
        total.failures += o.failures;
        for (s, n) in o.statuses {
            *total.statuses.entry(s).or_default() += n;
        }
    }
    total.elapsed = started.elapsed();
    total
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

#[tokio::main]
async fn main() {
    let secs = arg("--secs", 10.0);
    let fake = slow_fake(Duration::from_millis(50));
    let backend = openai_backend(&fake.base).map_stack(|s| s.with_calls_in_flight(Some(0)));
    let limits = ServiceLimits::default();
    let service = Service::start(backend, limits, None).await;
    let urls = vec![service.synthesize_url()];
    println!("## One replica, fake model with 50 ms latency, {secs} s per K\n");
    println!("| K | requests | requests/s | p50 ms | p99 ms | errors | peak RSS MiB |");
    println!("|---|---|---|---|---|---|---|");
    for k in [1, 16, 256] {
        let o = drive(&urls, k, secs).await;
        println!(
            "| {k} | {} | {:.1} | {} | {} | {} | {:.1} |",
            o.latencies.len(),
            o.ok() as f64 / o.elapsed.as_secs_f64(),
            ms(o.percentile(0.5)),
            ms(o.percentile(0.99)),
            o.errors(),
            peak_rss_mib()
        );
    }
    drop(service);
    drop(fake);
    redis_phase().await;
}

#[cfg(not(feature = "redis"))]
async fn redis_phase() {
    println!("\n(two replicas sharing Redis: build with --features redis)");
}

#[cfg(feature = "redis")]
async fn redis_phase() {
    use std::sync::Arc;
    use synthkit::layer::sharing::Sharing;

    use synthkit_serve::redis::{RedisBudget, connect};
    let secs = arg("--redis-secs", 40.0);
    let tpm = arg("--tpm", 240_000.0) as u32;
    let clients = arg("--redis-clients", 32.0) as usize;
    let redis = match synthkit_testkit::redis::RedisServer::start() {
        Ok(redis) => redis,
        Err(why) => {
            println!("\n(skipped the Redis phase: {why})");
            return;
        }
    };
    let fake = slow_fake(Duration::from_millis(50));
    let mut replicas = Vec::new();
    let mut budgets = Vec::new();
    for _ in 0..2 {
        let conn = connect(&redis.url).await.unwrap();
        let budget = RedisBudget::new(conn, "load", 0, tpm).with_burst(Duration::from_secs(1));
        budgets.push(budget.clone());
        let backend = openai_backend(&fake.base)
            .map_stack(|s| s.with_calls_in_flight(Some(0)))
            .map_stack(|s| s.with_sharing(Sharing::default().with_budget(Arc::new(budget))));
        replicas.push(Service::start(backend, ServiceLimits::default(), None).await);
    }
    let urls: Vec<String> = replicas.iter().map(Service::synthesize_url).collect();
    let o = drive(&urls, clients, secs).await;
    let seen = fake.seen();
    let first = seen.iter().map(|s| s.at).min().unwrap();
    let last = seen.iter().map(|s| s.at).max().unwrap();
    // Leave out the first 5 s (the one-second burst and the clients' start).
    let from = first + Duration::from_secs(5);
    let window = (last - from).as_secs_f64();
    let tokens: u64 = seen
        .iter()
        .filter(|s| s.at > from)
        .map(|s| s.prompt_tokens + s.max_tokens)
        .sum();
    let measured = tokens as f64 / window * 60.0;
    let charged: u64 = budgets.iter().map(|b| b.stats().tokens).sum();
    let whole = (last - first).as_secs_f64();
    println!(
        "\n## Two replicas sharing one Redis budget of {tpm} tokens/minute ({clients} clients, {secs} s)\n"
    );
    println!("| figure | value |\n|---|---|");
    println!("| requests answered 200 | {} |", o.ok());
    println!(
        "| answers 429 | {} |",
        o.statuses.get(&429).copied().unwrap_or(0)
    );
    println!(
        "| other errors | {} |",
        o.errors() - o.statuses.get(&429).copied().unwrap_or(0)
    );
    println!("| model calls seen by the fake | {} |", seen.len());
    println!(
        "| tokens/minute at the fake model (prompt, cl100k + 3/message, plus max_tokens; after the first 5 s, over {window:.1} s) | {measured:.0} ({:+.2}% of the cap) |",
        (measured / f64::from(tpm) - 1.0) * 100.0
    );
    println!(
        "| tokens/minute charged by the budget (synthkit's counts), whole run incl. 1 s burst | {:.0} |",
        charged as f64 / whole * 60.0
    );
    println!(
        "| calls per replica | {} / {} |",
        budgets[0].stats().requests,
        budgets[1].stats().requests
    );
    println!(
        "| p50 / p99 latency ms | {} / {} |",
        ms(o.percentile(0.5)),
        ms(o.percentile(0.99))
    );
    println!("| peak RSS MiB (process) | {:.1} |", peak_rss_mib());
}
