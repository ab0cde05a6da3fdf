//! Forward references: a sentence pointing to what follows it ("Open the dome only when
//! all of the weather limits below are met.", "Follow the steps below.") does not hold
//! what it points to. When it is the best candidate, the block it points to (the first
//! paragraph or list after it, past at most one heading, in the same document or the next
//! piece of the same file) answers with it: that block's candidates come first, the
//! pointing sentence after them. With nothing after it, it answers alone.

use super::cite::strip_markers;
use super::select::Cand;
use super::sentences::{Kind, Sentence};

/// Words after "below" that make it point forward ("the limits below are met", "see
/// below, then …"), rather than name a place or a quantity ("below 20.5", "below the
/// horizon").
const AFTER_BELOW: &[&str] = &[
    "are",
    "is",
    "must",
    "should",
    "apply",
    "applies",
    "and",
    "or",
    "to",
    "for",
    "before",
    "when",
    "if",
    "first",
    "carefully",
    "have",
    "has",
    "be",
    "will",
    "can",
    "in",
    "then",
];

/// The most sentences the pointed-to block may have (a long list is cut by the budget
/// anyway).
const MAX_BLOCK_SENTENCES: usize = 32;

/// Whether `text` points forward to content it does not hold: "below" ending a clause or
/// followed by a verb or conjunction ("the limits below are met", "see below."), "as
/// follows", "the following" ending a clause ("do the following."), "next section".
pub(super) fn points_forward(text: &str) -> bool {
    let lower = strip_markers(text).to_lowercase();
    // Words, each with whether punctuation (a clause's end) follows it.
    let mut words: Vec<(&str, bool)> = Vec::new();
    for piece in lower.split_whitespace() {
        let word = piece.trim_matches(|c: char| !c.is_alphanumeric());
        let ends = piece
            .trim_start_matches(|c: char| !c.is_alphanumeric())
            .ends_with(|c: char| !c.is_alphanumeric());
        if !word.is_empty() {
            words.push((word, ends));
        }
    }
    words.iter().enumerate().any(|(k, &(w, ends))| {
        let next = words.get(k + 1).map(|&(n, _)| n);
        let prev = k.checked_sub(1).and_then(|p| words.get(p)).map(|&(p, _)| p);
        match w {
            "below" => ends || next.is_none_or(|n| AFTER_BELOW.contains(&n)),
            "follows" => prev == Some("as"),
            "following" => prev == Some("the") && (ends || next.is_none()),
            "section" => prev == Some("next"),
            _ => false,
        }
    })
}

/// `order` (best first) with the block the best candidate points to before it, when the
/// best candidate points forward (see [`points_forward`]) and a block follows it.
pub(super) fn follow(order: &[usize], cands: &[Cand], sentences: &[Sentence]) -> Vec<usize> {
    let Some(best) = order.first().and_then(|&b| cands.get(b)) else {
        return order.to_vec();
    };
    // The candidate's last sentence points past it: a sentence, or a list whose last item
    // does ("6. Open the shutter only when the limits below are met."). A lead-in pointing
    // to its own items is not last, and code holds what it announces.
    let points = sentences
        .get(best.last)
        .is_some_and(|s| s.kind != Kind::Code && points_forward(&s.text));
    if !points {
        return order.to_vec();
    }
    let Some((start, end)) = block_after(best.last, sentences) else {
        return order.to_vec();
    };
    let mut out: Vec<usize> = cands
        .iter()
        .enumerate()
        .filter(|(_, c)| c.first > best.last && c.last >= start && c.first <= end)
        .map(|(i, _)| i)
        .collect();
    if out.is_empty() {
        return order.to_vec();
    }
    for &c in order {
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// The first block after sentence `last` (its first and last sentence): past the rest of
/// `last`'s paragraph and at most one heading, in the same document or the next piece of
/// the same file; a lead-in with its items, the items of one list, or a paragraph.
fn block_after(last: usize, sentences: &[Sentence]) -> Option<(usize, usize)> {
    let at = sentences.get(last)?;
    let mut j = last + 1;
    let mut headings = 0usize;
    let start = loop {
        let s = sentences.get(j)?;
        if s.para == at.para {
            j += 1;
            continue;
        }
        if s.doc != at.doc && !same_file(at, s) {
            return None;
        }
        if s.kind == Kind::Heading {
            headings += 1;
            if headings > 1 {
                return None;
            }
            j += 1;
            continue;
        }
        break j;
    };
    let first = sentences.get(start)?;
    let end = if first.items > 0 {
        start + first.items
    } else if matches!(first.kind, Kind::Item { .. }) {
        let mut k = start;
        while sentences.get(k + 1).is_some_and(|n| {
            matches!(n.kind, Kind::Item { .. }) && n.lead == first.lead && n.doc == first.doc
        }) {
            k += 1;
        }
        k
    } else {
        let mut k = start;
        while sentences
            .get(k + 1)
            .is_some_and(|n| n.para == first.para && n.kind == first.kind)
        {
            k += 1;
        }
        // A paragraph ending with a lead-in brings its list.
        k + sentences.get(k).map_or(0, |s| s.items)
    };
    Some((start, end.min(start + MAX_BLOCK_SENTENCES - 1)))
}

/// Whether `b` is in the next piece of `a`'s file (a chunk boundary between them).
fn same_file(a: &Sentence, b: &Sentence) -> bool {
    b.doc == a.doc + 1 && a.file.is_some() && a.file == b.file
}

#[cfg(test)]
mod tests {
    use super::points_forward;

    #[test]
    fn forward_pointers() {
        for s in [
            "Open the dome shutter only when all of the weather limits below are met.",
            "To install it, see the steps below.",
            "See below, then restart.",
            "The settings are as follows.",
            "Before you start, do the following.",
            "The next section lists the limits.",
            "The limits listed below [2] apply to every night.",
        ] {
            assert!(points_forward(s), "{s}");
        }
        for s in [
            "Readings below 20.5 usually mean haze.",
            "The telescope must not point below the horizon.",
            "The committee publishes the allocation for the following month.",
            "The section on safety is short.",
            "It follows the sun.",
        ] {
            assert!(!points_forward(s), "{s}");
        }
    }
}
