//! Reading a model's reply for "the sources do not answer" and for talk about the answer
//! instead of an answer.
//!
//! synthkit's default prompts tell the model to reply [`NOT_IN_SOURCES`] alone when the
//! passages do not answer. [`read_reply`] sorts a reply into a [`ReplyReading`]:
//!
//! - **[`ReplyReading::NotInSources`]**: the reply starts with [`NOT_IN_SOURCES`] (case,
//!   surrounding quotes, `*` and punctuation aside). The engine replaces it with the
//!   configured "not in the sources" answer, or, in a step that had an answer already,
//!   keeps that answer.
//! - **[`ReplyReading::SaysNotAnswered`]**: a short reply (at most [`SHORT_REPLY_WORDS`]
//!   words) that says so in other words, one of [`ABSTENTION_PATTERNS`]. Its text is kept
//!   (a stream has shown it already); the response says `answerable: false`. In a step
//!   that had an answer, the answer is kept, when the reply also opens as such replies
//!   do ([`OPENING_PATTERNS`], within its first [`OPENING_WORDS`] words).
//! - **[`ReplyReading::TalksAboutAnswer`]**: in a step that had an answer (refine), a short
//!   reply that opens so and only talks about it ("The original answer remains
//!   accurate"), one of [`META_PATTERNS`]: the answer is kept.
//! - **[`ReplyReading::Answer`]**: anything else.
//!
//! One more reading is the engine's, not [`read_reply`]'s: **[`ReplyReading::Ungrounded`]**,
//! a refine or compact reply that would replace an answer grounded in the passages shown so
//! far with one whose facts are in none of them ([`crate::grounding`]); the answer is kept.
//!
//! Long replies are answers whatever they say: a reply of more than
//! [`SHORT_REPLY_WORDS`] words (or [`SHORT_REPLY_BYTES`] bytes) that says the sources lack
//! one detail still carries the others, and is never thrown away.
//!
//! ```
//! use synthkit::text::abstention::{ReplyReading, read_reply};
//! assert_eq!(read_reply("Not in the sources.", false), ReplyReading::NotInSources);
//! assert_eq!(read_reply("\"not in the sources\"", false), ReplyReading::NotInSources);
//! assert_eq!(read_reply("The context does not mention it.", false), ReplyReading::SaysNotAnswered);
//! assert_eq!(read_reply("The original answer remains accurate.", true), ReplyReading::TalksAboutAnswer);
//! assert_eq!(read_reply("Every six months.", true), ReplyReading::Answer);
//! ```

use std::sync::LazyLock;

/// What the default prompts ask the model to reply when the passages do not answer.
pub const NOT_IN_SOURCES: &str = "Not in the sources";

/// The answer a synthesis gives when the sources do not answer, unless configured
/// otherwise ([`crate::SynthesizerBuilder::not_in_sources_answer`]).
pub const DEFAULT_NOT_IN_SOURCES_ANSWER: &str = "The sources do not answer this question.";

/// The most words a reply may have and still be read as an abstention or as talk about
/// the answer (a longer reply is an answer).
pub const SHORT_REPLY_WORDS: usize = 40;

/// The phrasings that make an answer an abstention (regexes, matched case-insensitively):
/// "not (mentioned/found/given/...) in the (provided) sources/context/text/documents/
/// passages/information"; "the context/sources/... does not mention/say/contain/provide/
/// specify/include/state/give/answer"; "cannot be answered", "can't answer", "unable to
/// answer/determine/find"; "no information", "not enough/insufficient information"; "I
/// don't know"; "Empty Response" (LlamaIndex's reply to nothing); "no answer found".
pub const ABSTENTION_PATTERNS: &[&str] = &[
    r"\bnot (?:mentioned |found |given |stated |specified |provided |included |present )?in the (?:provided |given |supplied )?(?:sources?|context|texts?|documents?|passages?|information)\b",
    r"\b(?:context|sources?|texts?|documents?|passages?|information) (?:does|do|did) ?n[o']t (?:mention|say|contain|provide|specify|include|state|give|answer)",
    r"\bcannot be answered\b",
    r"\b(?:cannot|can ?not|can't) answer\b",
    r"\bunable to (?:answer|determine|find)\b",
    r"\bno information\b",
    r"\b(?:not enough|insufficient) information\b",
    r"\bi (?:do not|don't) know\b",
    r"^\s*empty response\s*$",
    r"\bno answer found\b",
];

