//! [`MemoryCache`]: replies kept in memory, within a byte cap.

use std::sync::Arc;

use futures::future::BoxFuture;
use quick_cache::Weighter;
use quick_cache::sync::Cache;

use super::{CachedReply, ResponseCache};

/// What one entry costs besides its key and text: the strings' and the reply's own
/// fields, and the map's bookkeeping (an estimate, so that a cap is kept by tiny entries
/// too).
const ENTRY_OVERHEAD: u64 = 128;

/// The shards the cap is split into. Fixed (not one per core), so what fits does not
/// depend on the machine: an entry larger than a shard's share of the cap is not kept.
const SHARDS: usize = 4;

/// The share of the cap for entries read more than once; the rest holds new entries
/// until they are read again (S3-FIFO's small queue, 10% as in its paper: replies are
/// often asked for again soon after they are stored).
const HOT_SHARE: f64 = 0.9;

/// An entry's size as [`MemoryCache`] counts it.
#[derive(Debug, Clone, Copy, Default)]
struct ByBytes;

impl Weighter<String, Arc<CachedReply>> for ByBytes {
    fn weight(&self, key: &String, reply: &Arc<CachedReply>) -> u64 {
        entry_weight(key, reply)
    }
}

fn entry_weight(key: &str, reply: &CachedReply) -> u64 {
    let bytes = key
        .len()
        .saturating_add(reply.text.len())
        .saturating_add(reply.thinking.len());
    u64::try_from(bytes)
        .unwrap_or(u64::MAX)
        .saturating_add(ENTRY_OVERHEAD)
}

/// An in-memory store for one process, within a byte cap (default
/// [`MemoryCache::DEFAULT_MAX_BYTES`], 64 MiB).
///
/// An entry weighs its key plus its reply's text and thinking in bytes, plus a fixed 128 bytes for
/// its bookkeeping. Once the entries together would pass the cap, entries are evicted,
/// those not used recently first (quick_cache's S3-FIFO policy): a new entry waits in a
/// small queue (a tenth of the cap) and moves to the main part when it is read again;
/// entries stored and never read again are evicted first, and within the main part the
/// ones not read for the longest (a clock). So a stream of one-off replies cannot flush
/// the replies in use. The cap is split into four shards, so an entry heavier than about
/// a quarter of the cap is not kept at all (it is simply asked for again next time).
///
/// Its futures are ready at once (a lookup never waits); it starts no thread and no
/// task, and needs no clock.
pub struct MemoryCache {
    cache: Cache<String, Arc<CachedReply>, ByBytes>,
    max_bytes: u64,
}

debug_fields!(MemoryCache {
    len: len(),
    bytes: bytes(),
    max_bytes: max_bytes
});

impl Default for MemoryCache {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryCache {
    /// The default cap: 64 MiB of keys and replies.
    pub const DEFAULT_MAX_BYTES: u64 = 64 << 20;

    /// An empty store with the default cap ([`MemoryCache::DEFAULT_MAX_BYTES`]).
    pub fn new() -> Self {
        Self::with_max_bytes(Self::DEFAULT_MAX_BYTES)
    }

    /// An empty store that holds at most `max_bytes` of entries (0 keeps nothing).
    pub fn with_max_bytes(max_bytes: u64) -> Self {
        // A guess at the number of entries (2 KiB each) sizes the shards' tables and
        // the memory of recently evicted keys; it is no limit.
        let estimated_items = usize::try_from(max_bytes / 2048)
            .unwrap_or(usize::MAX)
            .clamp(16, 1 << 20);
        let options = quick_cache::OptionsBuilder::new()
            .shards(SHARDS)
            .hot_allocation(HOT_SHARE)
            .estimated_items_capacity(estimated_items)
            .weight_capacity(max_bytes)
            .build();
        let cache = match options {
            Ok(options) => Cache::with_options(
                options,
                ByBytes,
                quick_cache::DefaultHashBuilder::default(),
                quick_cache::sync::DefaultLifecycle::default(),
            ),
            // The options above are always valid; should the crate ever refuse them,
            // its own defaults with our cap are the next best thing.
            Err(_) => Cache::with_weighter(estimated_items, max_bytes, ByBytes),
        };
        Self { cache, max_bytes }
    }

    /// The cap, in bytes.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// The bytes the entries weigh now (never more than [`MemoryCache::max_bytes`]).
    pub fn bytes(&self) -> u64 {
        self.cache.weight()
    }

    /// Replies stored.
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.cache.is_empty()
    }
}

impl ResponseCache for MemoryCache {
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Option<CachedReply>> {
        // The lock is held only to clone the `Arc`; the text is copied after.
        let found = self.cache.get(key).map(|reply| CachedReply::clone(&reply));
        Box::pin(futures::future::ready(found))
    }

    fn put<'a>(&'a self, key: &'a str, value: &'a CachedReply) -> BoxFuture<'a, ()> {
        self.cache.insert(key.to_string(), Arc::new(value.clone()));
        Box::pin(futures::future::ready(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(text: &str) -> CachedReply {
        CachedReply {
            text: text.into(),
            ..CachedReply::default()
        }
    }

    #[test]
    fn an_entry_weighs_its_key_and_text() {
        assert_eq!(entry_weight("abc", &reply("hello")), 8 + ENTRY_OVERHEAD);
        let c = MemoryCache::with_max_bytes(1 << 20);
        futures::executor::block_on(c.put("abc", &reply("hello")));
        assert_eq!(c.bytes(), 8 + ENTRY_OVERHEAD);
        futures::executor::block_on(c.put("abc", &reply("hi")));
        assert_eq!((c.len(), c.bytes()), (1, 5 + ENTRY_OVERHEAD));
    }

    #[test]
    fn an_entry_too_large_for_the_cap_is_not_kept() {
        let c = MemoryCache::with_max_bytes(4096);
        futures::executor::block_on(c.put("k", &reply(&"x".repeat(8192))));
        assert!(c.is_empty());
        assert_eq!(futures::executor::block_on(c.get("k")), None);
        let none = MemoryCache::with_max_bytes(0);
        futures::executor::block_on(none.put("k", &reply("v")));
        assert!(none.is_empty());
    }
}
