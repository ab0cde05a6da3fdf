//! The limit, retry and sharing flags of every verb that calls a model (`ask`,
//! `summarize`, `batch`, `eval`, `serve`): one definition, checked once, read into the
//! library's retry policy and [`SharingOptions`] (where the budget and the cache live).

#[cfg(feature = "redis")]
use std::time::Duration;

use anyhow::{Result, anyhow};
use clap::Args;
use synthkit::layer::retry::RetryPolicy;
use synthkit::layer::sharing::{
    CacheLocation, DEFAULT_REDIS_PREFIX, DEFAULT_REDIS_TTL_SECS, Sharing, SharingError,
    SharingOptions,
};

use super::values::{positive_seconds, usage};

/// The default of `--retries`.
pub const DEFAULT_RETRIES: u32 = RetryPolicy::DEFAULT_MAX_ATTEMPTS;

/// Rate budgets and retries.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Limits")]
pub struct LimitArgs {
    /// Requests per minute to the model. Every send counts, retries included; calls wait
    /// for their turn. With `serve --redis-url`, one budget for every replica.
    #[arg(hide_short_help = true, long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub rpm: Option<u32>,
    /// Tokens per minute to the model: every send (retries included) is charged its prompt
    /// tokens plus its whole output reserve (--num-output). With `serve --redis-url`, one
    /// budget for every replica.
    #[arg(hide_short_help = true, long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub tpm: Option<u32>,
    /// The most sends of one model call, the first included: 429s, overloads, 5xx,
    /// timeouts and dropped connections are sent again (exponential backoff with full
    /// jitter, honouring Retry-After) until this many sends; 1 sends each call once.
    #[arg(hide_short_help = true, long, value_name = "N", default_value_t = DEFAULT_RETRIES, value_parser = clap::value_parser!(u32).range(1..))]
    pub retries: u32,
    /// The most seconds one model call may take from its first send, waits for the rate
    /// budget and Retry-After included: no send is started that would wait past it.
    #[arg(hide_short_help = true, long, value_name = "SECS", default_value_t = RetryPolicy::DEFAULT_MAX_ELAPSED.as_secs_f64())]
    pub retry_max_secs: f64,
    /// Redis for sharing: the --rpm/--tpm budget and the response cache are shared by
    /// every process given the same URL and --redis-prefix (`ask`, `batch`, `serve`
    /// replicas, Python), unless --cache (or `serve --memory-cache`) keeps the cache local.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "URL",
        env = "SYNTHKIT_REDIS_URL",
        help_heading = "Sharing"
    )]
    pub redis_url: Option<String>,
    /// The prefix of every Redis key.
    #[arg(hide_short_help = true, long, value_name = "PREFIX", default_value = DEFAULT_REDIS_PREFIX, help_heading = "Sharing")]
    pub redis_prefix: String,
    /// Seconds a reply stays in the Redis cache.
    #[arg(hide_short_help = true, long, value_name = "SECS", default_value_t = DEFAULT_REDIS_TTL_SECS, help_heading = "Sharing")]
    pub cache_ttl: u64,
}

impl LimitArgs {
    /// The retry policy the flags ask for.
    pub fn retry_policy(&self) -> Result<RetryPolicy> {
        let total = positive_seconds("--retry-max-secs", self.retry_max_secs)?;
        Ok(RetryPolicy::default()
            .with_max_attempts(self.retries)
            .with_max_elapsed(total))
    }

    /// `--rpm` and `--tpm` as numbers, 0 for none.
    pub fn rates(&self) -> (u32, u32) {
        (self.rpm.unwrap_or(0), self.tpm.unwrap_or(0))
    }

    /// Where the budget and the cache live: the rates (in Redis with --redis-url); the
    /// cache `local` when the verb keeps one (--cache FILE), else in Redis with
    /// --redis-url, else none.
    pub fn sharing_options(&self, local: CacheLocation) -> Result<SharingOptions> {
        let (rpm, tpm) = self.rates();
        let cache = match local {
            CacheLocation::None => self.redis_cache(),
            local => local,
        };
        let opts = SharingOptions::default()
            .with_rates(rpm, tpm)
            .with_cache(cache);
        let opts = match &self.redis_url {
            None => opts,
            #[cfg(feature = "redis")]
            Some(url) => opts.with_redis(url.clone(), Some(self.redis_prefix.clone())),
            #[cfg(not(feature = "redis"))]
            Some(_) => {
                return Err(usage(
                    "this synthkit was built without Redis support (cargo feature `redis`): leave out --redis-url (and SYNTHKIT_REDIS_URL), or reinstall with `cargo install synthkit-cli` (default features) or `--features redis`",
                ));
            }
        };
        opts.check()
            .map_err(|e| usage(format!("{e} (--redis-url)")))?;
        Ok(opts)
    }

    /// [`LimitArgs::sharing_options`], opened: the Redis connection, the cache file.
    pub async fn open_sharing(&self, local: CacheLocation) -> Result<Sharing> {
        self.sharing_options(local)?
            .open()
            .await
            .map_err(|e| match e {
                SharingError::Cache(e) => usage(format!("{e} (--cache)")),
                other => anyhow!(other),
            })
    }

    /// The cache in Redis when --redis-url is given (and the build has Redis).
    fn redis_cache(&self) -> CacheLocation {
        #[cfg(feature = "redis")]
        if self.redis_url.is_some() {
            return CacheLocation::Redis {
                ttl: Duration::from_secs(self.cache_ttl),
            };
        }
        CacheLocation::None
    }
}
