//! Text normalised for finding words: a quote in a source, a name or a number in a
//! passage. Both sides are put in Unicode NFC, lower case, with straight quote marks and
//! one space for a run of whitespace, and a needle is found only at word boundaries: a
//! needle that starts (or ends) with a letter or digit never starts (or ends) inside a
//! word of the haystack, so "effective" is not in "ineffective". Offsets are character
//! offsets into the original text; building and searching take time linear in the text.
//!
//! ```
//! use synthkit::text::normalized::{Needle, Normalized};
//!
//! let source = Normalized::new("The drug is ineffective; it is not SAFE  for children.");
//! assert_eq!(source.find_words("effective"), None);
//! assert_eq!(source.find_words("safe for children"), Some((35, 53)));
//! // A needle normalised once can be searched in many haystacks.
//! let needle = Needle::new("\u{201C}ineffective\u{201D}");
//! assert_eq!(needle.words(), 1);
//! assert!(source.find(&needle).is_none(), "the curly marks are part of the needle");
//! ```
//!
//! How it works: the normalised text carries a boundary byte (`\0`) wherever a word
//! starts or ends, and so does a needle, so a plain substring search (`memchr`'s
//! `memmem`, linear in the haystack) finds only matches that respect word boundaries.
//! A `\0` in the input reads as whitespace.

use memchr::memmem;
use unicode_normalization::char::{canonical_combining_class, is_combining_mark};
use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfc_quick};

/// The byte the normalised text carries at each start and end of a word.
const BOUNDARY: char = '\0';

/// A text normalised for finding words in it (see the [module documentation](self)).
#[derive(Debug, Clone)]
pub struct Normalized {
    /// The normalised text, with [`BOUNDARY`] at each start and end of a word.
    text: String,
    /// For each byte of `text`, the original character it comes from (a boundary byte:
    /// the character after it); saturates at `u32::MAX`.
    origin: Vec<u32>,
    /// Characters in the original text.
    chars: usize,
}

/// A needle normalised once, to search for in any number of [`Normalized`] texts.
#[derive(Debug, Clone)]
pub struct Needle {
    finder: memmem::Finder<'static>,
    /// Whether the normalised needle ends with a boundary byte.
    ends_with_boundary: bool,
    words: usize,
    word_chars: usize,
}

impl Normalized {
    /// `text` normalised, with the original character offset of every byte kept.
    pub fn new(text: &str) -> Self {
        let mut b = Builder::new(text.len(), true);
        let chars = feed(&mut b, text);
        b.finish(chars);
        Normalized {
            text: b.text,
            origin: b.origin.unwrap_or_default(),
            chars,
        }
    }

    /// Where `needle` (normalised here) is, as character offsets `(start, end)` into the
    /// original text (end exclusive), at its first occurrence on word boundaries; `None`
    /// when it is not there or holds nothing but whitespace.
    pub fn find_words(&self, needle: &str) -> Option<(usize, usize)> {
        self.find(&Needle::new(needle))
    }

    /// [`Normalized::find_words`] for a needle normalised once.
    pub fn find(&self, needle: &Needle) -> Option<(usize, usize)> {
        let len = needle.finder.needle().len();
        if len == 0 {
            return None;
        }
        let at = needle.finder.find(self.text.as_bytes())?;
        let start = self.origin_at(at)?;
        let last = at + len - 1;
        let end = if needle.ends_with_boundary {
            // The boundary after a word stands at the character that follows it.
            self.origin_at(last)?
        } else {
            // The first later byte from another character (one character may give
            // several bytes, or several characters one, as NFC composes them).
            let last_origin = *self.origin.get(last)?;
            self.origin
                .get(last + 1..)
                .unwrap_or_default()
                .iter()
                .find(|&&o| o != last_origin)
                .map_or(self.chars, |&o| o as usize)
        };
        Some((start, end.max(start)))
    }