/// The phrasings of a refine reply that talks about the previous answer instead of
/// giving one (regexes, matched case-insensitively on short replies only).
pub const META_PATTERNS: &[&str] = &[
    r"\b(?:original|existing|current|previous|given|initial|above) answer (?:remains|is still|still stands|stands|holds|does not need|doesn't need|needs no|requires no|is (?:already )?(?:correct|accurate|complete|appropriate|sufficient|adequate|valid))",
    r"\bno (?:changes?|refinements?|updates?|modifications?|improvements?) (?:is |are )?(?:needed|necessary|required)\b",
    r"\b(?:new )?(?:context|passages?|information|sources?) (?:does|do|did) ?n[o']t (?:change|alter|affect|add to|improve|require)\b",
    r"\b(?:repeat|keep|keeping|repeating) the (?:original|existing|current|previous) answer\b",
];

/// How a reply that is not an answer opens, in a step that had an answer (regexes,
/// anchored at the reply's start, matched case-insensitively). A streamed final step
/// holds back its first [`OPENING_WORDS`] words to see whether the reply opens so.
pub const OPENING_PATTERNS: &[&str] = &[
    r"^(?:the |this |your |my )?(?:original|existing|current|previous|given|initial|above|provided|prior) answer\b",
    r"^no (?:changes?|refinements?|updates?|modifications?|improvements?|new|additional|relevant|information)\b",
    r"^(?:the |these |this )?(?:new |additional |provided |given )?(?:context|passages?|information|sources?|texts?|documents?|excerpts?)\b",
    r"^i (?:do not|don't|cannot|can't|am unable|will|would|shall)\b",
    r"^(?:there is|there's|there are) no\b",
    r"^(?:unfortunately|sorry)\b",
    r"^(?:this|the) question\b",
    r"^(?:it is|it's) not\b",
    r"^(?:not|none)\b",
];

/// The words of a reply's start that [`OPENING_PATTERNS`] read.
pub const OPENING_WORDS: usize = 5;

fn set(patterns: &[&str]) -> Option<regex::RegexSet> {
    regex::RegexSetBuilder::new(patterns)
        .case_insensitive(true)
        .build()
        .ok()
}

/// The compiled patterns (`None` only if one failed to compile, which a test rules out).
static ABSTENTION_SET: LazyLock<Option<regex::RegexSet>> =
    LazyLock::new(|| set(ABSTENTION_PATTERNS));
static META_SET: LazyLock<Option<regex::RegexSet>> = LazyLock::new(|| set(META_PATTERNS));
static OPENING_SET: LazyLock<Option<regex::RegexSet>> = LazyLock::new(|| set(OPENING_PATTERNS));

/// Whether `text` reads as an abstention: empty, or one of [`ABSTENTION_PATTERNS`]
/// (at any length: this is how `eval` scores an answer).
pub fn text_abstains(text: &str) -> bool {
    let text = text.replace('\u{2019}', "'");
    text.trim().is_empty()
        || ABSTENTION_SET
            .as_ref()
            .is_some_and(|set| set.is_match(&text))
}

/// How a reply reads ([`read_reply`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ReplyReading {
    /// An answer.
    Answer,
    /// The reply starts with [`NOT_IN_SOURCES`].
    NotInSources,
    /// A short reply saying, in other words, that the sources do not answer.
    SaysNotAnswered,
    /// A short reply about the previous answer instead of one (only when there was one).
    TalksAboutAnswer,
    /// A refine or compact reply whose facts are in none of the passages the chain has
    /// shown the model, in a step whose previous answer has facts found there: the engine
    /// keeps the previous answer. Never what [`read_reply`] says (it reads the text
    /// alone); see [`crate::grounding::check`].
    Ungrounded,
}

