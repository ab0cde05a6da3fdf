//! `--plan`: a dry run that makes no model call.
//!
//! The synthesis runs for real against [`PlanningModel`], a local stand-in whose `info()`
//! and tokenizer mirror the real backend's (context window, output reserve, chat flag,
//! system prompt) and which answers every call at once with filler of exactly
//! `num_output` tokens: the longest answer the real model may give. Every request's step
//! and prompt tokens are recorded. The first step (or tree level) is therefore exact; later
//! steps see the longest possible earlier answers, so their counts are upper bounds.

use std::io::{self, Write};
use std::sync::{Arc, Mutex};

use anyhow::Result;
use serde_json::{Value, json};
use synthkit::model::{
    Completion, LanguageModel, ModelFuture, ModelInfo, ModelRequest, SharedCounter,
};
use synthkit::text::SharedTokenizer;
use synthkit::{Node, Observer, ResponseMode, Synthesizer};

use crate::args::SynthArgs;
use crate::backend::Backend;
use crate::observe::Fanout;
use crate::output::write_json;
use crate::synthesis::{CustomTemplates, build_synthesizer};
use crate::trace::Trace;

/// One planned call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Planned {
    step: &'static str,
    level: u32,
    prompt_tokens: usize,
}

/// A stand-in model for planning: mirrors a real model's limits and answers instantly
/// with `num_output` tokens of filler, recording each request.
pub struct PlanningModel {
    info: ModelInfo,
    tokenizer: SharedTokenizer,
    filler: String,
    calls: Mutex<Vec<Planned>>,
    /// The backend's exact prompt counter, so the plan counts as the run will.
    counter: Option<SharedCounter>,
}

impl PlanningModel {
    /// A planner mirroring `info`, counting with `tokenizer`.
    pub fn new(info: ModelInfo, tokenizer: SharedTokenizer) -> Self {
        let filler = filler(&tokenizer, info.num_output);
        Self {
            info,
            tokenizer,
            filler,
            calls: Mutex::new(Vec::new()),
            counter: None,
        }
    }

    /// A planner standing in for `backend`'s model: its limits, its tokenizer and its
    /// exact prompt counter, so the plan counts as the run will.
    pub fn of(backend: &Backend) -> Self {
        Self::new(backend.model.info(), backend.budget_tokenizer.clone())
            .with_counter(backend.model.counter())
    }

    /// Counts prompts with `counter` (the backend's), as the run will.
    pub fn with_counter(mut self, counter: Option<SharedCounter>) -> Self {
        self.counter = counter;
        self
    }

    fn record(&self, request: &ModelRequest) {
        if let Ok(mut calls) = self.calls.lock() {
            calls.push(Planned {
                step: request.step().step.as_str(),
                level: request.step().level,
                prompt_tokens: request.prompt_tokens,
            });
        }
    }

    fn calls(&self) -> Vec<Planned> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// The calls recorded since the last take, as rows (one synthesis of a batch).
    pub(crate) fn take_rows(&self) -> Vec<Row> {
        let calls = self
            .calls
            .lock()
            .map(|mut c| std::mem::take(&mut *c))
            .unwrap_or_default();
        rows(&calls)
    }
}

/// Adds one synthesis's rows to a batch's: rows of one step and level are summed, and a
/// sum is exact only if each of its parts was.
pub(crate) fn merge_rows(into: &mut Vec<Row>, rows: Vec<Row>) {
    for row in rows {
        match into
            .iter_mut()
            .find(|r| r.step == row.step && r.level == row.level)
        {
            Some(r) => {
                r.calls += row.calls;
                r.prompt_tokens += row.prompt_tokens;
                r.max_prompt_tokens = r.max_prompt_tokens.max(row.max_prompt_tokens);
                r.exact &= row.exact;
            }
            None => into.push(row),
        }
    }
}

/// The calls and prompt tokens of `rows`, and whether every row is exact.
pub(crate) fn row_totals(rows: &[Row]) -> (usize, usize, bool) {
    (
        rows.iter().map(|r| r.calls).sum(),
        rows.iter().map(|r| r.prompt_tokens).sum(),
        rows.iter().all(|r| r.exact),
    )
}

