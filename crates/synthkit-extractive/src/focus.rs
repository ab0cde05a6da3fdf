//! Focus: an answer stays where its best candidate is, so it is not padded with
//! sentences from elsewhere that share a word or two with the question.
//!
//! After the best candidate (all of them over the relevance floor), another one is kept
//! when it is near it (the same document, at most [`NEAR_SENTENCES`] sentences away) or
//! answers as well on its own: it scores at least [`FAR_SHARE`] of the best and covers as
//! much of the question (a second source saying the same thing, not a sentence sharing a
//! word or two with it). A best candidate that is itself a question (a FAQ's
//! "How do I ...?") is answered by what follows it: the candidates starting in the next
//! [`ANSWER_SENTENCES`] sentences of its document come right after it, whatever they score.

use super::select::Cand;
use super::sentences::Sentence;
use super::split::is_closer;

/// How far (in sentences) a candidate may be from the best one to join it.
pub(super) const NEAR_SENTENCES: usize = 8;
/// The share of the best score a candidate from elsewhere needs (with as much of the
/// question covered) to join it.
pub(super) const FAR_SHARE: f64 = 0.85;
/// The sentences after a question that answer it.
pub(super) const ANSWER_SENTENCES: usize = 3;

/// `order` (candidates best first, all over the relevance floor) kept to the best one's
/// neighbourhood, with a question's answer after it.
pub(super) fn focus(
    order: &[usize],
    cands: &[Cand],
    sentences: &[Sentence],
    scores: &[f64],
    covers: &[f64],
) -> Vec<usize> {
    let Some((&best, rest)) = order.split_first() else {
        return Vec::new();
    };
    let Some(b) = cands.get(best) else {
        return order.to_vec();
    };
    let doc = |c: &Cand| sentences.get(c.first).map(|s| s.doc);
    let best_cover = covers.get(best).copied().unwrap_or(0.0);
    let best_score = scores.get(best).copied().unwrap_or(0.0);
    let mut out = vec![best];
    let asks = sentences
        .get(b.last)
        .is_some_and(|s| s.text.trim_end_matches(is_closer).ends_with('?'));
    if asks {
        let answer = cands.iter().enumerate().filter(|(_, c)| {
            c.first > b.last && c.first <= b.last + ANSWER_SENTENCES && doc(c) == doc(b)
        });
        out.extend(answer.map(|(i, _)| i));
    }
    for &c in rest {
        let Some(cand) = cands.get(c) else { continue };
        let near = doc(cand) == doc(b)
            && cand.first.abs_diff(b.first) <= NEAR_SENTENCES
            && cand.last.abs_diff(b.last) <= NEAR_SENTENCES;
        let strong = covers.get(c).is_some_and(|&v| v + 1e-9 >= best_cover)
            && scores.get(c).is_some_and(|&s| s >= best_score * FAR_SHARE);
        if (near || strong) && !out.contains(&c) {
            out.push(c);
        }
    }
    out
}
