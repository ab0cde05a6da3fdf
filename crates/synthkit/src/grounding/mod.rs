//! The grounding check of an answer: the facts it states, looked up in the sources its
//! calls were shown. Pure: no I/O, no model; time linear in the answer plus the sources.
//!
//! [`check`] reads the answer's **facts** ([`facts`], [`FactKind`]): numbers (`1,000`,
//! `3.5`, `42%`, `3rd`, `six`, `twenty-one`), dates (`2019-04-01`, `March 3, 2020`,
//! `3 March 2020`, `March 2020`), versions (`1.65.0`, `v2.3`), code and identifiers
//! (`` `backticked` ``, `--flags`, `a/b.c`, `crate::Type`, `snake_case`), names
//! (capitalised words and runs of them, `Dr. John Smith`; a sentence's first word too,
//! unless it is a common opener such as *The*, *It*, *Yes*) and quoted words (the whole
//! quote, one fact). What the question names is not a claim of the answer
//! ("When was Drummelo founded?": `Drummelo` is not checked), nor are citation markers
//! (`[1]`, `[2, 3]`) or the engine's own "not in the sources" sentence
//! ([`DEFAULT_NOT_IN_SOURCES_ANSWER`]).
//!
//! Each fact is **looked up** in every source: case-insensitively, on word boundaries
//! (`effective` is not in `ineffective`; `1.65` is in `1.65.0`, not in `11.65` or
//! `1.650`), in text normalised the same way (Unicode NFC, straight quotes, one space for
//! a run of white space); numbers as numbers (`1,000` = `1000`, `six` = `6`, `3.50` =
//! `3.5`), dates as dates (`March 3, 2020` = `2020-03-03`). A number found in no source
//! but the sum or difference of two numbers of one source ("3.2 km longer", from 12.5 and
//! 9.3) is **derived**: supported, and listed as such.
//!
//! The [`Grounding`] says `supported` (no fact to check, or every fact found or derived),
//! `partly` (some found) or `unsupported` (none found), lists the spans found in no
//! source as the answer wrote them, and lists the sources that hold the answer's facts,
//! best first: the attribution of an answer that cites nothing.
//!
//! Every list and span is bounded: the answer is read up to [`MAX_ANSWER_BYTES`], at most
//! [`MAX_FACTS`] facts are checked, at most [`MAX_LISTED`] spans listed, each cut to
//! [`MAX_SPAN_CHARS`] characters. Each source is read once into an index of its words,
//! numbers and dates, and one automaton finds all the answer's phrases in one pass over it.
//!
//! ```
//! use synthkit::grounding::{self, GroundingStatus};
//!
//! let sources = ["Drummelo is a fishing town. Its harbour was built in 1890."];
//! let g = grounding::check("Drummelo was founded in 1935.", "When was Drummelo founded?", &sources);
//! assert_eq!(g.status, GroundingStatus::Unsupported);
//! assert_eq!(g.unsupported, ["1935"]);
//! let json = serde_json::to_value(&g).unwrap();
//! assert_eq!(json["status"], "unsupported");
//! assert_eq!(json["unsupported"][0], "1935");
//!
//! let sources = ["Line 7 is 9.3 km long.", "Line 4 is 12.5 km long and line 7 is 9.3 km long."];
//! let g = grounding::check("Line 4 is 3.2 km longer than line 7.", "How much longer is line 4?", &sources);
//! assert_eq!(g.status, GroundingStatus::Supported);
//! assert_eq!(g.derived, ["3.2"]);
//! assert_eq!(g.sources, [1, 0]); // both hold 7; source 1 also derives 3.2
//! ```

mod chars;
mod dates;
mod facts;
pub(crate) mod gate;
mod lookup;
mod numbers;

use serde::{Deserialize, Serialize};

use crate::text::abstention::DEFAULT_NOT_IN_SOURCES_ANSWER;
use crate::text::cap_text;
use lookup::{Key, Matcher, normalize};

