//! Per-call bookkeeping: the timeouts of one call on tokio's clock, and the model name the
//! server answers with.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use secrecy::SecretString;
use tokio::time::Instant;

use super::errors;
use crate::model::{ModelError, TimeoutKind};

/// The model the server named in its latest reply, shared with the streams it returns.
#[derive(Debug, Clone, Default)]
pub struct ServedModel(Arc<Mutex<Option<String>>>);

impl ServedModel {
    /// Records `name` (a no-op when it is the one already recorded).
    pub(crate) fn set(&self, name: &str) {
        let mut slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.as_deref() != Some(name) {
            *slot = Some(name.to_string());
        }
    }

    /// The latest name recorded.
    pub(crate) fn get(&self) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The timeouts of one call, measured from its start on tokio's clock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallClock {
    start: Instant,
    request: Duration,
    connect: Duration,
}

impl CallClock {
    /// A clock started now for a call with these request and connect timeouts.
    pub(crate) fn start(request: Duration, connect: Duration) -> Self {
        Self {
            start: Instant::now(),
            request,
            connect,
        }
    }

    /// What is left of the request timeout.
    pub(crate) fn request_left(&self) -> Duration {
        self.request.saturating_sub(self.start.elapsed())
    }

    /// The error when the request timeout fires now.
    pub(crate) fn request_timed_out(&self) -> ModelError {
        ModelError::Timeout {
            kind: TimeoutKind::Request,
            waited: self.start.elapsed(),
            limit: self.request,
        }
    }

    /// The error for a failed request: a connect timeout, the request timeout, or a
    /// connection failure.
    pub(crate) fn transport(&self, e: &reqwest::Error, key: Option<&SecretString>) -> ModelError {
        errors::from_reqwest(e, key, |connecting| {
            if connecting {
                ModelError::Timeout {
                    kind: TimeoutKind::Connect,
                    waited: self.start.elapsed(),
                    limit: self.connect,
                }
            } else {
                self.request_timed_out()
            }
        })
    }
}
