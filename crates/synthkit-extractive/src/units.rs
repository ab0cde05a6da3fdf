//! Candidates: the request's sentences as the ranking sees them, each on its own or, for
//! a lead-in, as a list unit with its items; their index entries; summary scores.

use std::collections::{HashMap, HashSet};

use super::cite::strip_markers;
use super::rank::{Doc, Term};
use super::select::Cand;
use super::sentences::{Kind, Sentence};

/// Words that make a lead-in refer back to the sentence before it ("Keep these rules in
/// mind:").
const ANAPHORS: &[&str] = &["these", "those", "this", "them", "they", "such", "it"];

/// Whether a lead-in needs the sentence before it: short, or referring back.
fn refers_back(lead_in: &str) -> bool {
    let words: Vec<String> = lead_in
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    words.len() < 6 || words.iter().any(|w| ANAPHORS.contains(&w.as_str()))
}

/// The most code lines shown under the sentence announcing them.
pub(super) const MAX_CODE_LINES: usize = 8;

/// The candidates: each usable sentence on its own, except lead-ins, which come as list
/// units with their items (and the sentence before them when they refer back to it), and,
/// with `code_units` (the question asks for code), sentences announcing code ("To verify
/// the build:"), which come with their code lines. Repeats (same text, markers aside,
/// case ignored) are kept once.
pub(super) fn candidates(sentences: &[Sentence], usable: &[bool], code_units: bool) -> Vec<Cand> {
    // Repeats are found on the text shown, markers aside.
    let keys: Vec<String> = sentences
        .iter()
        .map(|s| strip_markers(&s.text).to_lowercase())
        .collect();
    let mut seen: HashSet<String> = HashSet::new();
    let mut cands: Vec<Cand> = Vec::new();
    let mut cand_of: Vec<Option<usize>> = vec![None; sentences.len()];
    // Each lead-in's unit: its first sentence.
    let mut unit_first: HashMap<usize, usize> = HashMap::new();
    for (i, s) in sentences.iter().enumerate() {
        if !usable.get(i).copied().unwrap_or(false) {
            continue;
        }
        if s.items == 0 && code_units && s.code > 0 {
            let last = i + s.code.min(MAX_CODE_LINES);
            let key = keys.get(i..=last).unwrap_or_default().join("\n");
            if seen.insert(key) {
                cands.push(Cand {
                    first: i,
                    last,
                    lead: Some(i),
                    follow: None,
                    head: None,
                    only: None,
                });
            }
            continue;
        }
        if s.items == 0 {
            let key = keys.get(i).cloned().unwrap_or_default();
            if seen.insert(key) {
                if let Some(slot) = cand_of.get_mut(i) {
                    *slot = Some(cands.len());
                }
                cands.push(Cand {
                    first: i,
                    last: i,
                    lead: None,
                    follow: None,
                    head: s.lead.and_then(|l| unit_first.get(&l).copied()),
                    only: None,
                });
            }
            continue;
        }
        let prev = i.checked_sub(1).filter(|&p| {
            sentences.get(p).is_some_and(|ps| {
                ps.para == s.para && ps.kind == Kind::Prose && usable.get(p) == Some(&true)
            }) && refers_back(&s.text)
        });
        let first = prev.unwrap_or(i);
        let last = i + s.items;
        let key = keys.get(first..=last).unwrap_or_default().join("\n");
        if !seen.insert(key) {
            continue;
        }
        let unit = cands.len();
        if let Some(p) = prev
            && let Some(pc) = cand_of.get(p).copied().flatten()
            && let Some(pcand) = cands.get_mut(pc)
        {
            pcand.follow = Some(unit);
        }
        unit_first.insert(i, first);
        cands.push(Cand {
            first,
            last,
            lead: Some(i),
            follow: None,
            head: None,
            only: None,
        });
    }
    cands
}

