//! Evidence: the sentences of some passages that bear on a question
//! ([`ExtractiveModel::evidence`]), and the answerer's ranking as the engine's evidence
//! selector ([`ExtractiveEvidence`]).

use synthkit::text::SharedTokenizer;

use super::select::Selector;
use super::{Choice, ExtractiveModel, unit_ratio};

/// The sentences of some passages that bear on a question ([`ExtractiveModel::evidence`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Evidence {
    /// The passages with at least one sentence kept, in passage order.
    pub passages: Vec<EvidencePassage>,
    /// Whether the passages answer the question, as [`ExtractiveModel::extract`] decides
    /// it (its relevance floor and minimum coverage): false when the best match covers
    /// too little of the question.
    pub answerable: bool,
    /// The share of the question's weight the best match covers (0 to 1; 1 for a question
    /// without terms).
    pub coverage: f64,
}

/// One passage's evidence.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct EvidencePassage {
    /// The passage's index among those given.
    pub index: usize,
    /// Its kept sentences in their order, as a prompt shows them (a list under its
    /// lead-in one item a line).
    pub text: String,
    /// Its kept sentences one by one, as shown (inline markup cleaned, a long sentence's
    /// window).
    pub sentences: Vec<String>,
}

/// The offline answerer's ranking as an evidence selector ([`synthkit::evidence`]):
/// the sentences of every node that bear on the question, by [`ExtractiveModel::evidence`],
/// and whether the nodes answer at all by its minimum coverage.
///
/// ```
/// use std::sync::Arc;
/// use synthkit::evidence::EvidenceSelector;
/// use synthkit_extractive::ExtractiveEvidence;
/// let selector = ExtractiveEvidence::new();
/// let texts = [
///     "The dome opens at dusk. The primary mirror is cleaned every six months.",
///     "The cafe sells tea and cake.",
/// ];
/// let found = selector.select("How often is the mirror cleaned?", &texts, 512);
/// assert!(found.answerable);
/// assert_eq!(found.passages.len(), 1);
/// assert_eq!(found.passages[0].text, "The primary mirror is cleaned every six months.");
/// let none = selector.select("Who painted the ceiling?", &texts, 512);
/// assert!(!none.answerable);
/// ```
#[derive(Debug, Clone)]
pub struct ExtractiveEvidence {
    model: ExtractiveModel,
    min_relative_score: f64,
}

impl Default for ExtractiveEvidence {
    fn default() -> Self {
        Self::new()
    }
}

impl ExtractiveEvidence {
    /// The default share of the best sentence's score a sentence needs to be kept as
    /// evidence: 0.3 (the answerer's own floor, 0.6, keeps one source's sentences; a
    /// question whose facts are spread over several nodes needs them all).
    pub const DEFAULT_MIN_RELATIVE_SCORE: f64 = 0.3;

    /// The default share of the question the best match must cover for the nodes to
    /// answer: 0.4, below the answerer's own 0.5 (a model reads what the answerer cannot
    /// pick). Calibrated on `bench/quality` (121 cases, Qwen2.5-Coder-0.5B): at 0.5, 9 of
    /// 96 answerable questions were answered "not in the sources" without a call; at
    /// 0.4, 4, with 20 of 25 unanswerable ones still abstained (21 at 0.5).
    pub const DEFAULT_MIN_COVERAGE: f64 = 0.4;

    /// The selector with the answerer's ranking, a minimum coverage of
    /// [`Self::DEFAULT_MIN_COVERAGE`] and a relevance floor of
    /// [`Self::DEFAULT_MIN_RELATIVE_SCORE`].
    pub fn new() -> Self {
        Self {
            model: ExtractiveModel::new().with_min_coverage(Self::DEFAULT_MIN_COVERAGE),
            min_relative_score: Self::DEFAULT_MIN_RELATIVE_SCORE,
        }
    }

    /// Sets the relevance floor of kept sentences (a share of the best score, `[0, 1]`).
    pub fn with_min_relative_score(mut self, ratio: f64) -> Self {
        self.min_relative_score = unit_ratio(ratio);
        self
    }

    /// Sets the share of the question the best match must cover for the nodes to answer
    /// ([`ExtractiveModel::with_min_coverage`]; default [`Self::DEFAULT_MIN_COVERAGE`]).
    pub fn with_min_coverage(mut self, ratio: f64) -> Self {
        self.model = self.model.with_min_coverage(ratio);
        self
    }

