//! Looking facts up in sources: text as every lookup reads it ([`normalize`]), one index
//! of each source's words, numbers and dates ([`SourceIndex`], built in one pass), and one
//! automaton that finds every phrase of an answer in one pass over a source ([`Matcher`]).

use aho_corasick::AhoCorasick;
use rustc_hash::{FxHashMap, FxHashSet};
use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfc_quick};

use super::MAX_OPERANDS;
use super::chars::{char_at, char_before, is_word_char, starts_word};
use super::dates::{DateKey, date_at};
use super::numbers::{Number, is_tens_word, scan_numbers, source_number_word};

/// `c` with typographic quote marks and hyphens straightened.
fn straighten(c: char) -> char {
    match c {
        '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' | '\u{2032}' => '\'',
        '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{00AB}' | '\u{00BB}'
        | '\u{2033}' => '"',
        '\u{2010}' | '\u{2011}' | '\u{2012}' | '\u{2013}' => '-',
        c => c,
    }
}

/// `text` as every lookup reads it: Unicode NFC, typographic quotes and hyphens
/// straightened, each run of white space one space (none at the ends), lower case.
pub(super) fn normalize(text: &str) -> String {
    // Most sources are ASCII: nothing to compose, straighten or look up in Unicode's case
    // tables, byte by byte.
    if text.is_ascii() {
        return normalized_ascii(text);
    }
    // Most other text is NFC already: the quick check spares composing it again, which was
    // most of the time of a grounding check over long sources.
    if is_nfc_quick(text.chars()) == IsNormalized::Yes {
        normalized(text.len(), text.chars())
    } else {
        normalized(text.len(), text.nfc())
    }
}

/// [`normalize`] of an ASCII text: the same result as [`normalized`] gives it.
fn normalized_ascii(text: &str) -> String {
    let mut out = Vec::with_capacity(text.len());
    let mut space = false;
    for &b in text.as_bytes() {
        // `char::is_whitespace` on ASCII: tab, line feed, vertical tab, form feed,
        // carriage return and space (`u8::is_ascii_whitespace` leaves out the vertical tab).
        if matches!(b, b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ') {
            space = true;
            continue;
        }
        if space && !out.is_empty() {
            out.push(b' ');
        }
        space = false;
        out.push(b.to_ascii_lowercase());
    }
    // Every byte pushed is ASCII, so the bytes are UTF-8.
    String::from_utf8(out).unwrap_or_default()
}

/// [`normalize`] of the chars of a text in NFC, about `len` bytes long.
fn normalized(len: usize, chars: impl Iterator<Item = char>) -> String {
    let mut out = String::with_capacity(len);
    let mut space = false;
    for c in chars {
        if c.is_whitespace() {
            space = true;
            continue;
        }
        if space && !out.is_empty() {
            out.push(' ');
        }
        space = false;
        out.extend(straighten(c).to_lowercase());
    }
    out
}

/// Whether the needle found at `start..end` of `text` stands on word boundaries: a word
/// char at either end of the needle has no word char beside it in the text (`1.65` is in
/// `1.65.0`, not in `11.65` or `1.650`).
fn on_boundaries(text: &str, start: usize, end: usize) -> bool {
    let (Some(first), Some(last)) = (char_at(text, start), char_before(text, end)) else {
        return false;
    };
    (!is_word_char(first) || starts_word(text, start, first))
        && (!is_word_char(last) || !char_at(text, end).is_some_and(is_word_char))
}

/// Every maximal run of word chars of `text`, with its byte offset.
pub(super) fn word_runs<'t>(text: &'t str, mut each: impl FnMut(usize, &'t str)) {
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (is_word_char(c), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                if let Some(run) = text.get(s..i) {
                    each(s, run);
                }
                start = None;
            }
            _ => {}
        }
    }
    if let Some(run) = start.and_then(|s| text.get(s..).map(|r| (s, r))) {
        each(run.0, run.1);
    }
}

