//! Judge-free measures of one answer: correct, token F1, whether the answer was in the
//! nodes and in the prompts, citation precision and recall, abstention.
//!
//! **Correct.** An answer is correct when one alternative is found in it:
//! a string when its normalised words ([`super::normalize()`]: punctuation splits words,
//! so versions, flags, paths and code names are read as a reader reads them) appear in
//! the answer's normalised words, in order and together (so `6` is not found in `16`,
//! `six months` is found in "every Six Months.", `1.65` in "`1.65.0`" and `bundled` in
//! "`--features=bundled`"); the parts of a number written with dots are parts of one
//! number: a dotted number is found at the start of a longer one (`1.65` in `1.65.0`,
//! not in `1.650`, `11.65` or `2.1.65`) and a plain number only whole (`6` is not in
//! `6.5`); a list when each of its parts (strings or regexes) is found so; a regex when
//! it matches the raw answer, case-insensitively.
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
use super::normalize::{Word, tokens, words};
pub use synthkit::text::abstention::{ABSTENTION_PATTERNS, text_abstains};

/// Whether an answer abstains: the system said so (`said`), or its text does
/// ([`text_abstains`]).
pub fn abstains(answer: &str, said: Option<bool>) -> bool {
    said == Some(true) || text_abstains(answer)
}

/// Text made ready for matching: its normalised words and the raw text.
#[derive(Debug, Clone)]
pub(crate) struct Haystack<'a> {
    raw: &'a str,
    words: Vec<Word>,
}

impl<'a> Haystack<'a> {
    /// `text`, normalised once.
    pub fn new(raw: &'a str) -> Self {
        Self {
            raw,
            words: words(raw),
        }
    }

    /// Whether `needle`'s normalised words appear here in order and together (an empty
    /// needle never does), the parts of a dotted number as parts of one: `1.65` is found
    /// at the start of `1.65.0`, never inside `2.1.65`; a plain number is found only
    /// whole (`6` is not in `6.5`).
    pub(crate) fn has_words(&self, needle: &str) -> bool {
        let needle = words(needle);
        let Some(last) = needle.last() else {
            return false;
        };
        let n = needle.len();
        self.words.len() >= n
            && self.words.windows(n).enumerate().any(|(i, w)| {
                let same = w.iter().zip(&needle).all(|(h, x)| h == x);
                // A number that goes on past the needle: found only when the needle is
                // itself a dotted number (a version's first parts).
                let goes_on = self.words.get(i + n).is_some_and(|next| next.after_dot);
                same && (!goes_on || last.after_dot)
            })
    }

    /// Whether `alternative` is found here.
    pub fn has(&self, alternative: &Alternative) -> bool {
        match alternative {
            Alternative::Text(s) => self.has_words(s),
            Alternative::All(parts) => !parts.is_empty() && parts.iter().all(|p| self.has(p)),
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
            Alternative::All(parts) => {
                let words: Vec<&str> = parts
                    .iter()
                    .filter_map(|p| match p {
                        Alternative::Text(s) => Some(s.as_str()),
                        _ => None,
                    })
                    .collect();
                (!words.is_empty()).then(|| token_f1(answer, &words.join(" ")))
            }
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
    fn versions_flags_paths_and_code_are_matched_as_a_reader_reads_them() {
        // The three right answers issue 43 saw marked wrong.
        assert!(found(&[text("1.65")], "Rust `1.65.0` or newer."));
        assert!(found(&[text("1.65")], "MSRV: 1.65.0"));
        assert!(found(
            &[text("bundled")],
            "Build with `--features=bundled`."
        ));
        assert!(found(&[text("1.51")], "It needs Rust `1.51.x`."));
        // A version's first parts, never a different number.
        assert!(!found(&[text("1.65")], "version 1.650"));
        assert!(!found(&[text("1.65")], "version 11.65"));
        assert!(!found(&[text("1.65")], "version 2.1.65"));
        assert!(!found(&[text("6")], "after 6.5 months"));
        assert!(found(&[text("6 months")], "after 6 months."));
        // Paths and code across backticks and separators.
        assert!(found(&[text("src/main.rs")], "Edit `src/main.rs`."));
        assert!(found(&[text("crate::Type")], "It is `crate::Type`."));
        assert!(found(&[text("tokio::spawn")], "call `tokio::spawn(fut)`"));
        assert!(found(
            &[text("--no-default-features")],
            "`--no-default-features`"
        ));
        // Numbers as numbers: thousands separators.
        assert!(found(&[text("1,000")], "about 1000 trees"));
        assert!(found(&[text("1000")], "about 1,000 trees"));
        assert!(!found(&[text("1000")], "about 1,0000 trees"));
    }

    #[test]
    fn list_alternatives_need_every_part() {
        let both = Alternative::All(vec![text("Alice"), text("Bob")]);
        assert!(found(std::slice::from_ref(&both), "Bob and alice came."));
        assert!(!found(&[both], "Only Alice came."));
        // Regexes stand where strings do, in a list too.
        let regex = |p: &str| Alternative::Regex(AnswerRegex::new(p).unwrap());
        let both = Alternative::All(vec![regex(r"\bal"), regex(r"bob\b")]);
        assert!(found(std::slice::from_ref(&both), "Bob and Alice came."));
        assert!(!found(std::slice::from_ref(&both), "Bobby and Alice came."));
        assert_eq!(best_f1(&[both], "Bob"), None, "no words to compare");
        let mixed = Alternative::All(vec![text("Alice"), regex(r"\bbob\b")]);
        assert!(found(std::slice::from_ref(&mixed), "alice, bob"));
        assert_eq!(best_f1(&[mixed], "Alice"), Some(1.0));
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
            Alternative::All(vec![text("six"), text("months")]),
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
