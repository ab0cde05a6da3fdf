//! Judge-free measures of one answer: correct, token F1, whether the answer was in the
//! nodes and in the prompts, citation precision and recall, abstention.
//!
//! **Correct.** An answer is correct when one alternative is found in it:
//! a string when its normalised words ([`super::normalize()`]) appear in the answer's
//! normalised words, in order and together (so `6` is not found in `16`, and `six
//! months` is found in "every Six Months."); a list when each of its strings is found so;
//! a regex when it matches the raw answer, case-insensitively.
//!
//! **Token F1** is SQuAD's: the harmonic mean of the precision and recall of the
//! answer's normalised words against an alternative's (a list's strings joined), the best
//! over the alternatives. Regex alternatives have no words: a case whose alternatives are
//! all regexes gets an F1 of 1 when correct, else 0.
//!
//! **Abstention.** An answer abstains when the system said so, when it is empty, or when
//! its text matches one of [`ABSTENTION_PATTERNS`] (case-insensitive):
//!
//! - "not (mentioned/found/given/stated/specified/provided/included) in the (provided/given)
//!   sources / context / text / documents / passages / information";
//! - "(the) context / sources / text / documents / passages / information does (did, do)
//!   not mention / say / contain / provide / specify / include / state / give / answer";
//! - "cannot be answered", "can't answer", "cannot answer", "unable to answer /
//!   determine / find";
//! - "no information", "not enough information", "insufficient information";
//! - "I don't know", "I do not know";
//! - "Empty Response" (LlamaIndex's reply to nothing), "no answer found" (synthkit's
//!   extractive backend).

use std::collections::HashSet;

use super::case::Alternative;
use super::normalize::tokens;
pub use crate::text::abstention::{ABSTENTION_PATTERNS, text_abstains};

/// Whether an answer abstains: the system said so (`said`), or its text does
/// ([`text_abstains`]).
pub fn abstains(answer: &str, said: Option<bool>) -> bool {
    said == Some(true) || text_abstains(answer)
}

/// Text made ready for matching: its normalised words and the raw text.
#[derive(Debug, Clone)]
pub(crate) struct Haystack<'a> {
    raw: &'a str,
    words: Vec<String>,
}

impl<'a> Haystack<'a> {
    /// `text`, normalised once.
    pub fn new(raw: &'a str) -> Self {
        Self {
            raw,
            words: tokens(raw),
        }
    }

    /// Whether `needle`'s normalised words appear here in order and together (an empty
    /// needle never does).
    pub(crate) fn has_words(&self, needle: &str) -> bool {
        let needle = tokens(needle);
        !needle.is_empty()
            && self.words.len() >= needle.len()
            && self
                .words
                .windows(needle.len())
                .any(|w| w == needle.as_slice())
    }

    /// Whether `alternative` is found here.
    pub fn has(&self, alternative: &Alternative) -> bool {
        match alternative {
            Alternative::Text(s) => self.has_words(s),
            Alternative::All(parts) => parts.iter().all(|p| self.has_words(p)),
            Alternative::Regex(r) => r.is_match(self.raw),
        }
    }

    /// Whether some alternative is found here.
    pub(crate) fn has_any(&self, alternatives: &[Alternative]) -> bool {
        alternatives.iter().any(|a| self.has(a))
    }
}

/// Whether some alternative is found in `answer`.
pub fn found(alternatives: &[Alternative], answer: &str) -> bool {
    Haystack::new(answer).has_any(alternatives)
}

