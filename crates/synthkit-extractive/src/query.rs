//! The question as the backend reads it: its terms, whether it names code, whether it asks
//! which release or version.

use std::collections::HashSet;
use std::sync::LazyLock;

use super::rank::{Term, term_id, terms};

/// Words asking for a summary rather than a fact.
const SUMMARY_WORDS: &[&str] = &[
    "summarize",
    "summarise",
    "summary",
    "summaries",
    "overview",
    "tldr",
    "gist",
    "recap",
];

/// Words of a summary request that name no topic ("Summarize the text.",
/// "Give an overview of the documents").
const META_WORDS: &[&str] = &[
    "text",
    "texts",
    "document",
    "documents",
    "doc",
    "docs",
    "file",
    "files",
    "content",
    "contents",
    "passage",
    "passages",
    "article",
    "page",
    "pages",
    "main",
    "key",
    "point",
    "points",
    "idea",
    "ideas",
    "brief",
    "briefly",
    "short",
    "give",
    "write",
    "provide",
    "please",
    "everything",
    "overall",
    "topic",
    "topics",
    "above",
    "following",
    "tl",
    "dr",
];

/// Question words that documents rarely repeat (how often, how big, what does it need,
/// which release added): absent from every sentence, they do not count against an
/// answer's coverage ("How often is the mirror cleaned?").
const FILLER_WORDS: &[&str] = &[
    "often",
    "many",
    "much",
    "long",
    "usually",
    "typically",
    "exactly",
    "kind",
    "way",
    "happen",
    "happens",
    "need",
    "needs",
    "mean",
    "means",
    "work",
    "works",
    "big",
    "large",
    "far",
    "old",
    "tall",
    "wide",
    "heavy",
    "added",
    "introduced",
    "latest",
    "newest",
    "recent",
    "current",
    "title",
    "called",
    "named",
    "stand",
];

/// Words asking for a command or code ("What command verifies the build?", "How do I
/// create a project?"): a sentence announcing code ("To verify the build:") then answers
/// with its code.
const CODE_WORDS: &[&str] = &[
    "command", "commands", "run", "execute", "syntax", "example", "snippet", "code", "invoke",
];

/// Word starts naming something that happened in a release ("Which version added X?",
/// "... fixed ...", "... deprecated ..."): a note under a release heading answers.
const EVENT_CUES: &[&str] = &[
    "add", "introduc", "new", "support", "gain", "got", "fix", "chang", "remov", "deprecat",
    "stabiliz", "drop", "break", "broke", "need", "requir",
];

/// Words making a version question one about a requirement ("Which GCC version is
/// needed?"): no release answers it.
const REQUIREMENT_WORDS: &[&str] = &[
    "need",
    "needed",
    "needs",
    "require",
    "required",
    "requires",
    "minimum",
    "supported",
];

/// Words asking for the latest release.
const LATEST_WORDS: &[&str] = &["latest", "newest", "current", "last", "recent"];

/// Words of [`CODE_WORDS`] that name the answer's form and are no terms.
const FORM_WORDS: &[&str] = &[
    "command", "commands", "syntax", "example", "snippet", "code",
];

/// Words asking for a title or a heading ("What is the title of chapter 16?").
const HEADING_WORDS: &[&str] = &[
    "title", "titled", "heading", "chapter", "section", "called", "named", "name",
];

fn stems(words: &[&str]) -> HashSet<String> {
    words.iter().flat_map(|w| terms(w)).collect()
}

static SUMMARY: LazyLock<HashSet<String>> = LazyLock::new(|| stems(SUMMARY_WORDS));
static META: LazyLock<HashSet<String>> = LazyLock::new(|| stems(META_WORDS));
static FILLER: LazyLock<HashSet<Term>> =
    LazyLock::new(|| stems(FILLER_WORDS).iter().map(|s| term_id(s)).collect());

