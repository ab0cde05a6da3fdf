//! The progress bar: shown on standard error once more than one model call is planned,
//! never when standard error is not a terminal or with `--quiet`.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use synthkit::observe::CallReport;
use synthkit::{Observer, SynthEvent};

use crate::plan::Estimate;

/// What the bar knows beyond its position.
#[derive(Debug, Default)]
struct State {
    /// The calls counted up front ([`Progress::fix_total`]), if they were.
    planned: Option<usize>,
    /// The bar's length.
    len: usize,
    /// The largest total the library announced (the calls it has started or packed).
    announced: usize,
    /// The run announced more calls than planned: the bar follows the library from then on.
    overrun: bool,
    /// Tree levels counted up front, and the level being summarised (1-based).
    levels: Option<u32>,
    level: u32,
}

impl State {
    fn message(&self) -> String {
        let mut msg = match self.levels {
            Some(n) => format!("level {} of ~{}", self.level, n.max(self.level)),
            None => "synthesizing".to_string(),
        };
        if self.overrun {
            msg.push_str(" (more calls than planned)");
        }
        msg
    }
}

/// An [`Observer`] driving an indicatif bar. Its length is the number of calls counted
/// before the run ([`Progress::fix_total`]) and does not grow with the library's
/// `calls_planned` reports, unless the run announces more calls than that; without an
/// up-front count it follows those reports. `call_finished` advances it.
pub struct Progress {
    bar: ProgressBar,
    enabled: bool,
    shown: AtomicBool,
    state: Mutex<State>,
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
            state: Mutex::new(State::default()),
        }
    }

    /// Whether the bar will be drawn (so counting the calls up front is worth it).
    pub fn draws(&self) -> bool {
        self.enabled
    }

    /// Fixes the bar's length at the calls counted before the run (see
    /// [`crate::plan::estimate`]), with the tree's levels for `tree_summarize`.
    pub fn fix_total(&self, estimate: &Estimate) {
        let Ok(mut s) = self.state.lock() else { return };
        s.planned = Some(estimate.calls);
        s.len = estimate.calls.max(s.announced);
        s.levels = estimate.levels;
        s.level = 1;
        self.bar.set_length(s.len as u64);
        self.bar.set_message(s.message());
        self.show(s.len);
    }

    /// Starts drawing once more than one call is expected.
    fn show(&self, total: usize) {
        if total > 1
            && self.enabled
            && !self.shown.swap(true, Ordering::Relaxed)
            && !self.bar.is_finished()
        {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
            self.bar.enable_steady_tick(Duration::from_millis(120));
        }
    }

    /// Runs `f` (a line on standard error) with the bar hidden, so the two do not mix.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        self.bar.suspend(f)
    }

    /// Removes the bar from the terminal (before an answer is printed). A run that needed
    /// fewer calls than planned finishes at its real count.
    pub fn clear(&self) {
        if self.bar.is_finished() {
            return;
        }
        if let Ok(mut s) = self.state.lock() {
            let real = (self.bar.position() as usize).max(s.announced);
            if real < s.len {
                s.len = real;
                self.bar.set_length(real as u64);
            }
        }
        self.bar.disable_steady_tick();
        self.bar.finish_and_clear();
    }
}

impl Observer for Progress {
    fn calls_planned(&self, total: usize) {
        let Ok(mut s) = self.state.lock() else { return };
        s.announced = s.announced.max(total);
        if total <= s.len {
            return;
        }
        s.len = total;
        self.bar.set_length(total as u64);
        if s.planned.is_some() && !s.overrun {
            s.overrun = true;
            self.bar.set_message(s.message());
        }
        self.show(total);
    }

    fn call_finished(&self, _report: &CallReport<'_>) {
        self.bar.inc(1);
    }