/// The most of an answer read, in bytes (cut at a character boundary); the rest is not
/// checked, and the grounding says it was [`truncated`](Grounding::truncated).
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// The most of a question read, in bytes, for the names and numbers it gives.
pub const MAX_QUESTION_BYTES: usize = 16 * 1024;

/// The most distinct facts read from an answer, before those the question names are set
/// aside.
pub const MAX_CANDIDATES: usize = 1024;

/// The most facts of one answer checked (the first ones written); more make the grounding
/// [`truncated`](Grounding::truncated).
pub const MAX_FACTS: usize = 256;

/// The most spans listed as unsupported, and as derived.
pub const MAX_LISTED: usize = 32;

/// A listed span is cut to this many characters (an ellipsis marks the cut).
pub const MAX_SPAN_CHARS: usize = 100;

/// The longest quote or code read as one fact, and the longest word read as a name or
/// identifier, in characters.
pub const MAX_PHRASE_CHARS: usize = 200;

/// The most words in one run of names (`Dr. John Smith` is three).
pub const MAX_NAME_WORDS: usize = 6;

/// The most sources listed as holding the answer's facts.
pub const MAX_SOURCES_LISTED: usize = 64;

/// The most distinct numbers of one source tried as operands of a derived number (the
/// first ones written).
pub const MAX_OPERANDS: usize = 1024;

/// The most operands tried, over all the sources, to derive the numbers of one answer: a
/// bound on the work whatever the sources hold.
pub const MAX_DERIVATION_STEPS: usize = 1 << 20;

/// How well an answer's facts are grounded in its sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum GroundingStatus {
    /// No fact to check, or every fact found in a source (or derived from one).
    Supported,
    /// Some facts found, some in no source.
    Partly,
    /// Facts, and none of them in any source.
    Unsupported,
}

impl GroundingStatus {
    /// The status as written in JSON (`supported`, `partly`, `unsupported`).
    pub fn as_str(self) -> &'static str {
        match self {
            GroundingStatus::Supported => "supported",
            GroundingStatus::Partly => "partly",
            GroundingStatus::Unsupported => "unsupported",
        }
    }
}

impl std::fmt::Display for GroundingStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the check found for one answer ([`check`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Grounding {
    /// Supported, partly or unsupported.
    pub status: GroundingStatus,
    /// The answer's facts found in no source, as written, in the answer's order: at most
    /// [`MAX_LISTED`], each at most [`MAX_SPAN_CHARS`] characters.
    pub unsupported: Vec<String>,
    /// The numbers found in no source but the sum or difference of two numbers of one
    /// source, as written (at most [`MAX_LISTED`]). They count as found.
    #[serde(default)]
    pub derived: Vec<String>,
    /// How many facts were checked (at most [`MAX_FACTS`]).
    #[serde(default)]
    pub checked: usize,
    /// How many of them were found in a source or derived; `checked - found` were not,
    /// which may be more than [`unsupported`](Self::unsupported) lists.
    #[serde(default)]
    pub found: usize,
    /// The sources holding the answer's facts, as indices into the sources given to
    /// [`check`], the source with the most facts first (then in the order given); at most
    /// [`MAX_SOURCES_LISTED`].
    #[serde(default)]
    pub sources: Vec<usize>,
    /// The answer was longer than [`MAX_ANSWER_BYTES`] or stated more than [`MAX_FACTS`]
    /// facts: what is past the bound was not checked.
    #[serde(default)]
    pub truncated: bool,
    /// In a synthesis's response: the ids of the nodes holding the answer's facts (the
    /// [`sources`](Self::sources) by id), found by the engine, not cited by the model.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_ids: Vec<String>,
    /// In a synthesis's response: the answer the model wrote, when
    /// [`OnUnsupported::Abstain`] replaced an unsupported one with "not in the sources".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withheld: Option<String>,
}

/// What a synthesis does with an answer whose grounding is
/// [`GroundingStatus::Unsupported`] ([`crate::SynthesizerBuilder::on_unsupported`]). With
/// every policy the answer's [`Grounding`] is in the response and a warning is logged; an
/// answer that is only [`partly`](GroundingStatus::Partly) supported is flagged so, never
/// replaced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum OnUnsupported {
    /// Keep the answer, flagged (the default).
    #[default]
    Warn,
    /// Answer "not in the sources" instead (`answerable: false`), the model's answer kept
    /// in [`Grounding::withheld`].
    Abstain,
    /// Fail the synthesis ([`crate::SynthError::Unsupported`]).
    Error,
}

impl OnUnsupported {
    /// The policy as written in JSON and on command lines (`warn`, `abstain`, `error`).
    pub fn as_str(self) -> &'static str {
        match self {
            OnUnsupported::Warn => "warn",
            OnUnsupported::Abstain => "abstain",
            OnUnsupported::Error => "error",
        }
    }
}

