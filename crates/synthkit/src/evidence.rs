//! Evidence first: before any prompt is packed, the sentences of each node that bear on
//! the question are kept and the rest left out, so the model reads what answers and the
//! engine knows what it was shown.
//!
//! An [`EvidenceSelector`] (the offline `synthkit-extractive` crate's
//! `ExtractiveEvidence`, or your own) ranks the sentences of the nodes against the
//! question and keeps the best of them within a token budget ([`Evidence::max_tokens`],
//! [`DEFAULT_EVIDENCE_TOKENS`] by default), each node's in its own order. With
//! [`crate::SynthesizerBuilder::evidence`] set, a synthesis that asks the sources a
//! question (every mode but `generation`, `no_text` and `context_only`):
//!
//! - shows each node that has evidence as its kept sentences (its metadata as before, and
//!   with citations its label `[n]`, so numbers and steps still name the node);
//! - leaves out each node that has none (it costs no call and stays in the sources), and
//!   counts it ([`EvidenceReport::dropped`]);
//! - when the selector finds that no sentence states what the question asks
//!   ([`Selection::answerable`] false: the best match covers too little of the question),
//!   or the question names something no node mentions (a name, a number, code: "the
//!   lighthouse keeper of Varnholm" over nodes that speak of Skarholm's;
//!   [`EvidenceReport::missing`]),
//!   answers "not in the sources" without a model call (with [`Evidence::abstain`], the
//!   default), or asks the model over the nodes whole, as without evidence;
//! - reports what was kept, with each sentence's character offsets in its node's text
//!   where it is found there, and what was dropped, in [`crate::Response::evidence`].
//!
//! Image nodes are shown whole, and never answered without a call: the selector reads
//! text, not what an image shows. Selection runs on tokio's
//! blocking pool (its work grows with the nodes), never on a thread that polls the
//! synthesis.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), synthkit::SynthError> {
//! use std::sync::Arc;
//! use synthkit::evidence::{Evidence, EvidenceSelector, SelectedPassage, Selection};
//! use synthkit::{Node, Synthesizer, model::ModelInfo, testing::ScriptedModel};
//!
//! /// Keeps the sentences that name the question's last word.
//! struct Naive;
//! impl EvidenceSelector for Naive {
//!     fn select(&self, query: &str, texts: &[&str], _max_tokens: usize) -> Selection {
//!         let word = query.trim_end_matches('?').rsplit(' ').next().unwrap_or("");
//!         let passages: Vec<SelectedPassage> = texts
//!             .iter()
//!             .enumerate()
//!             .filter_map(|(index, t)| {
//!                 let kept: Vec<String> = t
//!                     .split_inclusive(". ")
//!                     .filter(|s| s.contains(word))
//!                     .map(|s| s.trim().to_string())
//!                     .collect();
//!                 (!kept.is_empty()).then(|| SelectedPassage::new(index, kept.join(" "), kept))
//!             })
//!             .collect();
//!         let answerable = !passages.is_empty();
//!         Selection::new(passages, answerable, if answerable { 1.0 } else { 0.0 })
//!     }
//! }
//!
//! let model = Arc::new(ScriptedModel::constant(ModelInfo::new("m"), "Every six months."));
//! let synth = Synthesizer::builder(model.clone())
//!     .evidence(Evidence::new(Arc::new(Naive)))
//!     .build()?;
//! let nodes = vec![
//!     Node::new("a", "The dome opens at dusk. The mirror is cleaned every six months."),
//!     Node::new("b", "The cafe sells tea."),
//! ];
//! let r = synth.synthesize("How often is the mirror cleaned?", nodes.clone()).await?;
//! let prompt = model.requests()[0].prompt.to_text();
//! assert!(prompt.contains("The mirror is cleaned") && !prompt.contains("dusk"));
//! let evidence = r.evidence.unwrap();
//! assert_eq!(evidence.dropped, vec!["b".to_string()]);
//! assert_eq!(evidence.kept[0].sentences[0].start, Some(24));
//! // Nothing bears on it: "not in the sources", without a call.
//! let r = synth.synthesize("Who painted the ceiling?", nodes).await?;
//! assert!(!r.answerable);
//! assert_eq!(model.requests().len(), 1);
//! # Ok(()) }
//! ```

use std::sync::Arc;

use serde::Serialize;

use crate::node::Node;

/// The default evidence budget: 512 tokens of kept sentences for the whole synthesis.
pub const DEFAULT_EVIDENCE_TOKENS: usize = 512;

/// The most ids of dropped nodes listed in an [`EvidenceReport`] (the rest are counted).
pub const MAX_DROPPED_LISTED: usize = 256;

