//! Quote mode: `[n] "exact words"` citations checked against the cited node's text, and
//! numbers of cited sentences checked against their sources.
//!
//! The check reads the answer as the model wrote it (before renumbering), so it works the
//! same whether markers are shown or hidden, streamed or not. Quotes are matched with
//! [`crate::text::normalized`]: NFC, case, whitespace and quote marks aside, on word
//! boundaries only.
//!
//! Its work is linear in the answer, plus the searches: each checked quote is looked for
//! (at most twice: as written, then without its trailing punctuation) in the sources its
//! marker names, then in the other sources shown, each normalised once. At most
//! [`MAX_CHECKED_MARKERS`] markers are read and [`MAX_QUOTES`] quotes checked, and the
//! check stops, every few thousand steps, once the flag its [`Work`] polls is set (its
//! caller is gone).

use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;

use super::constructed::EvidenceQuotes;
use super::markers::{marker_at, markers, strip_markers};
use crate::text::normalized::{Needle, Normalized};

/// The most quotes checked and listed in one answer. A later quote is not read: its
/// marker's use counts in [`super::Citations::unchecked_markers`] and supports nothing.
pub const MAX_QUOTES: usize = 256;
/// The longest quote read, in characters: a quote whose closing mark does not come within
/// this many is listed as [`QuoteStatus::Unchecked`] ([`UncheckedReason::TooLong`]).
pub const MAX_QUOTE_CHARS: usize = 1000;
/// The most markers the quote check reads in one answer (a marker naming several sources
/// counts once; markers naming no source shown do not count). Later ones are not checked:
/// they count in [`super::Citations::unchecked_markers`] and support no citation.
pub const MAX_CHECKED_MARKERS: usize = 1024;
/// A quote is checked when it has at least this many words...
pub const MIN_QUOTE_WORDS: usize = 2;
/// ... or at least this many letters and digits; a shorter quote (`"a"`, `"safe"`) is
/// listed as [`QuoteStatus::Unchecked`] ([`UncheckedReason::TooShort`]), never verified.
pub const MIN_QUOTE_LETTERS: usize = 8;
/// The most numbers flagged in one answer.
pub const MAX_UNSUPPORTED_NUMBERS: usize = 256;
/// A cited sentence's numbers are looked for in at most this many of the sources it
/// cites (the first ones), and [`UnsupportedNumber::markers`] lists at most this many.
pub const MAX_SENTENCE_SOURCES: usize = 64;
/// A flagged number's sentence is cut to this many characters.
const MAX_SENTENCE_CHARS: usize = 300;
/// The check polls its stop flag once every this many steps.
const POLL_EVERY: u64 = 4096;

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
    /// Fewer than [`MIN_QUOTE_WORDS`] words and [`MIN_QUOTE_LETTERS`] letters: found
    /// almost anywhere, so it proves nothing.
    TooShort,
    /// No closing mark within [`MAX_QUOTE_CHARS`] characters.
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
    /// its closing mark, its first [`MAX_QUOTE_CHARS`] characters).
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
    /// [`MAX_SENTENCE_SOURCES`]).
    pub markers: Vec<u32>,
    /// The sentence, without its markers (cut at 300 characters).
    pub sentence: String,
}

/// The work a check has done, in steps (characters read, sources' bytes searched,
/// lookups made), and the flag that stops it: set once its caller is gone.
#[derive(Debug)]
pub(crate) struct Work<'a> {
    steps: u64,
    next_poll: u64,
    stop: &'a AtomicBool,
}

/// The check stopped before its end: its caller is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stopped;

impl<'a> Work<'a> {
    /// No work done yet; the check stops once `stop` is set.
    pub(crate) fn new(stop: &'a AtomicBool) -> Self {
        Work {
            steps: 0,
            next_poll: 0,
            stop,
        }
    }

    /// The steps counted so far.
    pub(crate) fn steps(&self) -> u64 {
        self.steps
    }

    /// Counts `n` steps (about to be done); every [`POLL_EVERY`] steps, stops when asked.
    pub(crate) fn step(&mut self, n: usize) -> Result<(), Stopped> {
        self.steps = self.steps.saturating_add(n as u64);
        if self.steps >= self.next_poll {
            self.next_poll = self.steps.saturating_add(POLL_EVERY);
            if self.stop.load(Ordering::Relaxed) {
                return Err(Stopped);
            }
        }
        Ok(())
    }
}

