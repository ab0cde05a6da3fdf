//! Ranking: one request's candidates (sentences, and list units: a lead-in with its items)
//! scored against the question with BM25, or by centrality when the question has no term.
//!
//! BM25 as the `bm25` crate computes it (the scorer the CLI's `--top-k` uses): k1 = 1.2,
//! b = 0.75, IDF over this request's sentences (each sentence counted once, whatever units
//! it is part of), the average length fitted to the candidates (at least 1 term); a list
//! unit counts as long as its lead-in plus one average item, so a list is not buried by its
//! length. The crate's English analyzer splits Unicode words (each CJK ideograph is a
//! word), lowercases them, drops NLTK's English stop words and stems with Snowball. Text is
//! not transliterated to ASCII: that would turn CJK ideographs into ambiguous pinyin
//! syllables and emoji into English words.

use std::collections::HashMap;
use std::sync::LazyLock;

use bm25::{DefaultTokenizer, Language, TokenEmbedder, Tokenizer};

/// BM25 term-frequency saturation (the `bm25` crate's default).
const K1: f64 = 1.2;
/// BM25 length normalisation (the `bm25` crate's default).
const B: f64 = 0.75;

/// The fewest sentences coverage's IDF counts (see [`Index::coverage`]).
pub(super) const MIN_COVERAGE_SENTENCES: usize = 20;

/// The English analyzer, built once (its stop-word set and stemmer are shared).
static ENGLISH: LazyLock<DefaultTokenizer> = LazyLock::new(|| {
    DefaultTokenizer::builder()
        .language_mode(Language::English)
        .normalization(false)
        .build()
});

/// A term: its 64-bit hash, as the `bm25` crate embeds it (collisions are negligible at
/// the scale of one request).
pub(super) type Term = u64;

/// The terms of `text` as the ranking sees them (stemmed, without stop words).
pub(super) fn terms(text: &str) -> Vec<String> {
    Tokenizer::tokenize(&*ENGLISH, text)
}

/// A term's id.
pub(super) fn term_id(term: &str) -> Term {
    <u64 as TokenEmbedder>::embed(term)
}

/// The term ids of `text`.
pub(super) fn term_ids(text: &str) -> Vec<Term> {
    terms(text).iter().map(|t| term_id(t)).collect()
}

/// Indices by score, best first; ties keep the earlier one first.
pub(super) fn ranked(scores: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| {
        let sa = scores.get(a).copied().unwrap_or(0.0);
        let sb = scores.get(b).copied().unwrap_or(0.0);
        sb.total_cmp(&sa).then(a.cmp(&b))
    });
    order
}

/// A candidate as the index sees it.
#[derive(Debug, Clone, Default)]
pub(super) struct Doc {
    /// Term frequencies, sorted by term.
    tf: Vec<(Term, u32)>,
    /// The length BM25 normalises by.
    len: f64,
}

impl Doc {
    /// A candidate with `terms`, counted as `len` terms long.
    pub(super) fn new(terms: &[Term], len: usize) -> Self {
        let mut sorted = terms.to_vec();
        sorted.sort_unstable();
        let mut tf: Vec<(Term, u32)> = Vec::new();
        for t in sorted {
            match tf.last_mut() {
                Some((last, n)) if *last == t => *n += 1,
                _ => tf.push((t, 1)),
            }
        }
        Self {
            tf,
            len: len as f64,
        }
    }

    fn tf(&self, term: Term) -> u32 {
        self.tf
            .binary_search_by_key(&term, |&(t, _)| t)
            .ok()
            .and_then(|i| self.tf.get(i))
            .map_or(0, |&(_, n)| n)
    }
}

/// One request's candidates, indexed.
pub(super) struct Index {
    docs: Vec<Doc>,
    /// Document frequencies over the request's sentences.
    df: HashMap<Term, usize>,
    /// The number of sentences.
    n: usize,
    avgdl: f64,
}

impl Index {
    /// Indexes `docs`; `sentences` are the term lists IDF is computed over.
    pub(super) fn new(docs: Vec<Doc>, sentences: &[Vec<Term>]) -> Self {
        let mut df: HashMap<Term, usize> = HashMap::new();
        for s in sentences {
            let mut distinct = s.clone();
            distinct.sort_unstable();
            distinct.dedup();
            for t in distinct {
                *df.entry(t).or_insert(0) += 1;
            }
        }
        let total: f64 = docs.iter().map(|d| d.len).sum();
        let avgdl = if docs.is_empty() {
            1.0
        } else {
            (total / docs.len() as f64).max(1.0)
        };
        Self {
            docs,
            df,
            n: sentences.len(),
            avgdl,
        }
    }

