//! Text handling: tokenizers and the token text splitter.

pub mod abstention;
mod bpe;
pub mod normalized;
pub mod plain;
mod pretoken;
pub mod printable;
pub mod splitter;
pub mod thinking;
pub mod tokenizer;

pub use splitter::{Chunk, ChunkCursor, SplitError, TokenTextSplitter};
pub use tokenizer::{BpeTokenizer, SharedTokenizer, Tokenizer, TokenizerError};

/// `n` with a comma every three digits (`12,345`), as messages and pages show counts.
///
/// ```
/// assert_eq!(synthkit::text::thousands(1_234_567), "1,234,567");
/// assert_eq!(synthkit::text::thousands(12), "12");
/// ```
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// At most `max` bytes of `text`, cut at a character boundary, and whether it was cut.
pub fn cap_text(text: &str, max: usize) -> (&str, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let end = (0..=max)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    (text.get(..end).unwrap_or_default(), true)
}

/// The first few of `items`, quoted and joined by commas, and how many more there are
/// (for messages that name what they refuse without growing with it).
///
/// ```
/// use synthkit::text::list_excerpt;
/// assert_eq!(list_excerpt(&["1935".to_string()]), "\"1935\"");
/// let many: Vec<String> = (0..10).map(|i| i.to_string()).collect();
/// assert_eq!(list_excerpt(&many), "\"0\", \"1\", \"2\", \"3\", \"4\" and 5 more");
/// ```
pub fn list_excerpt(items: &[String]) -> String {
    const SHOWN: usize = 5;
    let shown: Vec<String> = items
        .iter()
        .take(SHOWN)
        .map(|s| format!("{:?}", cap_text(s, 80).0))
        .collect();
    let mut out = shown.join(", ");
    if items.len() > SHOWN {
        out.push_str(&format!(" and {} more", items.len() - SHOWN));
    }
    out
}
