//! Observers shared by the synthesis: a fan-out to several observers and a model-time
//! counter.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use synthkit::Observer;
use synthkit::SynthEvent;
use synthkit::observe::CallReport;

/// Sends every report to each observer, in order.
#[derive(Default)]
pub struct Fanout {
    observers: Vec<Arc<dyn Observer>>,
}

impl Fanout {
    /// Adds an observer.
    pub fn push(&mut self, observer: Arc<dyn Observer>) {
        self.observers.push(observer);
    }
}

impl Observer for Fanout {
    fn calls_planned(&self, total: usize) {
        for o in &self.observers {
            o.calls_planned(total);
        }
    }
    fn call_finished(&self, report: &CallReport<'_>) {
        for o in &self.observers {
            o.call_finished(report);
        }
    }
    fn event(&self, event: &SynthEvent) {
        for o in &self.observers {
            o.event(event);
        }
    }
}

/// Adds up the time spent in model calls.
#[derive(Debug, Default)]
pub struct ModelTime {
    micros: AtomicU64,
}

impl ModelTime {
    /// The total, in milliseconds.
    pub fn millis(&self) -> f64 {
        self.micros.load(Ordering::Relaxed) as f64 / 1000.0
    }
}

impl Observer for ModelTime {
    fn call_finished(&self, report: &CallReport<'_>) {
        let us = u64::try_from(report.elapsed.as_micros()).unwrap_or(u64::MAX);
        self.micros.fetch_add(us, Ordering::Relaxed);
    }
}
