//! The scores of one answer ([`Row`]) and of each system and mode ([`Totals`]).
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
use super::noise::{Paired, sign_test};

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
    pub quotes: Option<crate::citation::QuoteCounts>,
    /// How often the engine's answer guards acted (`None`: none did, or not synthkit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guards: Option<super::run::GuardCounts>,
    /// The grounding check's verdict of the answer (`None`: not checked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grounding: Option<crate::grounding::GroundingStatus>,
    /// Model calls.
    #[serde(default)]
    pub calls: u64,
    /// Prompt tokens.
    #[serde(default)]
    pub prompt_tokens: u64,
    /// Completion tokens.
    #[serde(default)]
    pub completion_tokens: u64,
    /// Calls cut at the output limit.
    #[serde(default)]
    pub truncated_calls: u64,
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
        completion_tokens: answer.completion_tokens.unwrap_or(0),
        truncated_calls: answer.truncated_calls.unwrap_or(0),
        wall_ms: answer.wall_ms.unwrap_or(0.0),
        report: None,
        tags: case.tags.clone(),
        case_sha256: Some(case.sha256.clone()),
        answer_sha256: answer.sha256.clone(),
        unknown_evidence: Vec::new(),
    }
}

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
    pub quotes: Option<crate::citation::QuoteCounts>,
    /// How often the answer guards acted, every row together (`None`: in no row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guards: Option<super::run::GuardCounts>,
    /// The rows whose answers were grounding-checked, and of them those only partly
    /// supported and those unsupported (`None`: no row was checked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grounding: Option<GroundingCounts>,
    /// Model calls.
    pub calls: u64,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Calls cut at the output limit.
    pub truncated_calls: u64,
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
            t.completion_tokens = t.completion_tokens.saturating_add(r.completion_tokens);
            t.truncated_calls = t.truncated_calls.saturating_add(r.truncated_calls);
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
            .reduce(crate::citation::QuoteCounts::plus);
        t.guards = rows
            .iter()
            .filter_map(|r| r.guards)
            .reduce(super::run::GuardCounts::plus);
        t.grounding = rows.iter().filter_map(|r| r.grounding).fold(
            None,
            |acc: Option<GroundingCounts>, s| {
                let mut c = acc.unwrap_or_default();
                c.checked = c.checked.saturating_add(1);
                match s {
                    crate::grounding::GroundingStatus::Partly => c.partly += 1,
                    crate::grounding::GroundingStatus::Unsupported => c.unsupported += 1,
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

/// The headings of [`table`]: who and how many, the scores ([`Totals::SCORE_HEADINGS`]),
/// then the cost.
pub const TABLE_HEADINGS: [&str; 15] = [
    "system",
    "mode",
    "cases",
    Totals::SCORE_HEADINGS[0],
    Totals::SCORE_HEADINGS[1],
    Totals::SCORE_HEADINGS[2],
    Totals::SCORE_HEADINGS[3],
    Totals::SCORE_HEADINGS[4],
    Totals::SCORE_HEADINGS[5],
    Totals::SCORE_HEADINGS[6],
    Totals::SCORE_HEADINGS[7],
    Totals::SCORE_HEADINGS[8],
    "calls",
    "prompt tok",
    "wall s",
];

/// The heading of the quote column [`table`] adds when a row checked quotes: verified,
/// misattributed and not found quotes.
pub const QUOTES_HEADING: &str = "quotes v/m/nf";

/// The heading of the guard column [`table`] adds when a guard acted in some row:
/// replies set aside, of those the steps that kept their previous answer, and
/// intermediate replies cut at the size of their input.
pub const GUARDS_HEADING: &str = "guards set/kept/bound";

/// The heading of the grounding column [`table`] adds when rows were grounding-checked:
/// answers checked, partly supported, unsupported.
pub const GROUNDING_HEADING: &str = "grounded checked/partly/unsupp";

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

/// The totals as a plain-text table, one line per (system, mode) under a line of
/// [`TABLE_HEADINGS`] (and [`QUOTES_HEADING`] when a row checked quotes,
/// [`GUARDS_HEADING`] when a guard acted), each column
/// padded to its widest cell, then one line per paired comparison
/// ([`super::noise::Paired::describe`]): what `synthkit eval` prints.
pub fn table(totals: &[Totals], paired: &[super::noise::Paired]) -> String {
    let quotes = totals.iter().any(|t| t.quotes.is_some());
    let guards = totals.iter().any(|t| t.guards.is_some());
    let grounding = totals.iter().any(|t| t.grounding.is_some());
    let lines: Vec<Vec<String>> = totals
        .iter()
        .map(|t| {
            let quote_cell = quotes.then(|| {
                t.quotes.map_or_else(
                    || "-".to_string(),
                    |q| format!("{}/{}/{}", q.verified, q.misattributed, q.not_found),
                )
            });
            [t.system.clone(), t.mode.clone(), t.cases.to_string()]
                .into_iter()
                .chain(t.score_cells())
                .chain([
                    t.calls.to_string(),
                    t.prompt_tokens.to_string(),
                    format!("{:.1}", t.wall_ms / 1000.0),
                ])
                .chain(quote_cell)
                .chain(guards.then(|| {
                    t.guards.map_or_else(
                        || "-".to_string(),
                        |g| format!("{}/{}/{}", g.set_aside, g.kept_previous, g.bounded),
                    )
                }))
                .chain(grounding.then(|| {
                    t.grounding.map_or_else(
                        || "-".to_string(),
                        |g| format!("{}/{}/{}", g.checked, g.partly, g.unsupported),
                    )
                }))
                .collect()
        })
        .collect();
    let headings: Vec<&str> = TABLE_HEADINGS
        .iter()
        .copied()
        .chain(quotes.then_some(QUOTES_HEADING))
        .chain(guards.then_some(GUARDS_HEADING))
        .chain(grounding.then_some(GROUNDING_HEADING))
        .collect();
    let mut widths: Vec<usize> = headings.iter().map(|h| h.chars().count()).collect();
    for line in &lines {
        for (w, cell) in widths.iter_mut().zip(line) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    table_line(&mut out, headings.iter().copied(), &widths);
    for line in &lines {
        table_line(&mut out, line.iter().map(String::as_str), &widths);
    }
    for t in totals {
        if let Some(line) = t.wrong_line() {
            out.push_str(&line);
            out.push('\n');
        }
        if let Some(line) = t.unknown_evidence_line() {
            out.push_str(&line);
            out.push('\n');
        }
    }
    for p in paired {
        out.push_str(&p.describe());
        out.push('\n');
    }
    out
}

impl Totals {
    /// `wrong in SYSTEM/MODE (N): id, id, ... and M more`: the cases answered wrong, the
    /// first [`NAMED_WRONG`] by id; `None` when none was.
    pub fn wrong_line(&self) -> Option<String> {
        let wrong = self.cases.saturating_sub(self.correct);
        if wrong == 0 {
            return None;
        }
        let more = wrong.saturating_sub(self.wrong_ids.len());
        let rest = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        Some(format!(
            "wrong in {}/{} ({wrong}): {}{rest}",
            self.system,
            self.mode,
            self.wrong_ids.join(", ")
        ))
    }

    /// A warning when some rows' evidence names no node of their run; `None` otherwise.
    pub fn unknown_evidence_line(&self) -> Option<String> {
        (self.unknown_evidence > 0).then(|| {
            format!(
                "warning: in {}/{}, {} row{} name evidence that is no node of the run (see \
                 each row's unknown_evidence; the nodes of `paths` are PATH#N): their \
                 citation recall counts it as not cited",
                self.system,
                self.mode,
                self.unknown_evidence,
                if self.unknown_evidence == 1 { "" } else { "s" }
            )
        })
    }
}

/// One line of the table: each cell padded to its column's width.
fn table_line<'a>(out: &mut String, cells: impl Iterator<Item = &'a str>, widths: &[usize]) {
    let mut line = String::new();
    for (cell, &w) in cells.zip(widths) {
        line.push_str(&format!("{cell:<w$}  "));
    }
    out.push_str(line.trim_end());
    out.push('\n');
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::eval::case::parse_case;

    fn case(answerable: bool) -> Case {
        let text = if answerable {
            r#"{"id": "c", "query": "How often?", "nodes": [{"id": "n1", "text": "Cleaned every six months."}, {"id": "n2", "text": "Other."}],
                "answers": ["six months", {"regex": "\\b6 months\\b"}], "evidence": ["n1"], "tags": ["t"]}"#
        } else {
            r#"{"id": "u", "query": "What colour?", "nodes": ["Cleaned every six months."], "answerable": false}"#
        };
        parse_case(text, 1).unwrap().unwrap()
    }

    fn line(answer: &str) -> AnswerLine {
        AnswerLine::new("c", "compact", answer)
    }

    #[test]
    fn an_answerable_case() {
        let c = case(true);
        let mut a = line("Every six months.");
        a.citations = Some(vec!["n1".into(), "n2".into()]);
        a.prompts = Some(vec!["Context: Cleaned every six months.".into()]);
        a.calls = Some(2);
        a.wall_ms = Some(10.0);
        let r = score(&c, "sys", &a, Some("Cleaned every six months."));
        assert!(r.correct && !r.abstained);
        assert!((r.f1 - 0.8).abs() < 1e-9, "{}", r.f1);
        assert_eq!((r.in_nodes, r.in_prompts), (Some(true), Some(true)));
        assert_eq!((r.cite_precision, r.cite_recall), (Some(0.5), Some(1.0)));
        assert_eq!((r.system.as_str(), r.calls, r.wall_ms), ("sys", 2, 10.0));
        assert_eq!(r.tags, ["t"]);

        let r = score(&c, "sys", &line("After 6 months."), None);
        assert!(r.correct, "the regex alternative");
        assert_eq!(r.in_nodes, None);

        let r = score(&c, "sys", &line("Not in the sources."), Some("nothing"));
        assert!(!r.correct && r.abstained);
        assert_eq!(
            (r.f1, r.in_nodes, r.cite_precision),
            (0.0, Some(false), None)
        );

        let mut failed = line("six months");
        failed.error = Some("boom".into());
        failed.system = Some("other".into());
        let r = score(&c, "sys", &failed, None);
        assert!(!r.correct && !r.abstained && r.f1 == 0.0);
        assert_eq!(r.system, "other");
    }

    #[test]
    fn an_unanswerable_case() {
        let c = case(false);
        let r = score(&c, "s", &line("The context does not say."), Some("x"));
        assert!(r.correct && r.abstained && r.f1 == 1.0);
        assert_eq!(r.in_nodes, None);
        let r = score(&c, "s", &line("Blue."), None);
        assert!(!r.correct && r.f1 == 0.0);
        let mut said = line("Blue.");
        said.abstained = Some(true);
        assert!(score(&c, "s", &said, None).correct);
    }

    #[test]
    fn a_failed_run_is_an_error_not_a_lost_answer() {
        let a = case(true);
        let mut failed = line("");
        failed.error = Some("connection refused".into());
        failed.prompts = Some(vec![]);
        let row = score(&a, "s", &failed, Some("Cleaned every six months."));
        assert_eq!(row.in_prompts, Some(false));
        let t = Totals::of(&[&row]);
        assert_eq!((t.errors, t.answerable, t.false_abstentions), (1, 1, 0));
        assert_eq!(
            (t.lost_in_retrieval, t.lost_in_packing, t.lost_in_synthesis),
            (0, 0, 0)
        );
    }

    #[test]
    fn totals_per_system_and_mode() {
        let a = case(true);
        let u = case(false);
        let with = |answer: &str, mode: &str, prompts: Option<&str>| {
            let mut l = line(answer);
            l.mode = mode.into();
            l.calls = Some(1);
            l.prompt_tokens = Some(100);
            l.prompts = prompts.map(|p| vec![p.to_string()]);
            l
        };
        let nodes = Some("Cleaned every six months.");
        let rows = vec![
            score(
                &a,
                "s",
                &with("six months", "compact", Some("six months")),
                nodes,
            ),
            score(
                &a,
                "s",
                &with("I don't know", "compact", Some("six months")),
                nodes,
            ),
            score(&a, "s", &with("Blue", "compact", Some("cut")), nodes),
            score(&a, "s", &with("Blue", "compact", None), Some("nothing")),
            score(
                &u,
                "s",
                &with("Not in the context.", "compact", None),
                nodes,
            ),
            score(&u, "s", &with("Blue", "refine", None), nodes),
        ];
        let t = totals(&rows);
        assert_eq!(t.len(), 2);
        let c = &t[0];
        assert_eq!((c.system.as_str(), c.mode.as_str()), ("s", "compact"));
        assert_eq!(
            (c.cases, c.correct, c.answerable, c.answerable_correct),
            (5, 2, 4, 1)
        );
        assert_eq!(
            (c.unanswerable, c.abstained_right, c.false_abstentions),
            (1, 1, 1)
        );
        assert_eq!(
            (c.lost_in_retrieval, c.lost_in_packing, c.lost_in_synthesis),
            (1, 1, 1)
        );
        assert!((c.correct_rate - 0.4).abs() < 1e-9);
        let (low, high) = c.correct_interval.unwrap();
        assert!(low < 0.4 && high > 0.4, "{low} {high}");
        assert_eq!(c.score_cells()[0], "2 (40%)");
        assert_eq!(
            c.score_cells()[1],
            format!("{:.0}-{:.0}%", low * 100.0, high * 100.0)
        );
        assert!((c.f1_mean - 0.4).abs() < 1e-9, "{}", c.f1_mean);
        assert_eq!((c.calls, c.prompt_tokens), (5, 500));
        assert_eq!(c.cite_precision, None);
        let r = &t[1];
        assert_eq!(
            (r.mode.as_str(), r.cases, r.correct, r.unanswerable),
            ("refine", 1, 0, 1)
        );
        assert!(totals(&[]).is_empty());
    }

    #[test]
    fn the_table_has_a_line_per_system_and_mode_in_aligned_columns() {
        let a = case(true);
        let mut long = line("six months");
        long.system = Some("a-long-system-name".into());
        long.calls = Some(3);
        long.prompt_tokens = Some(1234);
        long.wall_ms = Some(2500.0);
        let rows = vec![
            score(&a, "s", &line("six months"), None),
            score(&a, "s", &long, None),
        ];
        let text = table(&totals(&rows), &[]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        let head: Vec<&str> = lines[0]
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        assert_eq!(head, TABLE_HEADINGS);
        // Each column starts where its heading does.
        let at = |line: &str, cell: &str| line.find(cell).unwrap();
        assert_eq!(at(lines[0], "mode"), at(lines[2], "compact"));
        assert_eq!(at(lines[0], "mode"), "a-long-system-name".len() + 2);
        assert!(
            lines[2].starts_with("a-long-system-name  compact  1      1 (100%)  100-100%      1/1"),
            "{text}"
        );
        assert!(lines[2].ends_with("3      1234        2.5"), "{text}");
        assert!(table(&[], &[]).lines().count() == 1);
        // The paired comparisons follow the totals.
        let text = table(&totals(&rows), &crate::eval::paired(&rows));
        assert!(
            text.lines()
                .last()
                .unwrap()
                .starts_with("s/compact vs a-long-system-name/compact on 1 case:"),
            "{text}"
        );
    }

    #[test]
    fn totals_saturate_instead_of_wrapping() {
        let a = case(true);
        let mut huge = line("six months");
        huge.calls = Some(u64::MAX);
        huge.prompt_tokens = Some(u64::MAX - 1);
        huge.completion_tokens = Some(u64::MAX);
        huge.truncated_calls = Some(u64::MAX);
        huge.guards = Some(super::super::run::GuardCounts {
            set_aside: u64::MAX,
            kept_previous: 1,
            bounded: 0,
        });
        huge.quotes = Some(crate::citation::QuoteCounts {
            verified: u64::MAX,
            misattributed: 0,
            not_found: 2,
            unchecked: 0,
        });
        let row = score(&a, "s", &huge, None);
        let t = Totals::of(&[&row, &row, &row]);
        assert_eq!(
            (
                t.calls,
                t.prompt_tokens,
                t.completion_tokens,
                t.truncated_calls
            ),
            (u64::MAX, u64::MAX, u64::MAX, u64::MAX)
        );
        let guards = t.guards.unwrap();
        assert_eq!((guards.set_aside, guards.kept_previous), (u64::MAX, 3));
        let quotes = t.quotes.unwrap();
        assert_eq!((quotes.verified, quotes.not_found), (u64::MAX, 6));
    }

    #[test]
    fn the_table_names_the_cases_answered_wrong() {
        let a = case(true);
        let mut rows = Vec::new();
        for i in 0..(NAMED_WRONG + 3) {
            let mut l = line(if i % 2 == 0 { "Blue" } else { "six months" });
            l.id = format!("c{i}");
            let mut r = score(&a, "s", &l, None);
            r.id = format!("c{i}");
            rows.push(r);
        }
        let t = totals(&rows);
        let wrong = t[0].cases - t[0].correct;
        assert_eq!(wrong, 6);
        assert_eq!(t[0].wrong_ids, ["c0", "c2", "c4", "c6", "c8", "c10"]);
        let text = table(&t, &[]);
        assert!(
            text.contains("wrong in s/compact (6): c0, c2, c4, c6, c8, c10\n"),
            "{text}"
        );
        // Past NAMED_WRONG, a count of the rest.
        let many: Vec<Row> = (0..NAMED_WRONG + 4)
            .map(|i| {
                let mut r = score(&a, "s", &line("Blue"), None);
                r.id = format!("w{i}");
                r
            })
            .collect();
        let t = totals(&many);
        assert_eq!(t[0].wrong_ids.len(), NAMED_WRONG);
        let text = table(&t, &[]);
        assert!(text.contains(" and 4 more\n"), "{text}");
        assert!(text.contains("wrong in s/compact (12): w0, w1,"), "{text}");
        // All right: no such line.
        let right = vec![score(&a, "s", &line("six months"), None)];
        assert!(!table(&totals(&right), &[]).contains("wrong in"));
    }

    #[test]
    fn evidence_that_names_no_node_read_is_a_counted_warning() {
        let a = case(true);
        let mut r = score(&a, "s", &line("six months"), None);
        assert_eq!(r.check_evidence(&a.evidence, ["docs/a.md#1"]), ["n1"]);
        let t = totals(&[r.clone()]);
        assert_eq!(t[0].unknown_evidence, 1);
        let text = table(&t, &[]);
        assert!(
            text.contains("warning: in s/compact, 1 row name evidence that is no node"),
            "{text}"
        );
        assert!(r.check_evidence(&a.evidence, ["n1", "n2"]).is_empty());
        assert!(!table(&totals(&[r]), &[]).contains("warning"));
    }

    #[test]
    fn rows_keep_the_hashes_of_their_case_and_answers_line() {
        let a = case(true);
        let r = score(&a, "s", &line("six months"), None);
        assert_eq!(r.case_sha256.as_deref(), Some(a.sha256.as_str()));
        assert_eq!(r.answer_sha256, None, "a run made here");
        let read =
            crate::eval::parse_answer_line(r#"{"id": "c", "mode": "compact", "answer": "x"}"#, 1)
                .unwrap()
                .unwrap();
        let r = score(&a, "s", &read, None);
        assert_eq!(r.answer_sha256, read.sha256);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["case_sha256"], a.sha256.as_str());
        let back: Row = serde_json::from_value(json).unwrap();
        assert_eq!(back, r);
    }

    fn row(id: &str, system: &str, mode: &str, correct: bool) -> Row {
        Row {
            id: id.into(),
            system: system.into(),
            mode: mode.into(),
            correct,
            ..Row::default()
        }
    }

    #[test]
    fn paired_counts_matched_cases_only() {
        let rows = vec![
            row("1", "sk", "compact", true),
            row("2", "sk", "compact", true),
            row("3", "sk", "compact", false),
            row("4", "sk", "compact", true),
            row("1", "ref", "compact", true),
            row("2", "ref", "compact", false),
            row("3", "ref", "compact", true),
            // Case 4 has no reference row: left out.
            row("1", "sk", "refine", false),
            row("1", "ref", "refine", false),
        ];
        let pairs = paired(&rows);
        // sk/compact-ref/compact, sk/compact-sk/refine, ref/compact-ref/refine,
        // sk/refine-ref/refine; never ref/compact with sk/refine.
        let names: Vec<(String, String)> =
            pairs.iter().map(|p| (p.a.clone(), p.b.clone())).collect();
        assert_eq!(
            names,
            [
                ("sk/compact".to_string(), "ref/compact".to_string()),
                ("sk/compact".to_string(), "sk/refine".to_string()),
                ("ref/compact".to_string(), "ref/refine".to_string()),
                ("sk/refine".to_string(), "ref/refine".to_string()),
            ]
        );
        let p = &pairs[0];
        assert_eq!(
            (p.cases, p.both, p.only_a, p.only_b, p.neither),
            (3, 1, 1, 1, 0)
        );
        assert_eq!(p.p_value, 1.0);
        assert!(
            p.describe()
                .contains("sk/compact vs ref/compact on 3 cases")
        );
    }
}
