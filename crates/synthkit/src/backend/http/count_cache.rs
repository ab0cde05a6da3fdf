//! The count cache of the server-side prompt counters (llama.cpp's and vLLM's
//! `/tokenize`, Anthropic's `/v1/messages/count_tokens`): counts by key, bounded, and
//! the uncounted keys of a batch asked for concurrently, a few at a time.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{Mutex, PoisonError};

use futures::StreamExt;

use crate::model::ModelError;

/// The most keys kept before the cache is cleared.
const CACHE_ENTRIES: usize = 16_384;
/// The most key bytes kept before the cache is cleared.
const CACHE_BYTES: usize = 32 << 20;
/// Count requests in flight at once for one batch.
const BATCH_CONCURRENCY: usize = 8;

#[derive(Default)]
struct Counts {
    counts: HashMap<String, usize>,
    bytes: usize,
}

/// Counts by key (a text, or a prompt's wire form), cleared whole when full.
#[derive(Default)]
pub(crate) struct CountCache {
    inner: Mutex<Counts>,
}

impl CountCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many keys have their count cached.
    pub(crate) fn len(&self) -> usize {
        self.lock().counts.len()
    }

    fn insert(&self, key: &str, n: usize) {
        let mut c = self.lock();
        if c.counts.len() >= CACHE_ENTRIES || c.bytes + key.len() > CACHE_BYTES {
            c.counts.clear();
            c.bytes = 0;
        }
        if key.len() <= CACHE_BYTES && c.counts.insert(key.to_string(), n).is_none() {
            c.bytes += key.len();
        }
    }

    /// The counts of `keys`, in order: cached ones from the cache, each distinct other
    /// one by `fetch(i)` (`i` its first index in `keys`), concurrently, a few at a time.
    /// The first failure fails the batch.
    pub(crate) async fn counts<F, Fut>(
        &self,
        keys: &[String],
        fetch: F,
    ) -> Result<Vec<usize>, ModelError>
    where
        F: Fn(usize) -> Fut,
        Fut: Future<Output = Result<usize, ModelError>>,
    {
        let mut found: HashMap<&str, usize> = HashMap::new();
        let mut missing: Vec<usize> = Vec::new();
        let mut seen: HashSet<&str> = HashSet::new();
        {
            let cache = self.lock();
            for (i, k) in keys.iter().enumerate() {
                if !seen.insert(k) {
                    continue;
                }
                match cache.counts.get(k) {
                    Some(&n) => {
                        found.insert(k, n);
                    }
                    None => missing.push(i),
                }
            }
        }
        let mut fetched = futures::stream::iter(missing.into_iter().map(|i| {
            let fut = fetch(i);
            async move { Ok::<_, ModelError>((i, fut.await?)) }
        }))
        .buffer_unordered(BATCH_CONCURRENCY);
        while let Some(result) = fetched.next().await {
            let (i, n) = result?;
            if let Some(k) = keys.get(i) {
                self.insert(k, n);
                found.insert(k, n);
            }
        }
        Ok(keys
            .iter()
            .map(|k| found.get(k.as_str()).copied().unwrap_or_default())
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn asks_once_per_distinct_key_and_caches() {
        let cache = CountCache::default();
        let asked = AtomicUsize::new(0);
        let keys: Vec<String> = ["ab", "abc", "ab"].iter().map(|s| s.to_string()).collect();
        let fetch = |i: usize| {
            asked.fetch_add(1, Ordering::Relaxed);
            let n = keys[i].len();
            async move { Ok(n) }
        };
        assert_eq!(cache.counts(&keys, fetch).await.ok(), Some(vec![2, 3, 2]));
        assert_eq!(asked.load(Ordering::Relaxed), 2);
        assert_eq!(cache.counts(&keys, fetch).await.ok(), Some(vec![2, 3, 2]));
        assert_eq!((asked.load(Ordering::Relaxed), cache.len()), (2, 2));
    }
}
