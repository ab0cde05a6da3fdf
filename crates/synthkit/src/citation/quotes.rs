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

use super::constructed::EvidenceQuotes;
use super::markers::{marker_at, markers, strip_markers};
use super::quote::{Quote, QuoteOrigin, QuoteStatus, UncheckedReason, UnsupportedNumber};
use super::work::{Stopped, Work};
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
#[path = "quotes_tests.rs"]
mod tests;
