//! Score adjustments after BM25: what the question's form says about the best answer.
//!
//! - A list speaks to the question through its lead-in: when only its items match, the
//!   unit scores nothing (the items answer on their own).
//! - "Which release added X?": a sentence announcing something new outranks one that only
//!   mentions X (a later fix to it).
//! - "What is X?": a sentence defining X ("Ownership is a set of rules ...") outranks
//!   sentences that only use the word.
//! - The first sentence of a section whose heading has the question's words speaks for
//!   the section (the summary line under rustdoc's `Macro dbg`).
//! - A line of code answers a question naming code ("What does `Vec::with_capacity` do?")
//!   only when no prose does as well: its score is halved unless the question asks for
//!   code.
//! - "What is the latest release?": among the release headings scoring near the best, the
//!   highest version wins.

use super::markup::has_version;
use super::query::{Query, defines};
use super::rank::Term;
use super::select::Cand;
use super::sentences::{Kind, Sentence};

/// Adjusts `scores` (one per candidate) for the question's form.
pub(super) fn adjust(
    q: &Query,
    cands: &[Cand],
    sentences: &[Sentence],
    sentence_terms: &[Vec<Term>],
    headings: &[String],
    scores: &mut [f64],
) {
    let first_text = |c: &Cand| sentences.get(c.first).map_or("", |s| s.text.as_str());
    for (c, score) in cands.iter().zip(scores.iter_mut()) {
        if let Some(lead) = c.lead {
            let lead_terms = sentence_terms.get(c.first..=lead).unwrap_or_default();
            if !lead_terms.iter().flatten().any(|t| q.terms.contains(t)) {
                *score = 0.0;
            }
        }
        if q.release && q.asks_what_changed && announces_change(first_text(c)) {
            *score *= CHANGE_BOOST;
        }
        // The first sentence of a section titled with the question's words speaks for
        // that section (rustdoc's summary line under `Macro dbg`).
        if let Some(title) = sentences.get(c.first).and_then(|s| s.title.as_deref())
            && super::rank::term_ids(title)
                .iter()
                .any(|t| q.terms.contains(t))
        {
            *score *= TITLE_BOOST;
        }
        // Code lines answer a question naming code only when no prose does.
        if !q.asks_code && sentences.get(c.first).is_some_and(|s| s.kind == Kind::Code) {
            *score *= CODE_DAMPING;
        }
        if let Some(subject) = &q.subject
            && *score > 0.0
            && defines(first_text(c), subject)
        {
            *score *= DEFINITION_BOOST;
        }
    }
    if q.release && q.latest {
        prefer_latest(cands, sentences, headings, scores);
    }
}

/// Among release headings scoring at least [`LATEST_BAND`] of the best, the one with the
/// highest version gets the best score (a little more).
fn prefer_latest(cands: &[Cand], sentences: &[Sentence], headings: &[String], scores: &mut [f64]) {
    let best = scores.iter().copied().fold(0.0_f64, f64::max);
    if best <= 0.0 {
        return;
    }
    let latest = cands
        .iter()
        .zip(scores.iter())
        .enumerate()
        .filter(|(_, (_, s))| **s >= best * LATEST_BAND)
        .filter_map(|(i, (c, _))| {
            let s = sentences.get(c.first)?;
            let text = if s.kind == Kind::Heading {
                s.text.as_str()
            } else {
                headings.get(s.heading?)?.as_str()
            };
            Some((version(text)?, i))
        })
        .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    if let Some((_, i)) = latest
        && let Some(score) = scores.get_mut(i)
    {
        *score = best * 1.01;
    }
}

/// The first version number in `text` (`9.1`, `bash-4.0` gives 4.0), as numbers.
fn version(text: &str) -> Option<Vec<u32>> {
    if !has_version(text) {
        return None;
    }
    text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map(|w| w.trim_matches('.'))
        .find(|w| w.contains('.') && w.split('.').all(|p| !p.is_empty()))
        .map(|w| w.split('.').filter_map(|p| p.parse().ok()).collect())
}

/// How much more the first sentence of a section titled with the question's words weighs.
const TITLE_BOOST: f64 = 1.5;

/// How much a code line counts against prose for a question that names code but does not
/// ask for it ("What does --region do?").
const CODE_DAMPING: f64 = 0.5;

/// Release headings within this share of the best score compete for "latest".
const LATEST_BAND: f64 = 0.8;

/// How much a sentence defining the subject of "What is X?" weighs more.
const DEFINITION_BOOST: f64 = 3.0;

/// How much a sentence announcing a change weighs more for "which release added X?".
const CHANGE_BOOST: f64 = 1.5;

/// Whether a release note announces something new ("now accepts", "new option"), rather
/// than a fix. ("added" is no cue: NEWS files say "added in 5.0.1" of old features.)
pub(super) fn announces_change(text: &str) -> bool {
    let lower = without_provenance(text).to_lowercase();
    [
        "now accept",
        "now support",
        "new option",
        "new feature",
        "new command",
        "now ha",
        "there is a new",
        "there are new",
        "new shell option",
        "new builtin",
        "adds a new",
        "added a new",
    ]
    .iter()
    .any(|cue| lower.contains(cue))
}

/// `text` without bracketed provenance notes (`[bug introduced in coreutils-6.11]`,
/// `[introduced in 8.6]`).
pub(super) fn without_provenance(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest.get(open..).and_then(|r| r.find(']')).map(|c| open + c) else {
            break;
        };
        let inside = rest.get(open + 1..close).unwrap_or_default().to_lowercase();
        out.push_str(rest.get(..open).unwrap_or_default());
        if !(inside.contains("bug") || inside.contains("introduced")) {
            out.push_str(rest.get(open..=close).unwrap_or_default());
        }
        rest = rest.get(close + 1..).unwrap_or_default();
    }
    out.push_str(rest);
    out
}
