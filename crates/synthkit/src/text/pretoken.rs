//! `cl100k_base`'s pre-tokenizer on ASCII text, written out by hand: the same pieces as
//! the encoding's patterns ([`super::bpe`]) give, several times faster than the regex
//! engine, for the text most prompts are made of.
//!
//! [`cl100k_piece`] reads the pre-token at the start of a text as the patterns would, in
//! their order: a contraction (`'s`, `'t`, `'re`, `'ve`, `'m`, `'ll`, `'d`, any case); a
//! run of letters, after at most one character that is neither a newline, a letter nor
//! a digit; one to three digits; a run of punctuation, after at most one space, with the
//! newlines right after it; whitespace up to its last newline; whitespace to the end of
//! the text; a whitespace run without its last character; one whitespace character.
//!
//! Whenever the answer depends on a character outside ASCII (a letter, digit, space or
//! case-folded contraction Unicode knows and ASCII does not), it answers `None` and the
//! caller asks the regex: the scanner never guesses. The unit tests check it against
//! the regex on generated and real text.

/// A scanner of pre-tokens: the length of the one at the start of a text, or `None`
/// when the regex must say.
pub(crate) type Scanner = fn(&[u8]) -> Option<usize>;

/// The class of an ASCII byte, as the patterns see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// `\p{L}`: `A-Z`, `a-z`.
    Letter,
    /// `\p{N}`: `0-9`.
    Digit,
    /// `\r` or `\n`.
    Newline,
    /// Other `\s`: space, tab, vertical tab, form feed.
    Space,
    /// Anything else: punctuation, symbols, control characters.
    Other,
    /// Not ASCII: the regex decides.
    Wide,
}

fn class(b: u8) -> Class {
    match b {
        b'A'..=b'Z' | b'a'..=b'z' => Class::Letter,
        b'0'..=b'9' => Class::Digit,
        b'\r' | b'\n' => Class::Newline,
        b' ' | b'\t' | 0x0B | 0x0C => Class::Space,
        0x80.. => Class::Wide,
        _ => Class::Other,
    }
}

/// The class of the byte at `i`, `None` past the end.
fn at(text: &[u8], i: usize) -> Option<Class> {
    text.get(i).copied().map(class)
}

/// The end of the run of `kind` bytes from `i`, or `None` when it ends at a byte outside
/// ASCII (which may or may not belong to it).
fn run_end(text: &[u8], mut i: usize, kind: fn(Class) -> bool) -> Option<usize> {
    loop {
        match at(text, i) {
            Some(Class::Wide) => return None,
            Some(c) if kind(c) => i += 1,
            _ => return Some(i),
        }
    }
}

fn is_letter(c: Class) -> bool {
    c == Class::Letter
}

fn is_other(c: Class) -> bool {
    c == Class::Other
}

fn is_space(c: Class) -> bool {
    matches!(c, Class::Space | Class::Newline)
}

/// The length of the contraction at the start of `text` (which starts with `'`):
/// `Some(None)` when there is none, `None` when a character outside ASCII decides it.
fn contraction(text: &[u8]) -> Option<Option<usize>> {
    let lower = |i: usize| text.get(i).map(u8::to_ascii_lowercase);
    // A byte outside ASCII right after the quote may fold to a contraction's letter.
    if text.get(1).is_some_and(|b| !b.is_ascii()) {
        return None;
    }
    Some(match (lower(1), lower(2)) {
        (Some(b's' | b't' | b'm' | b'd'), _) => Some(2),
        (Some(b'r' | b'v'), Some(b'e')) | (Some(b'l'), Some(b'l')) => Some(3),
        (Some(b'r' | b'v' | b'l'), Some(b)) if !b.is_ascii() => return None,
        _ => None,
    })
}