impl std::str::FromStr for OnUnsupported {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "warn" => Ok(OnUnsupported::Warn),
            "abstain" => Ok(OnUnsupported::Abstain),
            "error" => Ok(OnUnsupported::Error),
            other => Err(format!(
                "unknown policy for unsupported answers `{other}`: use `warn`, `abstain` or `error`"
            )),
        }
    }
}

impl Grounding {
    /// How many checked facts were found in no source.
    pub fn unsupported_count(&self) -> usize {
        self.checked.saturating_sub(self.found)
    }
}

/// What kind of fact an answer states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FactKind {
    /// A number in digits or words: `1,000`, `3.5`, `42%`, `3rd`, `six`.
    Number,
    /// A date: `2019-04-01`, `March 3, 2020`, `March 2020`.
    Date,
    /// A version: `1.65.0`, `v2.3`.
    Version,
    /// Code or an identifier: `` `backticked` ``, `--flag`, `a/b.c`, `crate::Type`.
    Code,
    /// A capitalised word or a run of them: `Drummelo`, `Dr. John Smith`.
    Name,
    /// Words in quote marks, looked up as one phrase.
    Quote,
}

/// One fact an answer states ([`facts`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Fact {
    /// What kind of fact it is.
    pub kind: FactKind,
    /// The fact as the answer wrote it (at most [`MAX_SPAN_CHARS`] characters).
    pub text: String,
    /// How it is looked up.
    #[serde(skip)]
    key: Key,
}

/// The facts `answer` states that `question` does not name, in the answer's order, each
/// once: at most [`MAX_FACTS`].
///
/// ```
/// use synthkit::grounding::{FactKind, facts};
///
/// let found = facts("Dr. John Smith found it on 3 March 2020 at 42.8 MHz [1].", "What did Smith find?");
/// let listed: Vec<(FactKind, &str)> = found.iter().map(|f| (f.kind, f.text.as_str())).collect();
/// assert_eq!(listed, [
///     (FactKind::Name, "Dr. John Smith"),
///     (FactKind::Date, "3 March 2020"),
///     (FactKind::Number, "42.8"),
///     (FactKind::Name, "MHz"),
/// ]);
/// ```
pub fn facts(answer: &str, question: &str) -> Vec<Fact> {
    read(answer, question).facts
}