/// The default floor of [`Evidence::with_extract_when_declined`]: a model's "not in the
/// sources" gives way to the sources' own sentences when the best of them covers at least
/// 75 % of the question. Calibrated on `bench/quality` (121 cases, Qwen2.5-Coder-0.5B):
/// every case the model declined at a coverage of 0.75 or more was answerable, and none
/// the model rightly declined reached it (those were at 0.60 and 0.63).
pub const DEFAULT_EXTRACT_COVERAGE: f64 = 0.75;

/// The most tokens of an answer extracted when the model declined
/// ([`Evidence::with_extract_when_declined`]).
pub const EXTRACT_TOKENS: usize = 256;

/// Ranks the sentences of nodes against a question and keeps those that bear on it.
pub trait EvidenceSelector: Send + Sync {
    /// The evidence for `query` in `texts` (the nodes' model-visible texts, in order; an
    /// empty one is no node), at most `max_tokens` tokens of kept sentences in all.
    fn select(&self, query: &str, texts: &[&str], max_tokens: usize) -> Selection;

    /// The selector's own answer to `query` from `texts` (its best sentences, at most
    /// `max_tokens` tokens), or `None` when it has none or cannot answer (the default).
    /// Asked only when a model declined although the evidence covers the question
    /// ([`Evidence::with_extract_when_declined`]).
    fn extract(&self, query: &str, texts: &[&str], max_tokens: usize) -> Option<SelectedAnswer> {
        let _ = (query, texts, max_tokens);
        None
    }
}

impl<T: EvidenceSelector + ?Sized> EvidenceSelector for Arc<T> {
    fn select(&self, query: &str, texts: &[&str], max_tokens: usize) -> Selection {
        (**self).select(query, texts, max_tokens)
    }

    fn extract(&self, query: &str, texts: &[&str], max_tokens: usize) -> Option<SelectedAnswer> {
        (**self).extract(query, texts, max_tokens)
    }
}

/// A selector's own answer ([`EvidenceSelector::extract`]).
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct SelectedAnswer {
    /// The answer: sentences of the texts.
    pub text: String,
    /// The indexes of the texts its sentences come from, ascending.
    pub sources: Vec<usize>,
}

impl SelectedAnswer {
    /// An answer `text` drawn from the texts at `sources`.
    pub fn new(text: impl Into<String>, sources: Vec<usize>) -> Self {
        Self {
            text: text.into(),
            sources,
        }
    }
}

/// What a selector kept.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Selection {
    /// The texts with kept sentences, each once (in any order).
    pub passages: Vec<SelectedPassage>,
    /// Whether some sentence states what the question asks: false when the best match
    /// covers too little of it (the synthesis then abstains without a call, with
    /// [`Evidence::abstain`]).
    pub answerable: bool,
    /// The share of the question the best match covers, from 0 to 1.
    pub coverage: f64,
}

impl Selection {
    /// A selection of `passages`.
    pub fn new(passages: Vec<SelectedPassage>, answerable: bool, coverage: f64) -> Self {
        Self {
            passages,
            answerable,
            coverage,
        }
    }
}

/// The kept sentences of one text.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct SelectedPassage {
    /// The text's index among those given.
    pub index: usize,
    /// What the prompt shows for it: the kept sentences in their order.
    pub text: String,
    /// The kept sentences one by one, as shown.
    pub sentences: Vec<String>,
}

impl SelectedPassage {
    /// The kept `sentences` of text `index`, shown as `text`.
    pub fn new(index: usize, text: impl Into<String>, sentences: Vec<String>) -> Self {
        Self {
            index,
            text: text.into(),
            sentences,
        }
    }
}

/// How a synthesizer builds its prompts from evidence
/// ([`crate::SynthesizerBuilder::evidence`]).
#[derive(Clone)]
pub struct Evidence {
    selector: Arc<dyn EvidenceSelector>,
    max_tokens: usize,
    abstain: bool,
    extract_coverage: Option<f64>,
}

impl std::fmt::Debug for Evidence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Evidence")
            .field("max_tokens", &self.max_tokens)
            .field("abstain", &self.abstain)
            .field("extract_coverage", &self.extract_coverage)
            .finish_non_exhaustive()
    }
}

impl Evidence {
    /// Evidence from `selector`, [`DEFAULT_EVIDENCE_TOKENS`] at most, abstaining without a
    /// call when nothing bears on the question, and answering from the sources' sentences
    /// when the model declines a question they cover ([`DEFAULT_EXTRACT_COVERAGE`]).
    pub fn new(selector: Arc<dyn EvidenceSelector>) -> Self {
        Self {
            selector,
            max_tokens: DEFAULT_EVIDENCE_TOKENS,
            abstain: true,
            extract_coverage: Some(DEFAULT_EXTRACT_COVERAGE),
        }
    }

