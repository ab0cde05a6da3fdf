//! Looking facts up in sources: text as every lookup reads it ([`normalize`]), one index
//! of each source's words, numbers and dates ([`SourceIndex`], built in one pass), and one
//! automaton that finds every phrase of an answer in one pass over a source ([`Matcher`]).

use aho_corasick::AhoCorasick;
use rustc_hash::{FxHashMap, FxHashSet};
use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfc_quick};

use super::MAX_OPERANDS;

/// Decimal places kept exact in the arithmetic of derived numbers.
const SCALE_DIGITS: usize = 6;
/// The most integer digits of a number that takes part in arithmetic (more are compared
/// as written only).
const MAX_ARITHMETIC_DIGITS: usize = 24;

/// Whether `c` is part of a word: a letter, a digit or `_`.
pub(super) fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

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

/// The char before byte `at` of `text`.
pub(super) fn char_before(text: &str, at: usize) -> Option<char> {
    text.get(..at).and_then(|t| t.chars().next_back())
}

/// The char at byte `at` of `text`.
pub(super) fn char_at(text: &str, at: usize) -> Option<char> {
    text.get(at..).and_then(|t| t.chars().next())
}

/// Whether a word-like needle may start at byte `at`: no word char before it, or a `v`
/// alone before a digit (`v2.3` holds `2.3`).
fn starts_word(text: &str, at: usize, first: char) -> bool {
    match char_before(text, at) {
        None => true,
        Some(c) if !is_word_char(c) => true,
        Some('v' | 'V') if first.is_ascii_digit() => {
            !char_before(text, at - 1).is_some_and(is_word_char)
        }
        Some(_) => false,
    }
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

/// A number as lookups compare it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Number {
    /// Digits without thousands separators or leading zeros; up to two decimal places
    /// without trailing zeros (`3.50` is `3.5`). Three or more decimal places are kept
    /// as written: `1.650` is how much of Europe writes 1650, and a version's `.650` is
    /// not `.65`.
    canonical: String,
    /// The value times 10^6, when it has at most 6 decimal places and 24 integer digits.
    pub(super) scaled: Option<i128>,
    /// A number written with a decimal point is also looked up as its digits, a phrase:
    /// `1.70` is in `1.70.0` (a version) though no number of that source is 1.7.
    pub(super) phrase: Option<String>,
}

impl Number {
    /// The number of integer digits `int` (no separators) and decimals `frac`.
    fn new(int: &str, frac: &str) -> Self {
        let int = match int.trim_start_matches('0') {
            "" => "0",
            digits => digits,
        };
        let frac_kept = if frac.len() <= 2 {
            frac.trim_end_matches('0')
        } else {
            frac
        };
        let canonical = if frac_kept.is_empty() {
            int.to_string()
        } else {
            format!("{int}.{frac_kept}")
        };
        let scaled = (int.len() <= MAX_ARITHMETIC_DIGITS && frac.len() <= SCALE_DIGITS)
            .then(|| {
                let padded = format!("{int}{frac:0<SCALE_DIGITS$}");
                padded.parse::<i128>().ok()
            })
            .flatten();
        let phrase = (!frac.is_empty()).then(|| format!("{int}.{frac}"));
        Number {
            canonical,
            scaled,
            phrase,
        }
    }

    /// A whole number (a number word's value).
    pub(super) fn whole(n: u32) -> Self {
        Number::new(&n.to_string(), "")
    }
}

/// Every number written in digits in `text`, with its byte range: digit runs that may
/// hold thousands separators (`1,000`) and one decimal point. A run right after a letter
/// (`x86`, `mp3`) is not a number, but one after a lone `v` is (`v2.3`); a run of
/// several points (`1.65.0`) is a version, not a number; letters after a number are its
/// unit or ordinal suffix (`3rd`, `5km`); commas that are not thousands separators
/// separate numbers (`1,2`).
pub(super) fn scan_numbers(text: &str, mut each: impl FnMut(usize, usize, Number)) {
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if !b.is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        let mut end = i;
        while let Some(&c) = bytes.get(end) {
            if c.is_ascii_digit() {
                end += 1;
            } else if matches!(c, b'.' | b',') && bytes.get(end + 1).is_some_and(u8::is_ascii_digit)
            {
                end += 2;
            } else {
                break;
            }
        }
        i = end;
        if starts_word(text, start, '0')
            && let Some(run) = text.get(start..end)
        {
            numbers_of_run(run, start, &mut each);
        }
    }
}

