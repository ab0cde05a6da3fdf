//! Plans, counted and printed: the dry run of `--plan` (`ask`, `summarize`, `batch`) that
//! makes no model call, the size guard of `--max-calls` / `--max-total-prompt-tokens` and
//! the progress bar's length, all from one plan: the library's [`Synthesizer::plan`] (its
//! first step exact, later steps upper bounds). The verbs build the synthesizer; this
//! module counts with it and prints.

use std::io::{self, Write};

use anyhow::Result;
use serde_json::{Value, json};
use synthkit::cost::Prices;
use synthkit::model::ModelInfo;
use synthkit::{Node, Plan, PlanRow, ResponseMode, Synthesizer};

use crate::backend::Backend;
use crate::output::write_json;
use crate::settings::run::{OutputSettings, SizeGuards};

/// The calls a run is expected to make, counted before it starts (for the progress bar
/// and the size check of `--max-calls` / `--max-total-prompt-tokens`): the numbers of
/// `--plan`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Estimate {
    /// Model calls: exact for the first step (or tree level), an upper bound after it.
    pub calls: usize,
    /// Tree levels, the final call's included (`tree_summarize` only).
    pub levels: Option<u32>,
    /// Prompt tokens of all the calls, counted as the run counts them (the backend's exact
    /// counter when it has one).
    pub prompt_tokens: usize,
    /// Completion tokens at most: every call answering with its whole `max_tokens`.
    pub max_completion_tokens: usize,
    /// Whether both are exact (else they are upper bounds).
    pub exact: bool,
    /// The calls by step and level.
    pub(crate) rows: Vec<PlanRow>,
}

impl Estimate {
    /// The estimate of `plan`, a synthesis in `mode`.
    fn of(plan: Plan, mode: ResponseMode) -> Self {
        Self {
            calls: plan.calls,
            levels: (mode == ResponseMode::TreeSummarize).then(|| plan.levels()),
            prompt_tokens: plan.prompt_tokens,
            max_completion_tokens: plan.max_completion_tokens,
            exact: plan.exact,
            rows: plan.rows,
        }
    }
}

/// Counts the calls `synth` will make over `nodes`, with the same packing and the same
/// counter as the run (and as `--plan`) and no model call: [`Synthesizer::plan`].
pub async fn estimate(synth: &Synthesizer, query: &str, nodes: Vec<Node>) -> Result<Estimate> {
    let plan = synth.plan(query, nodes).await?;
    Ok(Estimate::of(plan, synth.mode()))
}

/// Whether a run of `estimate` needs `--yes`: more calls than `--max-calls` or more
/// prompt tokens than `--max-total-prompt-tokens`.
pub fn too_large(estimate: &Estimate, guards: &SizeGuards) -> bool {
    estimate.calls > guards.max_calls || estimate.prompt_tokens > guards.max_total_prompt_tokens
}

/// The error of a run refused for its size: what is over, and the ways on.
pub fn refusal_message(estimate: &Estimate, guards: &SizeGuards) -> String {
    let mut over = Vec::new();
    if estimate.calls > guards.max_calls {
        over.push(format!(
            "{} model calls (--max-calls {})",
            estimate.calls, guards.max_calls
        ));
    }
    if estimate.prompt_tokens > guards.max_total_prompt_tokens {
        over.push(format!(
            "{} prompt tokens (--max-total-prompt-tokens {})",
            estimate.prompt_tokens, guards.max_total_prompt_tokens
        ));
    }
    format!(
        "not started: this run needs {}{}; pass --yes to run it, or read fewer chunks (--top-k N, --include GLOB)",
        if estimate.exact { "" } else { "at most " },
        over.join(" and ")
    )
}

/// What `estimate` may cost at most at `prices`: every prompt token read fresh, every
/// reply as long as its cap.
pub fn cost_bound(estimate: &Estimate, prices: &Prices) -> f64 {
    prices.bound(estimate.prompt_tokens, estimate.max_completion_tokens)
}

