//! `--top-k`: keeps the chunks most relevant to the query, ranked with BM25.
//!
//! Scores come from the `bm25` crate with its English analyzer (Unicode word segmentation,
//! stop words, Snowball stemming), k1 = 1.2, b = 0.75, and the average chunk length fitted
//! to the chunks given. Each kept node's `score` is set to its BM25 score; nodes are
//! returned best first (ties keep their input order), as a retriever would return them.

use bm25::{EmbedderBuilder, Language, Scorer};
use synthkit::Node;

/// The `k` nodes most relevant to `query`, best first, with their scores set.
pub fn top_k(nodes: Vec<Node>, query: &str, k: usize) -> Vec<Node> {
    if nodes.is_empty() || k == 0 {
        return Vec::new();
    }
    let corpus: Vec<&str> = nodes.iter().map(|n| n.text.as_str()).collect();
    let embedder = EmbedderBuilder::<u32>::with_fit_to_corpus(Language::English, &corpus).build();
    let mut scorer = Scorer::<usize>::new();
    for (i, text) in corpus.iter().enumerate() {
        scorer.upsert(&i, embedder.embed(text));
    }
    let query = embedder.embed(query);
    let scores: Vec<f64> = (0..nodes.len())
        .map(|i| f64::from(scorer.score(&i, &query).unwrap_or(0.0)))
        .map(|s| if s.is_finite() { s } else { 0.0 })
        .collect();
    let mut order: Vec<usize> = (0..nodes.len()).collect();
    order.sort_by(|&a, &b| {
        let sa = scores.get(a).copied().unwrap_or(0.0);
        let sb = scores.get(b).copied().unwrap_or(0.0);
        sb.total_cmp(&sa).then(a.cmp(&b))
    });
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
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].id, "b");
        assert!(out[0].score.unwrap() > 0.0);
        assert_eq!(out[1].score, Some(0.0));
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
        let out = top_k(vec![Node::new("a", "x")], "y", 5);
        assert_eq!(out.len(), 1);
    }
}
