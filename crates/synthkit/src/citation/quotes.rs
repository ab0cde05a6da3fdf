//! Quote mode: `[n] "exact words"` citations checked against the cited node's text, and
//! numbers of cited sentences checked against their sources.
//!
//! The check reads the answer as the model wrote it (before renumbering), so it works the
//! same whether markers are shown or hidden, streamed or not.

use std::collections::{BTreeSet, HashMap};

use serde::Serialize;

use super::markers::{MAX_MARKER_LEN, marker_char, parse_marker, strip_markers};

/// The most quotes checked in one answer; later ones are left unchecked (not listed).
pub const MAX_QUOTES: usize = 256;
/// The longest quote read, in characters: a longer run after `[n] "` is not a quote.
pub const MAX_QUOTE_CHARS: usize = 1000;
/// The most numbers flagged in one answer.
pub const MAX_UNSUPPORTED_NUMBERS: usize = 256;
/// A flagged number's sentence is cut to this many characters.
const MAX_SENTENCE_CHARS: usize = 300;

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
}

impl QuoteStatus {
    /// The status as written in JSON (`verified`, `misattributed`, `not_found`).
    pub fn as_str(self) -> &'static str {
        match self {
            QuoteStatus::Verified => "verified",
            QuoteStatus::Misattributed => "misattributed",
            QuoteStatus::NotFound => "not_found",
        }
    }
}

impl std::fmt::Display for QuoteStatus {
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
    /// node the marker names when it was not found.
    pub node_id: String,
    /// The node the marker names (differs from `node_id` only when misattributed).
    pub marked_node_id: String,
    /// The quote as written in the answer, without its quote marks.
    pub quote: String,
    /// What the check found.
    pub status: QuoteStatus,
    /// Where the quote starts in `node_id`'s text, in characters (not bytes); `None` when
    /// not found.
    pub start: Option<usize>,
    /// Where the quote ends (exclusive) in `node_id`'s text, in characters.
    pub end: Option<usize>,
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
        }
    }

    /// These counts plus `other`'s.
    pub fn plus(self, other: QuoteCounts) -> Self {
        QuoteCounts {
            verified: self.verified + other.verified,
            misattributed: self.misattributed + other.misattributed,
            not_found: self.not_found + other.not_found,
        }
    }

    /// All quotes counted.
    pub fn total(&self) -> u64 {
        self.verified + self.misattributed + self.not_found
    }
}

/// A number in a cited sentence that none of the sentence's cited sources contains.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct UnsupportedNumber {
    /// The number as written.
    pub number: String,
    /// The sentence's markers, as numbered in the final answer.
    pub markers: Vec<u32>,
    /// The sentence, without its markers (cut at 300 characters).
    pub sentence: String,
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
}

/// The sources a check reads: node ids and texts by source number - 1.
pub(crate) struct Sources<'a> {
    pub(crate) ids: &'a [String],
    pub(crate) texts: &'a [String],
    /// The numbers the answer could cite (what its prompt showed).
    pub(crate) allowed: &'a BTreeSet<u32>,
}

/// A marker in the raw answer: byte range and its allowed source numbers.
struct Marker {
    start: usize,
    end: usize,
    numbers: Vec<u32>,
}

/// A quote after a marker: byte range (with its quote marks) and its inside.
struct RawQuote {
    end: usize,
    inside: String,
}

/// Every marker of `text`, read as [`super::MarkerRewriter`] reads them, with the
/// numbers outside `allowed` dropped (a marker left with none is skipped).
fn markers_of(text: &str, allowed: &BTreeSet<u32>) -> Vec<Marker> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(open) = text.get(i..).and_then(|t| t.find('[')) {
        let start = i + open;
        let after = start + 1;
        let mut end = None;
        for (k, c) in text.get(after..).unwrap_or_default().char_indices() {
            if c == ']' {
                end = Some(after + k);
                break;
            }
            if !marker_char(c) || k + 1 >= MAX_MARKER_LEN {
                break;
            }
        }
        let Some(close) = end else {
            i = after;
            continue;
        };
        if let Some(ns) = text.get(after..close).and_then(parse_marker) {
            let numbers: Vec<u32> = ns.into_iter().filter(|n| allowed.contains(n)).collect();
            if !numbers.is_empty() {
                out.push(Marker {
                    start,
                    end: close + 1,
                    numbers,
                });
            }
        }
        i = close + 1;
    }
    out
}