/// What the quote check gives the ledger.
#[derive(Debug, Default)]
pub(crate) struct QuoteReport {
    pub(crate) quotes: Vec<Quote>,
    pub(crate) unsupported_numbers: Vec<UnsupportedNumber>,
    /// Source numbers (original) cited by at least one use that was not a failed quote.
    pub(crate) supported: BTreeSet<u32>,
    /// Source numbers (original) re-pointed to other sources (original numbers).
    pub(crate) repointed: Vec<(u32, u32)>,
    /// Uses of markers not checked (past [`MAX_CHECKED_MARKERS`] markers, or with a quote
    /// past [`MAX_QUOTES`]).
    pub(crate) unchecked_markers: usize,
}

/// The sources a check reads: node ids and texts by source number - 1.
pub(crate) struct Sources<'a> {
    pub(crate) ids: &'a [String],
    pub(crate) texts: &'a [String],
    /// The numbers the answer could cite (what its prompt showed).
    pub(crate) allowed: &'a BTreeSet<u32>,
    /// The evidence sentences each source was shown as (by number - 1), when the
    /// evidence stage chose them: a bare marker gets one as its quote.
    pub(crate) evidence: Option<&'a [Vec<crate::evidence::EvidenceSpan>]>,
}

/// The index of source `n` (numbered from 1).
fn index(n: u32) -> Option<usize> {
    (n as usize).checked_sub(1)
}

/// A marker in the raw answer: byte range and its allowed source numbers, each once.
struct Marker {
    start: usize,
    end: usize,
    numbers: Vec<u32>,
}

/// The markers the check reads, and how many naming an allowed source it does not.
struct Scan {
    checked: Vec<Marker>,
    unchecked: usize,
}

/// Every marker of `text` naming a source in `allowed` (the others are dropped, as
/// [`super::MarkerRewriter`] drops them), the first [`MAX_CHECKED_MARKERS`] read.
fn scan_markers(text: &str, allowed: &BTreeSet<u32>, work: &mut Work) -> Result<Scan, Stopped> {
    let mut scan = Scan {
        checked: Vec::new(),
        unchecked: 0,
    };
    let mut read = 0;
    for (start, end, ns) in markers(text) {
        work.step(end.saturating_sub(read) + ns.len())?;
        read = end;
        let mut seen = BTreeSet::new();
        let numbers: Vec<u32> = ns
            .into_iter()
            .filter(|n| allowed.contains(n) && seen.insert(*n))
            .collect();
        if numbers.is_empty() {
            continue;
        }
        if scan.checked.len() < MAX_CHECKED_MARKERS {
            scan.checked.push(Marker {
                start,
                end,
                numbers,
            });
        } else {
            scan.unchecked += 1;
        }
    }
    Ok(scan)
}

/// The marks that close a quote opened with `open`; `None` when `open` opens none.
fn closing_marks(open: char) -> Option<&'static [char]> {
    match open {
        '"' => Some(&['"']),
        '\u{201C}' => Some(&['\u{201D}']),
        '\u{201E}' => Some(&['\u{201C}', '\u{201D}']),
        '\u{00AB}' => Some(&['\u{00BB}']),
        _ => None,
    }
}

/// The quote opening right after byte `at` of `text` (spaces, tabs and a colon may come
/// first): its closing marks and where its text starts.
fn quote_opening(text: &str, at: usize) -> Option<(&'static [char], usize)> {
    let rest = text.get(at..)?;
    let skipped = rest.len() - rest.trim_start_matches([' ', '\t', ':']).len();
    let open = rest.get(skipped..)?.chars().next()?;
    let closers = closing_marks(open)?;
    Some((closers, at + skipped + open.len_utf8()))
}

/// A quote after a marker.
struct RawQuote {
    /// Where the quote ends, after its closing mark (`None`: it has none).
    end: Option<usize>,
    /// Its text without the marks, trimmed (at most [`MAX_QUOTE_CHARS`] characters).
    inside: String,
    /// Why it cannot be checked, when it cannot (no closing mark).
    problem: Option<UncheckedReason>,
}

/// The quote whose text starts at byte `body` of `text`, closed by one of `closers`;
/// `None` when it holds no letter or digit (`""`: not a quote).
fn read_quote(
    text: &str,
    body: usize,
    closers: &[char],
    work: &mut Work,
) -> Result<Option<RawQuote>, Stopped> {
    let rest = text.get(body..).unwrap_or_default();
    let mut end = None;
    let mut cut = rest.len();
    let mut problem = Some(UncheckedReason::Unclosed);
    for (read, (k, c)) in rest.char_indices().enumerate() {
        if closers.contains(&c) {
            cut = k;
            end = Some(body + k + c.len_utf8());
            problem = None;
            break;
        }
        if read == MAX_QUOTE_CHARS {
            cut = k;
            problem = Some(UncheckedReason::TooLong);
            break;
        }
    }
    work.step(cut)?;
    let inside = rest.get(..cut).unwrap_or_default().trim();
    if !inside.chars().any(char::is_alphanumeric) {
        return Ok(None);
    }
    Ok(Some(RawQuote {
        end,
        inside: inside.to_string(),
        problem,
    }))
}