    /// The normalised text's length in bytes: what one search reads at most.
    pub fn len(&self) -> usize {
        self.text.len()
    }

    /// Whether the normalised text is empty.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    fn origin_at(&self, byte: usize) -> Option<usize> {
        self.origin.get(byte).map(|&o| o as usize)
    }
}

impl Needle {
    /// `text` without its surrounding whitespace, normalised for searching.
    pub fn new(text: &str) -> Self {
        let text = text.trim();
        let mut b = Builder::new(text.len(), false);
        let chars = feed(&mut b, text);
        b.finish(chars);
        let ends_with_boundary = b.text.ends_with(BOUNDARY);
        Needle {
            finder: memmem::Finder::new(b.text.as_bytes()).into_owned(),
            ends_with_boundary,
            words: b.words,
            word_chars: b.word_chars,
        }
    }

    /// How many words (runs of letters, digits and combining marks) the needle has.
    pub fn words(&self) -> usize {
        self.words
    }

    /// How many letters, digits and combining marks the needle has (after lower-casing).
    pub fn word_chars(&self) -> usize {
        self.word_chars
    }

    /// Whether the needle holds nothing (it is then never found).
    pub fn is_empty(&self) -> bool {
        self.finder.needle().is_empty()
    }
}

/// Whether `c` is part of a word: a letter, a digit or a combining mark.
fn is_word(c: char) -> bool {
    c.is_alphanumeric() || is_combining_mark(c)
}

/// Whether NFC can never join `c` with what comes before it: normalising the text in
/// pieces that start at such characters gives the text normalised whole.
fn starts_nfc_piece(c: char) -> bool {
    c.is_ascii()
        || (canonical_combining_class(c) == 0
            && is_nfc_quick(std::iter::once(c)) == IsNormalized::Yes)
}

/// Feeds `text` to `b` in NFC, a piece at a time; gives the number of characters.
fn feed(b: &mut Builder, text: &str) -> usize {
    let mut piece: Vec<char> = Vec::new();
    let mut piece_start = 0u32;
    let mut chars = 0usize;
    for (i, c) in text.chars().enumerate() {
        chars = i + 1;
        if starts_nfc_piece(c) {
            b.push_nfc(&mut piece, piece_start);
            piece_start = u32::try_from(i).unwrap_or(u32::MAX);
        }
        piece.push(c);
    }
    b.push_nfc(&mut piece, piece_start);
    chars
}

/// Builds normalised text: whitespace runs folded, lower case, straight quote marks,
/// boundary bytes.
struct Builder {
    text: String,
    /// `None` for a needle (no offsets needed).
    origin: Option<Vec<u32>>,
    /// Whether the last character pushed was part of a word (`None`: nothing yet).
    last_word: Option<bool>,
    in_space: bool,
    words: usize,
    word_chars: usize,
}

impl Builder {
    fn new(capacity: usize, offsets: bool) -> Self {
        Builder {
            text: String::with_capacity(capacity + capacity / 8),
            origin: offsets.then(|| Vec::with_capacity(capacity + capacity / 8)),
            last_word: None,
            in_space: false,
            words: 0,
            word_chars: 0,
        }
    }

    /// Pushes the NFC form of `piece` (emptied), every character from original `at`.
    fn push_nfc(&mut self, piece: &mut Vec<char>, at: u32) {
        match piece.as_slice() {
            [] => {}
            [c] => self.push(*c, at),
            many => {
                let composed: Vec<char> = many.iter().copied().nfc().collect();
                for c in composed {
                    self.push(c, at);
                }
            }
        }
        piece.clear();
    }

    fn push(&mut self, c: char, at: u32) {
        if c.is_whitespace() || c == BOUNDARY {
            if !self.in_space {
                self.in_space = true;
                self.put(' ', at);
            }
            return;
        }
        self.in_space = false;
        let c = match c {
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' | '\u{2032}' => '\'',
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{00AB}' | '\u{00BB}' => '"',
            c => c,
        };
        for l in c.to_lowercase() {
            self.put(l, at);
        }
    }