fn opening_quote(c: char) -> bool {
    matches!(c, '"' | '\u{201C}' | '\u{201E}' | '\u{00AB}')
}

fn closing_quote(c: char) -> bool {
    matches!(c, '"' | '\u{201D}' | '\u{201C}' | '\u{00BB}')
}

/// The quote right after byte `at` of `text` (spaces and a colon may come first).
fn quote_at(text: &str, at: usize) -> Option<RawQuote> {
    let rest = text.get(at..)?;
    let skipped = rest.len() - rest.trim_start_matches([' ', '\t', ':']).len();
    let mut chars = rest.get(skipped..)?.char_indices();
    let (_, open) = chars.next()?;
    if !opening_quote(open) {
        return None;
    }
    let body = at + skipped + open.len_utf8();
    for (n, (k, c)) in text.get(body..)?.char_indices().enumerate() {
        if n > MAX_QUOTE_CHARS {
            return None;
        }
        if closing_quote(c) {
            let inside = text.get(body..body + k)?.trim();
            if !inside.chars().any(char::is_alphanumeric) {
                return None;
            }
            return Some(RawQuote {
                end: body + k + c.len_utf8(),
                inside: inside.to_string(),
            });
        }
    }
    None
}

/// Text normalised for matching: lower case, straight quote marks, one space for a run
/// of whitespace; with the character offset in the original of every character.
struct Normalized {
    text: String,
    /// Original character index of each character of `text`.
    origin: Vec<usize>,
}

fn normalize(s: &str) -> Normalized {
    let mut text = String::with_capacity(s.len());
    let mut origin = Vec::with_capacity(s.len());
    let mut in_space = false;
    for (i, c) in s.chars().enumerate() {
        if c.is_whitespace() {
            if !in_space {
                text.push(' ');
                origin.push(i);
            }
            in_space = true;
            continue;
        }
        in_space = false;
        let c = match c {
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' | '\u{2032}' => '\'',
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{00AB}' | '\u{00BB}' => '"',
            c => c,
        };
        for l in c.to_lowercase() {
            text.push(l);
            origin.push(i);
        }
    }
    Normalized { text, origin }
}

/// Where the normalised `needle` is in `hay`: character offsets in the original text.
fn find_in(hay: &Normalized, needle: &str) -> Option<(usize, usize)> {
    if needle.is_empty() {
        return None;
    }
    let at = hay.text.find(needle)?;
    let first = hay.text.get(..at)?.chars().count();
    let len = needle.chars().count();
    let start = *hay.origin.get(first)?;
    let end = *hay.origin.get(first + len - 1)? + 1;
    Some((start, end))
}

/// The forms of a quote tried, in order: as written, then without a trailing `.`, `,`,
/// `;`, `:`, `!` or `?` (written inside the quote marks by English style).
fn needles(quote: &str) -> Vec<String> {
    let n = normalize(quote).text.trim().to_string();
    let cut = n
        .trim_end_matches(['.', ',', ';', ':', '!', '?'])
        .trim_end();
    let mut out = vec![n.clone()];
    if cut != n && !cut.is_empty() {
        out.push(cut.to_string());
    }
    out
}

/// Lazily normalised source texts.
struct Cache<'a> {
    sources: &'a Sources<'a>,
    normalized: HashMap<u32, Normalized>,
    numbers: HashMap<u32, BTreeSet<String>>,
}

impl<'a> Cache<'a> {
    fn find(&mut self, n: u32, needles: &[String]) -> Option<(usize, usize)> {
        let text = self.sources.texts.get(n as usize - 1)?;
        let hay = self.normalized.entry(n).or_insert_with(|| normalize(text));
        needles.iter().find_map(|q| find_in(hay, q))
    }

    fn has_number(&mut self, n: u32, number: &str) -> bool {
        let Some(text) = self.sources.texts.get(n as usize - 1) else {
            return false;
        };
        self.numbers
            .entry(n)
            .or_insert_with(|| numbers_of(text).into_iter().map(|(_, n)| n).collect())
            .contains(number)
    }

    fn id(&self, n: u32) -> String {
        self.sources
            .ids
            .get(n as usize - 1)
            .cloned()
            .unwrap_or_default()
    }
}

