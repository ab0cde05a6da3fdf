//! Process-wide metrics in the Prometheus text format (`GET /metrics`).
//!
//! | metric | type | what |
//! |---|---|---|
//! | `synthkit_http_requests_total{path,status}` | counter | answered requests |
//! | `synthkit_http_requests_in_flight` | gauge | synthesis requests being served |
//! | `synthkit_http_request_duration_seconds` | histogram | synthesis request latency (to the last byte of a stream) |
//! | `synthkit_http_connections_open` | gauge | client connections open now |
//! | `synthkit_http_connections_idle_closed_total` | counter | connections closed for sending no request in time |
//! | `synthkit_model_calls_total` | counter | model calls finished (cache hits included) |
//! | `synthkit_model_prompt_tokens_total` | counter | prompt tokens of those calls |
//! | `synthkit_model_completion_tokens_total` | counter | completion tokens of those calls |
//! | `synthkit_model_cached_prompt_tokens_total` | counter | of the prompt tokens, those the server read from its prompt cache |
//! | `synthkit_model_cost_usd_total` | counter | what the answered requests cost at the service's prices, in USD (0 without prices) |
//! | `synthkit_model_calls_in_flight` | gauge | calls at the backend now |
//! | `synthkit_model_call_duration_seconds` | histogram | one backend attempt, to the end of its reply |
//! | `synthkit_model_errors_total` | counter | backend attempts that failed |
//! | `synthkit_model_retries_total` | counter | attempts sent again by the retry layer |
//! | `synthkit_context_corrections_total` | counter | prompts re-packed after the server said too long |
//! | `synthkit_truncated_replies_total` | counter | replies cut at the output limit |
//! | `synthkit_cache_hits_total`, `synthkit_cache_misses_total` | counter | response cache |

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use synthkit::layer::cache::CacheCounters;
use synthkit::observe::CallReport;
use synthkit::{Observer, SynthEvent};

/// Bucket upper bounds, in seconds, of both latency histograms.
pub const BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// A latency histogram with the fixed [`BUCKETS`].
#[derive(Debug, Default)]
pub struct Histogram {
    counts: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&self, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        for (bound, count) in BUCKETS.iter().zip(&self.counts) {
            if secs <= *bound {
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (bound, count) in BUCKETS.iter().zip(&self.counts) {
            let _ = writeln!(
                out,
                "{name}_bucket{{le=\"{bound}\"}} {}",
                count.load(Ordering::Relaxed)
            );
        }
        let count = self.count();
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {count}");
    }
}

/// Every metric of the process. Shared (`Arc`) by the router, the per-request observers
/// and the model layers.
#[derive(Debug, Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(String, u16), u64>>,
    /// Synthesis requests being served.
    pub requests_in_flight: AtomicI64,
    /// Synthesis request latency.
    pub request_duration: Histogram,
    /// Client connections open now.
    pub connections_open: AtomicI64,
    /// Connections closed for sending no request within the header or keep-alive timeout.
    pub connections_idle_closed: AtomicU64,
    /// Model calls finished (cache hits included).
    pub calls: AtomicU64,
    /// Prompt tokens of finished calls.
    pub prompt_tokens: AtomicU64,
    /// Completion tokens of finished calls.
    pub completion_tokens: AtomicU64,
    /// Of the prompt tokens, those the server read from its prompt cache.
    pub cached_prompt_tokens: AtomicU64,
    /// What the answered requests cost at the service's prices, in millionths of a USD
    /// (shown in USD).
    pub cost_micro_usd: AtomicU64,
    /// Calls at the backend now.
    pub calls_in_flight: AtomicI64,
    /// One backend attempt's latency.
    pub call_duration: Histogram,
    /// Backend attempts that failed.
    pub model_errors: AtomicU64,
    /// Retries.
    pub retries: AtomicU64,
    /// Context corrections.
    pub corrections: AtomicU64,
    /// Replies cut at the output limit.
    pub truncated: AtomicU64,
    cache: OnceLock<CacheCounters>,
}

impl Metrics {
    /// Empty metrics.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Adds what a request cost, in USD (a negative or non-finite amount adds nothing).
    pub fn add_cost(&self, usd: f64) {
        if usd.is_finite() && usd > 0.0 {
            // Saturating: `as` stops at u64::MAX for an amount beyond it.
            saturating_add(&self.cost_micro_usd, (usd * 1e6).round() as u64);
        }
    }

    /// Reads cache hits and misses from `counters` (the model stack's cache layer).
    pub fn watch_cache(&self, counters: CacheCounters) {
        let _ = self.cache.set(counters);
    }

    /// Counts one answered request.
    pub fn count_request(&self, path: &str, status: u16) {
        if let Ok(mut map) = self.requests.lock() {
            *map.entry((path.to_string(), status)).or_default() += 1;
        }
    }