/// Text of exactly `n` tokens when the tokenizer allows it (else the longest under `n`).
fn filler(tokenizer: &SharedTokenizer, n: usize) -> String {
    let make = |k: usize| "word ".repeat(k).trim_end().to_string();
    // The largest k whose text fits n tokens.
    let (mut lo, mut hi) = (0usize, n.saturating_mul(2).max(1));
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if tokenizer.count(&make(mid)) <= n {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let mut text = make(lo);
    for _ in 0..8 {
        if tokenizer.count(&text) >= n {
            break;
        }
        let longer = format!("{text} .");
        if tokenizer.count(&longer) > n {
            break;
        }
        text = longer;
    }
    text
}

impl LanguageModel for PlanningModel {
    fn info(&self) -> ModelInfo {
        self.info.clone()
    }

    fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, Completion> {
        self.record(request);
        // A structured step (answer filtering) answers a satisfied verdict of full length.
        let text = match request.schema {
            Some(_) => json!({"query_satisfied": true, "answer": self.filler}).to_string(),
            None => self.filler.clone(),
        };
        Box::pin(async move { Ok(Completion::text(text)) })
    }

    fn tokenizer(&self) -> Option<SharedTokenizer> {
        Some(self.tokenizer.clone())
    }

    fn counter(&self) -> Option<SharedCounter> {
        self.counter.clone()
    }
}

/// One row of the plan: the calls of one step at one level.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    step: &'static str,
    level: u32,
    calls: usize,
    prompt_tokens: usize,
    max_prompt_tokens: usize,
    exact: bool,
}

/// Groups calls by (step, level) in order of first appearance; the first row is exact.
fn rows(calls: &[Planned]) -> Vec<Row> {
    let mut rows: Vec<Row> = Vec::new();
    for c in calls {
        match rows
            .iter_mut()
            .find(|r| r.step == c.step && r.level == c.level)
        {
            Some(r) => {
                r.calls += 1;
                r.prompt_tokens += c.prompt_tokens;
                r.max_prompt_tokens = r.max_prompt_tokens.max(c.prompt_tokens);
            }
            None => rows.push(Row {
                step: c.step,
                level: c.level,
                calls: 1,
                prompt_tokens: c.prompt_tokens,
                max_prompt_tokens: c.prompt_tokens,
                exact: rows.is_empty(),
            }),
        }
    }
    rows
}

/// The calls a run is expected to make, counted before it starts (for the progress bar
/// and the size check of `--max-calls` / `--max-total-prompt-tokens`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Estimate {
    /// Model calls: exact for the first step (or tree level), an upper bound after it.
    pub calls: usize,
    /// Tree levels, the final call's included (`tree_summarize` only).
    pub levels: Option<u32>,
    /// Prompt tokens of all the calls (counted with the local tokenizer).
    pub prompt_tokens: usize,
    /// The calls by step and level.
    pub(crate) rows: Vec<Row>,
}

/// Whether a run of `estimate` needs `--yes`: more calls than `--max-calls` or more
/// prompt tokens than `--max-total-prompt-tokens`.
pub fn too_large(estimate: &Estimate, args: &SynthArgs) -> bool {
    estimate.calls > args.max_calls || estimate.prompt_tokens > args.max_total_prompt_tokens
}

/// The error of a run refused for its size: what is over, and the ways on.
pub fn refusal_message(estimate: &Estimate, args: &SynthArgs) -> String {
    let mut over = Vec::new();
    if estimate.calls > args.max_calls {
        over.push(format!(
            "{} model calls (--max-calls {})",
            estimate.calls, args.max_calls
        ));
    }
    if estimate.prompt_tokens > args.max_total_prompt_tokens {
        over.push(format!(
            "{} prompt tokens (--max-total-prompt-tokens {})",
            estimate.prompt_tokens, args.max_total_prompt_tokens
        ));
    }
    format!(
        "not started: this run needs {}; pass --yes to run it, or read fewer chunks (--top-k N, --include GLOB)",
        over.join(" and ")
    )
}

/// Prints the plan of a run refused for its size on standard error.
pub fn print_refusal(backend: &Backend, mode: ResponseMode, estimate: &Estimate) -> Result<()> {
    let info = backend.model.info();
    let stderr = io::stderr();
    let mut out = stderr.lock();
    writeln!(
        out,
        "plan: {mode}, backend {} (model {}), context window {}, up to {} output tokens per call",
        backend.name(),
        info.name,
        info.context_window,
        info.num_output
    )?;
    write_table(&mut out, &estimate.rows)?;
    Ok(out.flush()?)
}

/// `--plan` and `--price-per-1k`, shared by `ask`, `summarize` and `batch` (whose
/// `--plan` help names the whole batch).
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct PlanArgs {
    /// Dry run: make no model call; print the calls and prompt tokens each step needs.
    #[arg(long, help_heading = "Output")]
    pub plan: bool,
    /// With --plan: the price of 1,000 prompt tokens in USD, to estimate the cost.
    #[arg(long, value_name = "USD", requires = "plan", help_heading = "Output")]
    pub price_per_1k: Option<f64>,
}

