//! Citations: numbered sources in the prompt, `[n]` markers in the answer, checked and
//! renumbered, mapped back to node ids.
//!
//! With [`crate::SynthesizerBuilder::citations`] on, every node's text reaches the model
//! after a label line `[n]` (`n` counts the nodes given, from 1), and a piece of a long
//! node continued in a later prompt starts with its label again. The model is asked to
//! cite the sources it uses as `[n]` and to keep the markers already in a text, so
//! citations survive `refine` (the existing answer keeps its markers) and
//! `tree_summarize` (summaries keep theirs at every level, and label numbers are global,
//! so a marker always names an original node).
//!
//! Every answer is checked against the sources its prompt actually showed: label lines
//! in the context, markers in the existing answer or in the summaries below. A marker
//! naming any other number is removed and reported in [`Citations::removed`], so a
//! summary can only carry markers of nodes that reached its subtree. The final answer's
//! markers are then renumbered 1, 2, ... in order of first use, and
//! [`Citations::markers`] maps each to its node ids.
//!
//! ```
//! # tokio_test_block_on(async {
//! use std::sync::Arc;
//! use synthkit::{Node, Synthesizer};
//! use synthkit::{model::ModelInfo, testing::ScriptedModel};
//! let model = ScriptedModel::constant(ModelInfo::new("demo"), "Every six months [2]. Not [7].");
//! let synth = Synthesizer::builder(Arc::new(model)).citations(true).build().unwrap();
//! let nodes = vec![
//!     Node::new("dome", "The dome opens at dusk."),
//!     Node::new("mirror", "The mirror is cleaned every six months."),
//! ];
//! let response = synth.synthesize("How often is the mirror cleaned?", nodes).await.unwrap();
//! assert_eq!(response.text, "Every six months [1]. Not.");
//! let citations = response.citations.unwrap();
//! assert_eq!(citations.markers[0].node_ids, vec!["mirror".to_string()]);
//! assert_eq!(citations.removed, vec!["[7]".to_string()]);
//! assert!(response.source_nodes.iter().any(|n| n.id == "mirror"));
//! # });
//! # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
//! #     tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
//! # }
//! ```

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;

mod constructed;
mod markers;
mod quote;
mod quotes;
mod work;

pub use markers::MAX_REMOVED_LISTED;
pub(crate) use markers::{MarkerRewriter, RemovedMarkers, label_lines, numbers_in, strip_markers};
pub use quote::{Quote, QuoteCounts, QuoteOrigin, QuoteStatus, UncheckedReason, UnsupportedNumber};
pub use quotes::{
    MAX_CHECKED_MARKERS, MAX_QUOTE_CHARS, MAX_QUOTES, MAX_SENTENCE_SOURCES,
    MAX_UNSUPPORTED_NUMBERS, MIN_QUOTE_LETTERS, MIN_QUOTE_WORDS,
};
pub(crate) use work::Stopped;

/// The removed markers a warning shows (it says how many there were in all).
const LOGGED_MARKERS: usize = 8;
/// Each marker a warning shows is cut to this many characters.
const LOGGED_MARKER_CHARS: usize = 32;

/// How the model is asked to cite ([`crate::SynthesizerBuilder::citation_style`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CitationStyle {
    /// `[n]` markers (the default).
    #[default]
    Markers,
    /// `[n] "exact words from source n"`: every quote is checked against the cited
    /// node's text ([`Citations::quotes`]), and numbers of cited sentences against their
    /// sources ([`Citations::unsupported_numbers`]).
    Quotes,
}

impl std::str::FromStr for CitationStyle {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "markers" | "marker" => Ok(CitationStyle::Markers),
            "quotes" | "quote" => Ok(CitationStyle::Quotes),
            other => Err(format!(
                "unknown citation style `{other}`: use `markers` or `quotes`"
            )),
        }
    }
}

