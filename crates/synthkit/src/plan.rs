//! Dry runs: the calls and prompt tokens a synthesis will spend, counted before it starts
//! and without a model call ([`Synthesizer::plan`]).
//!
//! The synthesis runs for real against a local stand-in model whose `info()`, tokenizer
//! and exact prompt counter are the real model's (context window, output reserve, chat
//! flag, system prompt; a server's `/tokenize` through its chat template), and which
//! answers every call at once with filler at least `num_output` tokens long by both the
//! local tokenizer and the exact counter: the longest answer the real model may give.
//! Every request's step and prompt tokens (counted as the run counts them) are recorded.
//!
//! What the numbers mean:
//!
//! - The first step (or tree level) does not depend on any reply: its calls and prompt
//!   tokens are **exact** ([`PlanRow::exact`]).
//! - Later steps (tree levels above the first, refine steps) depend on the replies; with
//!   the longest replies each prompt is as large as it may be and each packing has the
//!   least room, so their calls and prompt tokens are **upper bounds**: a shorter reply
//!   leaves more room (fewer pieces), and an empty one is dropped.
//!
//! Both hold as long as the server accepts every prompt within the window it reports: a
//! server that rejects a prompt as too long makes the run lower its limit and pack again
//! (more, smaller calls), which no plan can foresee.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), synthkit::SynthError> {
//! use synthkit::{Node, ResponseMode, Synthesizer, model::ModelInfo, testing::ScriptedModel};
//!
//! let info = ModelInfo::new("m").with_context_window(300).with_num_output(64);
//! let model = std::sync::Arc::new(ScriptedModel::constant(info, "never called"));
//! let synth = Synthesizer::builder(model.clone()).mode(ResponseMode::TreeSummarize).build()?;
//! let nodes: Vec<Node> = (0..6)
//!     .map(|i| Node::new(i.to_string(), "The mirror is cleaned every six months. ".repeat(12)))
//!     .collect();
//! let plan = synth.plan("Summarise.", nodes).await?;
//! assert!(plan.calls > 1);
//! assert!(plan.rows[0].exact && !plan.exact); // level 0 exact, the levels above bounds
//! assert!(model.requests().is_empty()); // no model call
//! # Ok(()) }
//! ```

use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::json;

use crate::error::SynthError;
use crate::model::{
    Completion, LanguageModel, ModelFuture, ModelInfo, ModelRequest, SharedCounter,
};
use crate::node::Node;
use crate::observe::Observer;
use crate::prompt::RenderedPrompt;
use crate::response::Truncation;
use crate::synth::{SynthesisInput, Synthesizer};
use crate::text::SharedTokenizer;

/// Attempts at lengthening the filler until the exact counter finds it long enough.
const MAX_FILLER_ROUNDS: usize = 8;

/// One planned call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Planned {
    step: &'static str,
    level: u32,
    prompt_tokens: usize,
    /// The call's output limit (the output reserve, or an intermediate call's bound, plus
    /// the thinking reserve).
    max_tokens: usize,
}

/// One row of a [`Plan`]: the calls of one step at one tree level.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PlanRow {
    /// The step (`qa`, `refine`, `summary`, `generate`, `map`, `reduce`).
    pub step: &'static str,
    /// The tree level (0 but for `tree_summarize` and `map_reduce`).
    pub level: u32,
    /// Model calls: exact when [`PlanRow::exact`], else at most this many.
    pub calls: usize,
    /// Prompt tokens of all the calls, counted as the run counts them (the model's exact
    /// counter when it has one): exact, or at most this many.
    pub prompt_tokens: usize,
    /// The largest single prompt.
    pub max_prompt_tokens: usize,
    /// Whether the row is exact (it depends on no reply); else its numbers are upper
    /// bounds.
    pub exact: bool,
}

/// What a synthesis will spend, counted before any model call ([`Synthesizer::plan`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Plan {
    /// The calls by step and level, in the order they are made.
    pub rows: Vec<PlanRow>,
    /// Model calls in all: exact when [`Plan::exact`], else at most this many.
    pub calls: usize,
    /// Prompt tokens in all: exact when [`Plan::exact`], else at most this many.
    pub prompt_tokens: usize,
    /// Completion tokens at most: the sum of the calls' `max_tokens` (each may answer with
    /// its whole output limit, the thinking reserve included).
    pub max_completion_tokens: usize,
    /// Whether every row is exact.
    pub exact: bool,
    /// What `simple_summarize` would cut to fit one prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncation: Option<Truncation>,
}