/// A candidate's index entry: its sentences' terms; a list unit counts its lead-in (and
/// the sentence before it) and the one item matching most of `query` (each item answers
/// on its own: a long list would otherwise match a question's words by chance), and is as
/// long as those; for a summary (no query), all its items, as long as its lead-in and one
/// average item.
pub(super) fn doc(c: &Cand, terms: &[Vec<Term>], query: &[Term]) -> Doc {
    let Some(lead) = c.lead else {
        let all: Vec<Term> = terms
            .get(c.first..=c.last)
            .unwrap_or_default()
            .iter()
            .flatten()
            .copied()
            .collect();
        return Doc::new(&all, all.len());
    };
    let mut kept: Vec<Term> = terms
        .get(c.first..=lead)
        .unwrap_or_default()
        .iter()
        .flatten()
        .copied()
        .collect();
    let items = terms.get(lead + 1..=c.last).unwrap_or_default();
    if query.is_empty() {
        // A summary: the whole list, as long as its lead-in and one average item.
        let head = kept.len();
        let avg = items.iter().map(Vec::len).sum::<usize>() / items.len().max(1);
        kept.extend(items.iter().flatten().copied());
        return Doc::new(&kept, (head + avg).min(kept.len()));
    }
    let hits = |t: &Vec<Term>| {
        let mut seen: Vec<Term> = t.iter().copied().filter(|x| query.contains(x)).collect();
        seen.sort_unstable();
        seen.dedup();
        seen.len()
    };
    let best = items
        .iter()
        .enumerate()
        .max_by(|a, b| hits(a.1).cmp(&hits(b.1)).then(b.0.cmp(&a.0)))
        .map(|(_, t)| t);
    if let Some(item) = best {
        kept.extend(item.iter().copied());
    }
    Doc::new(&kept, kept.len())
}

/// Centrality scores for a summary: a list unit's divided by the square root of its
/// sentence count (its many words make it similar to everything), normalised to the best,
/// plus a bonus for coming early in a document, where writers say what it is about:
/// `0.6 / (1 + k / 2)` for a document's `k`-th candidate.
pub(super) fn lead_biased(centrality: &[f64], cands: &[Cand], sentences: &[Sentence]) -> Vec<f64> {
    let centrality: Vec<f64> = cands
        .iter()
        .zip(centrality)
        .map(|(c, &score)| score / ((c.last - c.first + 1) as f64).sqrt())
        .collect();
    let best = centrality.iter().copied().fold(0.0_f64, f64::max);
    let mut doc = usize::MAX;
    let mut k = 0usize;
    cands
        .iter()
        .zip(&centrality)
        .map(|(c, &score)| {
            let d = sentences.get(c.first).map_or(0, |s| s.doc);
            if d != doc {
                doc = d;
                k = 0;
            }
            let bonus = 0.6 / (1.0 + k as f64 / 2.0);
            k += 1;
            let norm = if best > 0.0 { score / best } else { 0.0 };
            if norm > 0.0 { norm + bonus } else { 0.0 }
        })
        .collect()
}

/// A list whose items speak to the question more than its lead-in does (a FAQ, a list of
/// notes) answers with the items that match, not all of them: sets [`Cand::only`] to the
/// items matching at least half as many of the question's terms as the best one.
pub(super) fn answering_items(
    cands: &mut [Cand],
    sentences: &[Sentence],
    terms: &[Vec<Term>],
    query: &[Term],
) {
    let hits = |range: &[Vec<Term>]| {
        let mut seen: Vec<Term> = range
            .iter()
            .flatten()
            .copied()
            .filter(|t| query.contains(t))
            .collect();
        seen.sort_unstable();
        seen.dedup();
        seen.len()
    };
    for c in cands.iter_mut() {
        let Some(lead) = c.lead else { continue };
        let list = sentences.get(lead).is_some_and(|s| s.items > 0);
        if c.last <= lead || !list {
            continue;
        }
        let lead_hits = hits(terms.get(c.first..=lead).unwrap_or_default());
        let items: Vec<(usize, usize)> = (lead + 1..=c.last)
            .map(|k| (k, hits(terms.get(k..=k).unwrap_or_default())))
            .collect();
        let best = items.iter().map(|&(_, h)| h).max().unwrap_or(0);
        if best > lead_hits {
            c.only = Some(
                items
                    .iter()
                    .filter(|&&(_, h)| h > 0 && h * 2 >= best)
                    .map(|&(k, _)| k)
                    .collect(),
            );
        }
    }
}
