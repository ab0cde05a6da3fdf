//! The characters every reading of an answer and a source agrees on: what a word char
//! is, the chars around a byte offset, and where a word-like needle may start. A leaf:
//! the lookup, the numbers and the facts all read text with these.

/// Whether `c` is part of a word: a letter, a digit or `_`.
pub(super) fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
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
pub(super) fn starts_word(text: &str, at: usize, first: char) -> bool {
    match char_before(text, at) {
        None => true,
        Some(c) if !is_word_char(c) => true,
        Some('v' | 'V') if first.is_ascii_digit() => {
            !char_before(text, at - 1).is_some_and(is_word_char)
        }
        Some(_) => false,
    }
}