/// The forms of a quote looked for, in order: as written, then without a trailing `.`,
/// `,`, `;`, `:`, `!` or `?` (written inside the quote marks by English style).
fn needles(quote: &str) -> Vec<Needle> {
    let quote = quote.trim();
    let cut = quote
        .trim_end_matches(['.', ',', ';', ':', '!', '?'])
        .trim_end();
    let mut out = vec![Needle::new(quote)];
    if cut != quote && !cut.is_empty() {
        out.push(Needle::new(cut));
    }
    out
}

/// Whether a quote is too short to prove anything ([`MIN_QUOTE_WORDS`],
/// [`MIN_QUOTE_LETTERS`]).
fn too_short(quote: &Needle) -> bool {
    quote.words() < MIN_QUOTE_WORDS && quote.word_chars() < MIN_QUOTE_LETTERS
}

/// Source texts normalised for quotes and read for numbers, each once, when first needed.
struct Cache<'a> {
    sources: &'a Sources<'a>,
    normalized: HashMap<u32, Normalized>,
    numbers: HashMap<u32, HashSet<String>>,
}

impl<'a> Cache<'a> {
    fn new(sources: &'a Sources<'a>) -> Self {
        Cache {
            sources,
            normalized: HashMap::new(),
            numbers: HashMap::new(),
        }
    }

    fn text(&self, n: u32) -> Option<&'a String> {
        self.sources.texts.get(index(n)?)
    }

    /// Where the first of `needles` found in source `n` is (character offsets).
    fn find(
        &mut self,
        n: u32,
        needles: &[Needle],
        work: &mut Work,
    ) -> Result<Option<(usize, usize)>, Stopped> {
        let Some(text) = self.text(n) else {
            return Ok(None);
        };
        let hay = match self.normalized.entry(n) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                work.step(text.len())?;
                e.insert(Normalized::new(text))
            }
        };
        for needle in needles {
            work.step(hay.len())?;
            if let Some(at) = hay.find(needle) {
                return Ok(Some(at));
            }
        }
        Ok(None)
    }

    /// Whether source `n` has the number `number` (normalised as [`numbers_of`] gives it).
    fn has_number(&mut self, n: u32, number: &str, work: &mut Work) -> Result<bool, Stopped> {
        work.step(1)?;
        let text = self.text(n).map(String::as_str).unwrap_or_default();
        let numbers = match self.numbers.entry(n) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                work.step(text.len())?;
                e.insert(numbers_of(text).into_iter().map(|(_, n)| n).collect())
            }
        };
        Ok(numbers.contains(number))
    }

    fn id(&self, n: u32) -> String {
        index(n)
            .and_then(|i| self.sources.ids.get(i))
            .cloned()
            .unwrap_or_default()
    }
}

/// Numbers written in `text`: (as written, normalised without thousands separators).
/// A run of digits may hold `.` or `,` between digits (`3.5`, `1,000`); a run that
/// continues a word (`a1`) is not a number.
fn numbers_of(text: &str) -> Vec<(String, String)> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut after_word = false;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if !c.is_ascii_digit() || after_word {
            after_word = c.is_alphanumeric();
            continue;
        }
        let mut j = i;
        loop {
            match bytes.get(j) {
                Some(d) if d.is_ascii_digit() => j += 1,
                Some(b'.' | b',') if bytes.get(j + 1).is_some_and(u8::is_ascii_digit) => j += 2,
                _ => break,
            }
        }
        let written = text.get(i..j).unwrap_or_default();
        out.push((written.to_string(), written.replace(',', "")));
        while chars.next_if(|&(k, _)| k < j).is_some() {}
        after_word = true;
    }
    out
}

/// What the check found for one quote: the source it is in and where, when found.
enum Outcome {
    Verified(u32, (usize, usize)),
    Misattributed(u32, (usize, usize)),
    NotFound,
    Unchecked(UncheckedReason),
}

/// Looks for `needles` in the sources `marker` names, then in every other source shown.
fn search(
    marker: &Marker,
    needles: &[Needle],
    allowed: &BTreeSet<u32>,
    cache: &mut Cache<'_>,
    work: &mut Work,
) -> Result<Outcome, Stopped> {
    for &n in &marker.numbers {
        if let Some(at) = cache.find(n, needles, work)? {
            return Ok(Outcome::Verified(n, at));
        }
    }
    let marked: BTreeSet<u32> = marker.numbers.iter().copied().collect();
    for &n in allowed.difference(&marked) {
        if let Some(at) = cache.find(n, needles, work)? {
            return Ok(Outcome::Misattributed(n, at));
        }
    }
    Ok(Outcome::NotFound)
}