/// Numbers written in `text`: (as written, normalised without thousands separators).
/// A run of digits may hold `.` or `,` between digits (`3.5`, `1,000`).
fn numbers_of(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let Some(&c) = chars.get(i) else { break };
        let prev_word = i > 0 && chars.get(i - 1).is_some_and(|p| p.is_alphanumeric());
        if !c.is_ascii_digit() || prev_word {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < chars.len() {
            match chars.get(j) {
                Some(d) if d.is_ascii_digit() => j += 1,
                Some('.' | ',') if chars.get(j + 1).is_some_and(char::is_ascii_digit) => j += 2,
                _ => break,
            }
        }
        let written: String = chars.get(i..j).unwrap_or_default().iter().collect();
        let normal = written.replace(',', "");
        out.push((written, normal));
        i = j;
    }
    out
}

/// Checks the quotes and numbers of the answer `raw` (as the model wrote it) against
/// `sources`; `new_number` gives a source's number in the final answer.
pub(crate) fn check(
    raw: &str,
    sources: &Sources<'_>,
    new_number: impl Fn(u32) -> Option<u32>,
) -> QuoteReport {
    let markers = markers_of(raw, sources.allowed);
    let mut cache = Cache {
        sources,
        normalized: HashMap::new(),
        numbers: HashMap::new(),
    };
    let mut report = QuoteReport::default();
    // The sources each marker's use stands for (original numbers), for the numbers check.
    let mut backing: Vec<Vec<u32>> = Vec::with_capacity(markers.len());
    let mut quote_spans: Vec<(usize, usize)> = Vec::new();
    for m in &markers {
        let first = m.numbers.first().copied().unwrap_or_default();
        let quote = (report.quotes.len() < MAX_QUOTES)
            .then(|| quote_at(raw, m.end))
            .flatten();
        let Some(q) = quote else {
            report.supported.extend(&m.numbers);
            backing.push(m.numbers.clone());
            continue;
        };
        quote_spans.push((m.end, q.end));
        let needles = needles(&q.inside);
        let verified = m
            .numbers
            .iter()
            .find_map(|&n| cache.find(n, &needles).map(|at| (n, at)));
        let (status, at_source, at) = match verified {
            Some((n, at)) => (QuoteStatus::Verified, n, Some(at)),
            None => {
                let other = sources
                    .allowed
                    .iter()
                    .filter(|n| !m.numbers.contains(n))
                    .find_map(|&n| cache.find(n, &needles).map(|at| (n, at)));
                match other {
                    Some((n, at)) => (QuoteStatus::Misattributed, n, Some(at)),
                    None => (QuoteStatus::NotFound, first, None),
                }
            }
        };
        let marked = if status == QuoteStatus::Verified {
            at_source
        } else {
            first
        };
        match status {
            QuoteStatus::Verified => {
                report.supported.insert(at_source);
                backing.push(vec![at_source]);
            }
            QuoteStatus::Misattributed => {
                report.repointed.push((first, at_source));
                backing.push(vec![at_source]);
            }
            QuoteStatus::NotFound => backing.push(Vec::new()),
        }
        report.quotes.push(Quote {
            marker: new_number(marked).unwrap_or(marked),
            node_id: cache.id(at_source),
            marked_node_id: cache.id(marked),
            quote: q.inside,
            status,
            start: at.map(|a| a.0),
            end: at.map(|a| a.1),
        });
    }
    report.unsupported_numbers = check_numbers(raw, &markers, &backing, &quote_spans, &mut cache)
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
    report
}

/// The sentences of `raw` (byte ranges): ends after `.`, `!` or `?` before whitespace, and
/// at line breaks; never inside a quote.
fn sentences(raw: &str, quote_spans: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut iter = raw.char_indices().peekable();
    while let Some((i, c)) = iter.next() {
        if quote_spans.iter().any(|&(a, b)| i >= a && i < b) {
            continue;
        }
        let next = iter.peek().map(|&(_, n)| n);
        let end = match c {
            '\n' => Some(i),
            '.' | '!' | '?' if next.is_none_or(char::is_whitespace) => Some(i + 1),
            _ => None,
        };
        if let Some(end) = end {
            out.push((start, end));
            start = end;
        }
    }
    if start < raw.len() {
        out.push((start, raw.len()));
    }
    out
}