/// The characters trimmed from a chunk's start before it is read as a word.
const LEADING_PUNCTUATION: &str = "([{<\"'*~|\u{BF}\u{A1}\u{201C}\u{2018}\u{AB}\u{201E}";
/// The characters trimmed from a chunk's end before it is read as a word.
const TRAILING_PUNCTUATION: &str = ".,;:!?)]}>\"'*~|\u{2026}\u{201D}\u{2019}\u{BB}";

/// Whether `c` is trimmed from a chunk's start ([`LEADING_PUNCTUATION`]).
pub(super) fn leading_punctuation(c: char) -> bool {
    LEADING_PUNCTUATION.contains(c)
}

/// Whether `c` is trimmed from a chunk's end ([`TRAILING_PUNCTUATION`]).
pub(super) fn trailing_punctuation(c: char) -> bool {
    TRAILING_PUNCTUATION.contains(c)
}

/// How a fact is looked up in a source.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Key {
    /// One word (letters, digits, `_`), normalised: among the source's words.
    Word(String),
    /// Words and code, normalised: in the source's text, on word boundaries.
    Phrase(String),
    /// A number: among the source's numbers, or (written with a decimal point) as a
    /// phrase.
    Number(Number),
    /// A date: among the source's dates, whatever their format.
    Date(DateKey),
}

impl Key {
    /// The key of words or code as written: [`Key::Word`] when it is one word, else
    /// [`Key::Phrase`]; `None` when it has no letter or digit.
    pub(super) fn text(written: &str) -> Option<Key> {
        let normal = normalize(written);
        if !normal.chars().any(char::is_alphanumeric) {
            return None;
        }
        Some(if normal.chars().all(is_word_char) {
            Key::Word(normal)
        } else {
            Key::Phrase(normal)
        })
    }

    /// The phrase this key is looked up as, if any.
    fn phrase(&self) -> Option<&str> {
        match self {
            Key::Phrase(p) => Some(p),
            Key::Number(n) => n.phrase.as_deref(),
            Key::Word(_) | Key::Date(_) => None,
        }
    }
}

/// What of a source the keys of one answer need read: a source is only scanned for the
/// kinds of fact the answer states (its words are found by the [`Matcher`]).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Needs {
    /// Its numbers, in digits and in words (and their operands, for derived numbers).
    numbers: bool,
    /// Its dates.
    dates: bool,
}

impl Needs {
    /// What `keys` need.
    pub(super) fn of(keys: &[&Key]) -> Self {
        Needs {
            numbers: keys.iter().any(|k| matches!(k, Key::Number(_))),
            dates: keys.iter().any(|k| matches!(k, Key::Date(_))),
        }
    }
}

/// What one source holds, read once: its normalised text (for words and phrases), and
/// what the answer's [`Needs`] ask of it: its numbers (written in digits or as number
/// words) and its dates.
pub(super) struct SourceIndex<'t> {
    text: &'t str,
    /// The canonical forms of its numbers.
    numbers: FxHashSet<String>,
    /// Distinct scaled values, in order of first appearance, at most [`MAX_OPERANDS`].
    operands: Vec<i128>,
    operand_set: FxHashSet<i128>,
    dates: FxHashSet<DateKey>,
}

impl<'t> SourceIndex<'t> {
    /// The index of `text`, which [`normalize`] gave, with what `needs` asks.
    pub(super) fn new(text: &'t str, needs: Needs) -> Self {
        let mut index = SourceIndex {
            text,
            numbers: FxHashSet::default(),
            operands: Vec::new(),
            operand_set: FxHashSet::default(),
            dates: FxHashSet::default(),
        };
        if needs.numbers {
            index.read_numbers();
        }
        if needs.dates {
            index.read_dates();
        }
        index
    }