/// Checks the quotes and numbers of the answer `raw` (as the model wrote it) against
/// `sources`; `new_number` gives a source's number in the final answer. Stops early
/// (`Err(Stopped)`) once `work`'s flag is set.
pub(crate) fn check(
    raw: &str,
    sources: &Sources<'_>,
    new_number: impl Fn(u32) -> Option<u32>,
    work: &mut Work,
) -> Result<QuoteReport, Stopped> {
    let scan = scan_markers(raw, sources.allowed, work)?;
    let mut cache = Cache::new(sources);
    let mut made = sources
        .evidence
        .map(|spans| EvidenceQuotes::new(spans, sources.texts));
    let mut report = QuoteReport {
        unchecked_markers: scan.unchecked,
        ..QuoteReport::default()
    };
    // The sources each marker's use stands for (original numbers), for the numbers check.
    let mut backing: Vec<Vec<u32>> = Vec::with_capacity(scan.checked.len());
    let mut quote_spans: Vec<(usize, usize)> = Vec::new();
    // Where the last closed quote read ends: a marker before it is inside that quote.
    let mut quoted_to = 0;
    for m in &scan.checked {
        work.step(1)?;
        let first = m.numbers.first().copied().unwrap_or_default();
        let opening = (m.start >= quoted_to)
            .then(|| quote_opening(raw, m.end))
            .flatten();
        let quote = match opening {
            None => None,
            Some(_) if report.quotes.len() >= MAX_QUOTES => {
                report.unchecked_markers += 1;
                backing.push(Vec::new());
                continue;
            }
            Some((closers, body)) => read_quote(raw, body, closers, work)?,
        };
        let Some(q) = quote else {
            report.supported.extend(&m.numbers);
            backing.push(m.numbers.clone());
            if let Some(made) = &mut made
                && report.quotes.len() < MAX_QUOTES
                && let Some(q) = made.quote_for(raw, m.start, first, work)?
            {
                report.quotes.push(Quote {
                    marker: new_number(first).unwrap_or(first),
                    node_id: cache.id(first),
                    marked_node_id: cache.id(first),
                    quote: q.text,
                    status: QuoteStatus::Verified,
                    reason: None,
                    start: Some(q.start),
                    end: Some(q.end),
                    origin: QuoteOrigin::Evidence,
                });
            }
            continue;
        };
        if let Some(end) = q.end {
            quoted_to = end;
            quote_spans.push((m.end, end));
        }
        let found = match q.problem {
            Some(reason) => Outcome::Unchecked(reason),
            None => {
                let needles = needles(&q.inside);
                match needles.first() {
                    Some(n) if !too_short(n) => {
                        search(m, &needles, sources.allowed, &mut cache, work)?
                    }
                    _ => Outcome::Unchecked(UncheckedReason::TooShort),
                }
            }
        };
        let (status, at_source, at, reason) = match found {
            Outcome::Verified(n, at) => {
                report.supported.insert(n);
                backing.push(vec![n]);
                (QuoteStatus::Verified, n, Some(at), None)
            }
            Outcome::Misattributed(n, at) => {
                report.repointed.push((first, n));
                backing.push(vec![n]);
                (QuoteStatus::Misattributed, n, Some(at), None)
            }
            Outcome::NotFound => {
                backing.push(Vec::new());
                (QuoteStatus::NotFound, first, None, None)
            }
            Outcome::Unchecked(reason) => {
                backing.push(Vec::new());
                (QuoteStatus::Unchecked, first, None, Some(reason))
            }
        };
        let marked = if status == QuoteStatus::Verified {
            at_source
        } else {
            first
        };
        report.quotes.push(Quote {
            marker: new_number(marked).unwrap_or(marked),
            node_id: cache.id(at_source),
            marked_node_id: cache.id(marked),
            quote: q.inside,
            status,
            reason,
            start: at.map(|a| a.0),
            end: at.map(|a| a.1),
            origin: QuoteOrigin::Model,
        });
    }
    let cited = cited_sentences(raw, &scan.checked, &backing, &quote_spans, work)?;
    report.unsupported_numbers = check_numbers(raw, &cited, &mut cache, work)?
        .into_iter()
        .map(|(number, numbers, sentence)| UnsupportedNumber {
            number,
            markers: numbers
                .into_iter()
                .map(|n| new_number(n).unwrap_or(n))
                .collect(),
            sentence,
        })
        .collect();
    Ok(report)
}

/// A sentence of the answer with markers: its byte range, the numbers its markers show
/// and the sources their uses stand for (each at most [`MAX_SENTENCE_SOURCES`], each once).
#[derive(Debug, Default)]
struct CitedSentence {
    /// Its place among the answer's sentences.
    index: usize,
    start: usize,
    end: usize,
    shown: Vec<u32>,
    backed: Vec<u32>,
}

