//! The synthesis benchmark: per mode, a warm-up run (observed: calls, prompt tokens, calls
//! per tree level), then `repeat` timed runs without an observer; the best wall time wins.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use synthkit::model::{LanguageModel, ModelInfo};
use synthkit::observe::CallReport;
use synthkit::prompt::PromptBudget;
use synthkit::synth::DEFAULT_CONCURRENCY;
use synthkit::testing::FixedModel;
use synthkit::text::{BpeTokenizer, Tokenizer};
use synthkit::{Node, Observer, ResponseMode, Synthesizer};

use crate::schedule::{list_schedule_bound, mean_in_flight, work_bound};
use crate::timed_model::{Latency, TimedModel};
use crate::{SynthArgs, parse_modes, read_corpus, rss};

/// The fixed 40-word answer of every call (the conformance fake model's qa answer).
pub const FIXED_ANSWER: &str = "answer from qa call lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore magna aliqua ut enim ad minim veniam quis nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat";
/// The model's context window.
pub const CONTEXT_WINDOW: usize = 4096;
/// The model's output reserve.
pub const NUM_OUTPUT: usize = 256;
/// The overlap ratio of packed chunks.
pub const CHUNK_OVERLAP_RATIO: f64 = 0.1;

/// What one mode's benchmark measured (one JSON line).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ModeResult {
    /// The response mode.
    pub mode: String,
    /// Nodes given to `synthesize`.
    pub n: usize,
    /// Best wall time of the timed runs, in seconds.
    pub best_s: Option<f64>,
    /// Every timed run, in seconds.
    pub runs_s: Vec<f64>,
    /// Model calls (observed warm-up run).
    pub calls: u64,
    /// Sum of `request.prompt_tokens` over the calls.
    pub prompt_tokens: u64,
    /// The largest `request.prompt_tokens` of a call.
    pub max_prompt_tokens: usize,
    /// Calls per tree level (`request.step().level`), level 0 first.
    pub level_calls: Vec<u64>,
    /// Length of the final answer in bytes (a sanity check).
    pub answer_bytes: usize,
    /// Peak resident set size of the process (VmHWM), in KiB.
    pub peak_rss_kb: Option<u64>,
    /// Peak RSS just before the first synthesis: runtime, tokenizer, corpus, nodes and one
    /// input copy of the nodes.
    pub load_rss_kb: Option<u64>,
    /// Whether the process ran only this mode (so `peak_rss_kb` is this mode's own).
    pub rss_isolated: bool,
    /// Latency of every call, in milliseconds.
    pub latency_ms: u64,
    /// Calls in flight for tree levels and accumulate (0 = unlimited).
    pub concurrency: usize,
    /// `σ` of the log-normal latency spread (0: every call takes `latency_ms`).
    #[serde(default)]
    pub latency_spread: f64,
    /// The seed of the latency draws.
    #[serde(default)]
    pub seed: u64,
    /// With latency, of the best run: total call time / wall time.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mean_in_flight: Option<f64>,
    /// With latency, of the best run: the list-scheduling bound of its own calls (each
    /// level's calls in input order, each started as soon as a place frees), in seconds.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub list_bound_s: Option<f64>,
    /// With latency, of the best run: the work bound of its own calls (per level, the
    /// larger of total call time / places and the longest call), in seconds.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub work_bound_s: Option<f64>,
    /// Best wall time / list-scheduling bound.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub list_ratio: Option<f64>,
    /// With latency: the critical-path time, in seconds.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub bound_s: Option<f64>,
    /// With latency: best wall time / critical-path bound.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ratio: Option<f64>,
    /// With latency: best wall time - critical-path bound, in seconds (synthkit's own work
    /// that did not overlap a model call, plus timer slack).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub excess_s: Option<f64>,
    /// What went wrong, if the mode failed.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
}

/// Counts calls, prompt tokens and calls per tree level.
#[derive(Debug, Default)]
struct Stats {
    calls: AtomicU64,
    prompt_tokens: AtomicU64,
    max_prompt_tokens: AtomicUsize,
    levels: Mutex<BTreeMap<u32, u64>>,
}

impl Observer for Stats {
    fn call_finished(&self, report: &CallReport<'_>) {
        let r = report.request;
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.prompt_tokens
            .fetch_add(r.prompt_tokens as u64, Ordering::Relaxed);
        self.max_prompt_tokens
            .fetch_max(r.prompt_tokens, Ordering::Relaxed);
        if let Ok(mut levels) = self.levels.lock() {
            *levels.entry(r.step().level).or_insert(0) += 1;
        }
    }
}