/// The numbers of one run of digits, points and commas starting at byte `at`.
fn numbers_of_run(run: &str, at: usize, each: &mut impl FnMut(usize, usize, Number)) {
    let points = run.matches('.').count();
    if points > 1 {
        return;
    }
    let (int, frac) = run.split_once('.').unwrap_or((run, ""));
    let mut groups = int.split(',');
    let thousands =
        groups.next().is_some_and(|g| (1..=3).contains(&g.len())) && groups.all(|g| g.len() == 3);
    if thousands {
        each(at, at + run.len(), Number::new(&int.replace(',', ""), frac));
        return;
    }
    let mut offset = at;
    for piece in run.split(',') {
        let (int, frac) = piece.split_once('.').unwrap_or((piece, ""));
        each(offset, offset + piece.len(), Number::new(int, frac));
        offset += piece.len() + 1;
    }
}

/// Number words read as numbers: zero to nineteen.
const UNIT_WORDS: [&str; 20] = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
];
/// Twenty to ninety.
const TENS_WORDS: [&str; 8] = [
    "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
];
/// Ordinal words a source may write for a number (`third` for `3rd`).
const ORDINAL_WORDS: [&str; 12] = [
    "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
    "eleventh", "twelfth",
];

/// The value of a lower-case unit word (`six`), teen or ten (`forty`).
fn simple_number_word(word: &str) -> Option<u32> {
    if let Some(n) = UNIT_WORDS.iter().position(|&w| w == word) {
        return u32::try_from(n).ok();
    }
    let n = TENS_WORDS.iter().position(|&w| w == word)?;
    u32::try_from(20 + 10 * n).ok()
}

/// Whether a lower-case word is a ten (`twenty` to `ninety`).
pub(super) fn is_tens_word(word: &str) -> bool {
    TENS_WORDS.contains(&word)
}

/// The value of a lower-case number word: `six`, `forty`, `twenty-one`.
pub(super) fn number_word(word: &str) -> Option<u32> {
    match word.split_once('-') {
        Some((tens, unit)) if is_tens_word(tens) => {
            let unit = simple_number_word(unit).filter(|u| (1..=9).contains(u))?;
            Some(simple_number_word(tens)? + unit)
        }
        Some(_) => None,
        None => simple_number_word(word),
    }
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

/// A date, as much of it as was written: 0 for a part not given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct DateKey {
    pub(super) year: u16,
    pub(super) month: u8,
    pub(super) day: u8,
}

/// Month names and the abbreviations read for them, by month - 1.
const MONTHS: [(&str, &[&str]); 12] = [
    ("january", &["jan"]),
    ("february", &["feb"]),
    ("march", &["mar"]),
    ("april", &["apr"]),
    ("may", &[]),
    ("june", &["jun"]),
    ("july", &["jul"]),
    ("august", &["aug"]),
    ("september", &["sep", "sept"]),
    ("october", &["oct"]),
    ("november", &["nov"]),
    ("december", &["dec"]),
];

/// The month a word names (any case), 1 to 12.
pub(super) fn month(word: &str) -> Option<u8> {
    // Month names and their short forms are 3 to 9 ASCII letters: most words are not.
    if !(3..=9).contains(&word.len()) || !word.bytes().all(|b| b.is_ascii_alphabetic()) {
        return None;
    }
    let n = MONTHS.iter().position(|(name, short)| {
        name.eq_ignore_ascii_case(word) || short.iter().any(|s| s.eq_ignore_ascii_case(word))
    })?;
    u8::try_from(n + 1).ok()
}