    /// When the model answers "not in the sources" (its own words, not the grounding
    /// check's) although the best sentence covers at least `coverage` of the question
    /// (a share, `[0, 1]`; [`DEFAULT_EXTRACT_COVERAGE`] by default), the answer is the
    /// selector's own ([`EvidenceSelector::extract`]): the sources' sentences, with their
    /// nodes as its grounding's sources and the model's reply in
    /// [`EvidenceReport::extracted`]. `None` keeps the model's "not in the sources". A
    /// stream is shown as it comes, so it keeps the model's words.
    pub fn with_extract_when_declined(mut self, coverage: Option<f64>) -> Self {
        self.extract_coverage = coverage.map(|c| if c.is_nan() { 1.0 } else { c.clamp(0.0, 1.0) });
        self
    }

    /// Sets the most tokens of kept sentences, all nodes together (at least 1).
    pub fn with_max_tokens(mut self, tokens: usize) -> Self {
        self.max_tokens = tokens.max(1);
        self
    }

    /// Whether a synthesis whose evidence says nothing states the answer abstains
    /// without a call (`true`, the default) or asks the model anyway, over the nodes
    /// whole.
    pub fn with_abstain(mut self, abstain: bool) -> Self {
        self.abstain = abstain;
        self
    }

    /// The most tokens of kept sentences.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// Whether nothing bearing on the question is an answer without a call.
    pub fn abstain(&self) -> bool {
        self.abstain
    }

    /// The coverage from which a declined question is answered from the sources
    /// ([`Evidence::with_extract_when_declined`]).
    pub fn extract_coverage(&self) -> Option<f64> {
        self.extract_coverage
    }
}

/// What the evidence stage kept and left out ([`crate::Response::evidence`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct EvidenceReport {
    /// The nodes shown, with the sentences kept, in node order.
    pub kept: Vec<KeptNode>,
    /// The nodes left out (no sentence bears on the question), in node order: the first
    /// [`MAX_DROPPED_LISTED`].
    pub dropped: Vec<String>,
    /// How many nodes were left out (all of them, listed or not).
    pub dropped_count: usize,
    /// Whether some sentence states what the question asks.
    pub answerable: bool,
    /// The share of the question the best match covers (0 to 1).
    pub coverage: f64,
    /// Whether the synthesis abstained without a call because nothing did.
    pub abstained: bool,
    /// What the question names that no node mentions (names, numbers, code; found as
    /// the grounding check finds an answer's facts): any makes the nodes not answer.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// Set when the model declined ("not in the sources") a question the evidence covers
    /// and the answer is the sources' own sentences
    /// ([`Evidence::with_extract_when_declined`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extracted: Option<Extracted>,
}

/// An answer taken from the sources because the model declined
/// ([`EvidenceReport::extracted`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Extracted {
    /// What the model replied (its "not in the sources").
    pub declined: String,
    /// The nodes the answer's sentences come from, in node order.
    pub sources: Vec<String>,
}

/// One node's kept sentences.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct KeptNode {
    /// The node.
    pub node_id: String,
    /// Its kept sentences, in its order.
    pub sentences: Vec<EvidenceSpan>,
}

/// One kept sentence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct EvidenceSpan {
    /// The sentence as shown (inline markup cleaned, white space collapsed).
    pub text: String,
    /// Where it starts in the node's text, in characters; `None` when the shown text is
    /// not found there word for word (markup was cleaned out of it).
    pub start: Option<usize>,
    /// Where it ends (exclusive), in characters.
    pub end: Option<usize>,
}

/// The nodes as the evidence shows them, and the report.
pub(crate) struct Applied {
    /// Every node, in order: kept ones with their evidence as text, dropped ones empty.
    pub(crate) shown: Vec<Node>,
    pub(crate) report: EvidenceReport,
}

