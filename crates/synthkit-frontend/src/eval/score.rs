//! The scores of one answer ([`Row`]) and of each system and mode
//! ([`Totals`](super::totals::Totals)).
//!
//! A row is **correct** when an answerable case's answer holds an accepted alternative
//! (and the run did not fail), or when an unanswerable case's answer abstains. Its F1 is
//! the best token F1 for an answerable case, and 1 or 0 (abstained or not) for an
//! unanswerable one. A failed run is wrong, with an F1 of 0.
//!
//! Where an answer was lost, for the answerable cases: **in retrieval** when no
//! alternative is in the nodes (`in_nodes` false), **in packing** when it is in the nodes
//! but not in the prompts sent (`in_prompts` false), **in synthesis** when it reached the
//! prompts (or the nodes, when the prompts are unknown) and the answer is still wrong. A
//! failed run is counted in `errors` and in none of these.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::case::{AnswerLine, Case};
use super::metrics::{Haystack, abstains, best_f1, citation_scores};

/// The scores of one answer: one case, one mode, one system.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Row {
    /// The case's id.
    pub id: String,
    /// Who answered.
    pub system: String,
    /// The mode or strategy.
    pub mode: String,
    /// The answer's text.
    pub answer: String,
    /// Why the run failed, if it did.
    #[serde(default)]
    pub error: Option<String>,
    /// Whether the case is answerable.
    pub answerable: bool,
    /// See the module documentation.
    pub correct: bool,
    /// Token F1 (see the module documentation).
    pub f1: f64,
    /// Whether the answer abstains.
    pub abstained: bool,
    /// Whether an alternative is in the nodes' text (`None`: unknown or unanswerable).
    #[serde(default)]
    pub in_nodes: Option<bool>,
    /// Whether an alternative is in the prompts sent (`None`: prompts unknown, or
    /// unanswerable).
    #[serde(default)]
    pub in_prompts: Option<bool>,
    /// Citation precision against the evidence (`None`: no citations known, or none).
    #[serde(default)]
    pub cite_precision: Option<f64>,
    /// Citation recall against the evidence (`None`: no citations known, or no evidence).
    #[serde(default)]
    pub cite_recall: Option<f64>,
    /// Quote mode: the answer's quotes by status (`None`: no quote checked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quotes: Option<synthkit::citation::QuoteCounts>,
    /// How often the engine's answer guards acted (`None`: none did, or not synthkit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guards: Option<super::answers::GuardCounts>,
    /// The grounding check's verdict of the answer (`None`: not checked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grounding: Option<synthkit::grounding::GroundingStatus>,
    /// Model calls.
    #[serde(default)]
    pub calls: u64,
    /// Prompt tokens.
    #[serde(default)]
    pub prompt_tokens: u64,
    /// Of the prompt tokens, those the server read from its prompt cache (0: none, or
    /// the server does not say).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_prompt_tokens: u64,
    /// Completion tokens.
    #[serde(default)]
    pub completion_tokens: u64,
    /// Calls cut at the output limit.
    #[serde(default)]
    pub truncated_calls: u64,
    /// What the calls cost at the prices given ([`Row::price`]; `None`: no prices).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Wall time (milliseconds).
    #[serde(default)]
    pub wall_ms: f64,
    /// Where the run's report is, when one was written.
    #[serde(default)]
    pub report: Option<String>,
    /// The case's tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// The [`Case::sha256`] of the case scored: a resumed evaluation runs or scores again
    /// a row whose case has changed since (`None` in rows written before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case_sha256: Option<String>,
    /// The [`AnswerLine::sha256`] of the answers line scored (`None`: a run made here, or
    /// a row written before it was kept): a resumed evaluation scores again a row whose
    /// line has changed since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_sha256: Option<String>,
    /// Evidence ids of the case that name no node the run was given (a `paths` case,
    /// whose nodes are known once its files are read): its citation recall counts them
    /// as not cited. Set by the caller that read the nodes ([`Row::check_evidence`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown_evidence: Vec<String>,
}

impl Row {
    /// Sets [`Row::cost_usd`] to what the row's tokens cost at `prices`: its cached prompt
    /// tokens at the cached price. Rows of every system are priced alike, so that their
    /// costs compare.
    pub fn price(&mut self, prices: &synthkit::cost::Prices) {
        let mut usage = synthkit::UsageTotals::default();
        usage.calls = self.calls;
        usage.prompt_tokens = self.prompt_tokens;
        usage.cached_prompt_tokens = self.cached_prompt_tokens;
        usage.completion_tokens = self.completion_tokens;
        prices.price(&mut usage);
        self.cost_usd = usage.cost_usd;
    }

    /// Records the case's evidence ids that name none of `node_ids` (the nodes its run
    /// was given) in [`Row::unknown_evidence`], and returns them.
    pub fn check_evidence<'a>(
        &mut self,
        evidence: &[String],
        node_ids: impl IntoIterator<Item = &'a str>,
    ) -> &[String] {
        let ids: HashSet<&str> = node_ids.into_iter().collect();
        self.unknown_evidence = evidence
            .iter()
            .filter(|e| !ids.contains(e.as_str()))
            .cloned()
            .collect();
        &self.unknown_evidence
    }
}

/// Scores `answer` to `case`. `system` names the system when the answer line names none;
/// `nodes_text` is the text of the nodes the system was given (for `in_nodes`; `None`:
/// unknown).
pub fn score(case: &Case, system: &str, answer: &AnswerLine, nodes_text: Option<&str>) -> Row {
    let failed = answer.error.is_some();
    let abstained = !failed && abstains(&answer.answer, answer.abstained);
    let text = Haystack::new(&answer.answer);
    let found = !failed && text.has_any(&case.answers);
    let (correct, f1) = if case.answerable {
        let f1 = match best_f1(&case.answers, &answer.answer) {
            Some(f) if !failed => f,
            _ => f64::from(u8::from(found)),
        };
        (found, f1)
    } else {
        (abstained, f64::from(u8::from(abstained)))
    };
    let present = |t: &str| {
        case.answerable
            .then(|| Haystack::new(t).has_any(&case.answers))
    };
    let in_nodes = nodes_text.and_then(present);
    let in_prompts = answer.prompts.as_ref().and_then(|p| present(&p.join("\n")));
    let (cite_precision, cite_recall) = match &answer.citations {
        Some(cited) if !failed => citation_scores(cited, &case.evidence),
        _ => (None, None),
    };
    Row {
        id: case.id.clone(),
        system: answer.system.clone().unwrap_or_else(|| system.to_string()),
        mode: answer.mode.clone(),
        answer: answer.answer.clone(),
        error: answer.error.clone(),
        answerable: case.answerable,
        correct,
        f1,
        abstained,
        in_nodes,
        in_prompts,
        cite_precision,
        cite_recall,
        quotes: answer.quotes.filter(|_| !failed),
        guards: answer.guards,
        grounding: answer.grounding,
        calls: answer.calls.unwrap_or(0),
        prompt_tokens: answer.prompt_tokens.unwrap_or(0),
        cached_prompt_tokens: answer.cached_prompt_tokens.unwrap_or(0),
        completion_tokens: answer.completion_tokens.unwrap_or(0),
        truncated_calls: answer.truncated_calls.unwrap_or(0),
        cost_usd: None,
        wall_ms: answer.wall_ms.unwrap_or(0.0),
        report: None,
        tags: case.tags.clone(),
        case_sha256: Some(case.sha256.clone()),
        answer_sha256: answer.sha256.clone(),
        unknown_evidence: Vec::new(),
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