/// The synthesis a plan is made for: the backend, the mode, the flags, the templates and
/// the query (the nodes are given beside it).
#[derive(Clone, Copy)]
pub struct Synthesis<'a> {
    /// The backend whose model the plan mirrors.
    pub backend: &'a Backend,
    /// The response mode.
    pub mode: ResponseMode,
    /// The flags of `ask` or `summarize`.
    pub args: &'a SynthArgs,
    /// The template files read.
    pub templates: &'a CustomTemplates,
    /// The question (or summarize's query).
    pub query: &'a str,
}

impl<'a> Synthesis<'a> {
    /// The synthesis of `query` in `mode` with `backend`'s limits, the flags and the
    /// templates.
    pub fn new(
        backend: &'a Backend,
        mode: ResponseMode,
        args: &'a SynthArgs,
        templates: &'a CustomTemplates,
        query: &'a str,
    ) -> Self {
        Self {
            backend,
            mode,
            args,
            templates,
            query,
        }
    }

    /// The synthesizer over `model` with these flags and templates, reporting to
    /// `observer`; a `dry_run` (a plan over a [`PlanningModel`]) makes no spans.
    pub fn synthesizer(
        &self,
        model: Arc<dyn LanguageModel>,
        observer: Arc<dyn Observer>,
        dry_run: bool,
    ) -> Result<Synthesizer> {
        build_synthesizer(
            model,
            self.backend,
            self.mode,
            self.args,
            self.templates,
            observer,
            dry_run,
        )
    }
}

/// Counts the calls a synthesis of `nodes` will make, with the same packing as the run and
/// no model call: the synthesis runs against a [`PlanningModel`] that answers at once
/// with the longest answer allowed. It counts with the local tokenizer only (no
/// `/tokenize` round trips to a server), so it costs only packing.
pub async fn estimate(synthesis: &Synthesis<'_>, nodes: Vec<Node>) -> Result<Estimate> {
    let backend = synthesis.backend;
    let planner = Arc::new(PlanningModel::new(
        backend.model.info(),
        backend.budget_tokenizer.clone(),
    ));
    let synth = synthesis.synthesizer(planner.clone(), Arc::new(Fanout::default()), true)?;
    synth.synthesize(synthesis.query, nodes).await?;
    let calls = planner.calls();
    let levels = (synthesis.mode == ResponseMode::TreeSummarize)
        .then(|| calls.iter().map(|c| c.level + 1).max().unwrap_or(0));
    Ok(Estimate {
        calls: calls.len(),
        levels,
        prompt_tokens: calls.iter().map(|c| c.prompt_tokens).sum(),
        rows: rows(&calls),
    })
}

/// Plans the synthesis and prints the plan.
pub async fn run(
    synthesis: &Synthesis<'_>,
    nodes: Vec<Node>,
    trace: Option<Arc<Trace>>,
) -> Result<()> {
    let (backend, mode, args) = (synthesis.backend, synthesis.mode, synthesis.args);
    let info = backend.model.info();
    let planner = Arc::new(PlanningModel::of(backend));
    let mut fanout = Fanout::default();
    if let Some(t) = trace {
        fanout.push(t);
    }
    let observer: Arc<dyn Observer> = Arc::new(fanout);
    let synth = synthesis.synthesizer(planner.clone(), observer, true)?;
    let node_count = nodes.len();
    let response = synth
        .synthesize(synthesis.query, nodes)
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "planning failed, assuming every answer takes all {} output tokens: {e}",
                info.num_output
            )
        })?;
    let rows = rows(&planner.calls());
    let (calls, prompt_tokens, exact) = row_totals(&rows);
    let max_completion = calls * info.num_output;
    let cost = args
        .dry_run
        .price_per_1k
        .map(|p| prompt_tokens as f64 / 1000.0 * p);
    let stdout = io::stdout();
    let mut out = stdout.lock();
    if args.json {
        let steps: Vec<Value> = rows
            .iter()
            .map(|r| {
                json!({
                    "step": r.step, "level": r.level, "calls": r.calls,
                    "prompt_tokens": r.prompt_tokens, "max_prompt_tokens": r.max_prompt_tokens,
                    "exact": r.exact,
                })
            })
            .collect();
        let mut report = json!({
            "plan": true,
            "mode": mode.as_str(),
            "backend": backend.name(),
            "model": info.name,
            "context_window": info.context_window,
            "num_output": info.num_output,
            "nodes": node_count,
            "steps": steps,
            "total": {
                "calls": calls,
                "prompt_tokens": prompt_tokens,
                "max_completion_tokens": max_completion,
                "exact": exact,
            },
        });
        if let Some(obj) = report.as_object_mut() {
            if let (Some(p), Some(c)) = (args.dry_run.price_per_1k, cost) {
                obj.insert("price_per_1k".into(), json!(p));
                obj.insert("estimated_cost_usd".into(), json!(c));
            }
            if let Some(t) = &response.truncation {
                obj.insert("truncation".into(), json!({"dropped_tokens": t.dropped_tokens, "dropped_node_ids": t.dropped_node_ids}));
            }
        }
        write_json(&mut out, &report)?;
        return Ok(());
    }
    let subject = format!(
        "{mode} over {node_count} node{}",
        if node_count == 1 { "" } else { "s" }
    );
    let without_calls = format!("no model call is needed ({mode} answers without a model)");
    let plan = TextPlan {
        subject: &subject,
        rows: &rows,
        price_per_1k: args.dry_run.price_per_1k,
        without_calls: &without_calls,
    };
    plan.write(&mut out, backend, &info)?;
    if rows.is_empty() {
        return Ok(out.flush()?);
    }
    if let Some(t) = &response.truncation {
        writeln!(
            out,
            "note: {mode} would cut {} tokens of context to fit one prompt",
            t.dropped_tokens
        )?;
    }
    Ok(out.flush()?)
}

