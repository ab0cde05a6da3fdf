//! `--top-k`: keeps the chunks most relevant to the query, ranked with BM25.
//!
//! Scores come from the `bm25` crate with its English analyzer (Unicode word segmentation,
//! stop words, Snowball stemming), k1 = 1.2, b = 0.75, and the average chunk length fitted
//! to the chunks given. A chunk is ranked by its text with its file path and section (the
//! heading path, counted three times, as a title field weighs more) before it, so "Which
//! Python version is this?" finds the chunk of `python3.11/README.rst` titled "This is
//! Python version 3.11.2". A question asking for the latest release ("latest", "newest",
//! "recent", "current") weighs each file's first chunk 1.5 times: NEWS files and
//! changelogs put the newest release first. Each kept node's `score`
//! is set to its BM25 score; nodes are returned best first (ties keep their input order),
//! as a retriever would return them. A chunk whose score is 0 (it shares no word with the
//! question) is never kept, however large `k` is: fewer than `k`, or none, may come back
//! ([`nothing_relevant`] says so).

use std::collections::HashMap;

use bm25::{Embedder, EmbedderBuilder, Language};
use synthkit::Node;

/// What to say when no chunk of `total` is relevant to the question (the "nothing to
/// answer from" of `ask`, `batch` and `eval`, which then answer that the sources do not
/// answer).
pub fn nothing_relevant(total: usize) -> String {
    format!(
        "none of the {total} chunks read shares a word with the question (their relevance \
         is 0), so nothing was sent to the model; ask with other words, or give --top-k all \
         to send every chunk"
    )
}

/// The `k` nodes most relevant to `query`, best first, with their scores set; a node
/// whose score is 0 is left out.
pub fn top_k(nodes: Vec<Node>, query: &str, k: usize) -> Vec<Node> {
    if nodes.is_empty() || k == 0 {
        return Vec::new();
    }
    let analyzer = Analyzer::new();
    let terms: Vec<Terms> = nodes.iter().map(|n| analyzer.terms(n)).collect();
    let corpus = Corpus::of(terms.iter().map(|t| t.length));
    let mut frequency: HashMap<u32, u32> = HashMap::new();
    for t in &terms {
        for &(term, _) in &t.counts {
            *frequency.entry(term).or_default() += 1;
        }
    }
    let query = Query::new(
        &analyzer,
        query,
        |term| frequency.get(&term).copied().unwrap_or(0),
        corpus,
    );
    let scores: Vec<f64> = terms
        .iter()
        .zip(&nodes)
        .map(|(t, n)| query.score(t.length, |term| t.count(term), is_first_chunk(n)))
        .collect();
    let order = best_first(&scores, k);
    let mut slots: Vec<Option<Node>> = nodes.into_iter().map(Some).collect();
    order
        .into_iter()
        .filter_map(|(i, score)| {
            slots
                .get_mut(i)
                .and_then(Option::take)
                .map(|n| n.with_score(score))
        })
        .collect()
}

/// The indices of the `k` best of `scores` with their scores rounded ([`round4`]), best
/// first, ties in input order; a score of 0 is never kept.
pub fn best_first(scores: &[f64], k: usize) -> Vec<(usize, f64)> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| {
        let sa = scores.get(a).copied().unwrap_or(0.0);
        let sb = scores.get(b).copied().unwrap_or(0.0);
        sb.total_cmp(&sa).then(a.cmp(&b))
    });
    order.retain(|&i| scores.get(i).is_some_and(|&s| s > 0.0));
    order.truncate(k);
    order
        .into_iter()
        .map(|i| (i, round4(scores.get(i).copied().unwrap_or(0.0))))
        .collect()
}

/// Whether `node` is its file's first chunk (weighed more for "latest" questions).
pub fn is_first_chunk(node: &Node) -> bool {
    node.metadata.get("chunk").and_then(|c| c.as_u64()) == Some(1)
}

/// The words BM25 counts, as the `bm25` crate's English analyzer gives them (Unicode word
/// segmentation, stop words, Snowball stemming), each as its 32-bit hash.
pub struct Analyzer {
    embedder: Embedder<u32>,
}

impl Analyzer {
    /// The English analyzer.
    pub fn new() -> Self {
        Self {
            embedder: EmbedderBuilder::<u32>::with_avgdl(1.0)
                .language_mode(Language::English)
                .build(),
        }
    }

    /// The words of `text`, in order, repeats kept.
    pub fn words(&self, text: &str) -> Vec<u32> {
        self.embedder.embed(text).indices().copied().collect()
    }

    /// What a node is ranked by ([`ranked_text`]), counted.
    pub fn terms(&self, node: &Node) -> Terms {
        Terms::of(&self.words(&ranked_text(node)))
    }
}

impl Default for Analyzer {
    fn default() -> Self {
        Self::new()
    }
}