/// Adds `numbers` to `to`, each once, while `to` has fewer than [`MAX_SENTENCE_SOURCES`].
fn add_sources(to: &mut Vec<u32>, numbers: &[u32]) {
    for &n in numbers {
        if to.len() >= MAX_SENTENCE_SOURCES {
            return;
        }
        if !to.contains(&n) {
            to.push(n);
        }
    }
}

/// The sentences of `raw` that `markers` cite, in one pass. A sentence ends after `.`,
/// `!` or `?` before whitespace, and at a line break; never inside a quote of
/// `quote_spans`. A marker cites the sentence it is in, or the one before when only
/// markers and quotes come before it in its sentence ("... months. [2]").
fn cited_sentences(
    raw: &str,
    markers: &[Marker],
    backing: &[Vec<u32>],
    quote_spans: &[(usize, usize)],
    work: &mut Work,
) -> Result<Vec<CitedSentence>, Stopped> {
    let mut out: Vec<CitedSentence> = Vec::new();
    let mut sentence = 0;
    let mut start = 0;
    let mut previous = (0, 0);
    // Whether a letter or digit outside markers and quotes came in this sentence so far,
    // and the marks closing the quote open there, if any.
    let mut words = false;
    let mut open: Option<&'static [char]> = None;
    let mut uses = markers.iter().zip(backing).peekable();
    let mut spans = quote_spans.iter().peekable();
    let mut skip_to = 0;
    let mut chars = raw.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        work.step(1)?;
        if i < skip_to {
            continue;
        }
        if c == '['
            && let Some((end, _)) = marker_at(raw, i)
        {
            while let Some((m, backed)) = uses.next_if(|(m, _)| m.start <= i) {
                if m.start != i {
                    continue;
                }
                let s = if words || sentence == 0 {
                    sentence
                } else {
                    sentence - 1
                };
                if out.last().is_none_or(|c| c.index != s) {
                    let (a, b) = if s == sentence { (start, 0) } else { previous };
                    out.push(CitedSentence {
                        index: s,
                        start: a,
                        end: b,
                        ..CitedSentence::default()
                    });
                }
                if let Some(c) = out.last_mut() {
                    add_sources(&mut c.shown, &m.numbers);
                    add_sources(&mut c.backed, backed);
                }
            }
            skip_to = end;
            continue;
        }
        while spans.next_if(|q| q.1 <= i).is_some() {}
        let in_quote = spans.peek().is_some_and(|q| q.0 <= i);
        match open {
            Some(closers) if closers.contains(&c) => open = None,
            Some(_) => {}
            None => match closing_marks(c) {
                Some(closers) => open = Some(closers),
                None => words |= c.is_alphanumeric(),
            },
        }
        if in_quote {
            continue;
        }
        let next = chars.peek().map(|&(_, n)| n);
        let end = match c {
            '\n' => Some(i),
            '.' | '!' | '?' if next.is_none_or(char::is_whitespace) => Some(i + 1),
            _ => None,
        };
        if let Some(end) = end {
            end_sentence(&mut out, sentence, end);
            previous = (start, end);
            sentence += 1;
            start = end;
            words = false;
            open = None;
        }
    }
    end_sentence(&mut out, sentence, raw.len());
    Ok(out)
}

/// Sets the end of sentence `index` when it is the last one cited.
fn end_sentence(out: &mut [CitedSentence], index: usize, end: usize) {
    if let Some(c) = out.last_mut()
        && c.index == index
    {
        c.end = end;
    }
}