/// A question, analyzed.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Query {
    /// Its terms (stemmed, stop words and a summary request's meta words removed), in order.
    pub terms: Vec<Term>,
    /// Whether it names code (`--flag`, `foo()`, `a::b`, backticks, `$VAR`, snake_case):
    /// code lines may answer it.
    pub code: bool,
    /// Whether it asks which release or version.
    pub release: bool,
    /// For "What is X?" / "What are X?": X, lowercased ("ownership"), whose definition
    /// ("Ownership is ...") answers best.
    pub subject: Option<String>,
    /// Whether it asks what was added or changed ("added", "introduced", "new",
    /// "support"): with `release`, announcements outrank fixes.
    pub asks_what_changed: bool,
    /// Whether it asks for a command or code (`how do I ...`, "command", "example"): a
    /// sentence announcing code answers with the code.
    pub asks_code: bool,
    /// Whether it asks for a title or a heading: headings are candidates.
    pub asks_heading: bool,
    /// Whether it asks for the latest release ("latest", "newest", "current").
    pub latest: bool,
    /// Its symbols (`?`, `+=`: tokens without letters or digits), matched as terms.
    pub symbols: Vec<Term>,
    /// Whether it asks for a release itself ("Which Python version is this?", "What is
    /// the latest coreutils release?"): only headings naming a version answer it.
    pub version_only: bool,
}

impl Query {
    /// Analyzes `query`.
    pub(super) fn new(query: &str) -> Self {
        let mut words = terms(query);
        if words.iter().any(|w| SUMMARY.contains(w)) {
            words.retain(|w| !SUMMARY.contains(w) && !META.contains(w));
        }
        let words_of = || {
            query
                .split(|c: char| !c.is_alphanumeric())
                .map(str::to_lowercase)
        };
        // "Which GCC version is needed?" asks for a requirement, not for a release of
        // what the documents describe.
        let requirement = words_of().any(|w| REQUIREMENT_WORDS.contains(&w.as_str()));
        let release = !requirement
            && words_of()
                .any(|w| matches!(w.as_str(), "release" | "releases" | "version" | "versions"));
        let asks_what_changed = query.split(|c: char| !c.is_alphanumeric()).any(|w| {
            let w = w.to_lowercase();
            ["add", "introduc", "new", "support", "gain", "got"]
                .iter()
                .any(|cue| w.starts_with(cue))
        });
        let lower = query.to_lowercase();
        let plain: Vec<&str> = lower
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();
        let has = |list: &[&str]| plain.iter().any(|w| list.contains(w));
        let how = [
            "how do i ",
            "how can i ",
            "how to ",
            "how do you ",
            "how would i ",
        ]
        .iter()
        .any(|p| lower.contains(p));
        if has(CODE_WORDS) {
            // "What command ...?" says what form the answer takes, not what it is about.
            let drop = stems(FORM_WORDS);
            words.retain(|w| !drop.contains(w));
        }
        let symbols = symbol_terms(query.trim_end().trim_end_matches('?'));
        let latest = has(LATEST_WORDS);
        if release && latest {
            // "The latest release" asks for the highest version, not for the word.
            let drop = stems(LATEST_WORDS);
            words.retain(|w| !drop.contains(w));
        }
        let mut terms: Vec<Term> = words.iter().map(|w| term_id(w)).collect();
        terms.extend(symbols.iter().copied());
        // "Which Python version is this?", "What is the latest coreutils release?": the
        // answer is a release itself (a heading naming a version), not a note under one.
        let release_words = stems(&["release", "releases", "version", "versions"]);
        let topic = words
            .iter()
            .filter(|w| !release_words.contains(*w) && !FILLER.contains(&term_id(w)))
            .count();
        let event = plain
            .iter()
            .any(|w| EVENT_CUES.iter().any(|cue| w.starts_with(cue)));
        let version_only = release && !event && (latest || topic <= 1);
        Self {
            terms,
            code: code_ish(query),
            release,
            asks_what_changed,
            subject: definition_subject(query),
            asks_code: how || has(CODE_WORDS),
            asks_heading: has(HEADING_WORDS),
            latest,
            symbols,
            version_only,
        }
    }

    /// Whether the question has terms (else it is answered by a summary).
    pub(super) fn has_terms(&self) -> bool {
        !self.terms.is_empty()
    }

    /// Whether `term` is a filler word (see [`FILLER_WORDS`]).
    pub(super) fn is_filler(term: Term) -> bool {
        FILLER.contains(&term)
    }
}

/// The terms of `text`'s symbols: tokens (between white space and `;`, backticks and
/// quotes around them and a closing `:` or `,` taken off) of 1 to 4 characters without a
/// letter or digit (`?`, `+=`, `..`).
pub(super) fn symbol_terms(text: &str) -> Vec<Term> {
    text.split(|c: char| c.is_whitespace() || c == ';')
        .map(|t| {
            t.trim_end_matches([':', ','])
                .trim_matches(['`', '"', '\'', '“', '”'])
        })
        .filter(|t| {
            let n = t.chars().count();
            (1..=4).contains(&n) && !t.chars().any(char::is_alphanumeric)
        })
        .map(|t| term_id(&format!("symbol {t}")))
        .collect()
}

