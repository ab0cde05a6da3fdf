//! Selection: ranked sentences into an answer that fits a token budget.

use crate::text::SharedTokenizer;

/// Candidates rejected in a row (too long for the room left) before selection stops.
const MAX_REJECTIONS_IN_A_ROW: usize = 64;

/// Picks candidates (best first) while the joined answer fits `budget` tokens of `tok`;
/// returns the answer and whether the best sentence had to be cut.
pub(super) fn select(
    tok: &SharedTokenizer,
    sentences: &[String],
    candidates: &[usize],
    budget: usize,
) -> (String, bool) {
    if budget == 0 || candidates.is_empty() {
        return (String::new(), false);
    }
    let mut picked: Vec<usize> = Vec::new();
    let mut used = 0usize;
    let mut rejections = 0usize;
    for &i in candidates {
        if used + 1 >= budget || rejections >= MAX_REJECTIONS_IN_A_ROW {
            break;
        }
        let Some(sentence) = sentences.get(i) else {
            continue;
        };
        // Joining may merge the separating space into the next token, so allow a
        // token of slack before the exact check.
        if tok
            .count_till_limit(sentence, budget.saturating_sub(used) + 1)
            .is_none()
        {
            rejections += 1;
            continue;
        }
        let mut trial = picked.clone();
        let pos = trial.partition_point(|&p| p < i);
        trial.insert(pos, i);
        let joined = join(sentences, &trial);
        match tok.count_till_limit(&joined, budget) {
            Some(n) => {
                picked = trial;
                used = n;
                rejections = 0;
            }
            None => rejections += 1,
        }
    }
    if !picked.is_empty() {
        return (join(sentences, &picked), false);
    }
    // Even the best sentence is too long: cut it to the budget.
    let best = candidates
        .first()
        .and_then(|&i| sentences.get(i))
        .map(String::as_str)
        .unwrap_or("");
    let cut = truncate_to_tokens(best, budget, tok);
    let truncated = cut.len() < best.len();
    (cut, truncated)
}

/// The sentences at `indices` (ascending), joined by spaces.
fn join(sentences: &[String], indices: &[usize]) -> String {
    let mut out = String::new();
    for s in indices.iter().filter_map(|&i| sentences.get(i)) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(s);
    }
    out
}

/// The longest prefix of `text` with at most `budget` tokens, cut at a word boundary when
/// there is one.
fn truncate_to_tokens(text: &str, budget: usize, tok: &SharedTokenizer) -> String {
    if tok.count_till_limit(text, budget).is_some() {
        return text.to_string();
    }
    let bounds: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(text.len()))
        .collect();
    // Largest k with prefix(bounds[k]) fitting; prefix(0) = "" always fits.
    let (mut lo, mut hi) = (0usize, bounds.len().saturating_sub(1));
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        let end = bounds.get(mid).copied().unwrap_or(0);
        let fits = text
            .get(..end)
            .is_some_and(|p| tok.count_till_limit(p, budget).is_some());
        if fits {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let end = bounds.get(lo).copied().unwrap_or(0);
    let prefix = text.get(..end).unwrap_or("");
    let at_word_end = text
        .get(end..)
        .and_then(|rest| rest.chars().next())
        .is_none_or(char::is_whitespace);
    let cut = match prefix.rfind(char::is_whitespace) {
        Some(ws) if !at_word_end => prefix.get(..ws).unwrap_or(prefix),
        _ => prefix,
    };
    cut.trim_end().to_string()
}
