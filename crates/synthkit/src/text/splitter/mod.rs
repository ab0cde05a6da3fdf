//! The token text splitter: cuts text into chunks of at most `chunk_size` tokens.
//!
//! The algorithm is the reference's `TokenTextSplitter` (llama-index-core 0.14.25):
//!
//! 1. **Split.** A text that fits is one split. Otherwise it is cut at every occurrence of
//!    the separator (default `" "`; the separator stays attached to the *front* of every
//!    piece but the first), or, when that gives a single piece, at the backup separators
//!    (default `"\n"`), or else into single characters. Pieces that fit are kept; the others
//!    are split again the same way.
//! 2. **Merge.** Splits are packed greedily into chunks by the sum of their token counts; a
//!    chunk keeps up to `chunk_overlap` tokens of the previous chunk's tail (whole splits)
//!    and always leaves room for the split that starts the new content. Chunk edges are
//!    trimmed of whitespace; whitespace-only chunks vanish.
//!
//! Unlike the reference, the limit is **exact**: every chunk is counted again as the final,
//! trimmed text, and when the sum of split counts under-estimated it, the chunk gives back
//! its last splits (or its overlap, or its only split is cut finer) until it fits. The only
//! chunk that can exceed the limit is a single character that alone takes more tokens than
//! the limit; it is returned by itself with [`Chunk::oversized`] set.
//!
//! The work is iterative (no recursion) and linear in the text: splits are produced lazily
//! as byte ranges, the counts of short splits (words) are cached, and each chunk is counted
//! once with [`Tokenizer::count_till_limit`](crate::text::Tokenizer::count_till_limit).
//!
//! ```
//! use synthkit::text::{BpeTokenizer, TokenTextSplitter};
//! let splitter = TokenTextSplitter::new(3, 0, BpeTokenizer::cl100k_base().shared()).unwrap();
//! assert_eq!(splitter.split_text("one two three four five"), ["one two three", "four five"]);
//! ```

use std::fmt;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::text::SharedTokenizer;

use cursor::{Build, Item, Sep, Split};

mod cursor;

/// Errors in splitter settings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SplitError {
    /// The chunk size is 0.
    #[error("chunk size must be greater than 0")]
    ZeroChunkSize,
    /// The overlap is larger than the chunk size.
    #[error(
        "chunk overlap ({overlap}) is larger than chunk size ({chunk_size}): use an overlap of at most the chunk size, or a larger chunk size"
    )]
    OverlapTooLarge {
        /// The overlap asked for, in tokens.
        overlap: usize,
        /// The chunk size, in tokens.
        chunk_size: usize,
    },
}

/// One chunk: a contiguous, edge-trimmed substring of the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Byte offset of the chunk's first byte in the input (a char boundary).
    pub start: usize,
    /// Byte offset just past the chunk's last byte; the text is `&input[start..end]`.
    pub end: usize,
    /// The exact token count of the chunk text.
    pub tokens: usize,
    /// The chunk is a single character that alone takes more tokens than the limit.
    pub oversized: bool,
}

impl Chunk {
    /// The chunk's text in `input`, the text it was cut from (empty if it does not fit).
    pub fn text<'a>(&self, input: &'a str) -> &'a str {
        input.get(self.start..self.end).unwrap_or_default()
    }
}

/// Splits text into chunks of at most `chunk_size` tokens, with overlap.
///
/// See the [module documentation](self) for the algorithm.
#[derive(Debug, Clone)]
pub struct TokenTextSplitter {
    chunk_size: usize,
    chunk_overlap: usize,
    separator: String,
    backup_separators: Vec<String>,
    tokenizer: SharedTokenizer,
}