/// A plan as text: what is planned, its rows, the price for the cost.
pub(crate) struct TextPlan<'a> {
    /// What was planned (`compact over 12 nodes`, `40 requests`).
    pub subject: &'a str,
    /// The calls by step and level.
    pub rows: &'a [Row],
    /// `--price-per-1k`.
    pub price_per_1k: Option<f64>,
    /// The line printed when no call is needed.
    pub without_calls: &'a str,
}

impl TextPlan<'_> {
    /// Writes the heading, the table, the completion tokens and the estimated cost.
    pub(crate) fn write(
        &self,
        out: &mut impl Write,
        backend: &Backend,
        info: &ModelInfo,
    ) -> io::Result<()> {
        writeln!(
            out,
            "plan: {}, backend {} (model {}), context window {}, up to {} output tokens per call",
            self.subject,
            backend.name(),
            info.name,
            info.context_window,
            info.num_output
        )?;
        writeln!(out, "dry run: no model was called")?;
        writeln!(out)?;
        if self.rows.is_empty() {
            return writeln!(out, "{}", self.without_calls);
        }
        let (calls, prompt_tokens, exact) = row_totals(self.rows);
        write_table(out, self.rows)?;
        writeln!(out)?;
        writeln!(
            out,
            "completion tokens: at most {} ({} per call)",
            calls * info.num_output,
            info.num_output
        )?;
        if let Some(p) = self.price_per_1k {
            let cost = prompt_tokens as f64 / 1000.0 * p;
            writeln!(
                out,
                "estimated prompt cost: ${cost:.4} ({prompt_tokens} prompt tokens at ${p} per 1K{})",
                if exact { "" } else { "; upper bound" }
            )?;
        }
        Ok(())
    }
}

/// The plan's table: one row per step and level, then the total.
fn write_table(out: &mut impl Write, rows: &[Row]) -> io::Result<()> {
    let calls: usize = rows.iter().map(|r| r.calls).sum();
    let prompt_tokens: usize = rows.iter().map(|r| r.prompt_tokens).sum();
    let w = rows.iter().map(|r| r.step.len()).max().unwrap_or(4).max(5);
    writeln!(
        out,
        "{:<w$}  {:>5}  {:>6}  {:>13}  {:>14}",
        "step", "level", "calls", "prompt tokens", "largest prompt"
    )?;
    for r in rows {
        let label = if r.exact { "exact" } else { "upper bound" };
        writeln!(
            out,
            "{:<w$}  {:>5}  {:>6}  {:>13}  {:>14}  {label}",
            r.step, r.level, r.calls, r.prompt_tokens, r.max_prompt_tokens
        )?;
    }
    let label = if rows.len() <= 1 {
        "exact"
    } else {
        "upper bound"
    };
    writeln!(
        out,
        "{:<w$}  {:>5}  {:>6}  {:>13}  {:>14}  {label}",
        "total", "", calls, prompt_tokens, ""
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use synthkit::text::BpeTokenizer;

    #[test]
    fn filler_has_exactly_n_tokens() {
        let tok = BpeTokenizer::cl100k_base().shared();
        for n in [1, 2, 7, 256, 1000] {
            assert_eq!(tok.count(&filler(&tok, n)), n, "n = {n}");
        }
        assert_eq!(filler(&tok, 0), "");
    }

    #[test]
    fn rows_group_and_label() {
        let p = |step, level, t| Planned {
            step,
            level,
            prompt_tokens: t,
        };
        let r = rows(&[p("qa", 0, 10), p("refine", 0, 20), p("refine", 0, 30)]);
        assert_eq!(r.len(), 2);
        assert!(r[0].exact && !r[1].exact);
        assert_eq!(
            (r[1].calls, r[1].prompt_tokens, r[1].max_prompt_tokens),
            (2, 50, 30)
        );
    }
}
