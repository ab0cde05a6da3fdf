//! `synthkit serve`: the HTTP service (crate `synthkit-serve`) behind command-line flags.
//!
//! The flags build one model stack for the process (backend, limiter, retries, cache; with
//! `--redis-url`, a budget and a cache shared by every replica), then serve it until
//! SIGTERM or Ctrl-C, draining requests in flight for up to `--shutdown-grace` seconds.

use anyhow::{Context, Result, anyhow};
use synthkit::layer::sharing::CacheLocation;
use synthkit_serve::{AccessPolicy, ApiKeys, AppState, Backend, Metrics, ModelSetup};

use crate::error::usage;
use crate::flags::ServeArgs;
use crate::settings::CheckSettings;

/// Runs the service until SIGTERM or Ctrl-C.
pub fn run(args: ServeArgs) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow!("cannot start the async runtime: {e}"))?;
    runtime.block_on(serve(args))
}

async fn serve(args: ServeArgs) -> Result<()> {
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
    let prices = crate::settings::cost::prices(&args.prices)?;
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
    let access = access_policy(&args)?;
    let backend = backend_config(&args).await?;
    let checks = CheckSettings::for_questions(&args.checks).for_backend(backend.backend_name());
    let metrics = Metrics::new();
    let backend = Backend::build(backend, metrics.clone()).await?;
    let model = backend.model().info();
    let state = AppState::new(backend, limits, keys, metrics)
        .with_access(access)
        .with_checks(checks);
    let state = match (prices, args.max_cost_per_request) {
        (Some(p), cap) => state.with_prices(p, cap),
        (None, _) => state,
    };
    let listener = tokio::net::TcpListener::bind(args.bind)
        .await
        .with_context(|| format!("cannot listen on {}", args.bind))?;
    eprintln!(
        "synthkit serve: listening on http://{} (model {}, window {} tokens){}",
        listener.local_addr().unwrap_or(args.bind),
        // The server's model id: no escape of its may reach the terminal or the log.
        synthkit::text::printable::printable(&model.name),
        model.context_window,
        if args.access.api_keys.is_some() {
            ", API keys required"
        } else {
            ""
        }
    );
    synthkit_serve::serve(listener, state, synthkit_serve::shutdown_signal()).await?;
    eprintln!("synthkit serve: stopped");
    Ok(())
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

/// The backend, limits, retries and cache the flags ask for.
async fn backend_config(args: &ServeArgs) -> Result<ModelSetup> {
    let m = &args.model_args;
    if m.tokenizer.is_some() {
        return Err(usage(
            "serve counts tokens with the server's /tokenize where it has one, else with the model's tokenizer; --tokenizer is for ask and summarize",
        ));
    }
    let setup = crate::settings::model_setup(m, true)?;
    crate::settings::check_key(m, &setup)?;
    let local = if let Some(path) = &args.cache.cache {
        CacheLocation::Sqlite(path.clone())
    } else if args.cache.memory_cache {
        CacheLocation::Memory {
            max_bytes: args.cache.memory_cache_bytes,
        }
    } else {
        CacheLocation::None
    };
    let sharing = args.limits.open_sharing(local).await?;
    let stack = crate::settings::stack_options(&args.limits, Some(args.concurrency), 1, sharing)?;
    Ok(setup.with_stack(stack))
}
