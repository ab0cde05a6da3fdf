//! The totals of each system and mode ([`Totals`]) and paired comparisons of systems
//! and modes on the same cases ([`paired`]).

use serde::{Deserialize, Serialize};

use super::noise::{Paired, sign_test};
use super::score::Row;

/// How many case ids [`Totals::wrong_ids`] keeps (the table names them).
pub const NAMED_WRONG: usize = 8;

/// The totals of one system in one mode.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Totals {
    /// Who answered.
    pub system: String,
    /// The mode.
    pub mode: String,
    /// Cases scored.
    pub cases: usize,
    /// Correct rows (answerable answered right, unanswerable abstained).
    pub correct: usize,
    /// `correct / cases` (0 with no case).
    pub correct_rate: f64,
    /// The 95 % bootstrap interval of `correct_rate` ([`super::noise::bootstrap_interval`];
    /// `None` with no case).
    #[serde(default)]
    pub correct_interval: Option<(f64, f64)>,
    /// Answerable cases.
    pub answerable: usize,
    /// Answerable cases answered right.
    pub answerable_correct: usize,
    /// Unanswerable cases.
    pub unanswerable: usize,
    /// Unanswerable cases whose answer abstained (right).
    pub abstained_right: usize,
    /// Answerable cases whose answer abstained (wrong).
    pub false_abstentions: usize,
    /// Runs that failed.
    pub errors: usize,
    /// Mean F1 over the cases.
    pub f1_mean: f64,
    /// Answerable cases whose answer was not in the nodes (failed runs are left out of
    /// the three `lost_in_*` counts: they are `errors`).
    pub lost_in_retrieval: usize,
    /// Answerable cases whose answer was in the nodes but not in the prompts sent.
    pub lost_in_packing: usize,
    /// Answerable cases whose answer reached the prompts (or the nodes, prompts unknown)
    /// and were still answered wrong.
    pub lost_in_synthesis: usize,
    /// Mean citation precision over the rows that have one.
    pub cite_precision: Option<f64>,
    /// Mean citation recall over the rows that have one.
    pub cite_recall: Option<f64>,
    /// Quote mode: the quotes of every row by status (`None`: no row checked quotes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quotes: Option<synthkit::citation::QuoteCounts>,
    /// How often the answer guards acted, every row together (`None`: in no row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guards: Option<super::answers::GuardCounts>,
    /// The rows whose answers were grounding-checked, and of them those only partly
    /// supported and those unsupported (`None`: no row was checked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grounding: Option<GroundingCounts>,
    /// Model calls.
    pub calls: u64,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Of the prompt tokens, those the servers read from their prompt caches.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Calls cut at the output limit.
    pub truncated_calls: u64,
    /// What every row cost at the prices given (`None`: no row was priced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Wall time of every run together (milliseconds).
    pub wall_ms: f64,
    /// The ids of the first [`NAMED_WRONG`] cases answered wrong (failed runs too), in
    /// the rows' order; `cases - correct` of them in all.
    #[serde(default)]
    pub wrong_ids: Vec<String>,
    /// Rows whose case names evidence that no node of the run has
    /// ([`Row::unknown_evidence`]).
    #[serde(default)]
    pub unknown_evidence: usize,
}

impl Totals {
    /// The headings of [`Totals::score_cells`], in order.
    pub const SCORE_HEADINGS: [&'static str; 9] = [
        "correct",
        "95% interval",
        "answerable",
        "abstain",
        "false abst",
        "F1",
        "cite P",
        "cite R",
        "lost r/p/s",
    ];

    /// The scores as the cells of a table row (the terminal table and the HTML page both
    /// show them): correct with its rate and the rate's 95 % interval, answerable answered
    /// right, right abstentions,
    /// false abstentions, mean F1, citation precision and recall, and where wrong answers
    /// were lost (retrieval/packing/synthesis). `-` where nothing was measured.
    pub fn score_cells(&self) -> [String; 9] {
        let ratio = |n: usize, of: usize| {
            if of == 0 {
                "-".to_string()
            } else {
                format!("{n}/{of}")
            }
        };
        let mean = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.2}"));
        [
            format!("{} ({:.0}%)", self.correct, self.correct_rate * 100.0),
            self.correct_interval.map_or_else(
                || "-".to_string(),
                |(low, high)| format!("{:.0}-{:.0}%", low * 100.0, high * 100.0),
            ),
            ratio(self.answerable_correct, self.answerable),
            ratio(self.abstained_right, self.unanswerable),
            ratio(self.false_abstentions, self.answerable),
            format!("{:.2}", self.f1_mean),
            mean(self.cite_precision),
            mean(self.cite_recall),
            format!(
                "{}/{}/{}",
                self.lost_in_retrieval, self.lost_in_packing, self.lost_in_synthesis
            ),
        ]
    }
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