/// A chunk as BM25 sees it: its length in words and how often each word is in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terms {
    /// Words, repeats counted.
    pub length: u32,
    /// Each word with its count, by word.
    pub counts: Vec<(u32, u32)>,
}

impl Terms {
    /// Counts `words`.
    pub fn of(words: &[u32]) -> Self {
        let mut sorted = words.to_vec();
        sorted.sort_unstable();
        let mut counts: Vec<(u32, u32)> = Vec::new();
        for w in sorted {
            match counts.last_mut() {
                Some((last, n)) if *last == w => *n += 1,
                _ => counts.push((w, 1)),
            }
        }
        Self {
            length: u32::try_from(words.len()).unwrap_or(u32::MAX),
            counts,
        }
    }

    /// How often `term` is in the chunk.
    pub fn count(&self, term: u32) -> u32 {
        self.counts
            .binary_search_by_key(&term, |&(t, _)| t)
            .map_or(0, |i| self.counts[i].1)
    }
}

/// The chunks ranked together: how many, and their words in all (the average length
/// BM25 normalises by, fitted to them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Corpus {
    /// Chunks.
    pub chunks: u64,
    /// Words over all chunks.
    pub words: u64,
}

impl Corpus {
    /// The corpus of chunks of these lengths.
    pub fn of(lengths: impl IntoIterator<Item = u32>) -> Self {
        lengths.into_iter().fold(Self::default(), |c, l| Self {
            chunks: c.chunks + 1,
            words: c.words + u64::from(l),
        })
    }

    /// The average chunk length, as the `bm25` crate fits it (its fallback, 256, for no
    /// chunk or no word).
    fn average_length(self) -> f32 {
        const FALLBACK: f32 = 256.0;
        if self.chunks == 0 {
            return FALLBACK;
        }
        let avg = (self.words as f64 / self.chunks as f64) as f32;
        if avg <= 0.0 { FALLBACK } else { avg }
    }
}

/// BM25's k1 and b, the `bm25` crate's defaults.
const K1: f32 = 1.2;
const B: f32 = 0.75;

/// A question ready to score chunks: its words, each with its inverse document
/// frequency over the corpus. Scores are those of the `bm25` crate's `Scorer` to the bit
/// (the same f32 operations in the same order), so that ranking from an index's postings
/// and ranking chunks in memory agree.
pub struct Query {
    /// Each word of the question in order (repeats kept, as the crate counts them), with
    /// its inverse document frequency.
    words: Vec<(u32, f32)>,
    average_length: f32,
    latest: bool,
}

impl Query {
    /// `query` over `corpus`, whose chunks hold a word as often as `frequency` says (the
    /// number of chunks that have it).
    pub fn new(
        analyzer: &Analyzer,
        query: &str,
        frequency: impl Fn(u32) -> u32,
        corpus: Corpus,
    ) -> Self {
        let n = corpus.chunks as f32;
        let words = analyzer
            .words(query)
            .into_iter()
            .map(|w| {
                let df = frequency(w) as f32;
                let idf = (1f32 + ((n - df + 0.5) / (df + 0.5))).ln();
                (w, idf)
            })
            .collect();
        Self {
            words,
            average_length: corpus.average_length(),
            latest: asks_latest(query),
        }
    }

    /// The distinct words of the question.
    pub fn distinct_words(&self) -> Vec<u32> {
        let mut words: Vec<u32> = self.words.iter().map(|&(w, _)| w).collect();
        words.sort_unstable();
        words.dedup();
        words
    }

    /// The score of a chunk of `length` words holding each word as often as `count` says;
    /// `first`: the chunk is its file's first (weighed [`LATEST_BOOST`] times when the
    /// question asks for the latest). Not finite: 0.
    pub fn score(&self, length: u32, count: impl Fn(u32) -> u32, first: bool) -> f64 {
        let norm = K1 * (1.0 - B + B * (length as f32 / self.average_length));
        let mut total = 0f32;
        for &(word, idf) in &self.words {
            let tf = count(word) as f32;
            let weight = if tf == 0.0 {
                0f32
            } else {
                (tf * (K1 + 1.0)) / (tf + norm)
            };
            total += idf * weight;
        }
        let s = f64::from(total);
        let s = if s.is_finite() { s } else { 0.0 };
        if self.latest && first {
            s * LATEST_BOOST
        } else {
            s
        }
    }
}

/// How much more a file's first chunk weighs when the question asks for the latest
/// release (NEWS files and changelogs put the newest first).
const LATEST_BOOST: f64 = 1.5;

/// Whether the question asks for the latest of something ("latest", "newest", "most
/// recent", "current").
fn asks_latest(query: &str) -> bool {
    query.split(|c: char| !c.is_alphanumeric()).any(|w| {
        matches!(
            w.to_lowercase().as_str(),
            "latest" | "newest" | "recent" | "current"
        )
    })
}

