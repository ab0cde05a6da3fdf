//! [`AppState`]: what every request shares (the model stack, the limits, the keys, the
//! metrics and the shutdown signals), and [`ServiceLimits`].

use std::sync::Arc;
use std::time::Duration;

use synthkit::model::LanguageModel;
use tokio_util::sync::CancellationToken;

use crate::auth::ApiKeys;
use crate::backend::{Backend, Readiness};
use crate::metrics::Metrics;

/// Limits on what one request may ask, and the shutdown grace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServiceLimits {
    /// The largest request body, in bytes (413 above it).
    pub max_body_bytes: usize,
    /// The most nodes in one request (422 above it).
    pub max_nodes: usize,
    /// The most time one synthesis may take (504, or an `error` event, after it).
    pub request_timeout: Duration,
    /// The most model calls of one request in flight at once (a request's `concurrency`
    /// is capped at it; also its default).
    pub max_request_concurrency: usize,
    /// On shutdown, how long requests in flight may still run before they are
    /// cancelled.
    pub shutdown_grace: Duration,
}

impl ServiceLimits {
    /// The default largest body: 10 MiB.
    pub const DEFAULT_MAX_BODY_BYTES: usize = 10 * 1024 * 1024;
    /// The default most nodes: 10,000.
    pub const DEFAULT_MAX_NODES: usize = 10_000;
    /// The default time limit: 300 s.
    pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(300);
    /// The default calls in flight per request: 8.
    pub const DEFAULT_MAX_REQUEST_CONCURRENCY: usize = 8;
    /// The default shutdown grace: 30 s.
    pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

    /// Sets the largest body.
    pub fn with_max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// Sets the most nodes.
    pub fn with_max_nodes(mut self, nodes: usize) -> Self {
        self.max_nodes = nodes;
        self
    }

    /// Sets the per-request time limit.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sets the most calls in flight per request (at least 1).
    pub fn with_max_request_concurrency(mut self, n: usize) -> Self {
        self.max_request_concurrency = n.max(1);
        self
    }

    /// Sets the shutdown grace.
    pub fn with_shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }
}

impl Default for ServiceLimits {
    fn default() -> Self {
        Self {
            max_body_bytes: Self::DEFAULT_MAX_BODY_BYTES,
            max_nodes: Self::DEFAULT_MAX_NODES,
            request_timeout: Self::DEFAULT_REQUEST_TIMEOUT,
            max_request_concurrency: Self::DEFAULT_MAX_REQUEST_CONCURRENCY,
            shutdown_grace: Self::DEFAULT_SHUTDOWN_GRACE,
        }
    }
}

/// The state shared by every request. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) model: Arc<dyn LanguageModel>,
    pub(crate) readiness: Readiness,
    pub(crate) limits: ServiceLimits,
    pub(crate) keys: Option<ApiKeys>,
    pub(crate) metrics: Arc<Metrics>,
    /// Set when shutdown starts: no new connections, `/readyz` says `draining`.
    pub(crate) draining: CancellationToken,
    /// Set when the grace has passed: requests still in flight end with `shutting_down`.
    pub(crate) cancel: CancellationToken,
    pub(crate) client: reqwest::Client,
}

impl AppState {
    /// State for `stack`, with `limits`, optional API keys and the metrics the stack was
    /// built with.
    pub fn new(
        backend: Backend,
        limits: ServiceLimits,
        keys: Option<ApiKeys>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                model: backend.model(),
                readiness: backend.readiness,
                limits,
                keys,
                metrics,
                draining: CancellationToken::new(),
                cancel: CancellationToken::new(),
                client: reqwest::Client::new(),
            }),
        }
    }

    /// The process's metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.inner.metrics
    }

    /// The limits.
    pub fn limits(&self) -> ServiceLimits {
        self.inner.limits
    }

    /// Whether shutdown has started.
    pub fn is_draining(&self) -> bool {
        self.inner.draining.is_cancelled()
    }
}
