//! Ranking: one request's sentences scored against the question with BM25, or by
//! centrality when the question has no word in them.
//!
//! BM25 is the `bm25` crate's, the scorer the CLI's `--top-k` uses too: k1 = 1.2, b = 0.75,
//! IDF over this request's sentences, the average sentence length fitted to them (at least
//! 1 term). Its English analyzer splits Unicode words (each CJK ideograph is a word),
//! lowercases them, drops NLTK's English stop words and stems with Snowball. Text is not
//! transliterated to ASCII: that would turn CJK ideographs into ambiguous pinyin syllables
//! and emoji into English words.

use std::collections::HashMap;
use std::sync::LazyLock;

use bm25::{
    DefaultTokenizer, Embedder, EmbedderBuilder, Embedding, Language, Scorer, TokenEmbedding,
    Tokenizer,
};

/// BM25 term-frequency saturation (the `bm25` crate's default).
const K1: f32 = 1.2;
/// BM25 length normalisation (the `bm25` crate's default).
const B: f32 = 0.75;

/// The English analyzer, built once (its stop-word set and stemmer are shared).
static ENGLISH: LazyLock<DefaultTokenizer> = LazyLock::new(|| {
    DefaultTokenizer::builder()
        .language_mode(Language::English)
        .normalization(false)
        .build()
});

/// A handle to [`ENGLISH`], so each request's embedder shares it.
#[derive(Debug, Default, Clone, Copy)]
struct Analyzer;

impl Tokenizer for Analyzer {
    fn tokenize(&self, input_text: &str) -> Vec<String> {
        Tokenizer::tokenize(&*ENGLISH, input_text)
    }
}

/// A term: its 64-bit hash (collisions are negligible at the scale of one request).
type Term = u64;

/// The terms of `text` as the ranking sees them (stemmed, without stop words).
pub(super) fn terms(text: &str) -> Vec<String> {
    Analyzer.tokenize(text)
}

/// Sentence indices by score, best first; ties keep the earlier sentence first.
pub(super) fn ranked(scores: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| {
        let sa = scores.get(a).copied().unwrap_or(0.0);
        let sb = scores.get(b).copied().unwrap_or(0.0);
        sb.total_cmp(&sa).then(a.cmp(&b))
    });
    order
}

/// One request's sentences, analyzed and indexed.
pub(super) struct Index {
    embedder: Embedder<Term, Analyzer>,
    scorer: Scorer<usize, Term>,
    /// Each sentence's BM25 embedding: one entry per term occurrence.
    docs: Vec<Embedding<Term>>,
    /// Document frequencies: how many sentences contain each term.
    df: HashMap<Term, usize>,
}

impl Index {
    /// Indexes `sentences` (sentence `i` has id `i`).
    pub(super) fn new(sentences: &[String]) -> Self {
        let total: usize = sentences.iter().map(|s| Analyzer.tokenize(s).len()).sum();
        let avgdl = if sentences.is_empty() {
            1.0
        } else {
            (total as f32 / sentences.len() as f32).max(1.0)
        };
        let embedder = EmbedderBuilder::<Term, Analyzer>::with_avgdl(avgdl)
            .k1(K1)
            .b(B)
            .build();
        let mut scorer = Scorer::new();
        let mut df: HashMap<Term, usize> = HashMap::new();
        let mut docs = Vec::with_capacity(sentences.len());
        for (i, sentence) in sentences.iter().enumerate() {
            let doc = embedder.embed(sentence);
            let mut distinct: Vec<Term> = doc.indices().copied().collect();
            distinct.sort_unstable();
            distinct.dedup();
            for t in distinct {
                *df.entry(t).or_insert(0) += 1;
            }
            scorer.upsert(&i, doc.clone());
            docs.push(doc);
        }
        Self {
            embedder,
            scorer,
            docs,
            df,
        }
    }

    /// The query's distinct terms that occur in some sentence, in query order.
    fn query(&self, query: &str) -> Embedding<Term> {
        let mut terms: Vec<TokenEmbedding<Term>> = Vec::new();
        for t in self.embedder.embed(query).indices() {
            if self.df.contains_key(t) && !terms.iter().any(|q| q.index == *t) {
                terms.push(TokenEmbedding {
                    index: *t,
                    value: 1.0,
                });
            }
        }
        Embedding(terms)
    }

    /// The BM25 score of every sentence for `query`, times the share of the query's terms
    /// (those occurring in some sentence) the sentence contains: a coordination factor, so
    /// a sentence with several of the question's words beats one repeating a single word.
    /// Zero for sentences without a query term.
    pub(super) fn bm25(&self, query: &str) -> Vec<f64> {
        let query = self.query(query);
        let mut scores = vec![0.0_f64; self.docs.len()];
        if query.is_empty() {
            return scores;
        }
        for hit in self.scorer.matches(&query) {
            let Some(doc) = self.docs.get(hit.id) else {
                continue;
            };
            let matched = query
                .indices()
                .filter(|q| doc.indices().any(|t| t == *q))
                .count();
            let score = f64::from(hit.score) * matched as f64 / query.len() as f64;
            if let Some(s) = scores.get_mut(hit.id) {
                *s = if score.is_finite() { score } else { 0.0 };
            }
        }
        scores
    }

    /// The inverse document frequency of `term`, as BM25 weighs it.
    fn idf(&self, term: Term) -> f64 {
        let n = self.docs.len() as f64;
        let f = self.df.get(&term).copied().unwrap_or(0) as f64;
        (1.0 + (n - f + 0.5) / (f + 0.5)).ln()
    }

    /// Centrality of every sentence: the sum of its cosine similarities (TF-IDF vectors)
    /// to all other sentences, computed exactly in linear time as `u_i · Σ_j u_j − 1`.
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

    /// The sentence's TF-IDF vector, normalised to length 1 (empty without terms).
    fn unit_vector(&self, doc: &Embedding<Term>) -> Vec<(Term, f64)> {
        let mut sorted: Vec<Term> = doc.indices().copied().collect();
        sorted.sort_unstable();
        let mut v: Vec<(Term, f64)> = Vec::new();
        for t in sorted {
            match v.last_mut() {
                Some((last, w)) if *last == t => *w += self.idf(t),
                _ => v.push((t, self.idf(t))),
            }
        }
        let norm = v.iter().map(|(_, w)| w * w).sum::<f64>().sqrt();
        if norm > 0.0 {
            v.iter_mut().for_each(|(_, w)| *w /= norm);
            v
        } else {
            Vec::new()
        }
    }
}