    /// Answered requests with this path and status.
    pub fn requests(&self, path: &str, status: u16) -> u64 {
        self.requests
            .lock()
            .ok()
            .and_then(|m| m.get(&(path.to_string(), status)).copied())
            .unwrap_or(0)
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        out.push_str("# HELP synthkit_http_requests_total Answered HTTP requests.\n");
        out.push_str("# TYPE synthkit_http_requests_total counter\n");
        if let Ok(map) = self.requests.lock() {
            for ((path, status), n) in map.iter() {
                let _ = writeln!(
                    out,
                    "synthkit_http_requests_total{{path=\"{path}\",status=\"{status}\"}} {n}"
                );
            }
        }
        gauge(
            &mut out,
            "synthkit_http_requests_in_flight",
            "Synthesis requests being served.",
            self.requests_in_flight.load(Ordering::Relaxed),
        );
        self.request_duration.render(
            &mut out,
            "synthkit_http_request_duration_seconds",
            "Synthesis request latency, to the last byte of a stream.",
        );
        gauge(
            &mut out,
            "synthkit_http_connections_open",
            "Client connections open now.",
            self.connections_open.load(Ordering::Relaxed),
        );
        let (hits, misses) = self
            .cache
            .get()
            .map(|c| c.snapshot())
            .map_or((0, 0), |s| (s.hits, s.misses));
        let counters: [(&str, &str, u64); 11] = [
            (
                "synthkit_http_connections_idle_closed_total",
                "Connections closed for sending no request within the header or keep-alive timeout.",
                self.connections_idle_closed.load(Ordering::Relaxed),
            ),
            (
                "synthkit_model_calls_total",
                "Model calls finished, cache hits included.",
                self.calls.load(Ordering::Relaxed),
            ),
            (
                "synthkit_model_prompt_tokens_total",
                "Prompt tokens of finished model calls.",
                self.prompt_tokens.load(Ordering::Relaxed),
            ),
            (
                "synthkit_model_completion_tokens_total",
                "Completion tokens of finished model calls.",
                self.completion_tokens.load(Ordering::Relaxed),
            ),
            (
                "synthkit_model_cached_prompt_tokens_total",
                "Of the prompt tokens of finished model calls, those the server read from its prompt cache.",
                self.cached_prompt_tokens.load(Ordering::Relaxed),
            ),
            (
                "synthkit_model_errors_total",
                "Backend attempts that failed.",
                self.model_errors.load(Ordering::Relaxed),
            ),
            (
                "synthkit_model_retries_total",
                "Backend attempts sent again by the retry layer.",
                self.retries.load(Ordering::Relaxed),
            ),
            (
                "synthkit_context_corrections_total",
                "Prompts re-packed after the server rejected them as too long.",
                self.corrections.load(Ordering::Relaxed),
            ),
            (
                "synthkit_truncated_replies_total",
                "Model replies cut at the output limit.",
                self.truncated.load(Ordering::Relaxed),
            ),
            (
                "synthkit_cache_hits_total",
                "Model calls answered from the response cache.",
                hits,
            ),
            (
                "synthkit_cache_misses_total",
                "Model calls the response cache did not have.",
                misses,
            ),
        ];
        for (name, help, value) in counters {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP synthkit_model_cost_usd_total What the answered requests cost at the service's prices (--price-input and kin), in USD.\n# TYPE synthkit_model_cost_usd_total counter\nsynthkit_model_cost_usd_total {}",
            self.cost_micro_usd.load(Ordering::Relaxed) as f64 / 1e6
        );
        gauge(
            &mut out,
            "synthkit_model_calls_in_flight",
            "Model calls at the backend now.",
            self.calls_in_flight.load(Ordering::Relaxed),
        );
        self.call_duration.render(
            &mut out,
            "synthkit_model_call_duration_seconds",
            "One backend attempt, to the end of its reply.",
        );
        out
    }
}

fn gauge(out: &mut String, name: &str, help: &str, value: i64) {
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
    );
}

/// Adds `n` to `counter`, stopping at `u64::MAX` (token counts are the model server's,
/// so a hostile one could otherwise wrap the counter to a small number).
fn saturating_add(counter: &AtomicU64, n: u64) {
    let _ = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
        Some(c.saturating_add(n))
    });
}

/// The per-request observer: adds a synthesis's calls, tokens, corrections and truncated
/// replies to the process's [`Metrics`].
#[derive(Debug, Clone)]
pub struct MetricsObserver(pub Arc<Metrics>);

impl Observer for MetricsObserver {
    fn call_finished(&self, report: &CallReport<'_>) {
        let m = &self.0;
        m.calls.fetch_add(1, Ordering::Relaxed);
        saturating_add(&m.prompt_tokens, report.usage.prompt_tokens);
        saturating_add(&m.completion_tokens, report.usage.completion_tokens);
        saturating_add(&m.cached_prompt_tokens, report.usage.cached_prompt_tokens);
    }

    fn event(&self, event: &SynthEvent) {
        match event {
            SynthEvent::ContextCorrected { .. } => {
                self.0.corrections.fetch_add(1, Ordering::Relaxed);
            }
            SynthEvent::ReplyTruncated { .. } => {
                self.0.truncated.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_is_cumulative() {
        let m = Metrics::new();
        m.call_duration.observe(Duration::from_millis(40));
        m.call_duration.observe(Duration::from_secs(2));
        m.count_request("/v1/synthesize", 200);
        let text = m.render();
        assert!(text.contains("synthkit_model_call_duration_seconds_bucket{le=\"0.05\"} 1"));
        assert!(text.contains("synthkit_model_call_duration_seconds_bucket{le=\"2.5\"} 2"));
        assert!(text.contains("synthkit_model_call_duration_seconds_count 2"));
        assert!(
            text.contains("synthkit_http_requests_total{path=\"/v1/synthesize\",status=\"200\"} 1")
        );
    }
}