    /// Sets the tokenizer that measures the evidence against its budget.
    pub fn with_tokenizer(mut self, tokenizer: SharedTokenizer) -> Self {
        self.model = self.model.with_tokenizer(tokenizer);
        self
    }
}

impl synthkit::evidence::EvidenceSelector for ExtractiveEvidence {
    fn select(
        &self,
        query: &str,
        texts: &[&str],
        max_tokens: usize,
    ) -> synthkit::evidence::Selection {
        let found = self
            .model
            .evidence(query, texts, self.min_relative_score, max_tokens);
        let passages = found
            .passages
            .into_iter()
            .map(|p| synthkit::evidence::SelectedPassage::new(p.index, p.text, p.sentences))
            .collect();
        synthkit::evidence::Selection::new(passages, found.answerable, found.coverage)
    }

    /// The answerer's own answer ([`ExtractiveModel::extract`] over the texts labelled
    /// `[1]`, `[2]`, ...), when it is drawn from them.
    fn extract(
        &self,
        query: &str,
        texts: &[&str],
        max_tokens: usize,
    ) -> Option<synthkit::evidence::SelectedAnswer> {
        let mut context = String::new();
        for (i, t) in texts.iter().enumerate() {
            if t.trim().is_empty() {
                continue;
            }
            context.push_str(&format!("[{}]\n{t}\n\n", i + 1));
        }
        let found = self.model.extract(query, None, &context, max_tokens);
        let sources = found
            .sources
            .iter()
            .filter_map(|&n| (n as usize).checked_sub(1))
            .filter(|&i| i < texts.len())
            .collect();
        (found.grounded && found.query_matched)
            .then(|| synthkit::evidence::SelectedAnswer::new(found.text, sources))
    }
}

impl ExtractiveModel {
    /// The sentences of `passages` that bear on `query`, for a prompt's evidence: the
    /// candidates over `min_relative_score` times the best one's score, from every
    /// passage (no focus on the best one's neighbourhood), best first while they fit
    /// `max_tokens` tokens, each passage's shown in its own order. Whether the passages
    /// answer at all is decided as [`extract`](Self::extract) decides it (the relevance
    /// floor and minimum coverage of this model), and said in [`Evidence::answerable`].
    pub fn evidence(
        &self,
        query: &str,
        passages: &[&str],
        min_relative_score: f64,
        max_tokens: usize,
    ) -> Evidence {
        let mut context = String::new();
        for (i, p) in passages.iter().enumerate() {
            if p.trim().is_empty() {
                continue;
            }
            context.push_str(&format!("[{}]\n", i + 1));
            context.push_str(p);
            context.push_str("\n\n");
        }
        let chosen = match self.choose(query, None, &context, Some(unit_ratio(min_relative_score)))
        {
            Choice::Empty(e) => {
                return Evidence {
                    passages: Vec::new(),
                    answerable: e.grounded,
                    coverage: 0.0,
                };
            }
            Choice::Chosen(c) => c,
        };
        let selector = Selector {
            sentences: &chosen.all.sentences,
            headings: chosen.release.then_some(chosen.all.headings.as_slice()),
            marks: false,
            weights: &chosen.weights,
            tok: &self.tokenizer,
            budget: max_tokens,
        };
        let picked = selector.pick(&chosen.cands, &chosen.wide);
        let mut by_passage: std::collections::BTreeMap<u32, Vec<usize>> =
            std::collections::BTreeMap::new();
        for &i in picked.shown.keys() {
            if let Some(n) = chosen.all.sentences.get(i).and_then(|s| s.source) {
                by_passage.entry(n).or_default().push(i);
            }
        }
        let passages = by_passage
            .into_iter()
            .filter_map(|(n, ids)| {
                let text = selector.render_only(&picked, &ids);
                let sentences = ids
                    .iter()
                    .filter_map(|i| picked.shown.get(i).cloned())
                    .collect();
                (!text.trim().is_empty()).then(|| EvidencePassage {
                    index: n as usize - 1,
                    text,
                    sentences,
                })
            })
            .collect();
        Evidence {
            passages,
            answerable: chosen.grounded,
            coverage: chosen.coverage,
        }
    }
}
