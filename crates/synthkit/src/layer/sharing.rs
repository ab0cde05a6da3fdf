//! Where a stack's rate budget and response cache live: in this process, in a file, or in
//! Redis, shared by every process given the same URL and prefix.
//!
//! Every front end that lets its user choose (`synthkit serve`, the Python package) reads
//! its options into one [`SharingOptions`], opens it once ([`SharingOptions::open`]: the
//! Redis connection, the SQLite file) and applies the [`Sharing`] to each stack it builds
//! ([`Sharing::apply`]), so the choices mean the same everywhere:
//!
//! - **rates** (requests and tokens per minute, 0: none): with a Redis URL, one budget
//!   for every process on `{prefix}:budget:*` (`redis::RedisBudget`); without,
//!   the in-process limiter ([`super::limit::Limiter`]);
//! - **cache** ([`CacheLocation`]): none, in memory (bounded in bytes), an SQLite file
//!   (feature `sqlite-cache`), or Redis (feature `redis`, entries under
//!   `{prefix}:cache:*` expiring after a TTL; bounded by that TTL and the Redis server's
//!   own `maxmemory`).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), synthkit::layer::sharing::SharingError> {
//! use synthkit::layer::sharing::{CacheLocation, SharingOptions};
//! use synthkit::layer::stack::{CacheIdentity, ModelStack};
//! use synthkit::{model::ModelInfo, testing::ScriptedModel};
//!
//! let sharing = SharingOptions::default()
//!     .with_rates(600, 100_000)
//!     .with_cache(CacheLocation::memory())
//!     .open()
//!     .await?;
//! let backend = ScriptedModel::constant(ModelInfo::new("m"), "ok");
//! let stack = sharing
//!     .apply(ModelStack::builder(backend), CacheIdentity::new("scripted", ""))
//!     .build();
//! assert_eq!(sharing.budget_kind(), "local");
//! # let _ = stack; Ok(()) }
//! ```

use std::fmt;
#[cfg(feature = "sqlite-cache")]
use std::path::PathBuf;
use std::sync::Arc;
#[cfg(feature = "redis")]
use std::time::Duration;

use super::budget::RateBudget;
use super::cache::{MemoryCache, ResponseCache};
use super::stack::{CacheIdentity, StackBuilder};

/// The Redis key prefix when none is given.
pub const DEFAULT_REDIS_PREFIX: &str = "synthkit";

/// How long a reply stays in the Redis cache when no TTL is given: a day.
pub const DEFAULT_REDIS_TTL_SECS: u64 = 86_400;

/// Where the response cache lives.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CacheLocation {
    /// No cache.
    #[default]
    None,
    /// In this process, for its life: at most `max_bytes` of keys and replies (the
    /// entries not used recently are evicted first).
    Memory {
        /// The size bound in bytes.
        max_bytes: u64,
    },
    /// An SQLite file, kept between runs and shareable between processes of one machine.
    #[cfg(feature = "sqlite-cache")]
    Sqlite(PathBuf),
    /// Redis (the [`SharingOptions`]' URL and prefix), shared by every process.
    #[cfg(feature = "redis")]
    Redis {
        /// How long an entry lives (at least a second).
        ttl: Duration,
    },
}

impl CacheLocation {
    /// In memory, with [`MemoryCache::DEFAULT_MAX_BYTES`] (64 MiB) at most.
    pub fn memory() -> Self {
        Self::Memory {
            max_bytes: MemoryCache::DEFAULT_MAX_BYTES,
        }
    }

    /// In Redis, entries living [`DEFAULT_REDIS_TTL_SECS`].
    #[cfg(feature = "redis")]
    pub fn redis() -> Self {
        Self::Redis {
            ttl: Duration::from_secs(DEFAULT_REDIS_TTL_SECS),
        }
    }

    /// A short name for reports: `none`, `memory`, `sqlite` or `redis`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Memory { .. } => "memory",
            #[cfg(feature = "sqlite-cache")]
            Self::Sqlite(_) => "sqlite",
            #[cfg(feature = "redis")]
            Self::Redis { .. } => "redis",
        }
    }
}