/// The error of a run refused for its cost: the plan's figure, the cap, the ways on.
pub fn cost_refusal_message(estimate: &Estimate, prices: &Prices, cap: f64) -> String {
    format!(
        "not started: this run may cost up to ${:.6} ({} model call{}, {} prompt tokens and up to {} completion tokens at the prices given), over --max-cost ${cap}; raise --max-cost, or read fewer chunks (--top-k N, --include GLOB)",
        cost_bound(estimate, prices),
        estimate.calls,
        if estimate.calls == 1 { "" } else { "s" },
        estimate.prompt_tokens,
        estimate.max_completion_tokens,
    )
}

/// Prints the plan of a run refused for its size on standard error.
pub fn print_refusal(backend: &Backend, mode: ResponseMode, estimate: &Estimate) -> Result<()> {
    let info = backend.model().info();
    let stderr = io::stderr();
    let mut out = stderr.lock();
    writeln!(
        out,
        "plan: {mode}, backend {} (model {}), context window {}, up to {} output tokens per call",
        backend.backend, info.name, info.context_window, info.num_output
    )?;
    write_table(&mut out, &estimate.rows)?;
    Ok(out.flush()?)
}

/// Prints `plan`, the plan of one synthesis in `mode` over `node_count` nodes (`ask
/// --plan`, `summarize --plan`) by `backend`'s model (`info`): one JSON object with
/// `--json`, else the text of [`TextPlan`] and the note of a cut context.
pub fn print(
    plan: &Plan,
    backend: &Backend,
    info: &ModelInfo,
    mode: ResponseMode,
    node_count: usize,
    shown: &OutputSettings,
    prices: Option<Prices>,
) -> Result<()> {
    let rows = &plan.rows;
    let (calls, prompt_tokens, exact) = (plan.calls, plan.prompt_tokens, plan.exact);
    let max_completion = plan.max_completion_tokens;
    let cost = shown
        .price_per_1k
        .map(|p| prompt_tokens as f64 / 1000.0 * p);
    let stdout = io::stdout();
    let mut out = stdout.lock();
    if shown.json {
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
            "backend": backend.backend,
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
            if let (Some(p), Some(c)) = (shown.price_per_1k, cost) {
                obj.insert("price_per_1k".into(), json!(p));
                obj.insert("estimated_cost_usd".into(), json!(c));
            }
            if let Some(p) = &prices {
                obj.insert("prices".into(), json!(p));
                obj.insert(
                    "max_cost_usd".into(),
                    json!(p.bound(prompt_tokens, max_completion)),
                );
            }
            if let Some(t) = &plan.truncation {
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
    let text = TextPlan {
        subject: &subject,
        rows,
        price_per_1k: shown.price_per_1k,
        prices,
        max_completion_tokens: max_completion,
        without_calls: &without_calls,
    };
    text.write(&mut out, backend, info)?;
    if rows.is_empty() {
        return Ok(out.flush()?);
    }
    if let Some(t) = &plan.truncation {
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
    pub rows: &'a [PlanRow],
    /// `--price-per-1k`.
    pub price_per_1k: Option<f64>,
    /// `--price-input` and its kin.
    pub prices: Option<Prices>,
    /// Completion tokens at most, all the calls together.
    pub max_completion_tokens: usize,
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
            self.subject, backend.backend, info.name, info.context_window, info.num_output
        )?;
        writeln!(out, "dry run: no model was called")?;
        writeln!(out)?;
        if self.rows.is_empty() {
            return writeln!(out, "{}", self.without_calls);
        }
        let prompt_tokens: usize = self.rows.iter().map(|r| r.prompt_tokens).sum();
        let exact = self.rows.iter().all(|r| r.exact);
        write_table(out, self.rows)?;
        writeln!(out)?;
        writeln!(
            out,
            "completion tokens: at most {} ({} per call)",
            self.max_completion_tokens, info.num_output
        )?;
        if let Some(p) = &self.prices {
            writeln!(
                out,
                "cost: at most ${:.6} ({prompt_tokens} prompt tokens at ${} and {} completion tokens at ${} per million, none read from a cache)",
                p.bound(prompt_tokens, self.max_completion_tokens),
                p.input,
                self.max_completion_tokens,
                p.output
            )?;
        }
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
fn write_table(out: &mut impl Write, rows: &[PlanRow]) -> io::Result<()> {
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
