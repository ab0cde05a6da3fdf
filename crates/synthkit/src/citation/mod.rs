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
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;

mod markers;

pub(crate) use markers::{MarkerRewriter, label_lines, numbers_in, strip_markers};

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
    /// as written, from every step.
    pub removed: Vec<String>,
}

impl Citations {
    /// Whether node `id` is cited.
    pub fn cites(&self, id: &str) -> bool {
        self.markers
            .iter()
            .any(|c| c.node_ids.iter().any(|n| n == id))
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
    removed: Mutex<Vec<String>>,
}

impl CitationLedger {
    pub(crate) fn new(node_ids: Vec<String>) -> Arc<Self> {
        Arc::new(Self {
            node_ids,
            removed: Mutex::new(Vec::new()),
        })
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

    pub(crate) fn note_removed(&self, removed: Vec<String>) {
        if removed.is_empty() {
            return;
        }
        tracing::warn!(target: "synthkit", removed = ?removed, "the model cited sources it was not shown; those markers were removed");
        self.removed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(removed);
    }

    /// The citations of a final answer rewritten by `rewriter` (renumbering).
    pub(crate) fn citations(&self, rewriter: &mut MarkerRewriter) -> Citations {
        self.note_removed(rewriter.take_removed());
        let markers = rewriter
            .order()
            .iter()
            .enumerate()
            .map(|(i, &n)| Citation {
                marker: i as u32 + 1,
                node_ids: self
                    .node_ids
                    .get(n as usize - 1)
                    .map(|id| vec![id.clone()])
                    .unwrap_or_default(),
            })
            .collect();
        let removed = self
            .removed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        Citations { markers, removed }
    }
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
        let ledger = CitationLedger::new(vec!["a".into(), "b".into()]);
        let mut r = MarkerRewriter::new(ledger.all(), true);
        let text = r.rewrite("x [2] y [1] z [3]");
        assert_eq!(text, "x [1] y [2] z");
        let c = ledger.citations(&mut r);
        assert_eq!(c.markers[0].node_ids, vec!["b"]);
        assert_eq!(c.cited_node_ids(), vec!["b", "a"]);
        assert_eq!(c.removed, vec!["[3]"]);
        assert!(c.cites("a"));
    }
}
