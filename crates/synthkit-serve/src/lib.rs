//! synthkit as an HTTP service.
//!
//! - `POST /v1/synthesize`: a query, the retrieved nodes, a mode and options; the answer
//!   as JSON (`synthkit::Response`), or as server-sent events with `"stream": true`
//!   ([`sse`]).
//! - `GET /healthz`, `GET /readyz` (the backend answered its last check, [`readiness`]),
//!   `GET /metrics` (Prometheus text, [`metrics`]), `GET /openapi.json` ([`openapi`]).
//!
//! Hostile clients are held off by each connection's limits ([`server`]: a connection
//! cap, header and idle timeouts, header limits), by the layers in front of the routes
//! ([`stack`], where their order is written down: request limits, load shedding, keys,
//! cross-site protection from [`access`]) and by [`limits::ServiceLimits`], where every
//! bound has its default.
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
//! use synthkit_serve::{AppState, Backend, Metrics, ModelSetup, ServiceLimits};
//!
//! let metrics = Metrics::new();
//! let backend = Backend::build(ModelSetup::extractive(), metrics.clone()).await?;
//! let state = AppState::new(backend, ServiceLimits::default(), None, metrics);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! synthkit_serve::serve(listener, state, synthkit_serve::shutdown_signal()).await
//! # }
//! ```

pub mod access;
pub mod accounting;
pub mod api;
pub mod auth;
pub mod backend;
mod body;
mod cost;
pub mod error;
mod handlers;
pub mod limits;
pub mod meter;
pub mod metrics;
pub mod openapi;
pub mod readiness;
mod report_route;
pub mod reports;
pub mod server;
pub mod sse;
pub mod stack;
pub mod state;
mod trace_context;

pub use access::AccessPolicy;
pub use api::SYNTHESIZE_PATH;
pub use auth::{ApiKeys, KeyId, KeysError, check_bind};
pub use backend::{Backend, ModelSetup, Readiness, StackOptions};
pub use error::{ApiError, ServeError};
pub use limits::ServiceLimits;
pub use metrics::Metrics;
pub use readiness::BackendState;
pub use server::{connection_cap, serve};
pub use stack::router;
pub use state::AppState;
/// Scale-out through Redis (feature `redis`): the library's shared budget and cache.
#[cfg(feature = "redis")]
pub use synthkit::layer::redis;

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