/// Checks the facts `answer` states (those `question` does not name) against `sources`,
/// the texts its calls were shown.
pub fn check<S: AsRef<str>>(answer: &str, question: &str, sources: &[S]) -> Grounding {
    let Read { facts, truncated } = read(answer, question);
    if facts.is_empty() {
        // Nothing to look up: no source need be read.
        return Grounding {
            status: GroundingStatus::Supported,
            unsupported: Vec::new(),
            derived: Vec::new(),
            checked: 0,
            found: 0,
            sources: Vec::new(),
            truncated,
            source_ids: Vec::new(),
            withheld: None,
        };
    }
    let keys: Vec<&Key> = facts.iter().map(|f| &f.key).collect();
    let matcher = Matcher::new(&keys);
    let mut found = vec![false; facts.len()];
    let mut derived_from: Vec<Option<usize>> = vec![None; facts.len()];
    let mut held = vec![0usize; sources.len()];
    let mut budget = MAX_DERIVATION_STEPS;
    for ((s, source), held) in sources.iter().enumerate().zip(held.iter_mut()) {
        let text = normalize(source.as_ref());
        let index = matcher.index(&text);
        for (holds, found) in matcher.holds(&keys, &index).into_iter().zip(&mut found) {
            if holds {
                *found = true;
                *held += 1;
            }
        }
        for ((key, found), derived) in keys.iter().zip(&found).zip(&mut derived_from) {
            if let Key::Number(n) = key
                && let Some(x) = n.scaled
                && !found
                && derived.is_none()
                && index.derives(x, &mut budget)
            {
                *derived = Some(s);
            }
        }
    }
    let (mut unsupported, mut derived, mut found_count) = (Vec::new(), Vec::new(), 0);
    for ((fact, &found), from) in facts.iter().zip(&found).zip(&derived_from) {
        match (found, from) {
            (true, _) => found_count += 1,
            (false, Some(s)) => {
                found_count += 1;
                if let Some(h) = held.get_mut(*s) {
                    *h += 1;
                }
                if derived.len() < MAX_LISTED {
                    derived.push(fact.text.clone());
                }
            }
            (false, None) if unsupported.len() < MAX_LISTED => unsupported.push(fact.text.clone()),
            (false, None) => {}
        }
    }
    let mut ranked: Vec<(usize, usize)> = held
        .into_iter()
        .enumerate()
        .filter(|&(_, h)| h > 0)
        .collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let checked = facts.len();
    let status = if found_count == checked {
        GroundingStatus::Supported
    } else if found_count > 0 {
        GroundingStatus::Partly
    } else {
        GroundingStatus::Unsupported
    };
    Grounding {
        status,
        unsupported,
        derived,
        checked,
        found: found_count,
        sources: ranked
            .into_iter()
            .take(MAX_SOURCES_LISTED)
            .map(|(s, _)| s)
            .collect(),
        truncated,
        source_ids: Vec::new(),
        withheld: None,
    }
}

/// The facts to check, and whether some were left unread.
struct Read {
    facts: Vec<Fact>,
    truncated: bool,
}

fn read(answer: &str, question: &str) -> Read {
    let (answer, cut) = cap_text(answer, MAX_ANSWER_BYTES);
    let answer = without_engine_answer(answer);
    let (candidates, more) = facts::extract(&answer);
    let (question, _) = cap_text(question, MAX_QUESTION_BYTES);
    let question = normalize(question);
    let named = if question.is_empty() || candidates.is_empty() {
        vec![false; candidates.len()]
    } else {
        let keys: Vec<&Key> = candidates.iter().map(|f| &f.key).collect();
        let matcher = Matcher::new(&keys);
        matcher.holds(&keys, &matcher.index(&question))
    };
    let mut facts: Vec<Fact> = candidates
        .into_iter()
        .zip(named)
        .filter_map(|(fact, named)| (!named).then_some(fact))
        .collect();
    let truncated = cut || more || facts.len() > MAX_FACTS;
    facts.truncate(MAX_FACTS);
    Read { facts, truncated }
}

/// `answer` without the engine's "not in the sources" sentence (in any case).
fn without_engine_answer(answer: &str) -> std::borrow::Cow<'_, str> {
    let lower = answer.to_ascii_lowercase();
    let sentence = DEFAULT_NOT_IN_SOURCES_ANSWER.to_ascii_lowercase();
    if !lower.contains(&sentence) {
        return answer.into();
    }
    let mut out = String::with_capacity(answer.len());
    let mut at = 0;
    for (start, _) in lower.match_indices(&sentence) {
        out.push_str(answer.get(at..start).unwrap_or_default());
        out.push(' ');
        at = start + sentence.len();
    }
    out.push_str(answer.get(at..).unwrap_or_default());
    out.into()
}

#[cfg(test)]
mod tests;
