//! `MemoryCache` stays within its byte cap however many replies pass through it, keeps
//! the entries that are used, and works under tokio's paused clock.

use std::sync::Arc;

use futures::executor::block_on;
use synthkit::layer::cache::{CachedModel, CachedReply, MemoryCache, ResponseCache};
use synthkit::model::{LanguageModel, ModelInfo};
use synthkit::prompt::RenderedPrompt;
use synthkit::testing::ScriptedModel;

const ENTRIES: usize = 100_000;
const CAP: u64 = 1 << 20;
/// Keys read again and again while the others stream past.
const HOT: usize = 50;

/// A key shaped like the layer's (64 hex characters).
fn key(i: usize) -> String {
    format!("{i:064x}")
}

fn reply(i: usize) -> CachedReply {
    CachedReply {
        text: format!("reply {i}: {}", "lorem ipsum ".repeat(16)),
        ..CachedReply::default()
    }
}

/// Every this many entries, one is read right after it is stored (a reply asked for
/// again soon).
const TOUCH_EVERY: usize = 1000;

#[test]
fn a_hundred_thousand_entries_stay_under_the_cap_and_used_ones_survive() {
    let cache = MemoryCache::with_max_bytes(CAP);
    assert_eq!(cache.max_bytes(), CAP);
    for i in 0..HOT {
        block_on(cache.put(&key(i), &reply(i)));
    }
    let mut offered: u64 = 0;
    let mut peak = 0;
    for i in HOT..ENTRIES {
        block_on(cache.put(&key(i), &reply(i)));
        offered += (key(i).len() + reply(i).text.len()) as u64;
        peak = peak.max(cache.bytes());
        assert!(
            cache.bytes() <= CAP,
            "{} bytes after {i} entries",
            cache.bytes()
        );
        if i % TOUCH_EVERY == 0 {
            assert_eq!(block_on(cache.get(&key(i))), Some(reply(i)));
        }
        // The hot keys are in use: read them now and then.
        if i % 500 == 0 {
            for h in 0..HOT {
                assert_eq!(
                    block_on(cache.get(&key(h))),
                    Some(reply(h)),
                    "hot key {h} at {i}"
                );
            }
        }
    }
    // Far more went in than the cap holds; what stays is within it.
    assert!(offered > 20 * CAP, "{offered}");
    assert!(cache.len() < ENTRIES / 20, "{} entries kept", cache.len());
    assert!(peak <= CAP && peak > CAP / 2, "peak {peak}");
    let kept = |range: std::ops::Range<usize>, touched: bool| {
        range
            .filter(|i| (i % TOUCH_EVERY == 0) == touched)
            .filter(|&i| block_on(cache.get(&key(i))).is_some())
            .count()
    };
    // Used entries survive: the hot keys, and the recent entries read once.
    for h in 0..HOT {
        assert_eq!(block_on(cache.get(&key(h))), Some(reply(h)), "hot key {h}");
    }
    let recent = ENTRIES - 10 * TOUCH_EVERY..ENTRIES;
    assert_eq!(kept(recent, true), 10);
    // Entries stored once and never read again make room for them.
    assert_eq!(kept(40_000..50_000, false), 0);
    assert_eq!(
        block_on(cache.get(&key(ENTRIES - 1))),
        Some(reply(ENTRIES - 1))
    );
    eprintln!(
        "{ENTRIES} entries ({offered} bytes) through a {CAP}-byte cache: {} kept, {} bytes, peak {peak}",
        cache.len(),
        cache.bytes()
    );
}

#[test]
fn the_default_cap_is_64_mib() {
    assert_eq!(MemoryCache::DEFAULT_MAX_BYTES, 64 << 20);
    assert_eq!(MemoryCache::new().max_bytes(), 64 << 20);
    assert_eq!(MemoryCache::default().max_bytes(), 64 << 20);
}

/// Under tokio's paused clock (which auto-advances only when every task waits on a
/// timer): the model's call takes its second, a hit takes no time at all.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn works_under_paused_time() {
    let inner = ScriptedModel::constant(ModelInfo::new("m"), "ok")
        .with_delay(std::time::Duration::from_secs(1));
    let model = CachedModel::new(
        inner.clone(),
        Arc::new(MemoryCache::with_max_bytes(4096)),
        "scripted",
        "",
    );
    let request = synthkit::testing::qa_request(RenderedPrompt::Text("q".into()), 1, 8, None);
    let start = tokio::time::Instant::now();
    assert_eq!(model.complete(&request).await.unwrap().text, "ok");
    let called = tokio::time::Instant::now();
    assert_eq!(called - start, std::time::Duration::from_secs(1));
    assert_eq!(model.complete(&request).await.unwrap().text, "ok");
    assert_eq!(inner.requests().len(), 1);
    assert_eq!(model.stats().hits, 1);
    assert_eq!(tokio::time::Instant::now(), called);
}