impl Stats {
    fn level_calls(&self) -> Vec<u64> {
        let levels = self.levels.lock().map(|l| l.clone()).unwrap_or_default();
        let Some(top) = levels.keys().next_back().copied() else {
            return Vec::new();
        };
        (0..=top)
            .map(|l| levels.get(&l).copied().unwrap_or(0))
            .collect()
    }
}

/// The critical path in model latencies: independent calls of a level (accumulate's calls,
/// a tree level) run `concurrency` at a time; every other mode's calls are sequential.
pub fn critical_path(
    mode: ResponseMode,
    level_calls: &[u64],
    concurrency: usize,
    latency: Duration,
) -> Duration {
    let waves: u64 = match mode {
        ResponseMode::Accumulate
        | ResponseMode::CompactAccumulate
        | ResponseMode::TreeSummarize => level_calls
            .iter()
            .map(|&n| {
                if concurrency == 0 {
                    n.min(1)
                } else {
                    n.div_ceil(concurrency as u64)
                }
            })
            .sum(),
        _ => level_calls.iter().sum(),
    };
    latency.saturating_mul(u32::try_from(waves).unwrap_or(u32::MAX))
}

/// Runs the benchmark for every requested mode; `Ok(false)` when a mode failed.
pub fn run(args: &SynthArgs) -> Result<bool> {
    let corpus = args
        .corpus
        .as_deref()
        .context("--corpus FILE is required")?;
    let modes = parse_modes(&args.modes)?;
    if !corpus.is_file() {
        anyhow::bail!("no corpus file at {}", corpus.display());
    }
    let isolate = args.isolate || (!args.no_isolate && modes.len() > 1);
    if !args.json {
        print_header(args.latency_ms > 0);
    }
    let mut ok = true;
    if isolate {
        for mode in modes {
            let result = run_child(args, corpus, mode);
            ok &= result.error.is_none();
            print_result(&result, args.json);
        }
    } else {
        let bench = InProcess::new(args, corpus)?;
        let isolated = modes.len() == 1;
        for mode in modes {
            let mut result = bench.run_mode(mode);
            result.rss_isolated = isolated;
            ok &= result.error.is_none();
            print_result(&result, args.json);
        }
    }
    Ok(ok)
}

/// Re-executes this binary for one mode and reads its JSON line.
fn run_child(args: &SynthArgs, corpus: &Path, mode: ResponseMode) -> ModeResult {
    let failed = |error: String| ModeResult {
        mode: mode.as_str().to_string(),
        latency_ms: args.latency_ms,
        concurrency: args.concurrency.unwrap_or(DEFAULT_CONCURRENCY),
        error: Some(error),
        ..ModeResult::default()
    };
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return failed(format!("cannot find this executable to re-run it: {e}")),
    };
    let mut cmd = Command::new(exe);
    cmd.arg("--corpus")
        .arg(corpus)
        .args(["--modes", mode.as_str(), "--no-isolate", "--json"])
        .arg("--repeat")
        .arg(args.repeat.to_string())
        .arg("--latency-ms")
        .arg(args.latency_ms.to_string())
        .arg("--latency-spread")
        .arg(args.latency_spread.to_string())
        .arg("--seed")
        .arg(args.seed.to_string())
        .arg("--query")
        .arg(&args.query);
    if let Some(c) = args.concurrency {
        cmd.arg("--concurrency").arg(c.to_string());
    }
    if let Some(t) = args.threads {
        cmd.arg("--threads").arg(t.to_string());
    }
    cmd.stdin(Stdio::null()).stderr(Stdio::inherit());
    let out = match cmd.output() {
        Ok(o) => o,
        Err(e) => return failed(format!("cannot run the child process: {e}")),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let parsed = stdout
        .lines()
        .find_map(|l| serde_json::from_str::<ModeResult>(l).ok());
    match parsed {
        Some(mut r) => {
            r.rss_isolated = true;
            r
        }
        None => failed(format!("the child process gave no result ({})", out.status)),
    }
}

/// Everything shared by the modes run in this process.
struct InProcess {
    rt: tokio::runtime::Runtime,
    nodes: Vec<Node>,
    query: String,
    repeat: usize,
    latency: Latency,
    concurrency: Option<usize>,
    answer_tokens: u64,
}

impl InProcess {
    fn new(args: &SynthArgs, corpus: &Path) -> Result<Self> {
        let mut rt = tokio::runtime::Builder::new_multi_thread();
        rt.enable_all();
        if let Some(t) = args.threads {
            rt.worker_threads(t.max(1));
        }
        let rt = rt.build().context("starting the tokio runtime")?;
        let nodes: Vec<Node> = read_corpus(corpus)?
            .into_iter()
            .enumerate()
            .map(|(i, text)| Node::new(format!("n{i:05}"), text))
            .collect();
        let answer_tokens = BpeTokenizer::cl100k_base().count(FIXED_ANSWER) as u64;
        Ok(Self {
            rt,
            nodes,
            query: args.query.clone(),
            repeat: args.repeat.max(1),
            latency: Latency {
                base: Duration::from_millis(args.latency_ms),
                spread: args.latency_spread,
                seed: args.seed,
            },
            concurrency: args.concurrency,
            answer_tokens,
        })
    }