    /// Appends `c` from original character `at`, with a boundary byte before it when a
    /// word starts or ends there.
    fn put(&mut self, c: char, at: u32) {
        let word = is_word(c);
        if self.last_word.unwrap_or(false) != word {
            self.push_byte(BOUNDARY, at);
            if word {
                self.words += 1;
            }
        }
        if word {
            self.word_chars += 1;
        }
        self.push_byte(c, at);
        self.last_word = Some(word);
    }

    fn push_byte(&mut self, c: char, at: u32) {
        self.text.push(c);
        if let Some(origin) = &mut self.origin {
            origin.extend(std::iter::repeat_n(at, c.len_utf8()));
        }
    }

    /// Closes the last word (`chars`: the original text's length in characters).
    fn finish(&mut self, chars: usize) {
        if self.last_word == Some(true) {
            self.push_byte(BOUNDARY, u32::try_from(chars).unwrap_or(u32::MAX));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chars(text: &str, (start, end): (usize, usize)) -> String {
        text.chars().skip(start).take(end - start).collect()
    }

    #[test]
    fn finds_only_whole_words() {
        let text = "Ineffective, unsafe for children; 13 technicians.";
        let hay = Normalized::new(text);
        assert_eq!(hay.find_words("effective"), None);
        assert_eq!(hay.find_words("safe for children"), None);
        assert_eq!(hay.find_words("3 technicians"), None);
        assert_eq!(hay.find_words("unsafe for"), Some((13, 23)));
        assert_eq!(hay.find_words("13 technicians."), Some((34, 49)));
        // A needle starting or ending with punctuation may sit anywhere.
        assert_eq!(hay.find_words(", unsafe"), Some((11, 19)));
        assert_eq!(hay.find_words("ineffective,"), Some((0, 12)));
        assert_eq!(hay.find_words("   "), None);
        assert_eq!(hay.find_words(""), None);
    }

    #[test]
    fn normalises_case_space_quote_marks_and_nfc() {
        // "é" written as "e" and a combining acute accent, then precomposed.
        let text = "Caf\u{65}\u{301}  \u{201C}Open\n the DOME\u{201D}\0now";
        let hay = Normalized::new(text);
        let found = hay.find_words("caf\u{e9} \"open the dome\"").unwrap();
        assert_eq!(found, (0, 23));
        assert_eq!(
            chars(text, found),
            "Caf\u{65}\u{301}  \u{201C}Open\n the DOME\u{201D}"
        );
        // A NUL is whitespace, never a boundary.
        assert_eq!(
            hay.find_words("dome\" now").map(|f| chars(text, f)),
            Some("DOME\u{201D}\0now".into())
        );
        // The bare "e" of the decomposed "é" is not a word of its own.
        assert_eq!(hay.find_words("caf"), None);
    }

    #[test]
    fn offsets_are_characters_of_the_original() {
        let text = "Größe: 4 Meter — the mirror is cleaned.";
        let hay = Normalized::new(text);
        let found = hay.find_words("THE MIRROR").unwrap();
        assert_eq!(chars(text, found), "the mirror");
        assert_eq!(found.0, 17);
        let needle = Needle::new("  Größe: 4  ");
        assert_eq!((needle.words(), needle.word_chars()), (2, 6));
        assert_eq!(hay.find(&needle), Some((0, 8)));
    }

    #[test]
    fn a_needle_failing_every_boundary_is_not_found() {
        // Every occurrence of the needle's text fails the boundary check: the search
        // still reads the haystack once.
        let text = "ineffective ".repeat(10_000);
        let hay = Normalized::new(&text);
        assert!(hay.len() <= text.len() + 2 * 10_000 + 1);
        assert_eq!(hay.find_words("effective"), None);
    }
}