/// X of "What is X?", "What are X?", "What's X?", "Define X", without an article;
/// `None` for other questions or an X of more than four words.
fn definition_subject(query: &str) -> Option<String> {
    let q = query
        .trim()
        .trim_end_matches(['?', '.', '!'])
        .trim()
        .to_lowercase();
    let rest = ["what is ", "what are ", "what's ", "define "]
        .iter()
        .find_map(|p| q.strip_prefix(p))?;
    let rest = ["a ", "an ", "the "]
        .iter()
        .find_map(|a| rest.strip_prefix(a))
        .unwrap_or(rest)
        .trim();
    let words = rest.split_whitespace().count();
    (words > 0 && words <= 4).then(|| rest.to_string())
}

/// Whether `sentence` defines `subject`: it starts with it (an article allowed) followed
/// by "is", "are", "refers to" or "means".
pub(super) fn defines(sentence: &str, subject: &str) -> bool {
    let s = sentence
        .trim_start_matches(|c: char| !c.is_alphanumeric())
        .to_lowercase();
    let s = ["a ", "an ", "the "]
        .iter()
        .find_map(|a| s.strip_prefix(a))
        .unwrap_or(&s);
    let Some(after) = s.strip_prefix(subject) else {
        return false;
    };
    // "ownership is", and the plural or singular form of the subject ("a slice is" for
    // "What are slices?").
    let after = after.strip_prefix('s').unwrap_or(after);
    [" is ", " are ", " refers to ", " means "]
        .iter()
        .any(|verb| after.starts_with(verb))
}

/// Whether a question names code.
fn code_ish(query: &str) -> bool {
    if query.contains('`') || query.contains("()") {
        return true;
    }
    let chars: Vec<char> = query.chars().collect();
    chars.windows(3).enumerate().any(|(i, w)| {
        let before_space = i == 0 || chars.get(i - 1).is_none_or(|c| c.is_whitespace());
        match w {
            ['-', '-', c] => c.is_alphanumeric(),
            ['-', c, d] => before_space && c.is_ascii_alphabetic() && !d.is_alphanumeric(),
            [a, ':', ':'] => a.is_alphanumeric(),
            ['$', c, _] => c.is_ascii_alphabetic() || *c == '{',
            [a, '_', c] => a.is_alphanumeric() && c.is_alphanumeric(),
            [a, '(', _] => a.is_alphanumeric(),
            _ => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_have_no_terms() {
        assert!(!Query::new("Summarize the documents").has_terms());
        assert!(!Query::new("Summarize the text.").has_terms());
        assert!(!Query::new("Give me an overview of the main points").has_terms());
        assert!(Query::new("Summarize the safety rules").has_terms());
        assert!(Query::new("What is the text type?").has_terms());
    }

    #[test]
    fn code_and_release() {
        for q in [
            "What does --debug do?",
            "What does `ls` do?",
            "Is Vec::new() free?",
            "What is $HOME?",
            "What does -r do?",
            "What is max_tokens?",
            "What does foo(x) return?",
        ] {
            assert!(Query::new(q).code, "{q}");
        }
        for q in [
            "How often is the mirror cleaned?",
            "What is a well-known fact?",
            "Is it (really) so?",
        ] {
            assert!(!Query::new(q).code, "{q}");
        }
        assert_eq!(
            Query::new("What is ownership?").subject.as_deref(),
            Some("ownership")
        );
        assert_eq!(
            Query::new("What are the rules?").subject.as_deref(),
            Some("rules")
        );
        assert_eq!(Query::new("How does it work?").subject, None);
        assert!(defines("Ownership is a set of rules.", "ownership"));
        assert!(defines("The stack is fast.", "stack"));
        assert!(!defines("Understanding ownership is hard.", "ownership"));
        assert!(!defines("Ownership rules are strict.", "ownership"));
        assert!(Query::new("Which release added sort --debug?").release);
        assert!(Query::new("Which release added sort --debug?").asks_what_changed);
        assert!(!Query::new("Which release fixed the crash?").asks_what_changed);
        assert!(!Query::new("Who released the album?").release);
    }
}
