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

use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::bpe::{Encoding, Table, encoding};

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

/// A built-in OpenAI byte-pair encoding, its vocabulary embedded in the binary and its
/// tables built at first use in the process (module `text::bpe`).
///
/// Counting splits text into pre-tokens (words, numbers, punctuation runs) and adds up
/// their counts, as tiktoken does; the counts of short pre-tokens are remembered per
/// thread, so text that repeats words (all text) is counted several times faster.
#[derive(Clone, Copy)]
pub struct BpeTokenizer {
    name: &'static str,
    id: u8,
    table: Table,
}

/// Pre-tokens up to this many bytes have their counts cached.
const CACHED_PIECE_BYTES: usize = 14;
/// The per-thread cache is emptied when it holds this many entries.
const CACHE_MAX_ENTRIES: usize = 1 << 18;

thread_local! {
    /// Pre-token counts, keyed by tokenizer id, length and bytes packed into a `u128`.
    static PIECE_COUNTS: RefCell<FxHashMap<u128, u32>> =
        RefCell::new(FxHashMap::default());
}

/// The exact cache key of a short piece: id, length, then the bytes.
fn piece_key(id: u8, piece: &[u8]) -> Option<u128> {
    if piece.len() > CACHED_PIECE_BYTES {
        return None;
    }
    let mut bytes = [0u8; 16];
    bytes[0] = id;
    bytes[1] = piece.len() as u8;
    for (d, s) in bytes.iter_mut().skip(2).zip(piece) {
        *d = *s;
    }
    Some(u128::from_le_bytes(bytes))
}

debug_fields!(BpeTokenizer { name: name });

impl BpeTokenizer {
    /// `cl100k_base` (GPT-3.5/GPT-4), the default, as in the reference.
    pub fn cl100k_base() -> Self {
        Self {
            name: "cl100k_base",
            id: 1,
            table: Table::Cl100k,
        }
    }

    /// `o200k_base` (GPT-4o and later).
    pub fn o200k_base() -> Self {
        Self {
            name: "o200k_base",
            id: 2,
            table: Table::O200k,
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

    /// The encoding's tables (built by the first call in the process).
    fn inner(&self) -> &'static Encoding {
        encoding(self.table)
    }

    /// The count of one pre-token, from the cache when it is short.
    fn piece_count(
        &self,
        inner: &Encoding,
        piece: &str,
        cache: &mut FxHashMap<u128, u32>,
    ) -> usize {
        let bytes = piece.as_bytes();
        let Some(key) = piece_key(self.id, bytes) else {
            return inner.bpe.count(bytes);
        };
        if let Some(&n) = cache.get(&key) {
            return n as usize;
        }
        let n = inner.bpe.count(bytes);
        if cache.len() >= CACHE_MAX_ENTRIES {
            cache.clear();
        }
        cache.insert(key, n as u32);
        n
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
        let inner = self.inner();
        let text = inner.normalize(text);
        PIECE_COUNTS.with(|cache| {
            let mut cache = cache.borrow_mut();
            inner
                .split(&text)
                .map(|p| self.piece_count(inner, p, &mut cache))
                .sum()
        })
    }

    fn count_till_limit(&self, text: &str, limit: usize) -> Option<usize> {
        if text.is_empty() {
            return Some(0);
        }
        let inner = self.inner();
        let text = inner.normalize(text);
        PIECE_COUNTS.with(|cache| {
            let mut cache = cache.borrow_mut();
            let mut total = 0usize;
            for p in inner.split(&text) {
                total += self.piece_count(inner, p, &mut cache);
                if total > limit {
                    return None;
                }
            }
            Some(total)
        })
    }

    fn encode(&self, text: &str) -> Vec<u32> {
        self.inner().encode(text)
    }

    fn decode(&self, tokens: &[u32]) -> Option<String> {
        self.inner().decode(tokens)
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
    fn cached_counts_equal_uncached_counts() {
        let tok = BpeTokenizer::cl100k_base();
        let text = "Hello world, hello WORLD!! 1234567 \n\n  indented\ttabs émigré 🚀🚀 \
                    supercalifragilisticexpialidocious <|endoftext|> {query_str}";
        let uncached = tok.encode(text).len();
        for _ in 0..3 {
            assert_eq!(tok.count(text), uncached);
            assert_eq!(tok.count_till_limit(text, 10_000), Some(uncached));
        }
        let o = BpeTokenizer::o200k_base();
        assert_eq!(o.count(text), o.encode(text).len());
        assert_eq!(tok.count(text), tok.encode(text).len());
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
