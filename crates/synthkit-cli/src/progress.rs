//! The progress bar: shown on standard error once more than one model call is planned,
//! never when standard error is not a terminal or with `--quiet`.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use synthkit::Observer;
use synthkit::call::CallReport;

/// An [`Observer`] driving an indicatif bar: `calls_planned` sets its length,
/// `call_finished` advances it.
pub struct Progress {
    bar: ProgressBar,
    enabled: bool,
    shown: AtomicBool,
}

impl Progress {
    /// A bar that draws only if `enabled` and standard error is a terminal.
    pub fn new(enabled: bool) -> Self {
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::hidden());
        let style = ProgressStyle::with_template(
            "{spinner} {msg} [{bar:30}] {pos}/{len} calls ({elapsed})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        bar.set_style(style);
        bar.set_message("synthesizing");
        Self {
            bar,
            enabled: enabled && std::io::stderr().is_terminal(),
            shown: AtomicBool::new(false),
        }
    }

    /// Removes the bar from the terminal (before an answer is printed).
    pub fn clear(&self) {
        if self.bar.is_finished() {
            return;
        }
        self.bar.disable_steady_tick();
        self.bar.finish_and_clear();
    }
}

impl Observer for Progress {
    fn calls_planned(&self, total: usize) {
        self.bar.set_length(total as u64);
        if total > 1
            && self.enabled
            && !self.shown.swap(true, Ordering::Relaxed)
            && !self.bar.is_finished()
        {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
            self.bar.enable_steady_tick(Duration::from_millis(120));
        }
    }

    fn call_finished(&self, _report: &CallReport<'_>) {
        self.bar.inc(1);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}
