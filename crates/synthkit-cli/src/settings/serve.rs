//! What one `serve` runs, built from its flags once: [`ServeRun`]. Everything that can be
//! checked without the network is checked here (the keys file, the bind address against
//! the keys, the limits, the prices and the cap, the hosts and origins, the model setup
//! and its key); the verb opens the sharing (Redis), builds the backend and listens.

use std::net::SocketAddr;

use anyhow::Result;
use synthkit::cost::Prices;
use synthkit::layer::sharing::CacheLocation;
use synthkit_serve::{AccessPolicy, ApiKeys, ModelSetup, ServiceLimits};

use super::checks::CheckSettings;
use crate::flags::{LimitArgs, ServeArgs, usage};

/// One `synthkit serve`, as its flags ask for it (no `Debug`: it holds the API keys).
pub struct ServeRun<'a> {
    /// `--bind`.
    pub bind: SocketAddr,
    /// `--api-keys FILE`, read.
    pub keys: Option<ApiKeys>,
    /// The request limits of the service.
    pub limits: ServiceLimits,
    /// The prices every request is priced at, when given.
    pub prices: Option<Prices>,
    /// `--max-cost-per-request` (checked: prices given, a valid amount).
    pub max_cost_per_request: Option<f64>,
    /// `--allowed-host` and `--cors-origin`.
    pub access: AccessPolicy,
    /// A question's checks, with the flags (the backend's defaults applied by the verb).
    pub checks: CheckSettings,
    /// The model setup, its key checked (the stack is added once the sharing is open).
    pub setup: ModelSetup,
    /// Where replies are cached in this process (`--cache`, `--memory-cache`).
    pub cache: CacheLocation,
    /// Rates, retries and sharing: one budget for the process.
    pub model_limits: &'a LimitArgs,
    /// `--concurrency`: calls in flight of each request's synthesis.
    pub concurrency: usize,
}

impl<'a> ServeRun<'a> {
    /// The service `args` ask for; a bad keys file, an open public bind, a cap without
    /// prices, a bad host or origin, `--tokenizer` and a missing key refused.
    pub fn of(args: &'a ServeArgs) -> Result<Self> {
        let keys = match &args.access.api_keys {
            Some(path) => Some(ApiKeys::from_file(path).map_err(|e| usage(e.to_string()))?),
            None => None,
        };
        synthkit_serve::check_bind(
            args.bind,
            keys.as_ref(),
            args.access.allow_unauthenticated_public,
        )
        .map_err(|e| usage(e.to_string()))?;
        let limits = args.service.limits()?;
        let prices = super::cost::prices(&args.prices)?;
        match (prices, args.max_cost_per_request) {
            (None, Some(_)) => {
                return Err(usage(
                    "--max-cost-per-request needs the prices: give --price-input and --price-output (USD per million tokens), or --prices FILE",
                ));
            }
            (_, Some(cap)) => {
                synthkit::cost::checked_cap(cap)
                    .map_err(|e| usage(format!("{e} (--max-cost-per-request)")))?;
            }
            _ => {}
        }
        let access = access_policy(args)?;
        let m = &args.model_args;
        if m.tokenizer.is_some() {
            return Err(usage(
                "serve counts tokens with the server's /tokenize where it has one, else with the model's tokenizer; --tokenizer is for ask and summarize",
            ));
        }
        let setup = super::model_setup(m, true)?;
        super::check_key(m, &setup)?;
        let cache = if let Some(path) = &args.cache.cache {
            CacheLocation::Sqlite(path.clone())
        } else if args.cache.memory_cache {
            CacheLocation::Memory {
                max_bytes: args.cache.memory_cache_bytes,
            }
        } else {
            CacheLocation::None
        };
        Ok(Self {
            bind: args.bind,
            keys,
            limits,
            prices,
            max_cost_per_request: args.max_cost_per_request,
            access,
            checks: CheckSettings::for_questions(&args.checks),
            setup,
            cache,
            model_limits: &args.limits,
            concurrency: args.concurrency,
        })
    }
}

/// The extra hosts and the web origins the flags accept.
fn access_policy(args: &ServeArgs) -> Result<AccessPolicy> {
    let mut access = AccessPolicy::new();
    for host in &args.access.allowed_host {
        access = access
            .allow_host(host)
            .map_err(|e| usage(format!("{e} (--allowed-host)")))?;
    }
    for origin in &args.access.cors_origin {
        access = access
            .allow_origin(origin)
            .map_err(|e| usage(format!("{e} (--cors-origin)")))?;
    }
    Ok(access)
}