/// SQuAD's token F1 of `prediction` against `gold` (normalised words, counted with
/// repeats); both empty: 1, one empty: 0.
pub fn token_f1(prediction: &str, gold: &str) -> f64 {
    let p = tokens(prediction);
    let g = tokens(gold);
    if p.is_empty() || g.is_empty() {
        return if p.is_empty() && g.is_empty() {
            1.0
        } else {
            0.0
        };
    }
    let mut left: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for w in &g {
        *left.entry(w.as_str()).or_default() += 1;
    }
    let mut common = 0usize;
    for w in &p {
        if let Some(n) = left.get_mut(w.as_str()).filter(|n| **n > 0) {
            *n -= 1;
            common += 1;
        }
    }
    if common == 0 {
        return 0.0;
    }
    let precision = common as f64 / p.len() as f64;
    let recall = common as f64 / g.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

/// The best token F1 of `answer` over the string and list alternatives; `None` when there
/// are none (regexes only).
pub fn best_f1(alternatives: &[Alternative], answer: &str) -> Option<f64> {
    alternatives
        .iter()
        .filter_map(|a| match a {
            Alternative::Text(s) => Some(token_f1(answer, s)),
            Alternative::All(parts) => Some(token_f1(answer, &parts.join(" "))),
            Alternative::Regex(_) => None,
        })
        .reduce(f64::max)
}

/// Citation precision and recall of the cited node ids against the evidence ids.
///
/// Precision: the share of the (distinct) cited nodes that are evidence; `None` when
/// nothing is cited. Recall: the share of the evidence that is cited; `None` when there is
/// no evidence.
pub fn citation_scores(cited: &[String], evidence: &[String]) -> (Option<f64>, Option<f64>) {
    let cited: HashSet<&str> = cited.iter().map(String::as_str).collect();
    let evidence: HashSet<&str> = evidence.iter().map(String::as_str).collect();
    let hits = cited.intersection(&evidence).count() as f64;
    let precision = (!cited.is_empty()).then(|| hits / cited.len() as f64);
    let recall = (!evidence.is_empty()).then(|| hits / evidence.len() as f64);
    (precision, recall)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::eval::case::AnswerRegex;

    fn text(s: &str) -> Alternative {
        Alternative::Text(s.into())
    }

    #[test]
    fn string_alternatives_match_whole_normalised_words() {
        assert!(found(&[text("six months")], "Every Six  months."));
        assert!(found(&[text("the six months")], "six months"));
        assert!(!found(&[text("6")], "It took 16 days."));
        assert!(!found(&[text("months six")], "six months"));
        assert!(!found(&[text("...")], "anything"));
        assert!(found(&[text("nope"), text("blue")], "Blue!"));
    }

    #[test]
    fn list_alternatives_need_every_part() {
        let both = Alternative::All(vec!["Alice".into(), "Bob".into()]);
        assert!(found(std::slice::from_ref(&both), "Bob and alice came."));
        assert!(!found(&[both], "Only Alice came."));
    }

    #[test]
    fn regex_alternatives_match_the_raw_answer_case_insensitively() {
        let r = Alternative::Regex(AnswerRegex::new(r"\b6 MONTHS\b").unwrap());
        assert!(found(std::slice::from_ref(&r), "after 6 months."));
        assert!(!found(std::slice::from_ref(&r), "after 16 months."));
        // The raw text: punctuation the normalisation would drop still counts.
        let r = Alternative::Regex(AnswerRegex::new(r"\$5\.00").unwrap());
        assert!(found(std::slice::from_ref(&r), "It costs $5.00."));
        assert!(!found(&[r], "It costs 500."));
    }

    #[test]
    fn f1_is_squads() {
        assert_eq!(token_f1("The cat sat", "cat sat"), 1.0);
        assert_eq!(token_f1("", ""), 1.0);
        assert_eq!(token_f1("cat", ""), 0.0);
        assert_eq!(token_f1("dog", "cat"), 0.0);
        // 2 of 4 predicted words, 2 of 2 gold words: P 0.5, R 1, F1 2/3.
        let f = token_f1("every six months exactly", "six months");
        assert!((f - 2.0 / 3.0).abs() < 1e-9, "{f}");
        // Repeats count once each.
        let f = token_f1("six six", "six months");
        assert!((f - 0.5).abs() < 1e-9, "{f}");
        let alts = [
            text("dog"),
            Alternative::All(vec!["six".into(), "months".into()]),
            Alternative::Regex(AnswerRegex::new("x").unwrap()),
        ];
        assert_eq!(best_f1(&alts, "six months"), Some(1.0));
        assert_eq!(
            best_f1(&[Alternative::Regex(AnswerRegex::new("x").unwrap())], "x"),
            None
        );
    }

    #[test]
    fn abstention_phrases() {
        for yes in [
            "The answer is not in the provided sources.",
            "This is not mentioned in the context.",
            "The context does not mention the colour.",
            "The sources don't say.",
            "The documents do not specify when.",
            "This question cannot be answered from the text.",
            "I don’t know.",
            "I do not know",
            "Empty Response",
            "  ",
            "",
            "(no answer found: no passage matches enough of the question)",
            "There is no information about the mirror.",
            "I am unable to determine that.",
            "There is not enough information to say.",
        ] {
            assert!(text_abstains(yes), "{yes:?} should abstain");
        }
        for no in [
            "Every six months.",
            "The context mentions six months.",
            "The door is blue; the text says so.",
            "An empty response box was shown.",
            "I know it is blue.",
        ] {
            assert!(!text_abstains(no), "{no:?} should not abstain");
        }
        assert!(abstains("Blue.", Some(true)));
        assert!(!abstains("Blue.", Some(false)));
        assert!(abstains("Not in the sources.", Some(false)));
    }

    #[test]
    fn citation_precision_and_recall() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            citation_scores(&s(&["a", "b", "a"]), &s(&["a", "c", "d", "e"])),
            (Some(0.5), Some(0.25))
        );
        assert_eq!(citation_scores(&s(&[]), &s(&["a"])), (None, Some(0.0)));
        assert_eq!(citation_scores(&s(&["a"]), &s(&[])), (Some(0.0), None));
    }
}