    /// Reads the numbers of the text, in digits and in words.
    fn read_numbers(&mut self) {
        let text = self.text;
        scan_numbers(text, |_, _, n| self.add_number(n));
        let mut tens: Option<(usize, u32)> = None;
        word_runs(text, |at, word| {
            let value = source_number_word(word);
            if let Some(v) = value {
                self.add_number(Number::whole(v));
                if let Some((end, t)) = tens
                    && (1..=9).contains(&v)
                    && matches!(text.get(end..at), Some(" " | "-"))
                {
                    self.add_number(Number::whole(t + v));
                }
            }
            tens = value
                .filter(|_| is_tens_word(word))
                .map(|v| (at + word.len(), v));
        });
    }

    /// Reads the dates of the text, whatever their format.
    fn read_dates(&mut self) {
        let cores: Vec<&str> = self
            .text
            .split(' ')
            .map(|chunk| {
                chunk
                    .trim_start_matches(leading_punctuation)
                    .trim_end_matches(trailing_punctuation)
            })
            .collect();
        for i in 0..cores.len() {
            let Some((_, key)) = date_at(|k| cores.get(k).copied(), |_| true, i, false) else {
                continue;
            };
            self.dates.insert(key);
            if key.year != 0 && key.month != 0 && key.day != 0 {
                self.dates.insert(DateKey { day: 0, ..key });
                self.dates.insert(DateKey { year: 0, ..key });
            }
        }
    }

    fn add_number(&mut self, n: Number) {
        if let Some(v) = n.scaled
            && self.operands.len() < MAX_OPERANDS
            && self.operand_set.insert(v)
        {
            self.operands.push(v);
        }
        self.numbers.insert(n.canonical);
    }

    /// Whether `x` (scaled) is the sum or the difference of two different non-zero numbers
    /// of this source, each pair tried costing one step of `budget`.
    pub(super) fn derives(&self, x: i128, budget: &mut usize) -> bool {
        for &a in &self.operands {
            if *budget == 0 {
                return false;
            }
            *budget -= 1;
            if a == 0 {
                continue;
            }
            let found = |b: Option<i128>| {
                b.is_some_and(|b| b != 0 && b != a && self.operand_set.contains(&b))
            };
            if found(x.checked_sub(a)) || found(a.checked_sub(x)) {
                return true;
            }
        }
        false
    }
}

/// Finds the facts of one answer in sources: one Aho-Corasick automaton of all their
/// words and phrases, so a source is read once whatever the number of facts.
pub(super) struct Matcher {
    automaton: Option<AhoCorasick>,
    /// The pattern of each fact that has a word or a phrase.
    pattern_of: Vec<Option<usize>>,
    /// Whether each pattern is a word: found only as a whole run of word chars (with no
    /// `v` before a digit taken as a boundary, as a phrase's `2.3` is in `v2.3`).
    is_word: Vec<bool>,
    needs: Needs,
}

impl Matcher {
    /// The matcher of `keys`.
    pub(super) fn new(keys: &[&Key]) -> Self {
        let mut ids: FxHashMap<&str, usize> = FxHashMap::default();
        let mut patterns: Vec<&str> = Vec::new();
        let mut is_word: Vec<bool> = Vec::new();
        let pattern_of = keys
            .iter()
            .map(|key| {
                let (pattern, word) = match key {
                    Key::Word(w) => (w.as_str(), true),
                    key => (key.phrase()?, false),
                };
                // A word is all word chars and a phrase never is: one string is never both.
                Some(*ids.entry(pattern).or_insert_with(|| {
                    patterns.push(pattern);
                    is_word.push(word);
                    patterns.len() - 1
                }))
            })
            .collect();
        let automaton = (!patterns.is_empty())
            .then(|| AhoCorasick::new(&patterns).ok())
            .flatten();
        Matcher {
            automaton,
            pattern_of,
            is_word,
            needs: Needs::of(keys),
        }
    }