/// How many times a chunk's section (its heading path) is counted: a heading naming the
/// question's words says more than a passing mention (as BM25F weighs a title field).
const SECTION_WEIGHT: usize = 3;

/// What a node is ranked by: its file path (its words: `python3.11/README.rst` gives
/// `python3 11 README rst`), its section ([`SECTION_WEIGHT`] times) and its text.
pub fn ranked_text(node: &Node) -> String {
    let meta = |key: &str| {
        node.metadata
            .get(key)
            .and_then(|v| v.as_str())
            .unwrap_or("")
    };
    let path: String = meta("file_path")
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect();
    let section = format!("{}\n", meta("section")).repeat(SECTION_WEIGHT);
    format!("{path}\n{section}{}", node.text)
}

/// Rounded to 4 decimals, so outputs are stable and readable.
fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ranking as the `bm25` crate's own embedder and scorer give it (what `top_k`
    /// was written with): the scores must be the same to the bit.
    fn crate_scores(nodes: &[Node], query: &str) -> Vec<f64> {
        use bm25::Scorer;
        let ranked: Vec<String> = nodes.iter().map(ranked_text).collect();
        let corpus: Vec<&str> = ranked.iter().map(String::as_str).collect();
        let embedder =
            EmbedderBuilder::<u32>::with_fit_to_corpus(Language::English, &corpus).build();
        let mut scorer = Scorer::<usize>::new();
        for (i, text) in corpus.iter().enumerate() {
            scorer.upsert(&i, embedder.embed(text));
        }
        let latest = asks_latest(query);
        let q = embedder.embed(query);
        (0..nodes.len())
            .map(|i| f64::from(scorer.score(&i, &q).unwrap_or(0.0)))
            .map(|s| if s.is_finite() { s } else { 0.0 })
            .zip(nodes)
            .map(|(s, n)| {
                if latest && is_first_chunk(n) {
                    s * LATEST_BOOST
                } else {
                    s
                }
            })
            .collect()
    }

    #[test]
    fn scores_are_the_bm25_crates_to_the_bit() {
        let texts = [
            "The primary mirror is cleaned every six months, the secondary mirror yearly.",
            "Release 3.11.2 is the latest release; release notes follow.",
            "",
            "Visitors park behind the cafe. Parking is free on Sundays.",
            "mirror mirror mirror on the wall",
            "Cleaning lenses: we clean lenses weekly and mirrors when they need it.",
        ];
        let nodes: Vec<Node> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut n = Node::new(format!("doc{}.md#{}", i % 2, i / 2 + 1), *t);
                n.metadata
                    .insert("file_path".into(), format!("docs/doc{}.md", i % 2).into());
                n.metadata.insert("chunk".into(), (i / 2 + 1).into());
                if i == 1 {
                    n.metadata.insert("section".into(), "Release notes".into());
                }
                n
            })
            .collect();
        for query in [
            "How often is the mirror cleaned?",
            "mirror mirror",
            "What is the latest release?",
            "zebras",
            "",
        ] {
            let analyzer = Analyzer::new();
            let terms: Vec<Terms> = nodes.iter().map(|n| analyzer.terms(n)).collect();
            let corpus = Corpus::of(terms.iter().map(|t| t.length));
            let df = |w: u32| terms.iter().filter(|t| t.count(w) > 0).count() as u32;
            let q = Query::new(&analyzer, query, df, corpus);
            let ours: Vec<f64> = terms
                .iter()
                .zip(&nodes)
                .map(|(t, n)| q.score(t.length, |w| t.count(w), is_first_chunk(n)))
                .collect();
            assert_eq!(ours, crate_scores(&nodes, query), "{query}");
        }
    }

    #[test]
    fn best_first_with_scores() {
        let nodes = vec![
            Node::new("a", "The dome opens at dusk."),
            Node::new("b", "The primary mirror is cleaned every six months."),
            Node::new("c", "Visitors park behind the cafe."),
        ];
        let out = top_k(nodes, "How often is the mirror cleaned?", 2);
        // The two others share no word with the question: left out.
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].id, "b");
        assert!(out[0].score.unwrap() > 0.0);
    }

    #[test]
    fn stemming_matches_word_forms() {
        let nodes = vec![
            Node::new("a", "Parking is free."),
            Node::new("b", "We clean lenses weekly."),
        ];
        let out = top_k(nodes, "cleaning", 1);
        assert_eq!(out[0].id, "b");
    }

    #[test]
    fn more_than_available() {
        let nodes = vec![
            Node::new("a", "The mirror is clean."),
            Node::new("b", "The dome is white."),
        ];
        let out = top_k(nodes.clone(), "mirror", 5);
        assert_eq!(out.len(), 1);
        assert!(top_k(nodes, "zebras", 5).is_empty());
    }
}