impl Default for Plan {
    /// The plan of no call: exact.
    fn default() -> Self {
        Self::of_rows(Vec::new(), 0)
    }
}

impl Plan {
    /// A plan of `rows`, whose calls answer with at most `max_completion_tokens` tokens
    /// together.
    fn of_rows(rows: Vec<PlanRow>, max_completion_tokens: usize) -> Self {
        Self {
            calls: rows.iter().map(|r| r.calls).sum(),
            prompt_tokens: rows.iter().map(|r| r.prompt_tokens).sum(),
            max_completion_tokens,
            exact: rows.iter().all(|r| r.exact),
            rows,
            truncation: None,
        }
    }

    /// Tree levels, the final call's included (the highest level plus one; 0 without
    /// calls).
    pub fn levels(&self) -> u32 {
        self.rows.iter().map(|r| r.level + 1).max().unwrap_or(0)
    }

    /// Adds another synthesis's plan (a batch's): rows of one step and level are summed,
    /// and a sum is exact only if each of its parts was. The truncation is left as it is.
    pub fn merge(&mut self, other: Plan) {
        for row in other.rows {
            match self
                .rows
                .iter_mut()
                .find(|r| r.step == row.step && r.level == row.level)
            {
                Some(r) => {
                    r.calls += row.calls;
                    r.prompt_tokens += row.prompt_tokens;
                    r.max_prompt_tokens = r.max_prompt_tokens.max(row.max_prompt_tokens);
                    r.exact &= row.exact;
                }
                None => self.rows.push(row),
            }
        }
        self.calls += other.calls;
        self.prompt_tokens += other.prompt_tokens;
        self.max_completion_tokens += other.max_completion_tokens;
        self.exact = self.rows.iter().all(|r| r.exact);
    }
}

impl Synthesizer {
    /// The calls and prompt tokens a synthesis of `nodes` will spend, without a model call:
    /// see [`crate::plan`] for what is exact and what is an upper bound.
    pub async fn plan(&self, query: &str, nodes: Vec<Node>) -> Result<Plan, SynthError> {
        self.plan_input(&SynthesisInput::new(query, nodes)).await
    }

    /// [`Synthesizer::plan`] with every option of [`SynthesisInput`], which it only reads
    /// (the run can take it afterwards).
    ///
    /// The dry run packs exactly as the run will (same budget, templates, counter; a
    /// counter's round trips are made). It reports to no observer (a plan is not a run:
    /// metrics and progress must not count its calls) and makes no spans.
    pub async fn plan_input(&self, input: &SynthesisInput) -> Result<Plan, SynthError> {
        self.plan_observed(input, None).await
    }

    /// The plan with escalation `e`: the first synthesis's, exact where it is, and the
    /// wider one's as an upper bound.
    async fn plan_escalating(
        &self,
        input: &SynthesisInput,
        e: crate::Escalation,
        observer: Option<std::sync::Arc<dyn crate::observe::Observer>>,
    ) -> Result<Plan, SynthError> {
        let first = self
            .to_builder()
            .without_escalation()
            .build()?
            .plan_observed(
                &crate::synth::escalation::first_of(input, e),
                observer.clone(),
            )
            .await?;
        let mut wider = self.wider(e)?.plan_observed(input, observer).await?;
        for row in &mut wider.rows {
            row.exact = false;
        }
        let mut plan = first;
        plan.merge(wider);
        Ok(plan)
    }

    /// [`Synthesizer::plan_input`], reporting the dry run's events (the planned calls,
    /// none of them made) to `observer`: a trace of the plan.
    pub async fn plan_observed(
        &self,
        input: &SynthesisInput,
        observer: Option<Arc<dyn Observer>>,
    ) -> Result<Plan, SynthError> {
        if let Some(e) = self.escalation() {
            return Box::pin(self.plan_escalating(input, e, observer)).await;
        }
        let s = self.settings();
        let info = s.model.info();
        let planner = Arc::new(
            PlanningModel::new(info, s.budget.tokenizer().clone(), s.counter.clone()).await?,
        );
        let dry = self
            .to_builder()
            .dry_run(planner.clone(), observer)
            .build()?;
        let truncation = dry.run_borrowed(input).await?;
        let calls = planner.calls();
        let max_completion = calls
            .iter()
            .fold(0usize, |sum, c| sum.saturating_add(c.max_tokens));
        let mut plan = Plan::of_rows(rows(&calls), max_completion);
        plan.truncation = truncation;
        Ok(plan)
    }
}

