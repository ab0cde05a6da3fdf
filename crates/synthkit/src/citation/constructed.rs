//! Quotes by construction: in quote mode with the evidence stage on, a marker the model
//! wrote without a quote (`... every six months [2].`) gets the evidence sentence of
//! source 2 that bears on the sentence it cites, word for word from the node's text and
//! with the engine's character offsets ([`super::QuoteOrigin::Evidence`]). A small model
//! that cites by number thus gets a verified quote without copying words.
//!
//! The sentence chosen is the cited node's kept sentence sharing the most words with the
//! answer's sentence before the marker (words of three letters or more, and numbers);
//! the first such sentence on a tie; none when no kept sentence shares a word (the claim
//! is not evidently one of them), or when the kept sentence could not be located in the
//! node's text (its offsets are unknown). Each sentence is quoted once per marker.
//!
//! The work is bounded: the answer is read at most [`CLAIM_BYTES`] back from each marker
//! (at most [`super::MAX_CHECKED_MARKERS`] of them), the kept sentences are few (the
//! evidence budget), and quotes count towards [`super::MAX_QUOTES`].

use std::collections::HashSet;

use super::work::{Stopped, Work};
use crate::evidence::EvidenceSpan;

/// How far back from a marker, in bytes, the sentence it cites is read.
pub(crate) const CLAIM_BYTES: usize = 600;

/// The kept sentences of each source (by source number - 1), and what was quoted.
pub(crate) struct EvidenceQuotes<'a> {
    spans: &'a [Vec<EvidenceSpan>],
    texts: &'a [String],
    made: HashSet<(u32, usize)>,
}

/// A quote made from evidence: its text (the node's own characters) and offsets.
pub(crate) struct MadeQuote {
    pub(crate) text: String,
    pub(crate) start: usize,
    pub(crate) end: usize,
}

impl<'a> EvidenceQuotes<'a> {
    /// The quotes of sources whose kept sentences are `spans`, found in `texts`.
    pub(crate) fn new(spans: &'a [Vec<EvidenceSpan>], texts: &'a [String]) -> Self {
        EvidenceQuotes {
            spans,
            texts,
            made: HashSet::new(),
        }
    }

    /// The quote for the marker of source `n` written at byte `marker_start` of `raw`
    /// without a quote: `None` when no kept sentence of `n` shares a word with the
    /// sentence it cites, or that sentence was quoted for this marker already.
    pub(crate) fn quote_for(
        &mut self,
        raw: &str,
        marker_start: usize,
        n: u32,
        work: &mut Work,
    ) -> Result<Option<MadeQuote>, Stopped> {
        let Some(i) = (n as usize).checked_sub(1) else {
            return Ok(None);
        };
        let (Some(spans), Some(text)) = (self.spans.get(i), self.texts.get(i)) else {
            return Ok(None);
        };
        if spans.is_empty() {
            return Ok(None);
        }
        let claim = claim_before(raw, marker_start);
        work.step(claim.len())?;
        let wanted = words(claim);
        let mut best: Option<(usize, usize)> = None;
        for (k, span) in spans.iter().enumerate() {
            work.step(span.text.len())?;
            let shared = words(&span.text).intersection(&wanted).count();
            if shared > 0 && best.is_none_or(|(_, b)| shared > b) {
                best = Some((k, shared));
            }
        }
        let Some((k, span)) = best.and_then(|(k, _)| Some((k, spans.get(k)?))) else {
            return Ok(None);
        };
        let (Some(start), Some(end)) = (span.start, span.end) else {
            return Ok(None);
        };
        if !self.made.insert((n, k)) {
            return Ok(None);
        }
        work.step(text.len())?;
        let quoted: String = text.chars().skip(start).take(end - start).collect();
        if quoted.trim().is_empty() {
            return Ok(None);
        }
        Ok(Some(MadeQuote {
            text: quoted,
            start,
            end,
        }))
    }
}

