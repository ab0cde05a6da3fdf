//! Numbers as answers and sources write them: digits (with thousands separators and
//! decimals) and number words, each read as the [`Number`] lookups compare.

use super::chars::starts_word;

/// Decimal places kept exact in the arithmetic of derived numbers.
const SCALE_DIGITS: usize = 6;
/// The most integer digits of a number that takes part in arithmetic (more are compared
/// as written only).
const MAX_ARITHMETIC_DIGITS: usize = 24;

/// A number as lookups compare it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Number {
    /// Digits without thousands separators or leading zeros; up to two decimal places
    /// without trailing zeros (`3.50` is `3.5`). Three or more decimal places are kept
    /// as written: `1.650` is how much of Europe writes 1650, and a version's `.650` is
    /// not `.65`.
    pub(super) canonical: String,
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
    // Unit and tens words are 3 to 9 lower-case ASCII letters: most words are not.
    if !(3..=9).contains(&word.len()) || !word.bytes().all(|b| b.is_ascii_lowercase()) {
        return None;
    }
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

/// The value of a lower-case word that may be a number word of a source: `six`, `forty`,
/// `third` (a source's `twenty-one` is two words, read together by [`SourceIndex`]).
pub(super) fn source_number_word(word: &str) -> Option<u32> {
    // Number and ordinal words are 3 to 9 ASCII letters: most words are not.
    if !(3..=9).contains(&word.len()) || !word.bytes().all(|b| b.is_ascii_lowercase()) {
        return None;
    }
    simple_number_word(word).or_else(|| {
        let n = ORDINAL_WORDS.iter().position(|&w| w == word)?;
        u32::try_from(n + 1).ok()
    })
}
