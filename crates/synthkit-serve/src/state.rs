//! [`AppState`]: what every request shares (the model stack, the limits, the keys, the
//! access policy, the metrics, readiness and the shutdown signals).

use std::sync::Arc;

use synthkit::model::LanguageModel;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::access::AccessPolicy;
use crate::auth::ApiKeys;
use crate::backend::Backend;
pub use crate::limits::ServiceLimits;
use crate::metrics::Metrics;
use crate::readiness::{BackendState, ReadinessState};
use crate::reports::ReportStore;

/// The state shared by every request. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Clone)]
pub(crate) struct Inner {
    pub(crate) model: Arc<dyn LanguageModel>,
    pub(crate) readiness: Arc<ReadinessState>,
    /// The budget shared with other replicas: `/readyz` asks its health.
    pub(crate) shared_budget: Option<Arc<dyn synthkit::layer::budget::RateBudget>>,
    pub(crate) limits: ServiceLimits,
    pub(crate) keys: Option<ApiKeys>,
    pub(crate) access: Arc<AccessPolicy>,
    pub(crate) metrics: Arc<Metrics>,
    /// Set when shutdown starts: `/readyz` says `draining`, new syntheses are refused.
    pub(crate) draining: CancellationToken,
    /// Set when the grace has passed: requests still in flight end with `shutting_down`.
    pub(crate) cancel: CancellationToken,
    /// Notified when the last synthesis request in flight ends.
    pub(crate) idle: Arc<Notify>,
    /// The HTML reports kept for `GET /v1/report/{id}`.
    pub(crate) reports: Arc<ReportStore>,
    /// Evidence first and the policy for unsupported answers, unless a request says.
    pub(crate) checks: synthkit_frontend::AnswerChecks,
    /// The prices responses are priced at, and the cap of every request
    /// ([`AppState::with_prices`]).
    pub(crate) prices: Option<synthkit::cost::Prices>,
    pub(crate) max_cost_per_request: Option<f64>,
}

impl AppState {
    /// State for `backend`, with `limits`, optional API keys and the metrics its stack
    /// was built with; the requests' answer checks are the backend's defaults (a model:
    /// evidence on, abstain; the extractive backend: evidence off, warn:
    /// [`synthkit_frontend::AnswerChecks::for_questions_to`]).
    pub fn new(
        backend: Backend,
        limits: ServiceLimits,
        keys: Option<ApiKeys>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                model: backend.model(),
                readiness: ReadinessState::new(backend.readiness),
                shared_budget: backend.shared_budget,
                limits,
                keys,
                access: Arc::new(AccessPolicy::default()),
                metrics,
                draining: CancellationToken::new(),
                cancel: CancellationToken::new(),
                idle: Arc::new(Notify::new()),
                reports: Arc::new(ReportStore::default()),
                checks: synthkit_frontend::AnswerChecks::for_questions_to(backend.name),
                prices: None,
                max_cost_per_request: None,
            }),
        }
    }

    /// The same state with `checks` as the requests' defaults (evidence first and the
    /// policy for unsupported answers; default the backend's,
    /// [`synthkit_frontend::AnswerChecks::for_questions_to`]).
    /// Set it before serving.
    pub fn with_checks(self, checks: synthkit_frontend::AnswerChecks) -> Self {
        let mut inner = (*self.inner).clone();
        inner.checks = checks;
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The same state with responses priced at `prices` (their `usage.cost_usd`, and the
    /// metric `synthkit_model_cost_usd_total`) and every request held to
    /// `max_cost_per_request` (a request's `max_cost` may only lower it). Set it before
    /// serving.
    pub fn with_prices(
        self,
        prices: synthkit::cost::Prices,
        max_cost_per_request: Option<f64>,
    ) -> Self {
        let mut inner = (*self.inner).clone();
        inner.prices = Some(prices);
        inner.max_cost_per_request = max_cost_per_request;
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The same state with the `Host` names and web origins of `access` accepted (see
    /// [`crate::access`]). Set it before serving.
    pub fn with_access(self, access: AccessPolicy) -> Self {
        let mut inner = (*self.inner).clone();
        inner.access = Arc::new(access);
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The backend's last known state, as `/readyz` answers it: unavailable while the
    /// shared budget's store is failing (its [`health`](synthkit::layer::budget::RateBudget::health)),
    /// else the backend's last check.
    pub fn readiness(&self) -> BackendState {
        if let Some(budget) = &self.inner.shared_budget
            && let Err(reason) = budget.health()
        {
            return BackendState::Unavailable(format!("the shared budget: {reason}"));
        }
        self.inner.readiness.current()
    }

    /// Asks the backend now and keeps the answer (the service also does so every
    /// [`ServiceLimits::readiness_interval`] while it serves).
    pub async fn refresh_readiness(&self) -> BackendState {
        self.inner.readiness.refresh().await
    }

    /// Changes of the backend's state, as they happen.
    pub fn readiness_changes(&self) -> watch::Receiver<BackendState> {
        self.inner.readiness.subscribe()
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
