//! Scale-out through Redis (feature `redis`): N replicas share one requests/tokens per
//! minute budget ([`RedisBudget`], a GCRA token bucket kept in Redis and updated by one
//! atomic Lua script) and one response cache ([`RedisCache`], entries with a TTL).
//!
//! **When Redis fails.** Both share one multiplexed connection and hold no lock across a
//! round trip, and each has a circuit breaker: after [`FAILURES_TO_OPEN`] (3) round trips
//! in a row fail (each within the 2 s response timeout), calls stop asking Redis for
//! [`RETRY_INTERVAL`] (5 s): the budget fails them at once with [`RedisUnavailable`], the
//! cache takes them as misses (and skips its writes); then one call tries again, and its
//! success closes the breaker. [`RedisBudget::health`] is `Err` while the budget's breaker
//! is open (the service's `/readyz` reports it).
//!
//! ```no_run
//! # async fn demo() -> Result<(), synthkit::layer::redis::RedisError> {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use synthkit::layer::redis::{RedisBudget, RedisCache, connect};
//! use synthkit::layer::stack::{CacheIdentity, ModelStack};
//! use synthkit::{model::ModelInfo, testing::ScriptedModel};
//!
//! let conn = connect("redis://127.0.0.1:6379/").await?;
//! let budget = RedisBudget::new(conn.clone(), "synthkit", 500, 200_000);
//! let cache = RedisCache::new(conn, "synthkit", Duration::from_secs(86_400));
//! let stack = ModelStack::builder(ScriptedModel::constant(ModelInfo::new("m"), "ok"))
//!     .shared_budget(Arc::new(budget))
//!     .cache(Arc::new(cache), CacheIdentity::new("scripted", ""))
//!     .build();
//! # let _ = stack; Ok(()) }
//! ```

mod breaker;
mod budget;
mod cache;

use std::time::Duration;

pub use breaker::{FAILURES_TO_OPEN, RETRY_INTERVAL, RedisUnavailable};
pub use budget::{BudgetStats, RedisBudget};
pub use cache::RedisCache;
pub use redis::aio::ConnectionManager;

/// Redis could not be reached or set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RedisError {
    /// Connecting to Redis, or its first `PING`, failed.
    #[error("cannot use Redis at {url}: {message}; check the Redis URL and that the server is up")]
    Connect {
        /// The URL, without its password.
        url: String,
        /// What went wrong.
        message: String,
    },
}

/// How long opening a connection to Redis may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one Redis command may take before it fails.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

/// Connects to Redis at `url` (`redis://[:password@]host:port/[db]`): a connection
/// manager that reconnects by itself, shared (cloned) by the budget and the cache.
pub async fn connect(url: &str) -> Result<ConnectionManager, RedisError> {
    let err = |e: redis::RedisError| RedisError::Connect {
        url: redact(url),
        message: redact_in(&e.to_string(), url),
    };
    let client = redis::Client::open(url).map_err(err)?;
    let config = redis::aio::ConnectionManagerConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT))
        .set_number_of_retries(2);
    let mut conn = client
        .get_connection_manager_with_config(config)
        .await
        .map_err(err)?;
    let _: String = redis::cmd("PING")
        .query_async(&mut conn)
        .await
        .map_err(err)?;
    Ok(conn)
}

/// `url` without its password.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://[redacted]@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_string(),
    }
}

/// `text` with any copy of `url`'s password removed.
fn redact_in(text: &str, url: &str) -> String {
    let password = url
        .split_once("://")
        .and_then(|(_, rest)| rest.rsplit_once('@'))
        .and_then(|(userinfo, _)| userinfo.split_once(':'))
        .map(|(_, p)| p)
        .filter(|p| !p.is_empty());
    match password {
        Some(p) => text.replace(p, "[redacted]"),
        None => text.to_string(),
    }
}

/// Logs a Redis failure: a warning the first time, then at debug level.
fn log_failure(first: &std::sync::atomic::AtomicBool, what: &str, error: &redis::RedisError) {
    if first.swap(false, std::sync::atomic::Ordering::Relaxed) {
        tracing::warn!(%error, "{what} (further failures are logged at debug level)");
    } else {
        tracing::debug!(%error, "{what}");
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("redis://:hunter2@10.0.0.5:6379/0"),
            "redis://[redacted]@10.0.0.5:6379/0"
        );
        assert_eq!(redact("redis://127.0.0.1/"), "redis://127.0.0.1/");
    }
}