/// (number, the sentence's source numbers, the sentence) for each number of a cited
/// sentence that none of its sources contains.
fn check_numbers(
    raw: &str,
    cited: &[CitedSentence],
    cache: &mut Cache<'_>,
    work: &mut Work,
) -> Result<Vec<(String, Vec<u32>, String)>, Stopped> {
    let mut out = Vec::new();
    for s in cited {
        let sentence = raw.get(s.start..s.end).unwrap_or_default();
        work.step(sentence.len())?;
        let words = strip_markers(sentence);
        for (written, normal) in numbers_of(&words) {
            if out.len() >= MAX_UNSUPPORTED_NUMBERS {
                return Ok(out);
            }
            let mut supported = false;
            for &n in &s.backed {
                if cache.has_number(n, &normal, work)? {
                    supported = true;
                    break;
                }
            }
            if !supported {
                out.push((
                    written,
                    s.shown.clone(),
                    words.chars().take(MAX_SENTENCE_CHARS).collect(),
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sources<'a>(
        ids: &'a [String],
        texts: &'a [String],
        allowed: &'a BTreeSet<u32>,
    ) -> Sources<'a> {
        Sources {
            ids,
            texts,
            allowed,
            evidence: None,
        }
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// The check of `raw`, to its end.
    fn run(raw: &str, sources: &Sources<'_>) -> QuoteReport {
        let never = AtomicBool::new(false);
        check(raw, sources, Some, &mut Work::new(&never)).unwrap()
    }

    /// The steps the check of `raw` takes.
    fn steps(raw: &str, sources: &Sources<'_>) -> u64 {
        let never = AtomicBool::new(false);
        let mut work = Work::new(&never);
        check(raw, sources, Some, &mut work).unwrap();
        work.steps()
    }

    #[test]
    fn verified_quotes_give_character_offsets() {
        let ids = strings(&["a", "b"]);
        let texts = strings(&["Café déjà vu: the mirror is cleaned every six months.", "x"]);
        let allowed: BTreeSet<u32> = [1, 2].into();
        let r = run(
            "It is cleaned [1] \"the mirror is cleaned\".",
            &sources(&ids, &texts, &allowed),
        );
        let q = &r.quotes[0];
        assert_eq!(q.status, QuoteStatus::Verified);
        assert_eq!(q.node_id, "a");
        let start = q.start.unwrap();
        let end = q.end.unwrap();
        let text: Vec<char> = texts[0].chars().collect();
        let found: String = text[start..end].iter().collect();
        assert_eq!(found, "the mirror is cleaned");
        assert_eq!(start, 14);
        assert_ne!(
            texts[0].find("the mirror").unwrap(),
            start,
            "bytes differ from chars"
        );
    }

    #[test]
    fn normalises_space_case_and_quote_marks() {
        let ids = strings(&["a"]);
        let texts = strings(&["He said \u{201C}open  the\n dome\u{201D} at dusk."]);
        let allowed: BTreeSet<u32> = [1].into();
        let r = run(
            "Yes [1] \u{201C}said \"OPEN the dome\" AT dusk.\u{201D}",
            &sources(&ids, &texts, &allowed),
        );
        assert_eq!(r.quotes[0].status, QuoteStatus::Verified, "{:?}", r.quotes);
        assert_eq!(r.quotes[0].start, Some(3));
    }

    #[test]
    fn misattributed_and_not_found() {
        let ids = strings(&["a", "b"]);
        let texts = strings(&["The dome opens at dusk.", "The mirror is cleaned."]);
        let allowed: BTreeSet<u32> = [1, 2].into();
        let r = run(
            "A [1] \"mirror is cleaned\". B [2] \"made up words\".",
            &sources(&ids, &texts, &allowed),
        );
        assert_eq!(r.quotes[0].status, QuoteStatus::Misattributed);
        assert_eq!(r.quotes[0].node_id, "b");
        assert_eq!(r.quotes[0].marked_node_id, "a");
        assert_eq!(r.quotes[1].status, QuoteStatus::NotFound);
        assert_eq!(r.quotes[1].start, None);
        assert!(r.supported.is_empty());
        assert_eq!(r.repointed, vec![(1, 2)]);
    }

    #[test]
    fn flags_numbers_missing_from_the_cited_sources() {
        let ids = strings(&["a", "b"]);
        let texts = strings(&["Cleaned every 6 months, 1,000 visitors.", "Built in 1897."]);
        let allowed: BTreeSet<u32> = [1, 2].into();
        let r = run(
            "Every 6 months [1]. It has 1000 visitors and 3.5 domes [1]. Built 1897 [2]. Age 12.",
            &sources(&ids, &texts, &allowed),
        );
        let flagged: Vec<&str> = r
            .unsupported_numbers
            .iter()
            .map(|u| u.number.as_str())
            .collect();
        assert_eq!(flagged, vec!["3.5"]);
        assert_eq!(r.unsupported_numbers[0].markers, vec![1]);
        assert_eq!(
            r.unsupported_numbers[0].sentence,
            "It has 1000 visitors and 3.5 domes."
        );
    }

    #[test]
    fn a_marker_after_the_full_stop_cites_the_sentence_before() {
        let ids = strings(&["a"]);
        let texts = strings(&["Open 9 to 5."]);
        let allowed: BTreeSet<u32> = [1].into();
        let r = run(
            "Open 9 to 6. [1] \"Open 9 to 5\"",
            &sources(&ids, &texts, &allowed),
        );
        assert_eq!(r.quotes[0].status, QuoteStatus::Verified);
        assert_eq!(r.unsupported_numbers.len(), 1);
        assert_eq!(r.unsupported_numbers[0].number, "6");
    }

    #[test]
    fn markers_without_quotes_and_other_brackets() {
        let allowed: BTreeSet<u32> = [1, 2].into();
        let never = AtomicBool::new(false);
        let mut work = Work::new(&never);
        let ms = scan_markers("a [x] [1, 9] [2] b[3] [2, 2]", &allowed, &mut work).unwrap();
        assert_eq!(ms.checked.len(), 3);
        assert_eq!(ms.checked[0].numbers, vec![1]);
        assert_eq!(ms.checked[2].numbers, vec![2]);
        let read = |text: &str, at: usize| {
            let (closers, body) = quote_opening(text, at)?;
            read_quote(text, body, closers, &mut Work::new(&never)).unwrap()
        };
        assert!(read("[1] \"\"", 3).is_none());
        assert_eq!(read(" : \"ok\" rest", 0).unwrap().inside, "ok");
        assert!(read(" ok", 0).is_none());
    }

    #[test]
    fn a_quote_matches_only_whole_words_of_its_source() {
        let ids = strings(&["a"]);
        let texts = strings(&["The drug is ineffective and unsafe for children aged 13."]);
        let allowed: BTreeSet<u32> = [1].into();
        let r = run(
            "It works [1] \"effective\". Safe [1] \"safe for children\". Age [1] \"aged 3\". \
             Unsafe [1] \"unsafe for children\".",
            &sources(&ids, &texts, &allowed),
        );
        let statuses: Vec<QuoteStatus> = r.quotes.iter().map(|q| q.status).collect();
        use QuoteStatus::{NotFound, Verified};
        assert_eq!(statuses, vec![NotFound, NotFound, NotFound, Verified]);
        assert_eq!((r.quotes[3].start, r.quotes[3].end), (Some(28), Some(47)));
    }

    #[test]
    fn short_quotes_are_never_verified() {
        let ids = strings(&["a"]);
        let texts = strings(&["A dome, a mirror and a telescope."]);
        let allowed: BTreeSet<u32> = [1].into();
        let r = run(
            "One [1] \"a\". Two [1] \"mirror\". Three [1] \"a mirror\". Long [1] \"telescope\".",
            &sources(&ids, &texts, &allowed),
        );
        let got: Vec<(QuoteStatus, Option<UncheckedReason>)> =
            r.quotes.iter().map(|q| (q.status, q.reason)).collect();
        let short = (QuoteStatus::Unchecked, Some(UncheckedReason::TooShort));
        let verified = (QuoteStatus::Verified, None);
        assert_eq!(got, vec![short, short, verified, verified]);
        assert_eq!(r.quotes[0].start, None);
    }

    #[test]
    fn a_quote_closes_only_with_its_own_mark() {
        let ids = strings(&["a"]);
        let texts = strings(&["The dome opens at dusk."]);
        let allowed: BTreeSet<u32> = [1].into();
        let src = sources(&ids, &texts, &allowed);
        // A curly quote closed by a straight mark is not closed: the straight mark and
        // what follows are part of it, so nothing is verified.
        let r = run("At dusk [1] \u{201C}the dome opens\" at dusk.", &src);
        assert_eq!(r.quotes[0].status, QuoteStatus::Unchecked);
        assert_eq!(r.quotes[0].reason, Some(UncheckedReason::Unclosed));
        assert!(r.supported.is_empty(), "an unclosed quote supports nothing");
        // A guillemet closes with its own mark, and so does a low-high German quote.
        let r = run(
            "At dusk [1] \u{ab}the dome opens\u{bb}, [1] \u{201E}opens at dusk\u{201C}.",
            &src,
        );
        assert_eq!(r.quotes.len(), 2);
        assert!(r.quotes.iter().all(|q| q.status == QuoteStatus::Verified));
        assert_eq!(r.supported, [1].into());
    }

    #[test]
    fn over_long_and_unclosed_quotes_are_listed_and_support_nothing() {
        let ids = strings(&["a", "b"]);
        let texts = strings(&["The dome opens at dusk.", "The mirror is cleaned."]);
        let allowed: BTreeSet<u32> = [1, 2].into();
        let long = "words ".repeat(MAX_QUOTE_CHARS / 6 + 2);
        let raw = format!("Long [1] \"{long}\" and open [2] \"the mirror is cleaned");
        let r = run(&raw, &sources(&ids, &texts, &allowed));
        let got: Vec<Option<UncheckedReason>> = r.quotes.iter().map(|q| q.reason).collect();
        assert_eq!(
            got,
            vec![
                Some(UncheckedReason::TooLong),
                Some(UncheckedReason::Unclosed)
            ]
        );
        assert!(r.quotes.iter().all(|q| q.status == QuoteStatus::Unchecked));
        assert!(r.quotes[0].quote.chars().count() <= MAX_QUOTE_CHARS);
        assert_eq!(r.quotes[1].quote, "the mirror is cleaned");
        assert!(r.supported.is_empty(), "{:?}", r.supported);
        assert!(r.repointed.is_empty());
    }

    #[test]
    fn text_is_compared_in_nfc_on_both_sides() {
        let ids = strings(&["a", "b"]);
        // Source 1 writes "é" as e and a combining accent; source 2 precomposed.
        let texts = strings(&[
            "Le caf\u{65}\u{301} ferme t\u{f4}t.",
            "Un th\u{e9} glac\u{e9}.",
        ]);
        let allowed: BTreeSet<u32> = [1, 2].into();
        let r = run(
            "Early [1] \"caf\u{e9} ferme\". Tea [2] \"the\u{301} glace\u{301}\".",
            &sources(&ids, &texts, &allowed),
        );
        assert_eq!(r.quotes[0].status, QuoteStatus::Verified, "{:?}", r.quotes);
        assert_eq!((r.quotes[0].start, r.quotes[0].end), (Some(3), Some(14)));
        assert_eq!(r.quotes[1].status, QuoteStatus::Verified, "{:?}", r.quotes);
        assert_eq!((r.quotes[1].start, r.quotes[1].end), (Some(3), Some(12)));
    }

    #[test]
    fn markers_past_the_cap_are_counted_and_support_nothing() {
        let ids = strings(&["a", "b"]);
        let texts = strings(&["The dome opens at dusk.", "The mirror is cleaned."]);
        let allowed: BTreeSet<u32> = [1, 2].into();
        let raw = format!("{}Late [2].", "Dusk [1]. ".repeat(MAX_CHECKED_MARKERS));
        let r = run(&raw, &sources(&ids, &texts, &allowed));
        assert_eq!(r.unchecked_markers, 1);
        assert_eq!(r.supported, [1].into(), "[2] was never read");
        // Quotes past MAX_QUOTES are not read either, and support nothing.
        let raw = format!(
            "{}Late [2] \"the mirror is cleaned\".",
            "Dusk [1] \"the dome opens\". ".repeat(MAX_QUOTES)
        );
        let r = run(&raw, &sources(&ids, &texts, &allowed));
        assert_eq!(r.quotes.len(), MAX_QUOTES);
        assert_eq!(r.unchecked_markers, 1);
        assert_eq!(r.supported, [1].into());
    }

    /// The steps of checking `unit` repeated `n` and `2n` times: the second is at most
    /// twice the first plus `slack`.
    fn assert_linear(unit: &str, n: usize, slack: u64, sources: &Sources<'_>) {
        let one = steps(&unit.repeat(n), sources);
        let two = steps(&unit.repeat(2 * n), sources);
        assert!(
            two <= 2 * one + slack,
            "{n} x {unit:?}: {one} steps, twice as many: {two}"
        );
    }

    #[test]
    fn the_check_is_linear_in_the_answer() {
        let ids = strings(&["a", "b"]);
        let texts = strings(&[
            "The dome opens at dusk; 3 people, 12 domes.",
            "The mirror is cleaned every 6 months.",
        ]);
        let allowed: BTreeSet<u32> = [1, 2].into();
        let src = sources(&ids, &texts, &allowed);
        // The attack: one sentence of nothing but markers, below and past the
        // cap of markers read.
        assert_linear("[1] ", 400, 1000, &src);
        assert_linear("[1] ", 4 * MAX_CHECKED_MARKERS, 1000, &src);
        // Long quotes, each searched for: below and past the cap of quotes checked.
        let quote = format!("[1] \"{}\" ", "made up words ".repeat(70));
        assert_linear(&quote, 100, 10_000, &src);
        assert_linear(&quote, 2 * MAX_QUOTES, 10_000, &src);
        // Unclosed quotes, numbers in cited sentences, brackets that open no marker.
        assert_linear("[1] \u{201C}no end ", 4 * MAX_QUOTES, 10_000, &src);
        assert_linear("3 people and 12 domes, 7 more [1, 2] ", 300, 10_000, &src);
        assert_linear("[[[[[[[[[[[1", 1000, 1000, &src);
        assert_linear("[1111111111111111111111111111", 1000, 1000, &src);
    }

    #[test]
    fn a_stopped_check_returns_early() {
        let ids = strings(&["a"]);
        let texts = strings(&["The dome opens at dusk."]);
        let allowed: BTreeSet<u32> = [1].into();
        let src = sources(&ids, &texts, &allowed);
        let raw = "Dusk [1] \"the dome opens at dusk\". ".repeat(1000);
        let full = steps(&raw, &src);
        let stop = AtomicBool::new(true);
        let mut work = Work::new(&stop);
        assert_eq!(check(&raw, &src, Some, &mut work).err(), Some(Stopped));
        assert!(
            work.steps() <= POLL_EVERY,
            "{} steps of {full}",
            work.steps()
        );
        assert!(full > 10 * POLL_EVERY, "{full}");
    }
}
