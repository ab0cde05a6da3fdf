//! Hints for a run that will keep the user waiting: a small window the chunks fill many
//! times over, or a server that reads prompts slowly. One line, at most once a run, from
//! the plan's figures (before any call) or from the first call's pace, naming what would
//! help: fewer chunks (`--top-k`), fewer evidence tokens.
//!
//! The figures are the plan's ([`crate::plan::Estimate`]): later calls are upper bounds, so
//! the time said is "about", never a promise.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use synthkit::Observer;
use synthkit::observe::CallReport;

use crate::plan::Estimate;
use crate::progress::Progress;
use crate::say::note;
use crate::spinner::thousands;

/// A window at most this large is small: a handful of chunks fill it.
pub const SMALL_WINDOW: usize = 8192;

/// A run is slow when its calls after the first need about this many seconds or more.
pub const SLOW_SECS: f64 = 60.0;

/// The chunks a window of this run holds in one call (at least 1): what `--top-k` to
/// suggest.
fn chunks_per_call(estimate: &Estimate, chunks: usize) -> usize {
    (chunks / estimate.calls.max(1)).max(1)
}

/// What would help a run of `chunks` chunks whose window holds `fit` of them: fewer
/// chunks, and, with evidence on (`evidence_tokens`), fewer evidence tokens.
fn what_helps(fit: usize, chunks: usize, evidence_tokens: Option<usize>) -> String {
    let mut ways = Vec::new();
    if chunks > fit {
        ways.push(format!("--top-k {fit}"));
    }
    if let Some(tokens) = evidence_tokens {
        ways.push(format!(
            "a smaller --evidence-tokens (now {})",
            thousands(tokens)
        ));
    }
    if ways.is_empty() {
        return String::new();
    }
    format!("; fewer answer sooner: {}", ways.join(", or "))
}

/// The line for a small window the kept chunks fill several times over, if it is one: a
/// question run (its chunks ranked) of several calls to a model whose window is at most
/// [`SMALL_WINDOW`] tokens. `evidence_tokens`: the evidence budget, when evidence is on.
pub fn window_hint(
    estimate: &Estimate,
    window: usize,
    chunks: usize,
    evidence_tokens: Option<usize>,
) -> Option<String> {
    if estimate.calls < 2 || window > SMALL_WINDOW || chunks < 2 {
        return None;
    }
    let fit = chunks_per_call(estimate, chunks);
    let up_to = if estimate.exact { "" } else { "up to " };
    Some(format!(
        "the {chunks} chunks kept fill the model's {}-token window {up_to}{} times ({up_to}{} calls, {} prompt tokens){}",
        thousands(window),
        estimate.calls,
        estimate.calls,
        thousands(estimate.prompt_tokens),
        what_helps(fit, chunks, evidence_tokens),
    ))
}

/// The line for a slow server, if it is one: the first call's prompt tokens over its
/// time, and the planned prompt tokens left, need about [`SLOW_SECS`] or more.
pub fn pace_hint(
    estimate: &Estimate,
    chunks: usize,
    evidence_tokens: Option<usize>,
    first_prompt_tokens: usize,
    first_secs: f64,
) -> Option<String> {
    if estimate.calls < 2 || first_prompt_tokens == 0 || first_secs <= 0.0 {
        return None;
    }
    let rate = first_prompt_tokens as f64 / first_secs;
    let left = estimate.prompt_tokens.saturating_sub(first_prompt_tokens);
    let secs = left as f64 / rate;
    if secs < SLOW_SECS {
        return None;
    }
    let fit = chunks_per_call(estimate, chunks);
    let up_to = if estimate.exact { "" } else { "up to " };
    Some(format!(
        "the server read the first prompt at about {} tokens a second: the {up_to}{} calls left need about {} more{}",
        thousands(rate.round() as usize),
        estimate.calls - 1,
        duration(secs),
        what_helps(fit, chunks, evidence_tokens),
    ))
}

/// `40 s`, `3 min`, `2 h`.
fn duration(secs: f64) -> String {
    match secs {
        s if s < 120.0 => format!("{} s", s.round() as u64),
        s if s < 7200.0 => format!("{} min", (s / 60.0).round() as u64),
        s => format!("{} h", (s / 3600.0).round() as u64),
    }
}

/// Watches the first call and says [`pace_hint`]'s line once, when it has one.
pub struct SlowServer {
    estimate: Estimate,
    chunks: usize,
    evidence_tokens: Option<usize>,
    quiet: bool,
    seen: AtomicBool,
    /// The run's bar, hidden while the line is written.
    progress: Arc<Progress>,
}

impl SlowServer {
    /// Watches a run of `estimate` over `chunks` chunks (`evidence_tokens`: the evidence
    /// budget, when evidence is on), drawn by `progress`.
    pub fn new(
        estimate: Estimate,
        chunks: usize,
        evidence_tokens: Option<usize>,
        quiet: bool,
        progress: Arc<Progress>,
    ) -> Self {
        Self {
            estimate,
            chunks,
            evidence_tokens,
            quiet,
            seen: AtomicBool::new(false),
            progress,
        }
    }
}

impl Observer for SlowServer {
    fn call_finished(&self, report: &CallReport<'_>) {
        if self.seen.swap(true, Ordering::Relaxed) {
            return;
        }
        let line = pace_hint(
            &self.estimate,
            self.chunks,
            self.evidence_tokens,
            usize::try_from(report.usage.prompt_tokens).unwrap_or(usize::MAX),
            report.elapsed.as_secs_f64(),
        );
        if let Some(line) = line {
            self.progress.suspend(|| note(self.quiet, &line));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(calls: usize, prompt_tokens: usize) -> Estimate {
        Estimate {
            calls,
            prompt_tokens,
            exact: true,
            ..Estimate::default()
        }
    }

    #[test]
    fn a_small_window_filled_often_is_said_with_the_top_k_that_fits() {
        let line = window_hint(&planned(4, 15_200), 4096, 20, None).unwrap();
        assert!(line.contains("4,096-token window 4 times"), "{line}");
        assert!(line.contains("--top-k 5"), "{line}");
        assert!(!line.contains("evidence"), "{line}");
        // Evidence on: its budget is named too; a plan of upper bounds says so.
        let mut bound = planned(4, 15_200);
        bound.exact = false;
        let line = window_hint(&bound, 4096, 20, Some(2000)).unwrap();
        assert!(line.contains("up to 4 times"), "{line}");
        assert!(line.contains("--evidence-tokens (now 2,000)"), "{line}");
        // One call, or a large window: nothing to say.
        assert_eq!(window_hint(&planned(1, 3_000), 4096, 20, None), None);
        assert_eq!(window_hint(&planned(4, 15_200), 32_768, 20, None), None);
    }

    #[test]
    fn a_slow_first_call_is_said_when_the_rest_would_take_a_minute() {
        // 3,000 tokens in 50 s: 60 a second; 6,000 left: 100 s.
        let line = pace_hint(&planned(3, 9_000), 21, None, 3_000, 50.0).unwrap();
        assert!(line.contains("about 60 tokens a second"), "{line}");
        assert!(line.contains("2 calls left need about 100 s"), "{line}");
        assert!(line.contains("--top-k 7"), "{line}");
        // A fast server: nothing to say.
        assert_eq!(pace_hint(&planned(4, 12_000), 20, None, 3_000, 1.0), None);
        // One call: nothing left to wait for.
        assert_eq!(pace_hint(&planned(1, 3_000), 20, None, 3_000, 50.0), None);
        assert_eq!(duration(4_000.0), "67 min");
    }
}