    fn event(&self, event: &SynthEvent) {
        if let SynthEvent::TreeLevel { level, .. } = event
            && let Ok(mut s) = self.state.lock()
            && s.levels.is_some()
        {
            // `level` levels are done: the next one is being summarised.
            s.level = level + 1;
            self.bar.set_message(s.message());
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

/// `batch`'s bar: lines done of the input's lines, model calls and tokens so far, the
/// rate and the time left. An [`Observer`] on every synthesis of the batch (it counts
/// their calls); drawn only if enabled and standard error is a terminal.
pub struct BatchProgress {
    bar: ProgressBar,
    calls: AtomicU64,
    tokens: AtomicU64,
}

impl BatchProgress {
    /// A bar over `total` lines (a spinner when unknown), drawn if `enabled` and
    /// standard error is a terminal.
    pub fn new(enabled: bool, total: Option<u64>) -> Self {
        let target = if enabled && std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(total, target);
        let template = match total {
            Some(_) => {
                "{spinner} [{bar:30}] {pos}/{len} lines, {msg} ({per_sec}, {elapsed}, ETA {eta})"
            }
            None => "{spinner} {pos} lines, {msg} ({per_sec}, {elapsed})",
        };
        let style = ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        bar.set_style(style);
        bar.set_message("0 calls, 0 tokens");
        if !bar.is_hidden() {
            bar.enable_steady_tick(Duration::from_millis(120));
        }
        Self {
            bar,
            calls: AtomicU64::new(0),
            tokens: AtomicU64::new(0),
        }
    }

    /// Lines done (answered, failed or found in the output) so far.
    pub fn line_done(&self) {
        self.bar.inc(1);
    }

    /// Model calls finished (cached replies included) and their tokens.
    pub fn totals(&self) -> (u64, u64) {
        (
            self.calls.load(Ordering::Relaxed),
            self.tokens.load(Ordering::Relaxed),
        )
    }

    /// Removes the bar from the terminal.
    pub fn clear(&self) {
        self.bar.disable_steady_tick();
        self.bar.finish_and_clear();
    }
}

impl Observer for BatchProgress {
    fn call_finished(&self, report: &CallReport<'_>) {
        let calls = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        let tokens = self
            .tokens
            .fetch_add(report.usage.total(), Ordering::Relaxed)
            + report.usage.total();
        if !self.bar.is_hidden() {
            self.bar
                .set_message(format!("{calls} calls, {tokens} tokens"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    use clap::Parser;
    use synthkit::ResponseMode;

    use crate::backend;
    use crate::flags::{Cli, Command, SummarizeArgs};
    use crate::observe::Fanout;
    use crate::settings::SynthRun;
    use crate::spinner::Spinner;
    use crate::synthesis::{Synthesis, gather_nodes};

    fn len(p: &Progress) -> u64 {
        p.bar.length().unwrap_or(0)
    }

    #[test]
    fn a_fixed_total_does_not_grow_with_the_library_reports() {
        let p = Progress::new(false);
        p.fix_total(&Estimate {
            calls: 5,
            ..Estimate::default()
        });
        assert_eq!(len(&p), 5);
        for total in 1..=5 {
            p.calls_planned(total);
            assert_eq!(len(&p), 5);
        }
        assert_eq!(p.bar.message(), "synthesizing");
        // One call more than planned: extended, and said so.
        p.calls_planned(6);
        assert_eq!(len(&p), 6);
        assert_eq!(p.bar.message(), "synthesizing (more calls than planned)");
    }

    #[test]
    fn fewer_calls_than_planned_finish_at_the_real_count() {
        let p = Progress::new(false);
        p.fix_total(&Estimate {
            calls: 9,
            levels: Some(3),
            ..Estimate::default()
        });
        assert_eq!(p.bar.message(), "level 1 of ~3");
        p.calls_planned(4);
        p.bar.inc(4);
        p.event(&SynthEvent::TreeLevel {
            level: 1,
            chunks: 4,
        });
        assert_eq!(p.bar.message(), "level 2 of ~3");
        p.calls_planned(6);
        p.bar.inc(2);
        assert_eq!(len(&p), 9);
        p.clear();
        assert_eq!((p.bar.position(), len(&p)), (6, 6));
    }

    #[test]
    fn without_a_count_the_bar_follows_the_library() {
        let p = Progress::new(false);
        p.calls_planned(3);
        p.calls_planned(7);
        assert_eq!(len(&p), 7);
        assert_eq!(p.bar.message(), "synthesizing");
    }

    /// Forwards to the bar and records its length and message at every report.
    struct Recorder {
        progress: Arc<Progress>,
        seen: Mutex<Vec<(&'static str, u64, String)>>,
    }

    impl Recorder {
        fn note(&self, what: &'static str) {
            let p = &self.progress;
            self.seen
                .lock()
                .unwrap()
                .push((what, len(p), p.bar.message()));
        }
    }

    impl Observer for Recorder {
        fn calls_planned(&self, total: usize) {
            self.progress.calls_planned(total);
            self.note("planned");
        }
        fn call_finished(&self, report: &CallReport<'_>) {
            self.progress.call_finished(report);
            self.note("finished");
        }
        fn event(&self, event: &SynthEvent) {
            self.progress.event(event);
            self.note("event");
        }
    }

    fn args(dir: &std::path::Path, mode: &str, extra: &[&str]) -> SummarizeArgs {
        let mut argv = vec![
            "synthkit".to_string(),
            "summarize".into(),
            dir.display().to_string(),
            "--llm".into(),
            "extractive".into(),
            "--mode".into(),
            mode.into(),
        ];
        argv.extend(extra.iter().map(|s| s.to_string()));
        argv.push("--query".into());
        argv.push("Summarize.".into());
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Summarize(a) => a,
            _ => unreachable!(),
        }
    }

    fn folder(files: usize, sentences: usize) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for f in 0..files {
            let text: String = (0..sentences)
                .map(|i| {
                    format!(
                        "Document {f} sentence {i} says the mirror of telescope {} is cleaned every {} days. ",
                        i % 7,
                        i % 13 + 1
                    )
                })
                .collect();
            std::fs::write(dir.path().join(format!("doc{f:03}.txt")), text).unwrap();
        }
        dir
    }

    /// What `synthesis::run` does: count up front, fix the bar, run with the bar observing.
    async fn run(args: &SummarizeArgs, mode: ResponseMode) -> (Estimate, Arc<Recorder>, Duration) {
        let run = SynthRun::summarize(args).unwrap();
        assert_eq!(run.mode, mode);
        let query = run.query;
        let backend = backend::connect_with(run.stack).await.unwrap();
        let nodes = gather_nodes(&run.sources, query, &backend, &Spinner::new(false)).unwrap();
        let progress = Arc::new(Progress::new(false));
        let t = Instant::now();
        let planned = Synthesis::new(&backend, &run);
        let estimate = planned.estimate(nodes.clone()).await.unwrap();
        let took = t.elapsed();
        progress.fix_total(&estimate);
        let recorder = Arc::new(Recorder {
            progress: progress.clone(),
            seen: Mutex::new(Vec::new()),
        });
        let mut fanout = Fanout::default();
        fanout.push(recorder.clone());
        let synth = planned
            .synthesizer(backend.model(), Arc::new(fanout), false)
            .unwrap();
        synth.synthesize(query, nodes).await.unwrap();
        progress.clear();
        (estimate, recorder, took)
    }

    const SMALL: [&str; 6] = [
        "--context-window",
        "1024",
        "--num-output",
        "128",
        "--chunk-size",
        "128",
    ];

    #[tokio::test]
    async fn compact_total_is_known_before_the_first_call_and_never_grows() {
        let dir = folder(6, 40);
        let (estimate, rec, _) =
            run(&args(dir.path(), "compact", &SMALL), ResponseMode::Compact).await;
        assert!(estimate.calls > 3, "{estimate:?}");
        let seen = rec.seen.lock().unwrap();
        assert!(seen.iter().any(|s| s.0 == "finished"));
        for (what, len, msg) in seen.iter() {
            assert_eq!(*len, estimate.calls as u64, "{what}: {seen:?}");
            assert_eq!(msg, "synthesizing");
        }
        let p = &rec.progress;
        assert_eq!(p.bar.position(), len(p), "finished at the real count");
        assert!(len(p) <= estimate.calls as u64);
    }

    #[tokio::test]
    async fn tree_summarize_total_is_fixed_and_shows_levels() {
        let dir = folder(6, 40);
        let (estimate, rec, _) = run(
            &args(dir.path(), "tree_summarize", &SMALL),
            ResponseMode::TreeSummarize,
        )
        .await;
        let levels = estimate.levels.unwrap();
        assert!(
            levels >= 3 && estimate.calls > levels as usize,
            "{estimate:?}"
        );
        let seen = rec.seen.lock().unwrap();
        for (what, len, _) in seen.iter() {
            assert_eq!(*len, estimate.calls as u64, "{what}: {seen:?}");
        }
        assert_eq!(seen[0].2, format!("level 1 of ~{levels}"));
        assert!(
            seen.iter().any(|s| s.2 == format!("level 2 of ~{levels}")),
            "{seen:?}"
        );
        let p = &rec.progress;
        assert_eq!(p.bar.position(), len(p), "finished at the real count");
    }

    /// Counting up front on a large input (1,000+ chunks), against the run itself:
    /// `cargo test -p synthkit-cli --release -- --ignored --nocapture up_front`.
    #[tokio::test]
    #[ignore]
    async fn up_front_count_on_a_large_input() {
        let dir = folder(40, 300);
        for (name, mode) in [
            ("compact", ResponseMode::Compact),
            ("tree_summarize", ResponseMode::TreeSummarize),
        ] {
            for extra in [
                &["--chunk-size", "128"][..],
                &[
                    "--chunk-size",
                    "128",
                    "--context-window",
                    "1024",
                    "--num-output",
                    "128",
                ],
            ] {
                let a = args(dir.path(), name, extra);
                let r = SynthRun::summarize(&a).unwrap();
                let b = backend::connect_with(r.stack).await.unwrap();
                let chunks = gather_nodes(&r.sources, "q", &b, &Spinner::new(false))
                    .unwrap()
                    .len();
                let t = Instant::now();
                let (estimate, rec, took) = run(&a, mode).await;
                let total = t.elapsed();
                let real = rec.progress.bar.position();
                println!(
                    "{name} {extra:?}: {chunks} chunks, {estimate:?}, real {real} calls; count {took:?}, count + run {total:?}"
                );
            }
        }
    }
}