/// What a front end asks for: the rates, Redis, the cache. Build it with the `with_`
/// methods, then [`SharingOptions::open`] it.
#[derive(Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SharingOptions {
    /// Requests per minute (0: none).
    pub requests_per_minute: u32,
    /// Tokens per minute, each call charged its prompt plus its whole output reserve
    /// (0: none).
    pub tokens_per_minute: u32,
    /// Redis (`redis://[:password@]host:port/[db]`): the rates become one budget for
    /// every process given the same URL and prefix.
    pub redis_url: Option<String>,
    /// The prefix of every Redis key (default [`DEFAULT_REDIS_PREFIX`]).
    pub redis_prefix: Option<String>,
    /// The response cache.
    pub cache: CacheLocation,
}

impl fmt::Debug for SharingOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharingOptions")
            .field("requests_per_minute", &self.requests_per_minute)
            .field("tokens_per_minute", &self.tokens_per_minute)
            .field(
                "redis_url",
                &self.redis_url.as_deref().map(crate::secret::redact_url),
            )
            .field("redis_prefix", &self.redis_prefix)
            .field("cache", &self.cache)
            .finish()
    }
}

impl SharingOptions {
    /// Sets the requests and tokens per minute (0: none).
    pub fn with_rates(mut self, requests_per_minute: u32, tokens_per_minute: u32) -> Self {
        self.requests_per_minute = requests_per_minute;
        self.tokens_per_minute = tokens_per_minute;
        self
    }

    /// Shares the rates (and a `CacheLocation::Redis` cache) through Redis at `url`,
    /// under keys starting with `prefix` (`None`: [`DEFAULT_REDIS_PREFIX`]).
    pub fn with_redis(mut self, url: impl Into<String>, prefix: Option<String>) -> Self {
        self.redis_url = Some(url.into());
        self.redis_prefix = prefix;
        self
    }

    setters! {
        /// Sets where the response cache lives.
        pub fn with_cache(cache: CacheLocation) => cache;
    }

    /// Whether a rate budget was asked for.
    pub(crate) fn has_rates(&self) -> bool {
        self.requests_per_minute > 0 || self.tokens_per_minute > 0
    }

    /// The Redis key prefix.
    pub fn prefix(&self) -> &str {
        self.redis_prefix.as_deref().unwrap_or(DEFAULT_REDIS_PREFIX)
    }

    /// Checks what can be checked without opening anything.
    pub fn check(&self) -> Result<(), SharingError> {
        if self.redis_prefix.as_deref().is_some_and(str::is_empty) {
            return Err(SharingError::EmptyPrefix);
        }
        #[cfg(feature = "redis")]
        if matches!(self.cache, CacheLocation::Redis { .. }) && self.redis_url.is_none() {
            return Err(SharingError::RedisCacheWithoutUrl);
        }
        if self.redis_url.is_some() && !self.has_rates() && !cache_in_redis(&self.cache) {
            return Err(SharingError::NothingToShare);
        }
        #[cfg(not(feature = "redis"))]
        if self.redis_url.is_some() {
            return Err(SharingError::NoRedisSupport);
        }
        Ok(())
    }

    /// Opens the cache and connects to Redis (one connection, reconnecting by itself,
    /// for the budget and the cache). Makes no model call.
    pub async fn open(&self) -> Result<Sharing, SharingError> {
        self.check()?;
        #[cfg(feature = "redis")]
        let conn = match &self.redis_url {
            Some(url) => Some(super::redis::connect(url).await?),
            None => None,
        };
        let budget: Option<Arc<dyn RateBudget>> = {
            #[cfg(feature = "redis")]
            match (&conn, self.has_rates()) {
                (Some(conn), true) => Some(Arc::new(super::redis::RedisBudget::new(
                    conn.clone(),
                    self.prefix(),
                    self.requests_per_minute,
                    self.tokens_per_minute,
                ))),
                _ => None,
            }
            #[cfg(not(feature = "redis"))]
            None
        };
        let cache: Option<Arc<dyn ResponseCache>> = match &self.cache {
            CacheLocation::None => None,
            CacheLocation::Memory { max_bytes } => {
                Some(Arc::new(MemoryCache::with_max_bytes(*max_bytes)))
            }
            #[cfg(feature = "sqlite-cache")]
            CacheLocation::Sqlite(path) => Some(Arc::new(super::cache::SqliteCache::open(path)?)),
            #[cfg(feature = "redis")]
            CacheLocation::Redis { ttl } => match &conn {
                Some(conn) => Some(Arc::new(super::redis::RedisCache::new(
                    conn.clone(),
                    self.prefix(),
                    *ttl,
                ))),
                None => return Err(SharingError::RedisCacheWithoutUrl),
            },
        };
        Ok(Sharing {
            rates: (self.requests_per_minute, self.tokens_per_minute),
            budget,
            cache,
            cache_kind: self.cache.kind(),
        })
    }
}