impl TokenTextSplitter {
    /// A splitter with chunks of at most `chunk_size` tokens that repeat up to
    /// `chunk_overlap` tokens of the previous chunk, splitting on `" "` then `"\n"`.
    ///
    /// Fails when `chunk_size` is 0 or `chunk_overlap > chunk_size`.
    pub fn new(
        chunk_size: usize,
        chunk_overlap: usize,
        tokenizer: SharedTokenizer,
    ) -> Result<Self, SplitError> {
        if chunk_size == 0 {
            return Err(SplitError::ZeroChunkSize);
        }
        if chunk_overlap > chunk_size {
            return Err(SplitError::OverlapTooLarge {
                overlap: chunk_overlap,
                chunk_size,
            });
        }
        Ok(Self {
            chunk_size,
            chunk_overlap,
            separator: " ".to_string(),
            backup_separators: vec!["\n".to_string()],
            tokenizer,
        })
    }

    setters! {
        /// Uses `separator` (default `" "`) as the first place to cut. An empty separator is
        /// skipped.
        pub fn with_separator(separator: impl Into<String>) => separator;

        /// Uses `seps` (default `["\n"]`), in order, where the separator gives a single piece.
        /// Empty separators are skipped.
        pub fn with_backup_separators(seps: Vec<String>) => backup_separators;
    }

    /// The most tokens in a chunk.
    pub fn chunk_size(&self) -> usize {
        self.chunk_size
    }

    /// The most tokens a chunk repeats from the previous one.
    pub fn chunk_overlap(&self) -> usize {
        self.chunk_overlap
    }

    /// The first separator.
    pub fn separator(&self) -> &str {
        &self.separator
    }

    /// The backup separators.
    #[cfg(test)]
    pub(crate) fn backup_separators(&self) -> &[String] {
        &self.backup_separators
    }

    /// The tokenizer that counts chunks.
    pub fn tokenizer(&self) -> &SharedTokenizer {
        &self.tokenizer
    }

    /// A cursor over `text` with this splitter's separators and tokenizer.
    pub fn cursor<'t>(&self, text: &'t str) -> ChunkCursor<'t> {
        ChunkCursor::new(
            text,
            &self.separator,
            &self.backup_separators,
            self.tokenizer.clone(),
        )
    }

    /// The chunk texts, as the reference returns them: `""` gives `[""]`, whitespace-only
    /// text gives `[]`.
    pub fn split_text(&self, text: &str) -> Vec<String> {
        if text.is_empty() {
            return vec![String::new()];
        }
        self.split_chunks(text)
            .iter()
            .map(|c| c.text(text).to_string())
            .collect()
    }

    /// The chunks of `text` with their offsets and exact token counts (`""` gives none).
    pub fn split_chunks(&self, text: &str) -> Vec<Chunk> {
        let mut cursor = self.cursor(text);
        let mut out = Vec::new();
        while let Some(chunk) = cursor.next_chunk(self.chunk_size, self.chunk_overlap) {
            out.push(chunk);
        }
        out
    }
}

/// Incremental packer: hands out consecutive chunks of one text, each with its own budget.
///
/// Refine and compact use it because each step's budget depends on the previous answer's
/// length. With the same size at every step it gives exactly the chunks of
/// [`TokenTextSplitter::split_chunks`]. When the size changes, the rest of the text is split
/// afresh for the new size (the overlap still comes from the previous chunk).
#[derive(Clone)]
pub struct ChunkCursor<'t> {
    text: &'t str,
    seps: Vec<Sep>,
    tokenizer: SharedTokenizer,
    /// Token counts of very short splits (most words), keyed by their packed bytes.
    small_cache: FxHashMap<u128, usize>,
    /// Token counts of other short splits, keyed by their text.
    cache: FxHashMap<&'t str, usize>,
    /// Everything before this offset has been handed out (or was whitespace).
    pos: usize,
    /// The splits of the last chunk handed out, for the overlap.
    prev: Vec<Split>,
    /// Scratch: the splits of the chunk being built.
    cur: Vec<Split>,
    /// The split stream: what comes next is on top.
    stack: Vec<Item>,
    /// The chunk size the stream was made for.
    stream_size: Option<usize>,
}