/// A stand-in model for planning: mirrors a real model's limits and counting, and answers
/// at once with the longest reply, recording each request.
struct PlanningModel {
    info: ModelInfo,
    tokenizer: SharedTokenizer,
    /// The reply; sized again at the first call (see [`PlanningModel::reply`]).
    filler: Mutex<Option<String>>,
    /// The reply before the first call.
    base_filler: String,
    calls: Mutex<Vec<Planned>>,
    counter: Option<SharedCounter>,
}

impl PlanningModel {
    /// A planner mirroring `info`, counting with `tokenizer` and `counter`; its filler is
    /// at least `num_output` tokens by both.
    async fn new(
        info: ModelInfo,
        tokenizer: SharedTokenizer,
        counter: Option<SharedCounter>,
    ) -> Result<Self, SynthError> {
        let filler = match &counter {
            Some(c) => long_filler(&tokenizer, c, info.num_output).await?,
            None => filler(&tokenizer, info.num_output),
        };
        Ok(Self {
            info,
            tokenizer,
            filler: Mutex::new(None),
            base_filler: filler,
            calls: Mutex::new(Vec::new()),
            counter,
        })
    }

    /// The longest reply. With an exact counter the budget packs by local counts, so a
    /// reply must be long by both: at the first call (whose prompt holds the caller's own
    /// text) the filler is lengthened to the local tokens `num_output` exact tokens of
    /// that text take, and a tenth more.
    fn reply(&self, request: &ModelRequest) -> String {
        let Ok(mut filler) = self.filler.lock() else {
            return self.base_filler.clone();
        };
        if let Some(f) = filler.as_ref() {
            return f.clone();
        }
        let mut text = self.base_filler.clone();
        let exact = request.prompt_tokens;
        if self.counter.is_some() && exact > 0 {
            let local = local_count(&self.tokenizer, &request.prompt);
            let n = self.info.num_output;
            let want = (n as f64 * local as f64 / exact as f64 * 1.1).ceil() as usize;
            for _ in 0..MAX_FILLER_ROUNDS {
                let have = self.tokenizer.count(&text);
                if have >= want {
                    break;
                }
                text.push_str(&" word".repeat(want - have));
            }
        }
        *filler = Some(text.clone());
        text
    }

    fn record(&self, request: &ModelRequest) {
        if let Ok(mut calls) = self.calls.lock() {
            calls.push(Planned {
                step: request.step().step.as_str(),
                level: request.step().level,
                prompt_tokens: request.prompt_tokens,
                max_tokens: request.max_tokens,
            });
        }
    }

    fn calls(&self) -> Vec<Planned> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

impl LanguageModel for PlanningModel {
    fn info(&self) -> ModelInfo {
        self.info.clone()
    }

    fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, Completion> {
        self.record(request);
        // A structured step (answer filtering) answers a satisfied verdict of full length.
        let filler = self.reply(request);
        let text = match (&request.schema, request.step().step) {
            // A map_reduce record holding the longest information.
            (Some(_), crate::mode::Step::Map | crate::mode::Step::Reduce) => json!({
                "information": filler, "rationale": "", "answer": "", "confidence": 5,
                "no_information": false
            })
            .to_string(),
            (Some(_), _) => json!({"query_satisfied": true, "answer": filler}).to_string(),
            (None, _) => filler,
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

/// Filler of at least `n` tokens by `tokenizer` and at least `n` by the exact `counter`
/// (a reply of `n` model tokens is never longer than it, whichever counts): the local
/// filler, lengthened by the words the counter finds missing.
async fn long_filler(
    tokenizer: &SharedTokenizer,
    counter: &SharedCounter,
    n: usize,
) -> Result<String, SynthError> {
    let mut text = filler(tokenizer, n);
    if n == 0 {
        return Ok(text);
    }
    for _ in 0..MAX_FILLER_ROUNDS {
        let prompt = RenderedPrompt::Text(text.clone());
        let counted = counter
            .count_prompts(std::slice::from_ref(&prompt))
            .await
            .map_err(|source| SynthError::Count {
                counter: counter.name().to_string(),
                source,
            })?;
        let exact = counted.first().copied().unwrap_or_default();
        if exact > n {
            // More than `n`: the count of a whole prompt may add special tokens.
            break;
        }
        let missing = n + 1 - exact;
        text.push_str(&" word".repeat(missing));
    }
    Ok(text)
}

/// The local tokens of `prompt`'s text (its messages' contents).
fn local_count(tokenizer: &SharedTokenizer, prompt: &RenderedPrompt) -> usize {
    match prompt {
        RenderedPrompt::Text(t) => tokenizer.count(t),
        RenderedPrompt::Chat(messages) => {
            messages.iter().map(|m| tokenizer.count(&m.content)).sum()
        }
    }
}

/// Groups calls by (step, level) in order of first appearance; the first row is exact.
fn rows(calls: &[Planned]) -> Vec<PlanRow> {
    let mut rows: Vec<PlanRow> = Vec::new();
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
            None => rows.push(PlanRow {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::text::BpeTokenizer;

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
            max_tokens: 4,
        };
        let r = rows(&[p("qa", 0, 10), p("refine", 0, 20), p("refine", 0, 30)]);
        assert_eq!(r.len(), 2);
        assert!(r[0].exact && !r[1].exact);
        assert_eq!(
            (r[1].calls, r[1].prompt_tokens, r[1].max_prompt_tokens),
            (2, 50, 30)
        );
        let plan = Plan::of_rows(r, 12);
        assert_eq!((plan.calls, plan.prompt_tokens), (3, 60));
        assert_eq!((plan.max_completion_tokens, plan.exact), (12, false));
    }

    /// Issue 42: the thinking reserve is on every call's `max_tokens`, so it is in the
    /// plan's completion tokens (it counted the output reserve alone).
    #[tokio::test]
    async fn completion_tokens_count_every_calls_max_tokens_with_the_thinking_reserve() {
        use crate::model::ModelInfo;
        use crate::testing::ScriptedModel;
        use crate::{ResponseMode, Synthesizer};
        let info = ModelInfo::new("m")
            .with_context_window(8000)
            .with_num_output(64);
        let model = Arc::new(ScriptedModel::constant(info, "never called"));
        let nodes: Vec<Node> = (0..3)
            .map(|i| Node::new(i.to_string(), format!("Fact {i}: the mirror is clean.")))
            .collect();
        let mut plans = Vec::new();
        for reserve in [0, 1000] {
            let synth = Synthesizer::builder(model.clone())
                .mode(ResponseMode::Refine)
                .thinking_reserve(reserve)
                .build()
                .unwrap();
            plans.push(synth.plan("When?", nodes.clone()).await.unwrap());
        }
        let (without, with) = (&plans[0], &plans[1]);
        assert_eq!((without.calls, with.calls), (3, 3), "{plans:?}");
        // Each call's output limit: at most the output reserve (refine's first calls may
        // have a smaller bound), plus the whole thinking reserve.
        assert!(without.max_completion_tokens <= 3 * 64, "{without:?}");
        assert!(without.max_completion_tokens >= 64, "{without:?}");
        assert_eq!(
            with.max_completion_tokens,
            without.max_completion_tokens + 3 * 1000,
            "{plans:?}"
        );
        assert!(model.requests().is_empty());
    }

    #[test]
    fn merged_plans_sum_by_step_and_level() {
        let row = |step, calls, exact| PlanRow {
            step,
            level: 0,
            calls,
            prompt_tokens: calls * 10,
            max_prompt_tokens: 10,
            exact,
        };
        let mut a = Plan::of_rows(vec![row("qa", 1, true)], 2);
        a.merge(Plan::of_rows(
            vec![row("qa", 2, true), row("refine", 1, false)],
            6,
        ));
        assert_eq!(a.rows.len(), 2);
        assert_eq!(
            (a.calls, a.prompt_tokens, a.max_completion_tokens),
            (4, 40, 8)
        );
        assert!(!a.exact && a.rows[0].exact);
        assert_eq!(Plan::default().calls, 0);
        assert!(Plan::default().exact);
    }
}