/// Selects the evidence of `nodes` for `query` on tokio's blocking pool (inline off
/// tokio).
pub(crate) async fn apply(evidence: &Evidence, query: &str, nodes: &[Node]) -> Applied {
    let texts = selector_texts(nodes);
    let labels: Vec<String> = nodes.iter().map(label_words).collect();
    let selector = Arc::clone(&evidence.selector);
    let query_owned = query.to_string();
    let max_tokens = evidence.max_tokens;
    let run = move || {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let selection = selector.select(&query_owned, &refs, max_tokens);
        // The question's own facts, looked up in every node as an answer's are; a name
        // whose every word a node has (in its text, id or metadata: "the Tokio README"
        // over `tokio/README.md`) is not missing.
        let named = crate::grounding::check(&query_owned, "", &refs);
        let missing = match named.unsupported.is_empty() {
            true => named.unsupported,
            false => {
                let words = WordSet::of(
                    refs.iter()
                        .copied()
                        .chain(labels.iter().map(String::as_str)),
                );
                named
                    .unsupported
                    .into_iter()
                    .filter(|fact| !words.has_all(fact))
                    .collect()
            }
        };
        (selection, missing)
    };
    let (selection, missing) = match tokio::runtime::Handle::try_current() {
        Ok(runtime) => match runtime.spawn_blocking(run).await {
            Ok(found) => found,
            // The selector panicked: show every node, as without evidence.
            Err(_) => {
                tracing::warn!(target: "synthkit", "evidence selection failed; the nodes are shown whole");
                return Applied {
                    shown: nodes.to_vec(),
                    report: EvidenceReport {
                        answerable: true,
                        coverage: 1.0,
                        ..EvidenceReport::default()
                    },
                };
            }
        },
        Err(_) => run(),
    };
    let mut applied = shown_nodes(nodes, selection);
    if !missing.is_empty() && !has_images(nodes) {
        applied.report.answerable = false;
        applied.report.missing = missing;
    }
    applied
}

/// The selector's own answer to `query` from `nodes` ([`EvidenceSelector::extract`]), on
/// tokio's blocking pool (inline off tokio); `None` when it has none, or it panicked.
pub(crate) async fn extract(
    evidence: &Evidence,
    query: &str,
    nodes: &[Node],
) -> Option<SelectedAnswer> {
    let texts = selector_texts(nodes);
    let selector = Arc::clone(&evidence.selector);
    let query = query.to_string();
    let run = move || {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        selector.extract(&query, &refs, EXTRACT_TOKENS)
    };
    let found = match tokio::runtime::Handle::try_current() {
        Ok(runtime) => runtime.spawn_blocking(run).await.ok().flatten(),
        Err(_) => run(),
    };
    found.filter(|a| !a.text.trim().is_empty())
}

/// What the selector reads of each node: its model-visible text, or nothing for an image.
fn selector_texts(nodes: &[Node]) -> Vec<String> {
    nodes
        .iter()
        .map(|n| match n.image.is_some() {
            true => String::new(),
            false => n.llm_text().into_owned(),
        })
        .collect()
}

/// A node's id and metadata values, as words to look a question's names up in.
fn label_words(node: &Node) -> String {
    let mut words = node.id.clone();
    for value in node.metadata.values() {
        if let Some(v) = value.as_str() {
            words.push(' ');
            words.push_str(v);
        }
    }
    words
}

/// The words of some texts, lower case, to tell whether every word of a name is there.
struct WordSet(std::collections::HashSet<String>);

impl WordSet {
    /// The words of `texts` (runs of letters, digits and `_`).
    fn of<'t>(texts: impl Iterator<Item = &'t str>) -> Self {
        let mut set = std::collections::HashSet::new();
        for text in texts {
            set.extend(words(text).map(str::to_lowercase));
        }
        Self(set)
    }

    /// Whether every word of `fact` (a possessive `'s` aside; at least one word of two
    /// characters or more) is in the set.
    fn has_all(&self, fact: &str) -> bool {
        let mut any = false;
        for w in words(fact) {
            if w.chars().count() < 2 {
                continue;
            }
            any = true;
            if !self.0.contains(&w.to_lowercase()) {
                return false;
            }
        }
        any
    }
}

/// The words of `text`: runs of letters, digits and `_` (so `serde_json's` is
/// `serde_json` and `s`).
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
}

/// `nodes` as `selection` shows them.
fn shown_nodes(nodes: &[Node], selection: Selection) -> Applied {
    let mut by_index: Vec<Option<SelectedPassage>> = vec![None; nodes.len()];
    for p in selection.passages {
        if let Some(slot) = by_index.get_mut(p.index) {
            *slot = Some(p);
        }
    }
    // The selector reads text: what an image shows it cannot judge, so nodes with an
    // image are never answered "not in the sources" without the model.
    let mut report = EvidenceReport {
        answerable: selection.answerable || has_images(nodes),
        coverage: selection.coverage,
        ..EvidenceReport::default()
    };
    let shown = nodes
        .iter()
        .zip(by_index)
        .map(|(node, passage)| {
            if node.image.is_some() {
                return node.clone();
            }
            match passage {
                Some(p) if !p.text.trim().is_empty() => {
                    report.kept.push(KeptNode {
                        node_id: node.id.clone(),
                        sentences: p
                            .sentences
                            .iter()
                            .map(|s| {
                                let at = locate(&node.text, s);
                                EvidenceSpan {
                                    text: s.clone(),
                                    start: at.map(|a| a.0),
                                    end: at.map(|a| a.1),
                                }
                            })
                            .collect(),
                    });
                    let mut shown = node.clone();
                    shown.text = p.text;
                    shown
                }
                _ => {
                    if !node.text.trim().is_empty() {
                        report.dropped_count += 1;
                        if report.dropped.len() < MAX_DROPPED_LISTED {
                            report.dropped.push(node.id.clone());
                        }
                    }
                    let mut shown = node.clone();
                    shown.text = String::new();
                    shown
                }
            }
        })
        .collect();
    Applied { shown, report }
}

