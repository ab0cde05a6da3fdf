//! What a quote check finds: each quote's [`Quote`] (status, where it was found, its
//! origin), their [`QuoteCounts`], and the numbers of cited sentences found in no cited
//! source ([`UnsupportedNumber`]).

use serde::Serialize;

/// What the check of one quote found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum QuoteStatus {
    /// The quote is in the text of the node its marker names.
    Verified,
    /// The quote is not in the node its marker names but in another source the model was
    /// shown: the citation is re-pointed to that node.
    Misattributed,
    /// The quote is in no source the model was shown: it is kept out of the answer's
    /// citations.
    NotFound,
    /// The quote was not looked for ([`Quote::reason`] says why): like a quote not found,
    /// it supports no citation.
    Unchecked,
}

impl QuoteStatus {
    /// The status as written in JSON (`verified`, `misattributed`, `not_found`,
    /// `unchecked`).
    pub fn as_str(self) -> &'static str {
        match self {
            QuoteStatus::Verified => "verified",
            QuoteStatus::Misattributed => "misattributed",
            QuoteStatus::NotFound => "not_found",
            QuoteStatus::Unchecked => "unchecked",
        }
    }
}

impl std::fmt::Display for QuoteStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a quote was not checked ([`QuoteStatus::Unchecked`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum UncheckedReason {
    /// Fewer than [`MIN_QUOTE_WORDS`](super::MIN_QUOTE_WORDS) words and [`MIN_QUOTE_LETTERS`](super::MIN_QUOTE_LETTERS) letters: found
    /// almost anywhere, so it proves nothing.
    TooShort,
    /// No closing mark within [`MAX_QUOTE_CHARS`](super::MAX_QUOTE_CHARS) characters.
    TooLong,
    /// The answer ends before the quote's closing mark (a quote opened with `“` closes
    /// only with `”`, `«` with `»`, `"` with `"`, `„` with `“` or `”`).
    Unclosed,
}

impl UncheckedReason {
    /// The reason as written in JSON (`too_short`, `too_long`, `unclosed`).
    pub fn as_str(self) -> &'static str {
        match self {
            UncheckedReason::TooShort => "too_short",
            UncheckedReason::TooLong => "too_long",
            UncheckedReason::Unclosed => "unclosed",
        }
    }
}

impl std::fmt::Display for UncheckedReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One quote of the final answer (`[n] "words"`), checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Quote {
    /// The marker written before the quote, as numbered in the final answer.
    pub marker: u32,
    /// The node the quote was found in (the re-pointed node when misattributed), or the
    /// node the marker names when it was not found or not checked.
    pub node_id: String,
    /// The node the marker names (differs from `node_id` only when misattributed).
    pub marked_node_id: String,
    /// The quote as written in the answer, without its quote marks (for a quote without
    /// its closing mark, its first [`MAX_QUOTE_CHARS`](super::MAX_QUOTE_CHARS) characters).
    pub quote: String,
    /// What the check found.
    pub status: QuoteStatus,
    /// Why the quote was not checked ([`QuoteStatus::Unchecked`] only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<UncheckedReason>,
    /// Where the quote starts in `node_id`'s text, in characters (not bytes); `None` when
    /// not found.
    pub start: Option<usize>,
    /// Where the quote ends (exclusive) in `node_id`'s text, in characters.
    pub end: Option<usize>,
    /// Who wrote the quote: the model, or the engine from the evidence the marker's
    /// source was shown as (absent from JSON for the model's).
    #[serde(skip_serializing_if = "QuoteOrigin::is_model")]
    pub origin: QuoteOrigin,
}

/// Who wrote a [`Quote`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum QuoteOrigin {
    /// The model wrote it after its marker; the check looked for it in the sources.
    #[default]
    Model,
    /// The model wrote a bare marker; the engine quoted the evidence sentence of that
    /// source bearing on the sentence cited, word for word from the node's text at the
    /// offsets given ([`QuoteStatus::Verified`] by construction).
    Evidence,
}

impl QuoteOrigin {
    /// Whether the model wrote the quote.
    pub fn is_model(&self) -> bool {
        *self == QuoteOrigin::Model
    }

    /// The origin as written in JSON (`model`, `evidence`).
    pub fn as_str(self) -> &'static str {
        match self {
            QuoteOrigin::Model => "model",
            QuoteOrigin::Evidence => "evidence",
        }
    }
}

/// How many quotes of an answer (or of many) had each status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct QuoteCounts {
    /// Quotes found in the node their marker names.
    #[serde(default)]
    pub verified: u64,
    /// Quotes found in another source (re-pointed).
    #[serde(default)]
    pub misattributed: u64,
    /// Quotes found in no source shown (fabricated).
    #[serde(default)]
    pub not_found: u64,
    /// Quotes not checked: too short, too long or unclosed (absent from JSON when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unchecked: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl QuoteCounts {
    /// The counts of `quotes`.
    pub fn of<'a>(quotes: impl IntoIterator<Item = &'a Quote>) -> Self {
        let mut c = QuoteCounts::default();
        for q in quotes {
            c.add_status(q.status);
        }
        c
    }

    fn add_status(&mut self, status: QuoteStatus) {
        match status {
            QuoteStatus::Verified => self.verified += 1,
            QuoteStatus::Misattributed => self.misattributed += 1,
            QuoteStatus::NotFound => self.not_found += 1,
            QuoteStatus::Unchecked => self.unchecked += 1,
        }
    }

    /// These counts plus `other`'s.
    pub fn plus(self, other: QuoteCounts) -> Self {
        // Counts may be read from files: they saturate, never wrap.
        QuoteCounts {
            verified: self.verified.saturating_add(other.verified),
            misattributed: self.misattributed.saturating_add(other.misattributed),
            not_found: self.not_found.saturating_add(other.not_found),
            unchecked: self.unchecked.saturating_add(other.unchecked),
        }
    }

    /// All quotes counted.
    pub fn total(&self) -> u64 {
        self.verified
            .saturating_add(self.misattributed)
            .saturating_add(self.not_found)
            .saturating_add(self.unchecked)
    }
}

/// A number in a cited sentence that none of the sentence's cited sources contains.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct UnsupportedNumber {
    /// The number as written.
    pub number: String,
    /// The sentence's markers, as numbered in the final answer (at most
    /// [`MAX_SENTENCE_SOURCES`](super::MAX_SENTENCE_SOURCES)).
    pub markers: Vec<u32>,
    /// The sentence, without its markers (cut at 300 characters).
    pub sentence: String,
}