    /// The index of the normalised source `text` this matcher's keys need.
    pub(super) fn index<'t>(&self, text: &'t str) -> SourceIndex<'t> {
        SourceIndex::new(text, self.needs)
    }

    /// Whether the pattern found at `start..end` of `text` stands where pattern `p` may.
    fn stands(&self, p: usize, text: &str, start: usize, end: usize) -> bool {
        if self.is_word.get(p).copied().unwrap_or(false) {
            !char_before(text, start).is_some_and(is_word_char)
                && !char_at(text, end).is_some_and(is_word_char)
        } else {
            on_boundaries(text, start, end)
        }
    }

    /// Which of `keys` (those given to [`Matcher::new`]) `index` holds.
    pub(super) fn holds(&self, keys: &[&Key], index: &SourceIndex<'_>) -> Vec<bool> {
        let mut pattern_found = vec![false; self.is_word.len()];
        if let Some(matches) = self
            .automaton
            .as_ref()
            .and_then(|a| a.try_find_overlapping_iter(index.text).ok())
        {
            let mut left = pattern_found.len();
            for m in matches {
                let p = m.pattern().as_usize();
                if let Some(found) = pattern_found.get_mut(p)
                    && !*found
                    && self.stands(p, index.text, m.start(), m.end())
                {
                    *found = true;
                    left -= 1;
                    if left == 0 {
                        break;
                    }
                }
            }
        }
        let pattern = |k: usize| {
            self.pattern_of
                .get(k)
                .copied()
                .flatten()
                .and_then(|p| pattern_found.get(p).copied())
                .unwrap_or(false)
        };
        keys.iter()
            .enumerate()
            .map(|(k, key)| match key {
                Key::Word(_) | Key::Phrase(_) => pattern(k),
                Key::Number(n) => index.numbers.contains(&n.canonical) || pattern(k),
                Key::Date(d) => index.dates.contains(d),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_composes_only_what_is_not_composed() {
        // "café" written with a combining accent, and composed: one text once normalized.
        assert_eq!(
            normalize("Caf\u{65}\u{301}  \u{201C}Menu\u{201D}"),
            "caf\u{e9} \"menu\""
        );
        assert_eq!(normalize("Caf\u{e9} \"Menu\""), "caf\u{e9} \"menu\"");
        assert_eq!(normalize("\t A\u{b}B \n"), "a b");
        assert_eq!(normalize(""), "");
    }

    #[test]
    fn ascii_text_is_normalized_as_any_text() {
        for b in 0u8..=0x7F {
            let c = char::from(b);
            let text = format!("{c}Ab{c}{c} c{c}D {c}");
            assert_eq!(
                normalize(&text),
                normalized(text.len(), text.chars()),
                "byte {b:#04x}"
            );
        }
    }

    #[test]
    fn a_word_is_found_only_as_a_whole_word() {
        let keys = [Key::Word("2".into()), Key::Word("port".into())];
        let keys: Vec<&Key> = keys.iter().collect();
        let matcher = Matcher::new(&keys);
        let text = normalize("v2 and ports, x2");
        assert_eq!(matcher.holds(&keys, &matcher.index(&text)), [false, false]);
        let text = normalize("Port 2.");
        assert_eq!(matcher.holds(&keys, &matcher.index(&text)), [true, true]);
    }

    #[test]
    fn a_source_is_read_for_numbers_and_dates_only_when_asked() {
        let text = normalize("Six ships left on 3 March 2020.");
        let words = [Key::Word("ships".into())];
        let words: Vec<&Key> = words.iter().collect();
        let index = Matcher::new(&words).index(&text);
        assert!(index.numbers.is_empty() && index.dates.is_empty());
        let facts = [
            Key::Number(Number::whole(6)),
            Key::Date(DateKey {
                year: 2020,
                month: 3,
                day: 3,
            }),
        ];
        let facts: Vec<&Key> = facts.iter().collect();
        let matcher = Matcher::new(&facts);
        assert_eq!(matcher.holds(&facts, &matcher.index(&text)), [true, true]);
    }
}