    /// The model: the fixed answer, after the call's latency (recorded) when there is one.
    fn model(&self) -> (Arc<dyn LanguageModel>, Option<Arc<TimedModel>>) {
        let info = ModelInfo::new("fixed")
            .with_context_window(CONTEXT_WINDOW)
            .with_num_output(NUM_OUTPUT);
        let fixed = Arc::new(FixedModel::new(info, FIXED_ANSWER, self.answer_tokens));
        if self.latency.base.is_zero() {
            return (fixed, None);
        }
        let timed = Arc::new(TimedModel::new(fixed, self.latency));
        (timed.clone(), Some(timed))
    }

    fn synthesizer(
        &self,
        mode: ResponseMode,
        model: Arc<dyn LanguageModel>,
        observer: Option<Arc<Stats>>,
    ) -> Result<Synthesizer> {
        let budget = PromptBudget::new(CONTEXT_WINDOW, NUM_OUTPUT)?
            .with_chunk_overlap_ratio(CHUNK_OVERLAP_RATIO)?;
        // The fixed model reports our own counts as its usage: nothing to calibrate, so the
        // first call need not go alone.
        let mut b = Synthesizer::builder(model)
            .mode(mode)
            .budget(budget)
            .calibrate_from_usage(false);
        if let Some(c) = self.concurrency {
            b = b.concurrency(if c == 0 {
                synthkit::Concurrency::Unlimited
            } else {
                synthkit::Concurrency::limit(c)
            });
        }
        if let Some(o) = observer {
            b = b.observer(o);
        }
        Ok(b.build()?)
    }

    fn run_mode(&self, mode: ResponseMode) -> ModeResult {
        let concurrency = self.concurrency.unwrap_or(DEFAULT_CONCURRENCY);
        let mut result = ModeResult {
            mode: mode.as_str().to_string(),
            n: self.nodes.len(),
            latency_ms: u64::try_from(self.latency.base.as_millis()).unwrap_or(u64::MAX),
            latency_spread: self.latency.spread,
            seed: self.latency.seed,
            concurrency,
            ..ModeResult::default()
        };
        if let Err(e) = self.measure(mode, &mut result) {
            result.error = Some(format!("{e:#}"));
        }
        result.peak_rss_kb = rss::peak_rss_kb();
        result
    }

    fn measure(&self, mode: ResponseMode, result: &mut ModeResult) -> Result<()> {
        // Warm-up, observed (untimed): calls, prompt tokens, calls per level.
        let stats = Arc::new(Stats::default());
        let (model, _) = self.model();
        let observed = self.synthesizer(mode, model, Some(Arc::clone(&stats)))?;
        let nodes = self.nodes.clone();
        // The baseline: the corpus, the nodes and one input copy (synthesize consumes its
        // nodes, so every run gets a fresh copy; only one is alive at a time).
        result.load_rss_kb = rss::peak_rss_kb();
        let response = self.rt.block_on(observed.synthesize(&self.query, nodes))?;
        result.answer_bytes = response.text.len();
        drop(response);
        drop(observed);
        result.calls = stats.calls.load(Ordering::Relaxed);
        result.prompt_tokens = stats.prompt_tokens.load(Ordering::Relaxed);
        result.max_prompt_tokens = stats.max_prompt_tokens.load(Ordering::Relaxed);
        result.level_calls = stats.level_calls();

        // Timed runs, without an observer.
        let (model, timed) = self.model();
        let synth = self.synthesizer(mode, model, None)?;
        let mut best: Option<Duration> = None;
        for _ in 0..self.repeat {
            let nodes = self.nodes.clone();
            if let Some(t) = &timed {
                t.start_run();
            }
            let start = Instant::now();
            let response = self.rt.block_on(synth.synthesize(&self.query, nodes));
            let elapsed = start.elapsed();
            if let Some(t) = timed.as_ref().filter(|_| best.is_none_or(|b| elapsed < b)) {
                best = Some(elapsed);
                let calls = t.calls();
                result.mean_in_flight = Some(mean_in_flight(&calls, elapsed));
                let bound = list_schedule_bound(&calls, result.concurrency).as_secs_f64();
                result.list_bound_s = Some(bound);
                result.work_bound_s = Some(work_bound(&calls, result.concurrency).as_secs_f64());
                result.list_ratio = (bound > 0.0).then(|| elapsed.as_secs_f64() / bound);
            }
            let response = response?;
            if response.usage.calls != result.calls {
                eprintln!(
                    "synthkit-bench: {mode}: a timed run made {} calls, the observed run {}",
                    response.usage.calls, result.calls
                );
            }
            drop(response);
            result.runs_s.push(elapsed.as_secs_f64());
        }
        result.best_s = result.runs_s.iter().copied().reduce(f64::min);
        if !self.latency.base.is_zero() {
            let bound = critical_path(
                mode,
                &result.level_calls,
                result.concurrency,
                self.latency.base,
            )
            .as_secs_f64();
            result.bound_s = Some(bound);
            result.ratio = result.best_s.filter(|_| bound > 0.0).map(|b| b / bound);
            result.excess_s = result.best_s.map(|b| b - bound);
        }
        Ok(())
    }
}

