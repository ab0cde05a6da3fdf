//! `synthkit serve`: the HTTP service (crate `synthkit-serve`) behind command-line flags.
//!
//! The flags build one model stack for the process (backend, limiter, retries, cache; with
//! `--redis-url`, a budget and a cache shared by every replica), then serve it until
//! SIGTERM or Ctrl-C, draining requests in flight for up to `--shutdown-grace` seconds.
//! What the flags ask for is built and checked by [`crate::settings::ServeRun`]; this
//! verb opens the sharing, builds the backend and listens.

use anyhow::{Context, Result, anyhow};
use synthkit_serve::{AppState, Backend, Metrics};

use crate::settings::ServeRun;

/// Runs the service until SIGTERM or Ctrl-C.
pub fn run(run: ServeRun<'_>) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow!("cannot start the async runtime: {e}"))?;
    runtime.block_on(serve(run))
}

async fn serve(run: ServeRun<'_>) -> Result<()> {
    let sharing = run.model_limits.open_sharing(run.cache.clone()).await?;
    let stack =
        crate::settings::stack_options(run.model_limits, Some(run.concurrency), 1, sharing)?;
    let setup = run.setup.with_stack(stack);
    let checks = run.checks.for_backend(setup.backend_name());
    let metrics = Metrics::new();
    let backend = Backend::build(setup, metrics.clone()).await?;
    let model = backend.model().info();
    let keyed = run.keys.is_some();
    let state = AppState::new(backend, run.limits, run.keys, metrics)
        .with_access(run.access)
        .with_checks(checks);
    let state = match (run.prices, run.max_cost_per_request) {
        (Some(p), cap) => state.with_prices(p, cap),
        (None, _) => state,
    };
    let listener = tokio::net::TcpListener::bind(run.bind)
        .await
        .with_context(|| format!("cannot listen on {}", run.bind))?;
    eprintln!(
        "synthkit serve: listening on http://{} (model {}, window {} tokens){}",
        listener.local_addr().unwrap_or(run.bind),
        // The server's model id: no escape of its may reach the terminal or the log.
        synthkit::text::printable::printable(&model.name),
        model.context_window,
        if keyed { ", API keys required" } else { "" }
    );
    synthkit_serve::serve(listener, state, synthkit_serve::shutdown_signal()).await?;
    eprintln!("synthkit serve: stopped");
    Ok(())
}
