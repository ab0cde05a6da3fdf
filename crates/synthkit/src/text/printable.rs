//! Server-provided text made safe to print or log: a model id, an error body's excerpt.
//! A server controls these strings; printed raw, an ANSI escape could restyle or clear the
//! terminal and a newline could forge a log line. [`printable`] escapes control characters
//! (`\n`, `\r`, `\t`, and `\u{1b}` for the others), the Unicode line and paragraph
//! separators and the bidirectional overrides, and keeps every other character.
//!
//! ```
//! use synthkit::text::printable::printable;
//!
//! assert_eq!(printable("gpt-4o"), "gpt-4o");
//! assert_eq!(printable("m\n2026-01-01 INFO forged\u{1b}[2J"), "m\\n2026-01-01 INFO forged\\u{1b}[2J");
//! assert_eq!(printable("café"), "café");
//! ```

use std::borrow::Cow;

/// Whether `c` must not reach a terminal or a log line as it is.
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with control characters, line separators and bidirectional overrides escaped
/// (see the [module documentation](self)); borrowed when there is nothing to escape.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if unsafe_char(c) => out.extend(c.escape_unicode()),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn escapes_what_could_forge_or_restyle_a_line() {
        assert!(matches!(
            printable("plain id"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(
            printable("a\u{202e}b\u{7f}\u{0}"),
            "a\\u{202e}b\\u{7f}\\u{0}"
        );
        assert_eq!(printable("x\r\ny"), "x\\r\\ny");
    }
}