fn print_header(latency: bool) {
    print!(
        "{:<20} {:>6} {:>9} {:>7} {:>12} {:>10} {:>9} {:>9}",
        "mode", "n", "best_s", "calls", "prompt_tok", "max_prompt", "rss_MiB", "load_MiB"
    );
    if latency {
        print!(
            " {:>6} {:>8} {:>7} {:>9} {:>6} {:>8} {:>9}",
            "conc", "bound_s", "ratio", "list_s", "wall/l", "work_s", "in_flight"
        );
    }
    println!();
}

fn print_result(r: &ModeResult, json: bool) {
    if json {
        match serde_json::to_string(r) {
            Ok(s) => println!("{s}"),
            Err(e) => eprintln!("synthkit-bench: cannot serialise the result: {e}"),
        }
        return;
    }
    let mib = |kb: Option<u64>| {
        kb.map_or_else(|| "-".to_string(), |k| format!("{:.1}", k as f64 / 1024.0))
    };
    let best = r
        .best_s
        .map_or_else(|| "-".to_string(), |b| format!("{b:.4}"));
    print!(
        "{:<20} {:>6} {:>9} {:>7} {:>12} {:>10} {:>9} {:>9}",
        r.mode,
        r.n,
        best,
        r.calls,
        r.prompt_tokens,
        r.max_prompt_tokens,
        mib(r.peak_rss_kb),
        mib(r.load_rss_kb)
    );
    if r.latency_ms > 0 {
        let conc = if r.concurrency == 0 {
            "unl".to_string()
        } else {
            r.concurrency.to_string()
        };
        let bound = r
            .bound_s
            .map_or_else(|| "-".to_string(), |b| format!("{b:.3}"));
        let ratio = r
            .ratio
            .map_or_else(|| "-".to_string(), |x| format!("{x:.2}"));
        let opt = |x: Option<f64>, digits: usize| {
            x.map_or_else(|| "-".to_string(), |v| format!("{v:.digits$}"))
        };
        print!(
            " {conc:>6} {bound:>8} {ratio:>7} {:>9} {:>6} {:>8} {:>9}",
            opt(r.list_bound_s, 3),
            opt(r.list_ratio, 2),
            opt(r.work_bound_s, 3),
            opt(r.mean_in_flight, 2)
        );
    }
    println!();
    if let Some(e) = &r.error {
        println!("    error: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_answer_has_40_words() {
        assert_eq!(FIXED_ANSWER.split_whitespace().count(), 40);
    }

    #[test]
    fn critical_path_by_mode() {
        let ms = Duration::from_millis(50);
        // accumulate: 100 calls, 8 at a time: 13 waves.
        assert_eq!(
            critical_path(ResponseMode::Accumulate, &[100], 8, ms),
            ms * 13
        );
        assert_eq!(critical_path(ResponseMode::Accumulate, &[100], 0, ms), ms);
        // tree: 20 summaries then one final call.
        assert_eq!(
            critical_path(ResponseMode::TreeSummarize, &[20, 1], 8, ms),
            ms * 4
        );
        assert_eq!(
            critical_path(ResponseMode::TreeSummarize, &[20, 1], 0, ms),
            ms * 2
        );
        // refine is a chain.
        assert_eq!(critical_path(ResponseMode::Refine, &[100], 0, ms), ms * 100);
        assert_eq!(
            critical_path(ResponseMode::NoText, &[], 8, ms),
            Duration::ZERO
        );
    }

    #[test]
    fn result_round_trips() {
        let r = ModeResult {
            mode: "refine".into(),
            best_s: Some(0.5),
            ..ModeResult::default()
        };
        let line = serde_json::to_string(&r).unwrap_or_default();
        let back: Option<ModeResult> = serde_json::from_str(&line).ok();
        assert_eq!(back.map(|b| b.mode), Some("refine".to_string()));
    }
}