/// Whether the cache lives in Redis.
fn cache_in_redis(cache: &CacheLocation) -> bool {
    #[cfg(feature = "redis")]
    if matches!(cache, CacheLocation::Redis { .. }) {
        return true;
    }
    let _ = cache;
    false
}

/// Why the options cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SharingError {
    /// A Redis cache was asked for without a Redis URL.
    #[error(
        "a cache in Redis needs a Redis URL: give the URL, or keep the cache in memory or in a file"
    )]
    RedisCacheWithoutUrl,
    /// A Redis URL was given with neither rates nor a Redis cache to share.
    #[error(
        "a Redis URL shares the rate budget (requests or tokens per minute) and a cache in Redis: give one of them, or leave out the URL"
    )]
    NothingToShare,
    /// The Redis key prefix is empty.
    #[error("the Redis key prefix must not be empty")]
    EmptyPrefix,
    /// This build has no Redis support.
    #[cfg(not(feature = "redis"))]
    #[error("this synthkit was built without Redis support (cargo feature `redis`)")]
    NoRedisSupport,
    /// Redis could not be reached.
    #[cfg(feature = "redis")]
    #[error(transparent)]
    Redis(#[from] super::redis::RedisError),
    /// The cache file could not be opened.
    #[error(transparent)]
    Cache(#[from] super::cache::CacheError),
}

/// The opened budget and cache; apply them to each stack ([`Sharing::apply`]). Cheap to
/// clone: clones share the budget, the connection and the cache.
#[derive(Clone)]
pub struct Sharing {
    rates: (u32, u32),
    budget: Option<Arc<dyn RateBudget>>,
    cache: Option<Arc<dyn ResponseCache>>,
    cache_kind: &'static str,
}

debug_fields!(Sharing {
    rates: rates,
    budget: budget_kind(),
    cache: cache_kind
});

impl Default for Sharing {
    /// No budget and no cache.
    fn default() -> Self {
        Self {
            rates: (0, 0),
            budget: None,
            cache: None,
            cache_kind: "none",
        }
    }
}

impl Sharing {
    /// The in-process rates, requests and tokens per minute (0: none), where no shared
    /// budget replaces them.
    pub fn with_rates(mut self, requests_per_minute: u32, tokens_per_minute: u32) -> Self {
        self.rates = (requests_per_minute, tokens_per_minute);
        self
    }

    /// A budget of your own (shared between processes) in place of the rates.
    pub fn with_budget(mut self, budget: Arc<dyn RateBudget>) -> Self {
        self.budget = Some(budget);
        self
    }

    /// A cache store of your own (its kind in reports: `custom`).
    pub fn with_cache(mut self, store: Arc<dyn ResponseCache>) -> Self {
        self.cache = Some(store);
        self.cache_kind = "custom";
        self
    }

    /// `builder` with the budget (shared, or the in-process rates) and the cache, whose
    /// keys carry `identity` (what the backend's replies depend on).
    pub fn apply(&self, builder: StackBuilder, identity: CacheIdentity) -> StackBuilder {
        let mut builder = match &self.budget {
            Some(b) => builder.shared_budget(Arc::clone(b)),
            None => builder.rates_per_minute(self.rates.0, self.rates.1),
        };
        if let Some(store) = &self.cache {
            builder = builder.cache(Arc::clone(store), identity);
        }
        builder
    }

    /// The shared budget, when the rates are shared (Redis).
    pub fn shared_budget(&self) -> Option<&Arc<dyn RateBudget>> {
        self.budget.as_ref()
    }

    /// The cache store, when there is one.
    pub fn cache(&self) -> Option<&Arc<dyn ResponseCache>> {
        self.cache.as_ref()
    }

    /// `none`, `local` (this process's limiter) or the shared budget's name (`redis`).
    pub fn budget_kind(&self) -> &str {
        match &self.budget {
            Some(b) => b.name(),
            None if self.rates != (0, 0) => "local",
            None => "none",
        }
    }

    /// The cache's kind: `none`, `memory`, `sqlite`, `redis` or `custom`.
    pub fn cache_kind(&self) -> &'static str {
        self.cache_kind
    }
}