/// Whether any of `nodes` is an image (the selector cannot read it).
fn has_images(nodes: &[Node]) -> bool {
    nodes.iter().any(|n| n.image.is_some())
}

/// Where `shown` (a sentence, inline markup cleaned) stands in `text`: character offsets,
/// comparing letters and digits only (case aside), so collapsed white space and cleaned
/// punctuation still match; a long sentence's window (`…` where cut) is found by its
/// longest piece. `None` when its letters are not there in order.
pub(crate) fn locate(text: &str, shown: &str) -> Option<(usize, usize)> {
    let piece = shown
        .split('\u{2026}')
        .max_by_key(|p| p.len())
        .unwrap_or(shown);
    let needle: String = piece
        .chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect();
    if needle.is_empty() {
        return None;
    }
    // The skeleton of `text`: its letters and digits, lower case, each with its
    // character index.
    let mut skeleton = String::with_capacity(text.len());
    let mut origin: Vec<usize> = Vec::with_capacity(text.len());
    for (i, c) in text.chars().enumerate() {
        if c.is_alphanumeric() {
            for l in c.to_lowercase() {
                skeleton.push(l);
                origin.push(i);
            }
        }
    }
    let at = skeleton.find(&needle)?;
    let first = skeleton.get(..at)?.chars().count();
    let last = first + needle.chars().count() - 1;
    let start = *origin.get(first)?;
    let end = *origin.get(last)? + 1;
    // Up to the sentence's closing punctuation, when it follows at once.
    let end = text
        .chars()
        .skip(end)
        .take(1)
        .filter(|c| matches!(c, '.' | '!' | '?' | ':' | ';'))
        .count()
        + end;
    Some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_are_located_by_their_letters() {
        let text = "Intro.  The *primary* mirror is\n cleaned every six months. End.";
        let at = locate(text, "The primary mirror is cleaned every six months.").unwrap();
        let found: String = text.chars().skip(at.0).take(at.1 - at.0).collect();
        assert_eq!(found, "The *primary* mirror is\n cleaned every six months.");
        // Character offsets, not bytes.
        let text = "Café déjà vu. The dome opens.";
        let at = locate(text, "The dome opens.").unwrap();
        assert_eq!(at, (14, 29));
        // A window of a long sentence, by its longest piece.
        assert!(locate(text, "\u{2026} dome opens \u{2026}").is_some());
        assert_eq!(locate(text, "Not there."), None);
        assert_eq!(locate(text, "..."), None);
    }

    #[test]
    fn an_image_node_is_never_answered_without_the_model() {
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
        let image = crate::node::NodeImage::from_bytes(png, None).unwrap();
        let nodes = vec![Node::new("chart", "").with_image(image)];
        let applied = shown_nodes(&nodes, Selection::new(Vec::new(), false, 0.0));
        assert!(applied.report.answerable);
        assert!(applied.shown[0].image.is_some());
    }

    #[test]
    fn nodes_without_evidence_are_dropped_and_counted() {
        let nodes = vec![
            Node::new("a", "The mirror is cleaned every six months."),
            Node::new("b", "Tea."),
            Node::new("c", "  "),
        ];
        let selection = Selection::new(
            vec![SelectedPassage::new(
                0,
                "The mirror is cleaned every six months.",
                vec!["The mirror is cleaned every six months.".into()],
            )],
            true,
            1.0,
        );
        let applied = shown_nodes(&nodes, selection);
        assert_eq!(applied.report.dropped, vec!["b".to_string()]);
        assert_eq!(applied.report.dropped_count, 1);
        assert_eq!(applied.shown.len(), 3);
        assert!(applied.shown[1].text.is_empty());
        assert_eq!(applied.report.kept[0].sentences[0].start, Some(0));
        assert_eq!(applied.report.kept[0].sentences[0].end, Some(39));
    }
}
