//! Slow-body attack (a measurement, not a test; issue 42, item 3): N connections send a
//! synthesis request's headers and then its body one byte every few seconds, against a
//! service started with `--max-requests N`; meanwhile K clients send ordinary requests,
//! and the share of them answered 200 is printed, then how the slow bodies ended.
//!
//! ```sh
//! cargo run -p synthkit-serve --example slow_bodies -- [--slots 8] [--secs 20] [--drip-secs 2] [--clients 4]
//! ```
//!
//! Everything runs in this one process on loopback (the offline extractive backend, every
//! other limit at its default) and every step is bounded: the ordinary clients stop after
//! `--secs`, each of their requests has a 5 s timeout, and the slow bodies are watched for
//! at most 45 s more (the default body deadline is 30 s; without one they would last the
//! 300 s request timeout).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

#[path = "../tests/it/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::{DEADLINE, Service, arg, nodes, wait_until};
use serde_json::json;
use synthkit_serve::ServiceLimits;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The declared length of a slow body: far more bytes than it will ever send.
const SLOW_BODY_BYTES: usize = 10_000;
/// How long the slow bodies are watched after the ordinary clients stop.
const WATCH_AFTER: Duration = Duration::from_secs(45);

/// One slow body: the head, then a byte every `drip` until the service answers or
/// `until` passes. The status the service answered with (`None`: none by then).
async fn slow_body(addr: String, drip: Duration, until: Instant) -> Option<u16> {
    let stream = TcpStream::connect(&addr).await.ok()?;
    let (mut reader, mut writer) = stream.into_split();
    let head = format!(
        "POST /v1/synthesize HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {SLOW_BODY_BYTES}\r\n\r\n"
    );
    writer.write_all(head.as_bytes()).await.ok()?;
    let dripping = tokio::spawn(async move {
        for _ in 0..SLOW_BODY_BYTES {
            tokio::time::sleep(drip).await;
            if writer.write_all(b" ").await.is_err() {
                return;
            }
        }
    });
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    let status = loop {
        let left = until.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, reader.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => {
                answer.extend_from_slice(&chunk[..n]);
                let text = String::from_utf8_lossy(&answer);
                if let Some(code) = text.strip_prefix("HTTP/1.1 ").and_then(|t| t.get(..3)) {
                    break code.parse().ok();
                }
            }
            _ => break None,
        }
    };
    dripping.abort();
    status
}

#[tokio::main]
async fn main() {
    let slots = arg("--slots", 8.0) as usize;
    let secs = arg("--secs", 20.0);
    let drip = Duration::from_secs_f64(arg("--drip-secs", 2.0));
    let clients = arg("--clients", 4.0) as usize;

    let limits = ServiceLimits::default().with_max_requests(slots);
    let service = Service::extractive(limits).await;
    let addr = service.url.trim_start_matches("http://").to_string();

    let started = Instant::now();
    let watch_until = started + DEADLINE + Duration::from_secs_f64(secs) + WATCH_AFTER;
    let slow: Vec<_> = (0..slots)
        .map(|_| tokio::spawn(slow_body(addr.clone(), drip, watch_until)))
        .collect();
    let metrics = service.state.metrics().clone();
    wait_until("the slow bodies are in flight", || {
        metrics.requests_in_flight.load(Ordering::SeqCst) >= slots as i64
    })
    .await;

    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let url = service.synthesize_url();
    let body = json!({"query": "How often is the primary mirror cleaned?", "nodes": nodes()});
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let (client, url, body) = (client.clone(), url.clone(), body.clone());
            tokio::spawn(async move {
                let mut statuses: BTreeMap<String, usize> = BTreeMap::new();
                while Instant::now() < deadline {
                    let key = match client.post(&url).json(&body).send().await {
                        Ok(r) => r.status().as_u16().to_string(),
                        Err(_) => "no answer".to_string(),
                    };
                    *statuses.entry(key).or_default() += 1;
                    // An ordinary client, not a flood: a request every 50 ms at most.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                statuses
            })
        })
        .collect();
    let mut statuses: BTreeMap<String, usize> = BTreeMap::new();
    for t in tasks {
        for (k, n) in t.await.unwrap() {
            *statuses.entry(k).or_default() += n;
        }
    }
    let total: usize = statuses.values().sum();
    let ok = statuses.get("200").copied().unwrap_or(0);
    println!(
        "{slots} slow bodies (a byte every {:.1} s) against --max-requests {slots}; {clients} ordinary clients for {secs:.0} s",
        drip.as_secs_f64()
    );
    println!(
        "ordinary requests: {total}, answered 200: {ok} ({:.1} %), by status: {statuses:?}",
        100.0 * ok as f64 / total.max(1) as f64
    );
    let mut ended: BTreeMap<String, usize> = BTreeMap::new();
    for t in slow {
        let key = match t.await.unwrap() {
            Some(status) => status.to_string(),
            None => "still open".to_string(),
        };
        *ended.entry(key).or_default() += 1;
    }
    println!(
        "slow bodies after {:.0} s: {ended:?}",
        started.elapsed().as_secs_f64()
    );
}