impl fmt::Debug for ChunkCursor<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChunkCursor")
            .field("len", &self.text.len())
            .field("pos", &self.pos)
            .field("tokenizer", &self.tokenizer)
            .finish_non_exhaustive()
    }
}

impl<'t> ChunkCursor<'t> {
    /// A cursor over `text` that cuts at `separator`, then at `backup_separators` in order,
    /// then between characters, and counts with `tokenizer`. Empty separators are skipped.
    pub fn new(
        text: &'t str,
        separator: &str,
        backup_separators: &[String],
        tokenizer: SharedTokenizer,
    ) -> Self {
        let seps = std::iter::once(separator)
            .chain(backup_separators.iter().map(String::as_str))
            .filter(|s| !s.is_empty())
            .map(Sep::new)
            .collect();
        Self {
            text,
            seps,
            tokenizer,
            small_cache: FxHashMap::default(),
            cache: FxHashMap::default(),
            pos: 0,
            prev: Vec::new(),
            cur: Vec::new(),
            stack: Vec::new(),
            stream_size: None,
        }
    }

    /// The text being handed out.
    pub fn text(&self) -> &'t str {
        self.text
    }

    /// True when no text is left to hand out (only whitespace remains).
    pub fn is_done(&self) -> bool {
        self.text
            .get(self.pos..)
            .is_none_or(|rest| rest.trim_start().is_empty())
    }

    /// The next chunk with at most `chunk_size` tokens (exact, counted on the final trimmed
    /// text), keeping up to `chunk_overlap` tokens of the previous chunk's tail (as the
    /// reference merge does), or `None` when all text has been handed out.
    ///
    /// A `chunk_size` of 0 is treated as 1; an overlap above the size as the size. Every
    /// chunk carries text that no earlier chunk had.
    pub fn next_chunk(&mut self, chunk_size: usize, chunk_overlap: usize) -> Option<Chunk> {
        let tokenizer = Arc::clone(&self.tokenizer);
        let size = chunk_size.max(1);
        self.next_chunk_fitting(chunk_size, chunk_overlap, &mut |text| {
            tokenizer.count_till_limit(text, size)
        })
    }

    /// Like [`ChunkCursor::next_chunk`], but the final check is the caller's: `fits` gets
    /// the chunk's final text and answers `Some(n)` to accept it (`n` is stored as the
    /// chunk's `tokens`) or `None` to ask for a smaller chunk. `chunk_size` still guides
    /// the packing. A synthesizer checks the whole prompt the chunk goes into, so the text
    /// is counted once, together with its template. `fits` must accept smaller chunks when
    /// it accepts larger ones; a single character that never fits is handed out alone,
    /// flagged `oversized`, without asking `fits`.
    pub(crate) fn next_chunk_fitting(
        &mut self,
        chunk_size: usize,
        chunk_overlap: usize,
        fits: &mut dyn FnMut(&str) -> Option<usize>,
    ) -> Option<Chunk> {
        let size = chunk_size.max(1);
        let overlap = chunk_overlap.min(size);
        if self.stream_size.is_none() && self.pos == 0 && self.text.len() <= size {
            // A text not yet started whose bytes fit the size fits whole (a token is at
            // least one byte): offer it whole, so that it is counted once, by `fits`.
            let head = self.text.trim_start();
            let start = self.text.len() - head.len();
            let end = start + head.trim_end().len();
            if start == end {
                self.pos = self.text.len();
                return None;
            }
            if let Some(tokens) = self.text.get(start..end).and_then(&mut *fits) {
                self.pos = self.text.len();
                return Some(Chunk {
                    start,
                    end,
                    tokens,
                    oversized: false,
                });
            }
        }
        if self.stream_size != Some(size) {
            self.reset_stream(size);
        }
        loop {
            match self.build_chunk(size, overlap, fits) {
                Build::Done => {
                    self.pos = self.text.len();
                    self.stack.clear();
                    return None;
                }
                Build::Chunk(chunk) => return Some(chunk),
                Build::Retry => {}
            }
        }
    }
}

#[cfg(test)]
mod tests;