/// What the model is told in quote mode, instead of
/// [`crate::prompt::defaults::CITATION_INSTRUCTIONS`]: short, as it rides on every call.
pub const QUOTE_CITATION_INSTRUCTIONS: &str =
    "Cite sources as [n] \"exact words from source n\"; keep existing [n] citations.";

/// One marker of the final answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Citation {
    /// The number written in the answer (`[1]` is 1).
    pub marker: u32,
    /// The nodes it cites.
    pub node_ids: Vec<String>,
}

/// The citations of an answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Citations {
    /// The answer's markers in order of first use (marker 1 first).
    pub markers: Vec<Citation>,
    /// Markers removed because they named no source shown to the model that wrote them,
    /// as written, from every step: the first [`MAX_REMOVED_LISTED`].
    pub removed: Vec<String>,
    /// How many markers were removed in all (listed in `removed` or not).
    pub removed_count: usize,
    /// Quote mode: uses of markers the check did not read, past [`MAX_CHECKED_MARKERS`]
    /// markers or with a quote past [`MAX_QUOTES`]; they support no citation (absent
    /// from JSON when 0).
    #[serde(skip_serializing_if = "is_zero")]
    pub unchecked_markers: usize,
    /// Quote mode ([`CitationStyle::Quotes`]): every `[n] "quote"` of the final answer,
    /// checked, in order (empty otherwise).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub quotes: Vec<Quote>,
    /// Quote mode: numbers of cited sentences that none of their cited sources contains.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unsupported_numbers: Vec<UnsupportedNumber>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Citations {
    /// Whether node `id` is cited.
    pub fn cites(&self, id: &str) -> bool {
        self.markers
            .iter()
            .any(|c| c.node_ids.iter().any(|n| n == id))
    }

    /// How many quotes had each status (all zero outside quote mode).
    pub fn quote_counts(&self) -> QuoteCounts {
        QuoteCounts::of(&self.quotes)
    }

    /// The ids of the cited nodes, in order of first citation, each once.
    pub fn cited_node_ids(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for id in self.markers.iter().flat_map(|c| &c.node_ids) {
            if !out.contains(&id.as_str()) {
                out.push(id);
            }
        }
        out
    }
}

/// The label line put before source `n`'s text.
pub(crate) fn label(n: u32) -> String {
    format!("[{n}]\n")
}

/// The number of the label line that governs byte `offset` of `text`: the last label
/// line at or before it. `None` when `offset` is itself at a label line or no label
/// precedes it.
pub(crate) fn label_before(text: &str, offset: usize) -> Option<u32> {
    let head = text.get(..offset)?;
    if text.get(offset..).is_some_and(starts_with_label) {
        return None;
    }
    // The lines wholly before the one `offset` is on, nearest first.
    let complete = head.get(..head.rfind('\n')?)?;
    complete.rsplit('\n').find_map(label_number)
}

