//! synthkit as an HTTP service.
//!
//! - `POST /v1/synthesize`: a query, the retrieved nodes, a mode and options; the answer
//!   as JSON (`synthkit::Response`), or as server-sent events with `"stream": true`
//!   ([`sse`]).
//! - `GET /healthz`, `GET /readyz` (the backend answers), `GET /metrics` (Prometheus
//!   text, [`metrics`]), `GET /openapi.json` ([`openapi`]).
//!
//! The backend and its model stack ([`backend::Backend`], the library's
//! `synthkit::layer::stack::ModelStack`) are built once and shared by every request: one
//! adaptive limit on calls in flight, one rate budget, one retry policy and one response
//! cache per process, or, with the `redis` feature, a budget and a cache per fleet of
//! replicas. Each request gets its
//! own `Synthesizer` on that model. Nothing a request starts outlives its connection: a
//! client that disconnects drops the synthesis and its model calls.
//!
//! ```no_run
//! # async fn demo() -> Result<(), synthkit_serve::ServeError> {
//! use synthkit_serve::{AppState, Backend, BackendConfig, Metrics, ServiceLimits};
//!
//! let metrics = Metrics::new();
//! let backend = Backend::build(BackendConfig::extractive(), metrics.clone()).await?;
//! let state = AppState::new(backend, ServiceLimits::default(), None, metrics);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! synthkit_serve::serve(listener, state, synthkit_serve::shutdown_signal()).await
//! # }
//! ```

pub mod api;
pub mod auth;
pub mod backend;
pub mod error;
mod handlers;
pub mod meter;
pub mod metrics;
pub mod openapi;
pub mod sse;
pub mod state;

use std::future::Future;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};

pub use auth::{ApiKeys, check_bind};
pub use backend::{Backend, BackendConfig, BackendKind, CacheChoice, Readiness};
pub use error::{ApiError, ServeError};
pub use handlers::SYNTHESIZE_PATH;
pub use metrics::Metrics;
pub use state::{AppState, ServiceLimits};
/// Scale-out through Redis (feature `redis`): the library's shared budget and cache.
#[cfg(feature = "redis")]
pub use synthkit::layer::redis;

/// How long connections may take to close after the requests still in flight at the
/// shutdown deadline were cancelled.
const CLOSE_AFTER_CANCEL: Duration = Duration::from_secs(5);

/// The service's routes on `state`.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route(SYNTHESIZE_PATH, post(handlers::synthesize))
        .route("/healthz", get(handlers::healthz))
        .route("/readyz", get(handlers::readyz))
        .route("/metrics", get(handlers::metrics))
        .route("/openapi.json", get(handlers::openapi))
        .with_state(state)
}

/// Serves the routes on `listener` until `shutdown` resolves, then shuts down
/// gracefully: stops accepting, lets the requests in flight finish for up to the
/// state's [`ServiceLimits::shutdown_grace`], then cancels the rest (a JSON request gets
/// a 503 `shutting_down` error, a stream an `error` event) and returns.
pub async fn serve<F>(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: F,
) -> Result<(), ServeError>
where
    F: Future<Output = ()> + Send + 'static,
{
    let draining = state.inner.draining.clone();
    let signal = async move {
        shutdown.await;
        tracing::info!("shutting down: no new connections, draining requests in flight");
        draining.cancel();
    };
    let server = axum::serve(listener, router(state.clone())).with_graceful_shutdown(signal);
    let server = std::future::IntoFuture::into_future(server);
    tokio::pin!(server);
    tokio::select! {
        r = &mut server => return Ok(r?),
        () = state.inner.draining.cancelled() => {}
    }
    let grace = state.inner.limits.shutdown_grace;
    if let Ok(r) = tokio::time::timeout(grace, &mut server).await {
        return Ok(r?);
    }
    let left = state
        .inner
        .metrics
        .requests_in_flight
        .load(std::sync::atomic::Ordering::Relaxed);
    tracing::warn!(
        requests = left,
        grace_secs = grace.as_secs_f64(),
        "shutdown grace is over: cancelling the requests still in flight"
    );
    state.inner.cancel.cancel();
    match tokio::time::timeout(CLOSE_AFTER_CANCEL, &mut server).await {
        Ok(r) => Ok(r?),
        Err(_) => {
            tracing::warn!("connections still open after cancelling: stopping anyway");
            Ok(())
        }
    }
}

/// Resolves on Ctrl-C or, on Unix, SIGTERM: the `shutdown` future for [`serve`].
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