impl ReplyReading {
    /// Whether the reply is an answer.
    pub fn is_answer(self) -> bool {
        self == Self::Answer
    }

    /// Whether the reply says the sources do not answer.
    pub fn abstains(self) -> bool {
        matches!(self, Self::NotInSources | Self::SaysNotAnswered)
    }
}

/// Reads `reply`; `has_previous`: the step had an answer to keep (a refine step), so
/// talk about it counts ([`ReplyReading::TalksAboutAnswer`]), and a reply must open as
/// such replies do ([`opens_like_no_answer`]) to be set aside.
pub fn read_reply(reply: &str, has_previous: bool) -> ReplyReading {
    if starts_with_not_in_sources(reply) {
        return ReplyReading::NotInSources;
    }
    if is_long(reply) || reply.trim().is_empty() {
        return ReplyReading::Answer;
    }
    if has_previous && !opens_like_no_answer(reply) {
        return ReplyReading::Answer;
    }
    let text = reply.replace('\u{2019}', "'");
    if matches(&ABSTENTION_SET, &text) {
        ReplyReading::SaysNotAnswered
    } else if has_previous && matches(&META_SET, &text) {
        ReplyReading::TalksAboutAnswer
    } else {
        ReplyReading::Answer
    }
}

fn matches(set: &Option<regex::RegexSet>, text: &str) -> bool {
    set.as_ref().is_some_and(|s| s.is_match(text))
}

/// The most bytes a reply may have and still be short (whatever its words): a stream
/// holds back at most this much of a reply to read it.
pub const SHORT_REPLY_BYTES: usize = 1024;

/// Whether `text` has more than [`SHORT_REPLY_WORDS`] words or [`SHORT_REPLY_BYTES`]
/// bytes (then it is an answer).
pub fn is_long(text: &str) -> bool {
    text.len() > SHORT_REPLY_BYTES || text.split_whitespace().nth(SHORT_REPLY_WORDS).is_some()
}

/// Whether `reply` opens as a reply that is not an answer does ([`OPENING_PATTERNS`]).
pub fn opens_like_no_answer(reply: &str) -> bool {
    let text = reply
        .trim_start_matches(is_wrapping)
        .replace('\u{2019}', "'");
    matches(&OPENING_SET, &text)
}

/// Whether `text` so far has its first [`OPENING_WORDS`] words whole (a space or a
/// word follows them), so [`opens_like_no_answer`] can read it.
pub fn has_opening(text: &str) -> bool {
    let mut words = text.split_whitespace();
    match words.nth(OPENING_WORDS - 1) {
        None => false,
        Some(_) => words.next().is_some() || text.ends_with(char::is_whitespace),
    }
}

/// The characters around the marker phrase that do not count: quotes, emphasis, spaces.
fn is_wrapping(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | '*' | '_' | '`' | '\u{201c}' | '\u{201d}')
}

/// Whether `reply` starts with [`NOT_IN_SOURCES`] followed by the end, punctuation or a
/// space.
pub fn starts_with_not_in_sources(reply: &str) -> bool {
    let text = reply.trim_start_matches(is_wrapping);
    let n = NOT_IN_SOURCES.len();
    let Some(head) = text.get(..n) else {
        return false;
    };
    head.eq_ignore_ascii_case(NOT_IN_SOURCES)
        && text
            .get(n..)
            .and_then(|rest| rest.chars().next())
            .is_none_or(|c| !c.is_alphanumeric())
}