/// A day of the month as written: `3`, `03`, `3rd`.
fn day(word: &str) -> Option<u8> {
    let digits = word
        .strip_suffix("st")
        .or_else(|| word.strip_suffix("nd"))
        .or_else(|| word.strip_suffix("rd"))
        .or_else(|| word.strip_suffix("th"))
        .unwrap_or(word);
    if digits.is_empty() || digits.len() > 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|d| (1..=31).contains(d))
}

/// A year as written: four digits.
fn year(word: &str) -> Option<u16> {
    (word.len() == 4 && word.bytes().all(|b| b.is_ascii_digit()))
        .then(|| word.parse().ok())
        .flatten()
        .filter(|&y| y > 0)
}

/// An ISO 8601 date: `2019-04-01`.
pub(super) fn iso_date(word: &str) -> Option<DateKey> {
    let mut parts = word.split('-');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || m.len() != 2 || d.len() != 2 {
        return None;
    }
    let month = day(m).filter(|&m| m <= 12)?;
    Some(DateKey {
        year: year(y)?,
        month,
        day: day(d)?,
    })
}

/// A date read from the words `words` (cores of white-space separated chunks, without
/// their punctuation): `March 3, 2020`, `3 March 2020`, `March 2020`, `March 3`,
/// `2019-04-01`. Returns how many words it took. `joined(k)` says whether word `k`
/// follows word `k - 1` with nothing but white space and punctuation between; with
/// `capital_months`, a month must be written with a capital (as in an answer).
pub(super) fn date_at<'w>(
    word: impl Fn(usize) -> Option<&'w str>,
    joined: impl Fn(usize) -> bool,
    i: usize,
    capital_months: bool,
) -> Option<(usize, DateKey)> {
    let first = word(i)?;
    if let Some(key) = iso_date(first) {
        return Some((1, key));
    }
    let month_at = |k: usize| {
        let w = word(k)?;
        if capital_months && !w.starts_with(|c: char| c.is_uppercase()) {
            return None;
        }
        month(w)
    };
    let next = |k: usize| word(k).filter(|_| joined(k));
    if let Some(m) = month_at(i) {
        if let Some(d) = next(i + 1).and_then(day) {
            let y = next(i + 2).and_then(year);
            let key = DateKey {
                year: y.unwrap_or(0),
                month: m,
                day: d,
            };
            return Some((if y.is_some() { 3 } else { 2 }, key));
        }
        let y = next(i + 1).and_then(year)?;
        return Some((
            2,
            DateKey {
                year: y,
                month: m,
                day: 0,
            },
        ));
    }
    let d = day(first)?;
    let m = month_at(i + 1).filter(|_| joined(i + 1))?;
    let y = next(i + 2).and_then(year);
    let key = DateKey {
        year: y.unwrap_or(0),
        month: m,
        day: d,
    };
    Some((if y.is_some() { 3 } else { 2 }, key))
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

/// The value of a lower-case word that may be a number word of a source: `six`, `forty`,
/// `third` (a source's `twenty-one` is two words, read together by [`SourceIndex`]).
fn source_number_word(word: &str) -> Option<u32> {
    // Number and ordinal words are 3 to 9 ASCII letters: most words are not.
    if !(3..=9).contains(&word.len()) || !word.bytes().all(|b| b.is_ascii_lowercase()) {
        return None;
    }
    simple_number_word(word).or_else(|| {
        let n = ORDINAL_WORDS.iter().position(|&w| w == word)?;
        u32::try_from(n + 1).ok()
    })
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

    #[test]
    fn months_are_named_in_full_or_short_in_any_case() {
        assert_eq!(month("SEPT"), Some(9));
        assert_eq!(month("december"), Some(12));
        assert_eq!(month("May"), Some(5));
        assert_eq!(month("ma"), None);
        assert_eq!(month("septembers"), None);
        assert_eq!(month("m\u{e4}r"), None);
    }
}
