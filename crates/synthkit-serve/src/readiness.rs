//! `/readyz`'s state: the backend is asked on a timer by a task that [`crate::serve`] owns
//! (every [`ServiceLimits::readiness_interval`](crate::ServiceLimits), default 1 s), and a
//! probe reads the last answer. A slow provider therefore never makes a probe slow, and
//! probes never multiply the calls to the provider.
//!
//! [`Readiness`] (how to ask the backend) is the backend's own probe
//! ([`synthkit::backend::probe`]); this module only schedules it and keeps its answer.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Mutex, watch};
use tokio::time::MissedTickBehavior;
use tokio_util::task::AbortOnDropHandle;

use crate::backend::Readiness;

/// The backend's last known state.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackendState {
    /// Not asked yet (the first check runs as soon as the service starts).
    Unknown,
    /// It answered.
    Ready,
    /// It did not answer; why.
    Unavailable(String),
}

impl BackendState {
    /// Whether the backend answered.
    pub fn is_ready(&self) -> bool {
        matches!(self, BackendState::Ready)
    }
}

/// The readiness check, its HTTP client and its last answer.
pub struct ReadinessState {
    check: Readiness,
    client: reqwest::Client,
    state: watch::Sender<BackendState>,
    /// One check at a time, so that an older answer never overwrites a newer one.
    running: Mutex<()>,
}

impl ReadinessState {
    pub(crate) fn new(check: Readiness) -> Arc<Self> {
        let initial = match check {
            Readiness::Always => BackendState::Ready,
            _ => BackendState::Unknown,
        };
        // No pooled connection: each check opens its own, so a backend that went away is
        // seen at the next check rather than through a kept-alive connection.
        synthkit::tls::install_default_provider();
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .unwrap_or_default();
        Arc::new(Self {
            check,
            client,
            state: watch::channel(initial).0,
            running: Mutex::new(()),
        })
    }

    /// The last known state.
    pub fn current(&self) -> BackendState {
        self.state.borrow().clone()
    }

    /// Changes of the state, as they happen.
    pub fn subscribe(&self) -> watch::Receiver<BackendState> {
        self.state.subscribe()
    }

    /// Asks the backend now (after any check already running) and keeps the answer.
    pub async fn refresh(&self) -> BackendState {
        let _one = self.running.lock().await;
        let next = match self.check.check(&self.client).await {
            Ok(()) => BackendState::Ready,
            Err(reason) => BackendState::Unavailable(reason),
        };
        self.state.send_if_modified(|s| {
            let changed = *s != next;
            if changed {
                match &next {
                    BackendState::Unavailable(reason) => {
                        tracing::warn!(%reason, "the backend is not ready")
                    }
                    _ => tracing::info!("the backend is ready"),
                }
                *s = next.clone();
            }
            changed
        });
        next
    }

    /// The task refreshing the state every `every`, ended when the handle is dropped;
    /// `None` for a backend that is always ready.
    pub(crate) fn spawn_refresher(
        self: &Arc<Self>,
        every: Duration,
    ) -> Option<AbortOnDropHandle<()>> {
        if matches!(self.check, Readiness::Always) {
            return None;
        }
        let this = Arc::clone(self);
        let every = every.max(Duration::from_millis(10));
        Some(AbortOnDropHandle::new(tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                this.refresh().await;
            }
        })))
    }
}