/// The length of `cl100k_base`'s first pre-token of `text`, or `None` when the regex must
/// say (a character outside ASCII decides it, or the text is empty).
pub(crate) fn cl100k_piece(text: &[u8]) -> Option<usize> {
    let lead = *text.first()?;
    let first = class(lead);
    if first == Class::Wide {
        return None;
    }
    if lead == b'\''
        && let Some(n) = contraction(text)?
    {
        return Some(n);
    }
    // Letters, after at most one character that is neither a newline, a letter nor a
    // digit.
    match first {
        Class::Letter => return run_end(text, 1, is_letter),
        Class::Space | Class::Other => match at(text, 1) {
            Some(Class::Letter) => return run_end(text, 2, is_letter),
            Some(Class::Wide) => return None,
            _ => {}
        },
        _ => {}
    }
    // One to three digits.
    if first == Class::Digit {
        let mut end = 1;
        while end < 3 {
            match at(text, end) {
                Some(Class::Digit) => end += 1,
                Some(Class::Wide) => return None,
                _ => break,
            }
        }
        return Some(end);
    }
    // Punctuation, after at most one space, and the newlines right after it.
    let punct_from = match (lead, first, at(text, 1)) {
        (_, Class::Other, _) => Some(0),
        (b' ', _, Some(Class::Other)) => Some(1),
        (b' ', _, Some(Class::Wide)) => return None,
        _ => None,
    };
    if let Some(from) = punct_from {
        let end = run_end(text, from + 1, is_other)?;
        let newlines = text
            .iter()
            .skip(end)
            .take_while(|b| matches!(b, b'\r' | b'\n'))
            .count();
        return Some(end + newlines);
    }
    // Whitespace: what is left.
    let end = run_end(text, 0, is_space)?;
    if let Some(last) = text
        .iter()
        .take(end)
        .rposition(|b| matches!(b, b'\r' | b'\n'))
    {
        // Up to its last newline.
        return Some(last + 1);
    }
    if end == text.len() || end == 1 {
        // To the end of the text; or a single space before a word.
        return Some(end);
    }
    // A run before a non-space keeps its last character for the word after it.
    Some(end - 1)
}

#[cfg(test)]
mod tests {
    use crate::text::bpe::{Table, encoding};

    /// The pieces of `text` by the regex alone.
    fn by_regex(text: &str) -> Vec<&str> {
        encoding(Table::Cl100k).split_by_regex(text).collect()
    }

    /// The pieces of `text` by the scanner, asking the regex where it says `None`.
    fn by_scanner(text: &str) -> Vec<&str> {
        encoding(Table::Cl100k).split(text).collect()
    }

    #[test]
    fn known_pieces() {
        let cases: &[(&str, &[&str])] = &[
            ("a   b", &["a", "  ", " b"]),
            ("don't 12345 ??!", &["don", "'t", " ", "123", "45", " ??!"]),
            ("x  \n\n  y  ", &["x", "  \n\n", " ", " y", "  "]),
            (
                "(word) 'Sam' 'RE",
                &["(word", ")", " '", "Sam", "'", " '", "RE"],
            ),
            (
                "fn main() {\r\n}\n",
                &["fn", " main", "()", " {\r\n", "}\n"],
            ),
            ("\t\tx", &["\t", "\tx"]),
        ];
        for (text, pieces) in cases {
            assert_eq!(by_scanner(text), *pieces, "{text:?}");
            assert_eq!(by_regex(text), *pieces, "{text:?}");
        }
    }

    /// A small deterministic generator (xorshift), so the test needs no crate.
    struct Draw(u64);

    impl Draw {
        fn next(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    #[test]
    fn generated_text_splits_as_the_regex_splits_it() {
        // Every class, and the characters outside ASCII that could change a piece.
        let atoms = [
            "a", "Z", "re", "ll", "s", "7", "42", " ", "  ", "\t", "\n", "\r\n", "\x0b", "\x0c",
            "'", "'S", ".", "(", "?!", "\u{7f}", "\x01", "é", "\u{a0}", "\u{85}", "ſ", "٣", "—",
            "日本", "\u{2003}", "😀", "K",
        ];
        let mut draw = Draw(0x9E37_79B9_7F4A_7C15);
        for _ in 0..20_000 {
            let len = 1 + draw.next(12);
            let text: String = (0..len).map(|_| atoms[draw.next(atoms.len())]).collect();
            assert_eq!(by_scanner(&text), by_regex(&text), "{text:?}");
        }
    }

    #[test]
    fn real_text_splits_as_the_regex_splits_it() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
        for file in ["README.md", "Cargo.toml", "crates/synthkit/src/text/bpe.rs"] {
            let text = std::fs::read_to_string(format!("{root}/{file}")).unwrap();
            assert_eq!(by_scanner(&text), by_regex(&text), "{file}");
        }
    }
}
