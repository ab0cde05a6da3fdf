//! Windows of run-on text: the stretch of a long sentence that speaks to the question,
//! with `…` where it was cut.

use std::collections::HashMap;

use super::rank::{Term, term_id, terms};
use synthkit::text::SharedTokenizer;

/// Sentences longer than this many words are shown as a window.
pub(super) const LONG_SENTENCE_WORDS: usize = 60;
/// The number of words in a window.
pub(super) const WINDOW_WORDS: usize = 45;

/// The `size`-word window of `text` with the most question weight (`weights`: IDF per
/// query term), `…` on each side that was cut, at word boundaries. Windows are compared by
/// the weight of the distinct query terms they contain, then by all their hits; among
/// equals, the one whose hits sit most centrally, then the earliest. Text of at most
/// `size` words is returned as it is.
pub(super) fn window(text: &str, weights: &HashMap<Term, f64>, size: usize) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let n = words.len();
    if n <= size || size == 0 {
        return if size == 0 {
            String::new()
        } else {
            text.to_string()
        };
    }
    let hits: Vec<Vec<(Term, f64)>> = words
        .iter()
        .map(|w| {
            terms(w)
                .iter()
                .filter_map(|t| {
                    let id = term_id(t);
                    weights.get(&id).map(|&w| (id, w))
                })
                .collect()
        })
        .collect();
    let hit_at: Vec<usize> = (0..n)
        .filter(|&i| hits.get(i).is_some_and(|h| !h.is_empty()))
        .collect();
    let mut counts: HashMap<Term, usize> = HashMap::new();
    let (mut distinct, mut total) = (0.0_f64, 0.0_f64);
    let add = |i: usize, counts: &mut HashMap<Term, usize>, d: &mut f64, t: &mut f64, sign: i64| {
        for &(id, w) in hits.get(i).map(Vec::as_slice).unwrap_or_default() {
            let c = counts.entry(id).or_insert(0);
            if sign > 0 {
                if *c == 0 {
                    *d += w;
                }
                *c += 1;
                *t += w;
            } else {
                *c = c.saturating_sub(1);
                if *c == 0 {
                    *d -= w;
                }
                *t -= w;
            }
        }
    };
    for i in 0..size {
        add(i, &mut counts, &mut distinct, &mut total, 1);
    }
    let mut best = (0usize, distinct, total, margin(&hit_at, 0, size));
    for start in 1..=n - size {
        add(start - 1, &mut counts, &mut distinct, &mut total, -1);
        add(start + size - 1, &mut counts, &mut distinct, &mut total, 1);
        let m = margin(&hit_at, start, size);
        let better = match cmp(distinct, best.1) {
            std::cmp::Ordering::Greater => true,
            std::cmp::Ordering::Less => false,
            std::cmp::Ordering::Equal => match cmp(total, best.2) {
                std::cmp::Ordering::Greater => true,
                std::cmp::Ordering::Less => false,
                std::cmp::Ordering::Equal => m > best.3,
            },
        };
        if better {
            best = (start, distinct, total, m);
        }
    }
    let start = best.0;
    let mut out = String::new();
    if start > 0 {
        out.push_str("… ");
    }
    out.push_str(&words.get(start..start + size).unwrap_or_default().join(" "));
    if start + size < n {
        out.push_str(" …");
    }
    out
}

/// Compares weights, equal within rounding.
fn cmp(a: f64, b: f64) -> std::cmp::Ordering {
    if (a - b).abs() <= 1e-9 * (1.0 + a.abs().max(b.abs())) {
        std::cmp::Ordering::Equal
    } else {
        a.total_cmp(&b)
    }
}

/// How central the hits of the window `[start, start + size)` are: the smaller of the
/// gaps before its first hit and after its last (0 without hits).
fn margin(hit_at: &[usize], start: usize, size: usize) -> usize {
    let from = hit_at.partition_point(|&i| i < start);
    let to = hit_at.partition_point(|&i| i < start + size);
    if from >= to {
        return 0;
    }
    let first = hit_at.get(from).copied().unwrap_or(start);
    let last = hit_at.get(to - 1).copied().unwrap_or(start);
    (first - start).min(start + size - 1 - last)
}

/// The largest window of `text` (at most [`WINDOW_WORDS`] words, or all of it) that fits
/// `budget` tokens; empty when not even one word does.
pub(super) fn fit(
    text: &str,
    weights: &HashMap<Term, f64>,
    budget: usize,
    tok: &SharedTokenizer,
) -> String {
    let n = text.split_whitespace().count();
    if tok.count_till_limit(text, budget).is_some() && n <= WINDOW_WORDS.max(LONG_SENTENCE_WORDS) {
        return text.to_string();
    }
    let (mut lo, mut hi) = (0usize, n.min(WINDOW_WORDS));
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if tok
            .count_till_limit(&window(text, weights, mid), budget)
            .is_some()
        {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    window(text, weights, lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weights(words: &[&str]) -> HashMap<Term, f64> {
        words
            .iter()
            .flat_map(|w| terms(w))
            .map(|t| (term_id(&t), 1.0))
            .collect()
    }

    #[test]
    fn finds_the_fact_and_marks_the_cuts() {
        let filler = "the committee discussed many unrelated matters at length and".repeat(20);
        let text = format!("{filler} the mirror is cleaned with snow every three months {filler}");
        let w = window(&text, &weights(&["mirror", "cleaned"]), 20);
        assert!(w.starts_with("… ") && w.ends_with(" …"), "{w}");
        assert!(
            w.contains("the mirror is cleaned with snow every three months"),
            "{w}"
        );
        assert_eq!(w.split_whitespace().count(), 22);
        // No hits: the start, cut on the right only.
        let w = window(&text, &weights(&["dome"]), 5);
        assert!(!w.starts_with('…') && w.ends_with(" …"), "{w}");
        assert_eq!(window("short text", &weights(&["x"]), 5), "short text");
    }
}
