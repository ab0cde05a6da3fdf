//! The [`Tokenizer`] trait and the built-in OpenAI BPE tokenizers.
//!
//! Counts are the ones an OpenAI-compatible server reports for the same text: text that
//! looks like a special token (`<|endoftext|>`) is counted as ordinary text.
//!
//! ```
//! use synthkit::text::{BpeTokenizer, Tokenizer};
//! let tok = BpeTokenizer::cl100k_base();
//! assert_eq!(tok.count("hello world"), 2);
//! assert_eq!(tok.count_till_limit("hello world", 1), None);
//! let ids = tok.encode("hello world");
//! assert_eq!(tok.decode(&ids).as_deref(), Some("hello world"));
//! ```

use std::fmt;
use std::sync::Arc;

/// Counts, encodes and decodes text in model tokens.
///
/// Implementations must be deterministic: the same text always gives the same count.
pub trait Tokenizer: Send + Sync + fmt::Debug {
    /// A short name, such as `cl100k_base`.
    fn name(&self) -> &str;
    /// The number of tokens in `text`.
    fn count(&self, text: &str) -> usize;
    /// The number of tokens in `text` if it is at most `limit`, else `None`.
    ///
    /// May stop early once the limit is passed, so it is cheaper than [`Tokenizer::count`]
    /// on long texts.
    fn count_till_limit(&self, text: &str, limit: usize) -> Option<usize> {
        let n = self.count(text);
        (n <= limit).then_some(n)
    }
    /// The token ids of `text`.
    fn encode(&self, text: &str) -> Vec<u32>;
    /// The text of `tokens`, or `None` when they do not decode to valid UTF-8.
    fn decode(&self, tokens: &[u32]) -> Option<String>;
}

/// A tokenizer shared between threads and tasks.
pub type SharedTokenizer = Arc<dyn Tokenizer>;

/// Errors when choosing a tokenizer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenizerError {
    /// The name is not one of the built-in tokenizers.
    #[error("unknown tokenizer `{0}`: use `cl100k_base` (the default) or `o200k_base`")]
    Unknown(String),
}

/// A built-in OpenAI byte-pair encoding, with its vocabulary embedded in the binary.
#[derive(Clone, Copy)]
pub struct BpeTokenizer {
    name: &'static str,
    inner: &'static bpe_openai::Tokenizer,
}

impl fmt::Debug for BpeTokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BpeTokenizer")
            .field("name", &self.name)
            .finish()
    }
}

impl BpeTokenizer {
    /// `cl100k_base` (GPT-3.5/GPT-4), the default, as in the reference.
    pub fn cl100k_base() -> Self {
        Self {
            name: "cl100k_base",
            inner: bpe_openai::cl100k_base(),
        }
    }

    /// `o200k_base` (GPT-4o and later).
    pub fn o200k_base() -> Self {
        Self {
            name: "o200k_base",
            inner: bpe_openai::o200k_base(),
        }
    }

    /// A built-in tokenizer by name: `cl100k_base` or `o200k_base` (also `cl100k`, `o200k`).
    pub fn by_name(name: &str) -> Result<Self, TokenizerError> {
        match name.trim().to_ascii_lowercase().as_str() {
            "cl100k_base" | "cl100k" => Ok(Self::cl100k_base()),
            "o200k_base" | "o200k" => Ok(Self::o200k_base()),
            _ => Err(TokenizerError::Unknown(name.to_string())),
        }
    }

    /// This tokenizer behind an [`Arc`], ready to share.
    pub fn shared(self) -> SharedTokenizer {
        Arc::new(self)
    }
}

impl Default for BpeTokenizer {
    fn default() -> Self {
        Self::cl100k_base()
    }
}

impl Tokenizer for BpeTokenizer {
    fn name(&self) -> &str {
        self.name
    }

    fn count(&self, text: &str) -> usize {
        if text.is_empty() {
            return 0;
        }
        self.inner.count(text)
    }

    fn count_till_limit(&self, text: &str, limit: usize) -> Option<usize> {
        if text.is_empty() {
            return Some(0);
        }
        // A token is at least one byte: a text of at most `limit` bytes always fits, but
        // we still need its exact count.
        self.inner
            .count_till_limit(&self.inner.normalize(text), limit)
    }

    fn encode(&self, text: &str) -> Vec<u32> {
        self.inner.encode(text)
    }

    fn decode(&self, tokens: &[u32]) -> Option<String> {
        self.inner.decode(tokens)
    }
}

/// The default tokenizer (`cl100k_base`), shared.
pub fn default_tokenizer() -> SharedTokenizer {
    BpeTokenizer::cl100k_base().shared()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_token_text_is_ordinary_text() {
        let tok = BpeTokenizer::cl100k_base();
        assert!(tok.count("<|endoftext|>") > 1);
    }

    #[test]
    fn names() {
        assert_eq!(
            BpeTokenizer::by_name("o200k").map(|t| t.name().to_string()),
            Ok("o200k_base".to_string())
        );
        assert!(matches!(
            BpeTokenizer::by_name("gpt2"),
            Err(TokenizerError::Unknown(_))
        ));
    }

    #[test]
    fn limit() {
        let tok = BpeTokenizer::cl100k_base();
        let n = tok.count("one two three four");
        assert_eq!(tok.count_till_limit("one two three four", n), Some(n));
        assert_eq!(tok.count_till_limit("one two three four", n - 1), None);
        assert_eq!(tok.count_till_limit("", 0), Some(0));
    }
}
