//! A model with seeded, uneven latencies that records when every call ran.
//!
//! Each call sleeps `latency × m`, where `m` is log-normal with mean 1
//! (`exp(σZ − σ²/2)`, `Z` standard normal) and `σ` is `--latency-spread`. `Z` is drawn from
//! the seed and a hash of the call's prompt, not from the order of the calls, so the same
//! call waits as long in every run and on every commit whose prompts are the same: two
//! schedulers are compared on one workload.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use synthkit::model::{
    Completion, CompletionStream, LanguageModel, ModelFuture, ModelLayer, ModelRequest,
    one_delta_stream,
};

/// One call as it ran: its place in the synthesis and when it started and ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CallTiming {
    /// The tree level (0 for modes without levels).
    pub level: u32,
    /// The call's position within its level.
    pub index: usize,
    /// When the call started, from the start of the run.
    pub start: Duration,
    /// When the call ended, from the start of the run.
    pub end: Duration,
}

impl CallTiming {
    /// How long the call took.
    pub fn duration(&self) -> Duration {
        self.end.saturating_sub(self.start)
    }
}

/// The latency of a call: a base latency spread log-normally, seeded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Latency {
    /// The mean latency of a call.
    pub base: Duration,
    /// `σ` of the log-normal multiplier (0: every call takes `base`).
    pub spread: f64,
    /// The seed mixed into every call's draw.
    pub seed: u64,
}

impl Latency {
    /// The latency of the call whose prompt is `prompt`.
    pub fn of(&self, prompt: &str) -> Duration {
        if self.spread <= 0.0 {
            return self.base;
        }
        let z = standard_normal(fnv1a(prompt.as_bytes()) ^ self.seed);
        let multiplier = (self.spread * z - self.spread * self.spread / 2.0).exp();
        self.base.mul_f64(multiplier)
    }
}

/// FNV-1a, 64 bits: a stable hash of the prompt (std's hasher is seeded per process).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// splitmix64: one well-mixed word from another.
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A uniform draw in (0, 1].
fn unit(x: u64) -> f64 {
    ((x >> 11) as f64 + 1.0) / (1u64 << 53) as f64
}

/// A standard normal draw from `key` (Box-Muller).
fn standard_normal(key: u64) -> f64 {
    let a = splitmix(key);
    let b = splitmix(a);
    (-2.0 * unit(a).ln()).sqrt() * (std::f64::consts::TAU * unit(b)).cos()
}

/// Wraps a model: every call waits its [`Latency`] first, and is recorded.
pub struct TimedModel {
    inner: Arc<dyn LanguageModel>,
    latency: Latency,
    run: Mutex<Run>,
}

struct Run {
    started: Instant,
    calls: Vec<CallTiming>,
}

impl std::fmt::Debug for TimedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimedModel")
            .field("latency", &self.latency)
            .finish_non_exhaustive()
    }
}

impl TimedModel {
    /// `inner` behind `latency`.
    pub fn new(inner: Arc<dyn LanguageModel>, latency: Latency) -> Self {
        Self {
            inner,
            latency,
            run: Mutex::new(Run {
                started: Instant::now(),
                calls: Vec::new(),
            }),
        }
    }

    /// Forgets the recorded calls; times count from now.
    pub fn start_run(&self) {
        if let Ok(mut run) = self.run.lock() {
            run.started = Instant::now();
            run.calls.clear();
        }
    }

    /// The calls recorded since [`TimedModel::start_run`].
    pub fn calls(&self) -> Vec<CallTiming> {
        self.run.lock().map(|r| r.calls.clone()).unwrap_or_default()
    }

    fn since_start(&self) -> Duration {
        self.run
            .lock()
            .map(|r| r.started.elapsed())
            .unwrap_or_default()
    }
}

/// The call's level and position (the one place that reads the synthesis's step).
fn position(request: &ModelRequest) -> (u32, usize) {
    let step = request.step();
    (step.level, step.index)
}

impl ModelLayer for TimedModel {
    type Inner = dyn LanguageModel;

    fn inner(&self) -> &(dyn LanguageModel + 'static) {
        &*self.inner
    }

    fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, Completion> {
        Box::pin(async move {
            let start = self.since_start();
            tokio::time::sleep(self.latency.of(&request.prompt.to_text())).await;
            let reply = self.inner().complete(request).await;
            let end = self.since_start();
            let (level, index) = position(request);
            if let Ok(mut run) = self.run.lock() {
                run.calls.push(CallTiming {
                    level,
                    index,
                    start,
                    end,
                });
            }
            reply
        })
    }

    /// One delta after the timed call, so a streamed call waits its latency too.
    fn stream<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, CompletionStream> {
        Box::pin(async move { Ok(one_delta_stream(ModelLayer::complete(self, request).await?)) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_multiplier_has_mean_one_and_is_stable() {
        let latency = Latency {
            base: Duration::from_millis(100),
            spread: 1.0,
            seed: 7,
        };
        let n = 20_000;
        let total: f64 = (0..n)
            .map(|i| latency.of(&format!("prompt {i}")).as_secs_f64())
            .sum();
        let mean = total / f64::from(n);
        assert!((mean - 0.1).abs() < 0.01, "{mean}");
        assert_eq!(latency.of("same"), latency.of("same"));
        let other = Latency { seed: 8, ..latency };
        assert_ne!(latency.of("same"), other.of("same"));
    }

    #[test]
    fn no_spread_is_the_base() {
        let latency = Latency {
            base: Duration::from_millis(50),
            spread: 0.0,
            seed: 1,
        };
        assert_eq!(latency.of("anything"), Duration::from_millis(50));
    }
}
