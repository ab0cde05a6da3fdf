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

use bm25::{EmbedderBuilder, Language, Scorer};
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
    let ranked: Vec<String> = nodes.iter().map(ranked_text).collect();
    let corpus: Vec<&str> = ranked.iter().map(String::as_str).collect();
    let embedder = EmbedderBuilder::<u32>::with_fit_to_corpus(Language::English, &corpus).build();
    let mut scorer = Scorer::<usize>::new();
    for (i, text) in corpus.iter().enumerate() {
        scorer.upsert(&i, embedder.embed(text));
    }
    let latest = asks_latest(query);
    let query = embedder.embed(query);
    let scores: Vec<f64> = (0..nodes.len())
        .map(|i| f64::from(scorer.score(&i, &query).unwrap_or(0.0)))
        .map(|s| if s.is_finite() { s } else { 0.0 })
        .zip(&nodes)
        .map(|(s, n)| {
            let first = n.metadata.get("chunk").and_then(|c| c.as_u64()) == Some(1);
            if latest && first { s * LATEST_BOOST } else { s }
        })
        .collect();
    let mut order: Vec<usize> = (0..nodes.len()).collect();
    order.sort_by(|&a, &b| {
        let sa = scores.get(a).copied().unwrap_or(0.0);
        let sb = scores.get(b).copied().unwrap_or(0.0);
        sb.total_cmp(&sa).then(a.cmp(&b))
    });
    order.retain(|&i| scores.get(i).is_some_and(|&s| s > 0.0));
    order.truncate(k);
    let mut slots: Vec<Option<Node>> = nodes.into_iter().map(Some).collect();
    order
        .into_iter()
        .filter_map(|i| {
            let score = scores.get(i).copied().unwrap_or(0.0);
            slots
                .get_mut(i)
                .and_then(Option::take)
                .map(|n| n.with_score(round4(score)))
        })
        .collect()
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
fn ranked_text(node: &Node) -> String {
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
