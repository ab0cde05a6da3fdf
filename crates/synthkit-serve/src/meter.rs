//! The service's [`Metrics`] as the model stack's [`CallMeter`]: every attempt at the
//! backend is a call in flight and one latency observation, failures and retries are
//! counted.

use std::sync::atomic::Ordering;
use std::time::Duration;

use synthkit::layer::meter::CallMeter;
use synthkit::layer::retry::RetryEvent;
use synthkit::model::ModelError;

use crate::metrics::Metrics;

impl CallMeter for Metrics {
    fn attempt_started(&self) {
        self.calls_in_flight.fetch_add(1, Ordering::Relaxed);
    }

    fn attempt_finished(&self, elapsed: Duration, error: Option<&ModelError>) {
        self.calls_in_flight.fetch_sub(1, Ordering::Relaxed);
        self.call_duration.observe(elapsed);
        if error.is_some() {
            self.model_errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn retrying(&self, _event: &RetryEvent<'_>) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }
}