impl Totals {
    /// The totals of `rows` (all of one system and mode, whose names it takes from the
    /// first).
    pub fn of(rows: &[&Row]) -> Self {
        let mut t = Totals::default();
        if let Some(first) = rows.first() {
            t.system = first.system.clone();
            t.mode = first.mode.clone();
        }
        t.cases = rows.len();
        for r in rows {
            t.correct += usize::from(r.correct);
            t.errors += usize::from(r.error.is_some());
            if r.answerable {
                t.answerable += 1;
                t.answerable_correct += usize::from(r.correct);
                t.false_abstentions += usize::from(r.abstained);
                // A failed run is an error, not an answer lost somewhere: it sent no
                // prompt, or none that counts.
                match (r.in_nodes, r.in_prompts) {
                    _ if r.error.is_some() => {}
                    (Some(false), _) => t.lost_in_retrieval += 1,
                    (_, Some(false)) => t.lost_in_packing += 1,
                    (Some(true), _) | (_, Some(true)) if !r.correct => t.lost_in_synthesis += 1,
                    _ => {}
                }
            } else {
                t.unanswerable += 1;
                t.abstained_right += usize::from(r.abstained);
            }
            // Counts read from files: never wrapped, at most u64::MAX.
            t.calls = t.calls.saturating_add(r.calls);
            t.prompt_tokens = t.prompt_tokens.saturating_add(r.prompt_tokens);
            t.cached_prompt_tokens = t
                .cached_prompt_tokens
                .saturating_add(r.cached_prompt_tokens);
            t.completion_tokens = t.completion_tokens.saturating_add(r.completion_tokens);
            t.truncated_calls = t.truncated_calls.saturating_add(r.truncated_calls);
            if let Some(c) = r.cost_usd {
                t.cost_usd = Some(t.cost_usd.unwrap_or(0.0) + c);
            }
            t.wall_ms += r.wall_ms;
            if !r.correct && t.wrong_ids.len() < NAMED_WRONG {
                t.wrong_ids.push(r.id.clone());
            }
            t.unknown_evidence += usize::from(!r.unknown_evidence.is_empty());
        }
        if t.cases > 0 {
            t.correct_rate = t.correct as f64 / t.cases as f64;
        }
        let outcomes: Vec<bool> = rows.iter().map(|r| r.correct).collect();
        t.correct_interval = super::noise::bootstrap_interval(&outcomes);
        t.f1_mean = mean(rows.iter().map(|r| r.f1)).unwrap_or(0.0);
        t.cite_precision = mean(rows.iter().filter_map(|r| r.cite_precision));
        t.cite_recall = mean(rows.iter().filter_map(|r| r.cite_recall));
        t.quotes = rows
            .iter()
            .filter_map(|r| r.quotes)
            .reduce(synthkit::citation::QuoteCounts::plus);
        t.guards = rows
            .iter()
            .filter_map(|r| r.guards)
            .reduce(super::answers::GuardCounts::plus);
        t.grounding = rows.iter().filter_map(|r| r.grounding).fold(
            None,
            |acc: Option<GroundingCounts>, s| {
                let mut c = acc.unwrap_or_default();
                c.checked = c.checked.saturating_add(1);
                match s {
                    synthkit::grounding::GroundingStatus::Partly => c.partly += 1,
                    synthkit::grounding::GroundingStatus::Unsupported => c.unsupported += 1,
                    _ => {}
                }
                Some(c)
            },
        );
        t
    }
}

/// The rows of each (system, mode) of `rows`, in the order each first appears.
pub(crate) fn groups(rows: &[Row]) -> Vec<((&str, &str), Vec<&Row>)> {
    let mut out: Vec<((&str, &str), Vec<&Row>)> = Vec::new();
    for r in rows {
        let key = (r.system.as_str(), r.mode.as_str());
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some((_, group)) => group.push(r),
            None => out.push((key, vec![r])),
        }
    }
    out
}

/// The totals of each (system, mode) of `rows`, in the order each first appears.
pub fn totals(rows: &[Row]) -> Vec<Totals> {
    groups(rows)
        .into_iter()
        .map(|(_, group)| Totals::of(&group))
        .collect()
}

/// How many answers the grounding check read, by verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct GroundingCounts {
    /// Answers checked.
    pub checked: u64,
    /// Of them, partly supported.
    pub partly: u64,
    /// Of them, unsupported.
    pub unsupported: u64,
}

impl Paired {
    /// Compares the rows of side `a` with those of side `b`, matched by case id (a case
    /// one side lacks is left out).
    pub fn of(a: &str, a_rows: &[&Row], b: &str, b_rows: &[&Row]) -> Self {
        let mut p = Paired {
            a: a.to_string(),
            b: b.to_string(),
            ..Paired::default()
        };
        for ra in a_rows {
            let Some(rb) = b_rows.iter().find(|r| r.id == ra.id) else {
                continue;
            };
            p.cases += 1;
            match (ra.correct, rb.correct) {
                (true, true) => p.both += 1,
                (true, false) => p.only_a += 1,
                (false, true) => p.only_b += 1,
                (false, false) => p.neither += 1,
            }
        }
        p.p_value = sign_test(p.only_a, p.only_b);
        p
    }
}

/// Every pair of systems that ran the same mode, and every pair of modes of one system,
/// compared on the cases both answered; in the order the sides first appear in `rows`.
pub fn paired(rows: &[Row]) -> Vec<Paired> {
    let sides = groups(rows);
    let mut out = Vec::new();
    for (i, (a, a_rows)) in sides.iter().enumerate() {
        for (b, b_rows) in sides.get(i + 1..).unwrap_or_default() {
            // Same mode across systems, or same system across modes.
            if a.0 != b.0 && a.1 != b.1 {
                continue;
            }
            out.push(Paired::of(
                &format!("{}/{}", a.0, a.1),
                a_rows,
                &format!("{}/{}", b.0, b.1),
                b_rows,
            ));
        }
    }
    out
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