/// The number of a label line, a line that is exactly `[n]` (the line the engine writes
/// before each source when citations are on); `None` for any other line. Shared by the
/// engine, the marker checks and backends that read the sources of a prompt (the
/// `synthkit-extractive` answerer).
///
/// ```
/// use synthkit::citation::label_number;
/// assert_eq!(label_number("[12]"), Some(12));
/// assert_eq!(label_number("[a]"), None);
/// ```
pub fn label_number(line: &str) -> Option<u32> {
    let digits = line.strip_prefix('[')?.strip_suffix(']')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn starts_with_label(text: &str) -> bool {
    text.split_once('\n')
        .and_then(|(first, _)| label_number(first))
        .is_some()
}

/// A job's citation bookkeeping: which node each number names, and what was removed.
#[derive(Debug, Default)]
pub(crate) struct CitationLedger {
    /// Node id of source `n` at index `n - 1` (empty for nodes without text).
    node_ids: Vec<String>,
    /// Quote mode: the text of source `n` at index `n - 1` (`None`: markers only).
    texts: Option<Vec<String>>,
    /// Quote mode with evidence: the sentences source `n` was shown as, at index `n - 1`.
    evidence: Option<Vec<Vec<crate::evidence::EvidenceSpan>>>,
    removed: Mutex<RemovedMarkers>,
    /// The steps the quote checks of this ledger took, stopped ones included.
    check_steps: AtomicU64,
}

impl CitationLedger {
    /// A ledger that checks quotes against `texts` (quote mode) when given.
    pub(crate) fn with_texts(node_ids: Vec<String>, texts: Option<Vec<String>>) -> Arc<Self> {
        Arc::new(Self {
            node_ids,
            texts,
            evidence: None,
            removed: Mutex::new(RemovedMarkers::default()),
            check_steps: AtomicU64::new(0),
        })
    }

    /// A quote mode ledger whose bare markers get the evidence sentences of their sources
    /// as quotes: `evidence` holds source `n`'s at index `n - 1`.
    pub(crate) fn with_evidence(
        node_ids: Vec<String>,
        texts: Vec<String>,
        evidence: Vec<Vec<crate::evidence::EvidenceSpan>>,
    ) -> Arc<Self> {
        Arc::new(Self {
            node_ids,
            texts: Some(texts),
            evidence: Some(evidence),
            removed: Mutex::new(RemovedMarkers::default()),
            check_steps: AtomicU64::new(0),
        })
    }

    /// Whether quotes are checked (quote mode).
    pub(crate) fn checks_quotes(&self) -> bool {
        self.texts.is_some()
    }

    /// Every source number.
    pub(crate) fn all(&self) -> BTreeSet<u32> {
        (1..=self.node_ids.len() as u32).collect()
    }

    /// Checks an intermediate answer against what its prompt showed (no renumbering).
    pub(crate) fn check(&self, shown: BTreeSet<u32>, text: &str) -> String {
        let mut r = MarkerRewriter::new(shown, false);
        let out = r.rewrite(text);
        self.note_removed(r.take_removed());
        out
    }

    /// Keeps `removed` for the answer's citations (logged once, by
    /// [`CitationLedger::citations`]).
    pub(crate) fn note_removed(&self, removed: RemovedMarkers) {
        if removed.is_empty() {
            return;
        }
        self.removed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .append(removed);
    }

    /// The steps the quote checks of this ledger took so far (stopped ones included).
    #[cfg(test)]
    pub(crate) fn check_steps(&self) -> u64 {
        self.check_steps.load(Ordering::Relaxed)
    }

    /// The citations of a final answer rewritten by `rewriter` (renumbering); `raw` is
    /// the answer as the model wrote it (read in quote mode only). The quote check stops
    /// (`Err(Stopped)`) once `stop` is set: its caller is gone.
    ///
    /// In quote mode a marker names its node when at least one of its uses is not a
    /// failed quote (no quote, or a verified one), plus every node one of its quotes was
    /// found in instead (misattributed); a marker left naming none (all its quotes
    /// fabricated or unchecked) is left out of [`Citations::markers`].
    pub(crate) fn citations(
        &self,
        rewriter: &mut MarkerRewriter,
        raw: &str,
        stop: &AtomicBool,
    ) -> Result<Citations, Stopped> {
        self.note_removed(rewriter.take_removed());
        let report = match &self.texts {
            None => None,
            Some(texts) => {
                let sources = quotes::Sources {
                    ids: &self.node_ids,
                    texts,
                    allowed: rewriter.allowed(),
                    evidence: self.evidence.as_deref(),
                };
                let mut work = work::Work::new(stop);
                let checked = quotes::check(raw, &sources, |n| rewriter.new_number(n), &mut work);
                self.check_steps.fetch_add(work.steps(), Ordering::Relaxed);
                if checked.is_err() {
                    tracing::debug!(target: "synthkit", steps = work.steps(), "the quote check stopped: its caller is gone");
                }
                Some(checked?)
            }
        };
        let id = |n: u32| self.node_ids.get(n as usize - 1).cloned();
        let markers = rewriter
            .order()
            .iter()
            .enumerate()
            .filter_map(|(i, &n)| {
                let node_ids = match &report {
                    None => id(n).into_iter().collect(),
                    Some(r) => {
                        let mut ids: Vec<String> = Vec::new();
                        let own = r.supported.contains(&n).then_some(n);
                        let moved = r.repointed.iter().filter(|(from, _)| *from == n);
                        for m in own.into_iter().chain(moved.map(|(_, to)| *to)) {
                            if let Some(x) = id(m)
                                && !ids.contains(&x)
                            {
                                ids.push(x);
                            }
                        }
                        if ids.is_empty() {
                            return None;
                        }
                        ids
                    }
                };
                Some(Citation {
                    marker: i as u32 + 1,
                    node_ids,
                })
            })
            .collect();
        let removed = self
            .removed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        log_removed(&removed);
        let (quotes, unsupported_numbers, unchecked_markers) = report
            .map(|r| (r.quotes, r.unsupported_numbers, r.unchecked_markers))
            .unwrap_or_default();
        Ok(Citations {
            markers,
            removed: removed.listed,
            removed_count: removed.count,
            unchecked_markers,
            quotes,
            unsupported_numbers,
        })
    }
}

/// One warning for an answer's removed markers: how many, and the first few, cut short.
fn log_removed(removed: &RemovedMarkers) {
    if removed.is_empty() {
        return;
    }
    let first: Vec<String> = removed
        .listed
        .iter()
        .take(LOGGED_MARKERS)
        .map(|m| m.chars().take(LOGGED_MARKER_CHARS).collect())
        .collect();
    tracing::warn!(target: "synthkit", removed = removed.count, first = ?first, "the model cited sources it was not shown; those markers were removed");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_label_governing_an_offset() {
        let text = "[1]\nalpha beta\n\n[2]\nfile: x\n\ngamma delta";
        let at = |needle: &str| text.find(needle).unwrap();
        assert_eq!(label_before(text, at("beta")), Some(1));
        assert_eq!(label_before(text, at("gamma")), Some(2));
        assert_eq!(label_before(text, at("file")), Some(2));
        assert_eq!(label_before(text, at("[2]")), None);
        assert_eq!(label_before(text, 0), None);
        assert_eq!(label_before("no labels here", 5), None);
    }

    #[test]
    fn ledger_maps_numbers_to_ids() {
        let ledger = CitationLedger::with_texts(vec!["a".into(), "b".into()], None);
        let mut r = MarkerRewriter::new(ledger.all(), true);
        let text = r.rewrite("x [2] y [1] z [3]");
        assert_eq!(text, "x [1] y [2] z");
        let c = ledger
            .citations(&mut r, "", &AtomicBool::new(false))
            .unwrap();
        assert_eq!(c.markers[0].node_ids, vec!["b"]);
        assert_eq!(c.cited_node_ids(), vec!["b", "a"]);
        assert_eq!(c.removed, vec!["[3]"]);
        assert_eq!(c.removed_count, 1);
        assert!(c.cites("a"));
    }

    #[test]
    fn removed_markers_are_listed_up_to_the_bound_and_all_counted() {
        let ledger = CitationLedger::with_texts(vec!["a".into()], None);
        // Removed at two steps, then in the final answer.
        let step = "x [9] ".repeat(MAX_REMOVED_LISTED / 2 + 1);
        ledger.check([1].into(), &step);
        ledger.check([1].into(), &step);
        let mut r = MarkerRewriter::new(ledger.all(), true);
        r.rewrite(&"[1] [7] ".repeat(500_000 / 8));
        let c = ledger
            .citations(&mut r, "", &AtomicBool::new(false))
            .unwrap();
        assert_eq!(c.removed.len(), MAX_REMOVED_LISTED);
        assert!(c.removed.iter().all(|m| m == "[9]"), "first ones first");
        assert_eq!(c.removed_count, 2 * (MAX_REMOVED_LISTED / 2 + 1) + 62_500);
    }
}