    /// The inverse document frequency of `term`, as BM25 weighs it; a term in no
    /// sentence gets the largest.
    pub(super) fn idf(&self, term: Term) -> f64 {
        let n = self.n as f64;
        let f = self.df.get(&term).copied().unwrap_or(0) as f64;
        (1.0 + (n - f + 0.5) / (f + 0.5)).ln()
    }

    /// The query's distinct terms.
    fn distinct(query: &[Term]) -> Vec<Term> {
        let mut q: Vec<Term> = Vec::new();
        for &t in query {
            if !q.contains(&t) {
                q.push(t);
            }
        }
        q
    }

    /// The BM25 score of every candidate for `query`, times the share of the query's terms
    /// (those occurring in some sentence) the candidate contains: a coordination factor, so
    /// a sentence with several of the question's words beats one repeating a single word.
    /// Zero for candidates without a query term.
    pub(super) fn bm25(&self, query: &[Term]) -> Vec<f64> {
        let q: Vec<Term> = Self::distinct(query)
            .into_iter()
            .filter(|t| self.df.contains_key(t))
            .collect();
        self.docs
            .iter()
            .map(|doc| {
                let mut score = 0.0;
                let mut matched = 0usize;
                for &t in &q {
                    let tf = f64::from(doc.tf(t));
                    if tf > 0.0 {
                        matched += 1;
                        let norm = K1 * (1.0 - B + B * doc.len / self.avgdl);
                        score += self.idf(t) * tf * (K1 + 1.0) / (tf + norm);
                    }
                }
                if matched == 0 || q.is_empty() {
                    0.0
                } else {
                    let s = score * matched as f64 / q.len() as f64;
                    if s.is_finite() { s } else { 0.0 }
                }
            })
            .collect()
    }

    /// The share of the question's weight candidate `doc` covers: the IDF of the distinct
    /// query terms it (or its `context`: its file and headings) contains over the IDF of
    /// all of them (a filler word left out unless the candidate has it). 1 for a question without terms. The IDF here counts at least
    /// [`MIN_COVERAGE_SENTENCES`] sentences: in a context of one or two sentences every
    /// word present has an IDF near 0, and one absent word would outweigh them all.
    pub(super) fn coverage(
        &self,
        doc: usize,
        query: &[Term],
        filler: impl Fn(Term) -> bool,
        context: &[Term],
    ) -> f64 {
        let Some(d) = self.docs.get(doc) else {
            return 0.0;
        };
        let (mut have, mut all) = (0.0, 0.0);
        for t in Self::distinct(query) {
            // A filler word ("how often", "how long") says what form the answer takes,
            // not what it is about: it counts only for a candidate that has it, so a
            // document using the word elsewhere ("temperatures often fall") never makes
            // the one that answers look weak.
            if filler(t) && d.tf(t) == 0 && !context.contains(&t) {
                continue;
            }
            let n = self.n.max(MIN_COVERAGE_SENTENCES) as f64;
            let f = self.df.get(&t).copied().unwrap_or(0) as f64;
            let w = (1.0 + (n - f + 0.5) / (f + 0.5)).ln();
            all += w;
            if d.tf(t) > 0 || context.contains(&t) {
                have += w;
            }
        }
        if all > 0.0 { have / all } else { 1.0 }
    }

    /// The IDF of each query term, for windows.
    pub(super) fn weights(&self, query: &[Term]) -> HashMap<Term, f64> {
        query.iter().map(|&t| (t, self.idf(t))).collect()
    }

    /// Centrality of every candidate: the sum of its cosine similarities (TF-IDF vectors)
    /// to all other candidates, computed exactly in linear time as `u_i · Σ_j u_j − 1`.
    pub(super) fn centrality(&self) -> Vec<f64> {
        let units: Vec<Vec<(Term, f64)>> =
            self.docs.iter().map(|doc| self.unit_vector(doc)).collect();
        let mut sum: HashMap<Term, f64> = HashMap::with_capacity(self.df.len());
        for unit in &units {
            for &(t, w) in unit {
                *sum.entry(t).or_insert(0.0) += w;
            }
        }
        units
            .iter()
            .map(|unit| {
                if unit.is_empty() {
                    return 0.0;
                }
                let dot: f64 = unit
                    .iter()
                    .map(|(t, w)| w * sum.get(t).copied().unwrap_or(0.0))
                    .sum();
                dot - 1.0
            })
            .collect()
    }

    /// The candidate's TF-IDF vector, normalised to length 1 (empty without terms).
    fn unit_vector(&self, doc: &Doc) -> Vec<(Term, f64)> {
        let mut v: Vec<(Term, f64)> = doc
            .tf
            .iter()
            .map(|&(t, n)| (t, f64::from(n) * self.idf(t)))
            .collect();
        let norm = v.iter().map(|(_, w)| w * w).sum::<f64>().sqrt();
        if norm > 0.0 {
            v.iter_mut().for_each(|(_, w)| *w /= norm);
            v
        } else {
            Vec::new()
        }
    }
}
