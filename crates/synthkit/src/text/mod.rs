//! Text handling: tokenizers and the token text splitter.

pub mod abstention;
pub mod normalized;
pub mod plain;
pub mod printable;
pub mod splitter;
pub mod thinking;
pub mod tokenizer;

pub use splitter::{Chunk, ChunkCursor, SplitError, TokenTextSplitter};
pub use tokenizer::{BpeTokenizer, SharedTokenizer, Tokenizer, TokenizerError};

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
