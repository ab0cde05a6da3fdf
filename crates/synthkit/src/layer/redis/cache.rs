//! [`RedisCache`]: the response cache in Redis, one JSON value per key with a TTL.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use crate::layer::cache::{CachedReply, ResponseCache};
use futures::future::BoxFuture;
use redis::AsyncCommands;
use redis::aio::ConnectionManager;

use super::breaker::Breaker;
use super::log_failure;

/// A [`ResponseCache`] in Redis: replies stored as JSON under `{prefix}:cache:{key}`,
/// expiring after the TTL. Like every store it never fails a call: a Redis error is
/// logged and taken as a miss (or a write that did not happen), and while Redis is failing
/// (its circuit breaker open, see [the module](super)) calls do not even ask it.
pub struct RedisCache {
    conn: ConnectionManager,
    breaker: Breaker,
    prefix: String,
    ttl_secs: u64,
    first_failure: AtomicBool,
}

debug_fields!(RedisCache {
    prefix: prefix,
    ttl_secs: ttl_secs,
    ..
});

impl RedisCache {
    /// A cache on `conn` whose keys start with `prefix` and live `ttl` (at least 1 s).
    pub fn new(conn: ConnectionManager, prefix: impl Into<String>, ttl: Duration) -> Self {
        Self {
            conn,
            breaker: Breaker::default(),
            prefix: prefix.into(),
            ttl_secs: ttl.as_secs().max(1),
            first_failure: AtomicBool::new(true),
        }
    }

    fn key(&self, key: &str) -> String {
        format!("{}:cache:{key}", self.prefix)
    }
}

impl ResponseCache for RedisCache {
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Option<CachedReply>> {
        Box::pin(async move {
            let permit = self.breaker.allow().ok()?;
            let mut conn = self.conn.clone();
            let found: Option<String> = match conn.get(self.key(key)).await {
                Ok(v) => {
                    permit.success();
                    v
                }
                Err(e) => {
                    permit.failure();
                    log_failure(&self.first_failure, "Redis cache read failed", &e);
                    return None;
                }
            };
            let text = found?;
            match serde_json::from_str(&text) {
                Ok(reply) => Some(reply),
                Err(e) => {
                    tracing::warn!(error = %e, "a Redis cache entry does not parse; asking the model");
                    None
                }
            }
        })
    }

    fn put<'a>(&'a self, key: &'a str, value: &'a CachedReply) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let Ok(text) = serde_json::to_string(value) else {
                return;
            };
            let Ok(permit) = self.breaker.allow() else {
                return;
            };
            let mut conn = self.conn.clone();
            let stored: Result<(), redis::RedisError> =
                conn.set_ex(self.key(key), text, self.ttl_secs).await;
            match stored {
                Ok(()) => permit.success(),
                Err(e) => {
                    permit.failure();
                    log_failure(&self.first_failure, "Redis cache write failed", &e);
                }
            }
        })
    }
}