/// The sentence a marker at byte `at` of `raw` cites: the text before it back to the
/// last sentence end (`.`, `!` or `?` before white space, or a line break), read at most
/// [`CLAIM_BYTES`] back; when only the sentence's end comes before the marker ("... six
/// months. [2]"), the sentence before that.
fn claim_before(raw: &str, at: usize) -> &str {
    let mut from = at.saturating_sub(CLAIM_BYTES);
    while !raw.is_char_boundary(from) {
        from += 1;
    }
    let head = raw.get(from..at).unwrap_or_default();
    // Trailing white space, other markers and the sentence's own end belong to it.
    let mut head = head.trim_end();
    loop {
        let trimmed = head
            .trim_end_matches(['.', '!', '?', ',', ';', ':', ')'])
            .trim_end();
        let trimmed = trimmed
            .strip_suffix(']')
            .and_then(|t| t.rsplit_once('['))
            .filter(|(_, inside)| {
                inside
                    .chars()
                    .all(|c| c.is_ascii_digit() || matches!(c, ',' | ' ' | '-'))
            })
            .map_or(trimmed, |(before, _)| before.trim_end());
        if trimmed.len() == head.len() {
            break;
        }
        head = trimmed;
    }
    let start = head
        .char_indices()
        .rev()
        .find(|&(k, c)| {
            c == '\n'
                || (matches!(c, '.' | '!' | '?')
                    && head
                        .get(k + 1..)
                        .is_some_and(|rest| rest.starts_with(char::is_whitespace)))
        })
        .map_or(0, |(k, c)| k + c.len_utf8());
    head.get(start..).unwrap_or_default().trim()
}

/// The words of `text` that say something: runs of letters and digits, lower case, of
/// three characters or more, and numbers of any length.
fn words(text: &str) -> HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| {
            w.chars().count() >= 3 || (!w.is_empty() && w.chars().all(|c| c.is_ascii_digit()))
        })
        .map(str::to_lowercase)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    fn span(text: &str, node: &str) -> EvidenceSpan {
        let at = crate::evidence::locate(node, text);
        EvidenceSpan {
            text: text.to_string(),
            start: at.map(|a| a.0),
            end: at.map(|a| a.1),
        }
    }

    #[test]
    fn the_claim_is_the_sentence_before_the_marker() {
        let raw = "The dome opens at dusk. The mirror is cleaned every six months [2].";
        assert_eq!(
            claim_before(raw, raw.find("[2]").unwrap()),
            "The mirror is cleaned every six months"
        );
        let raw = "First. It is cleaned every six months. [1] [2]";
        assert_eq!(
            claim_before(raw, raw.find("[2]").unwrap()),
            "It is cleaned every six months"
        );
        assert_eq!(claim_before("[1]", 0), "");
    }

    #[test]
    fn the_kept_sentence_sharing_most_words_is_quoted_once() {
        let node = "The dome opens at dusk. The primary mirror is cleaned every six months.";
        let texts = vec![node.to_string()];
        let spans = vec![vec![
            span("The dome opens at dusk.", node),
            span("The primary mirror is cleaned every six months.", node),
        ]];
        let stop = AtomicBool::new(false);
        let mut work = Work::new(&stop);
        let mut quotes = EvidenceQuotes::new(&spans, &texts);
        let raw = "It is cleaned every six months [1]. Again [1].";
        let q = quotes.quote_for(raw, 31, 1, &mut work).unwrap().unwrap();
        assert_eq!(q.text, "The primary mirror is cleaned every six months.");
        let chars: String = node.chars().skip(q.start).take(q.end - q.start).collect();
        assert_eq!(chars, q.text);
        // The same sentence again for the same marker: no second quote.
        assert!(quotes.quote_for(raw, 31, 1, &mut work).unwrap().is_none());
        // "Again" shares no word with a kept sentence; source 2 does not exist.
        let at = raw.rfind("[1]").unwrap();
        assert!(quotes.quote_for(raw, at, 1, &mut work).unwrap().is_none());
        assert!(quotes.quote_for(raw, 31, 2, &mut work).unwrap().is_none());
    }
}