/// (number, the sentence's source numbers, the sentence) for each number of a cited
/// sentence that none of its sources contains.
fn check_numbers(
    raw: &str,
    markers: &[Marker],
    backing: &[Vec<u32>],
    quote_spans: &[(usize, usize)],
    cache: &mut Cache<'_>,
) -> Vec<(String, Vec<u32>, String)> {
    let spans = sentences(raw, quote_spans);
    // Each marker's sentence: the one it starts in, or the one before when only markers
    // and quotes come before it in its sentence ("... months. [2]").
    let mut cited: Vec<(Vec<u32>, Vec<u32>)> = vec![(Vec::new(), Vec::new()); spans.len()];
    for (k, m) in markers.iter().enumerate() {
        let Some(mut s) = spans.iter().position(|&(a, b)| m.start >= a && m.start < b) else {
            continue;
        };
        let head = raw
            .get(spans.get(s).map_or(0, |x| x.0)..m.start)
            .unwrap_or_default();
        if s > 0
            && !strip_markers(&strip_quotes(head))
                .chars()
                .any(char::is_alphanumeric)
        {
            s -= 1;
        }
        if let Some((shown, backed)) = cited.get_mut(s) {
            shown.extend(&m.numbers);
            backed.extend(backing.get(k).into_iter().flatten());
        }
    }
    let mut out = Vec::new();
    for (&(a, b), (shown, backed)) in spans.iter().zip(&cited) {
        if shown.is_empty() {
            continue;
        }
        let sentence = raw.get(a..b).unwrap_or_default();
        let words = strip_markers(sentence);
        for (written, normal) in numbers_of(&words) {
            if out.len() >= MAX_UNSUPPORTED_NUMBERS {
                return out;
            }
            if !backed.iter().any(|&n| cache.has_number(n, &normal)) {
                let mut numbers: Vec<u32> = Vec::new();
                for &n in shown {
                    if !numbers.contains(&n) {
                        numbers.push(n);
                    }
                }
                let clean = strip_markers(sentence);
                out.push((
                    written,
                    numbers,
                    clean.chars().take(MAX_SENTENCE_CHARS).collect(),
                ));
            }
        }
    }
    out
}

/// `text` with quoted runs removed (for deciding whether words come before a marker).
fn strip_quotes(text: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for c in text.chars() {
        if !inside && opening_quote(c) {
            inside = true;
        } else if inside && closing_quote(c) {
            inside = false;
        } else if !inside {
            out.push(c);
        }
    }
    out
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
        }
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn verified_quotes_give_character_offsets() {
        let ids = strings(&["a", "b"]);
        let texts = strings(&["Café déjà vu: the mirror is cleaned every six months.", "x"]);
        let allowed: BTreeSet<u32> = [1, 2].into();
        let r = check(
            "It is cleaned [1] \"the mirror is cleaned\".",
            &sources(&ids, &texts, &allowed),
            Some,
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
        let r = check(
            "Yes [1] \u{201C}said \"OPEN the dome\" AT dusk.\u{201D}",
            &sources(&ids, &texts, &allowed),
            Some,
        );
        assert_eq!(r.quotes[0].status, QuoteStatus::Verified, "{:?}", r.quotes);
        assert_eq!(r.quotes[0].start, Some(3));
    }

    #[test]
    fn misattributed_and_not_found() {
        let ids = strings(&["a", "b"]);
        let texts = strings(&["The dome opens at dusk.", "The mirror is cleaned."]);
        let allowed: BTreeSet<u32> = [1, 2].into();
        let r = check(
            "A [1] \"mirror is cleaned\". B [2] \"made up words\".",
            &sources(&ids, &texts, &allowed),
            Some,
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
        let r = check(
            "Every 6 months [1]. It has 1000 visitors and 3.5 domes [1]. Built 1897 [2]. Age 12.",
            &sources(&ids, &texts, &allowed),
            Some,
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
        let r = check(
            "Open 9 to 6. [1] \"Open 9 to 5\"",
            &sources(&ids, &texts, &allowed),
            Some,
        );
        assert_eq!(r.quotes[0].status, QuoteStatus::Verified);
        assert_eq!(r.unsupported_numbers.len(), 1);
        assert_eq!(r.unsupported_numbers[0].number, "6");
    }

    #[test]
    fn markers_without_quotes_and_other_brackets() {
        let allowed: BTreeSet<u32> = [1, 2].into();
        let ms = markers_of("a [x] [1, 9] [2] b[3]", &allowed);
        assert_eq!(ms.len(), 2);
        assert_eq!(ms[0].numbers, vec![1]);
        assert!(quote_at("[1] \"\"", 3).is_none());
        assert_eq!(quote_at(" : \"ok\" rest", 0).unwrap().inside, "ok");
    }
}