/// Whether `text` so far could still grow into a reply that starts with
/// [`NOT_IN_SOURCES`] (a stream holds such text back until it knows).
pub fn may_start_with_not_in_sources(text: &str) -> bool {
    let text = text.trim_start_matches(is_wrapping);
    let n = text.len().min(NOT_IN_SOURCES.len());
    match (text.get(..n), NOT_IN_SOURCES.get(..n)) {
        (Some(head), Some(marker)) => head.eq_ignore_ascii_case(marker),
        // A cut inside a multi-byte character is not the marker, which is ASCII.
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_compile() {
        assert!(ABSTENTION_SET.is_some());
        assert!(META_SET.is_some());
        assert!(OPENING_SET.is_some());
    }

    #[test]
    fn the_marker_phrase_in_its_wrappings() {
        for yes in [
            "Not in the sources.",
            "not in the sources",
            "  **Not in the sources.**",
            "\u{201c}Not in the sources\u{201d}",
            "NOT IN THE SOURCES: the passages are about ferries.",
            "Not in the sources. The passages only describe the dome, which opens at dusk and closes at dawn, and the mirror, which was made in 1901 by a firm from Jena that no longer exists and whose records were lost.",
        ] {
            assert_eq!(
                read_reply(yes, false),
                ReplyReading::NotInSources,
                "{yes:?}"
            );
            assert_eq!(read_reply(yes, true), ReplyReading::NotInSources, "{yes:?}");
        }
        for no in [
            "Not in the sourcesX",
            "Not in the",
            "It is not in the sourcebook.",
        ] {
            assert!(!starts_with_not_in_sources(no), "{no:?}");
        }
    }

    #[test]
    fn short_abstentions_and_long_answers() {
        assert_eq!(
            read_reply("The passages do not say when the mirror is cleaned.", false),
            ReplyReading::SaysNotAnswered
        );
        assert_eq!(
            read_reply("I don\u{2019}t know.", true),
            ReplyReading::SaysNotAnswered
        );
        let long = format!(
            "The mirror is cleaned every six months. {} The context does not mention who cleans it.",
            "It is a large mirror in the dome of the old observatory on the hill. ".repeat(3)
        );
        assert_eq!(read_reply(&long, false), ReplyReading::Answer);
        assert_eq!(read_reply("Every six months.", false), ReplyReading::Answer);
        assert_eq!(read_reply("", false), ReplyReading::Answer);
        // One endless word is long too (a stream never holds more than the byte bound).
        let endless = format!("The context does not mention {}", "x".repeat(2000));
        assert_eq!(read_reply(&endless, false), ReplyReading::Answer);
    }

    #[test]
    fn talk_about_the_answer_only_counts_in_a_refine_step() {
        for meta in [
            "The original answer remains appropriate.",
            "The existing answer is already correct.",
            "No changes are needed.",
            "The new context does not change the answer.",
            "I will repeat the original answer.",
        ] {
            assert_eq!(
                read_reply(meta, true),
                ReplyReading::TalksAboutAnswer,
                "{meta:?}"
            );
            assert_eq!(read_reply(meta, false), ReplyReading::Answer, "{meta:?}");
        }
        assert_eq!(
            read_reply("The answer is 42, as the original answer said.", true),
            ReplyReading::Answer
        );
        // With an answer to keep, only a reply that opens as a non-answer is set aside.
        assert_eq!(
            read_reply("Every six months; the context does not mention who.", true),
            ReplyReading::Answer
        );
        assert_eq!(
            read_reply("Every six months; the context does not mention who.", false),
            ReplyReading::SaysNotAnswered
        );
        assert_eq!(
            read_reply("The new passages do not mention the mirror.", true),
            ReplyReading::SaysNotAnswered
        );
        assert!(has_opening("one two three four five six"));
        assert!(has_opening("one two three four five "));
        assert!(!has_opening("one two three four five"));
        assert!(!has_opening("one two three four"));
    }

    #[test]
    fn prefixes_of_the_marker() {
        for maybe in [
            "",
            " ",
            "N",
            "\"not in",
            "**Not in the sour",
            "Not in the sources.",
        ] {
            assert!(may_start_with_not_in_sources(maybe), "{maybe:?}");
        }
        for no in ["Every", "Not a", "\u{e9}t\u{e9}"] {
            assert!(!may_start_with_not_in_sources(no), "{no:?}");
        }
    }
}
