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

use std::collections::HashMap;
use std::fmt;
use std::hash::BuildHasherDefault;
use std::sync::Arc;

use super::fxhash::FxHasher;

use crate::text::SharedTokenizer;

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

    /// Uses `separator` (default `" "`) as the first place to cut. An empty separator is
    /// skipped.
    pub fn with_separator(mut self, separator: impl Into<String>) -> Self {
        self.separator = separator.into();
        self
    }

    /// Uses `seps` (default `["\n"]`), in order, where the separator gives a single piece.
    /// Empty separators are skipped.
    pub fn with_backup_separators(mut self, seps: Vec<String>) -> Self {
        self.backup_separators = seps;
        self
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
    pub fn backup_separators(&self) -> &[String] {
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
pub struct ChunkCursor<'t> {
    text: &'t str,
    seps: Vec<Sep>,
    tokenizer: SharedTokenizer,
    /// Token counts of very short splits (most words), keyed by their packed bytes.
    small_cache: HashMap<u128, usize, BuildHasherDefault<FxHasher>>,
    /// Token counts of other short splits, keyed by their text.
    cache: HashMap<&'t str, usize, BuildHasherDefault<FxHasher>>,
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

/// Splits shorter than this many bytes have their counts cached.
const CACHE_MAX_BYTES: usize = 64;
/// The cache is emptied when it holds this many entries.
const CACHE_MAX_ENTRIES: usize = 1 << 16;
/// Back-off steps that give back one split at a time before giving back more.
const LINEAR_BACKOFF_STEPS: usize = 3;

/// A split: the byte range `start..end` of the text and its token count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Split {
    start: usize,
    end: usize,
    tokens: usize,
}

/// An entry of the split stream.
#[derive(Debug, Clone, Copy)]
enum Item {
    /// A finished split.
    Split(Split),
    /// A range still to be measured (and cut if too large).
    Range(usize, usize),
    /// A range being cut into pieces at one level.
    Frame(Frame),
}

/// A range cut lazily at one level (a separator, or characters past the last one).
#[derive(Debug, Clone, Copy)]
struct Frame {
    end: usize,
    level: usize,
    /// Start of the next piece.
    next: usize,
    /// Where to look for the next separator.
    search: usize,
}

/// A separator, with the last search for it remembered (the cursor only moves forward, so
/// the searches cost linear time in total).
#[derive(Debug, Clone)]
struct Sep {
    text: String,
    single: Option<char>,
    /// The first occurrence at or after `from` is `found` (`None`: none to the end).
    memo: Option<(usize, Option<usize>)>,
}

impl Sep {
    fn new(text: &str) -> Self {
        let mut chars = text.chars();
        let single = match (chars.next(), chars.next()) {
            (Some(c), None) => Some(c),
            _ => None,
        };
        Self {
            text: text.to_string(),
            single,
            memo: None,
        }
    }

    /// The first occurrence of the separator in `text` at or after `from`.
    fn find(&mut self, text: &str, from: usize) -> Option<usize> {
        if let Some((memo_from, found)) = self.memo
            && memo_from <= from
            && found.is_none_or(|f| from <= f)
        {
            return found;
        }
        let hay = text.get(from..)?;
        let found = match self.single {
            Some(c) => hay.find(c),
            None => hay.find(self.text.as_str()),
        }
        .map(|i| from + i);
        self.memo = Some((from, found));
        found
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
            small_cache: HashMap::default(),
            cache: HashMap::default(),
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
    pub fn next_chunk_fitting(
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

    /// Restarts the split stream at the first byte not handed out, for `size`.
    fn reset_stream(&mut self, size: usize) {
        self.stack.clear();
        if self.pos < self.text.len() {
            self.stack.push(Item::Range(self.pos, self.text.len()));
        }
        self.stream_size = Some(size);
    }

    /// One attempt at the next chunk.
    fn build_chunk(
        &mut self,
        size: usize,
        overlap: usize,
        fits: &mut dyn FnMut(&str) -> Option<usize>,
    ) -> Build {
        let Some(first) = self.next_split(size) else {
            return Build::Done;
        };
        self.stack.push(Item::Split(first));

        // The overlap: the longest tail of the previous chunk that stays within
        // `overlap` and leaves room for the first new split (the reference's rule).
        let mut keep_from = self.prev.len();
        let mut kept = 0usize;
        while let Some(k) = keep_from.checked_sub(1) {
            let Some(s) = self.prev.get(k) else { break };
            let total = kept + s.tokens;
            if total > overlap || total + first.tokens > size {
                break;
            }
            kept = total;
            keep_from = k;
        }
        let mut cur = std::mem::take(&mut self.cur);
        cur.clear();
        cur.extend(self.prev.get(keep_from..).unwrap_or_default());
        let mut n_overlap = cur.len();
        let mut cur_len = kept;
        let mut has_new = false;

        // Greedy packing by the sum of split counts.
        while let Some(s) = self.next_split(size) {
            if cur_len + s.tokens > size {
                if has_new {
                    self.stack.push(Item::Split(s));
                    break;
                }
                // Only overlap and whitespace so far: give them up to make room.
                let mut drop = 0;
                for d in cur.iter() {
                    if cur_len + s.tokens <= size {
                        break;
                    }
                    cur_len = cur_len.saturating_sub(d.tokens);
                    drop += 1;
                }
                cur.drain(..drop);
                n_overlap = n_overlap.saturating_sub(drop);
            }
            cur.push(s);
            cur_len += s.tokens;
            if !self.is_blank(s) {
                has_new = true;
                if s.tokens > size {
                    // An oversized split stands alone.
                    break;
                }
            }
        }
        if !has_new {
            self.cur = cur;
            return Build::Done;
        }

        // The sum counts the chunk's edges with their whitespace, which trimming removes
        // (a word without its leading space often takes more tokens). Estimate the trimmed
        // count from cached counts and give back the trailing splits it shows to be too
        // many, so that the exact count below usually succeeds at the first try.
        let first_new = self.first_new(&cur, n_overlap);
        while cur.len() > first_new + 1 && self.estimate_trimmed(&cur, cur_len) > size {
            cur_len = cur_len.saturating_sub(self.give_back(&mut cur, first_new, 1));
        }

        // Count the final text; give back splits until it fits.
        let mut step = 0usize;
        let result = loop {
            let (start, end) = self.trimmed(&cur);
            let chunk_text = self.text.get(start..end).unwrap_or_default();
            if let Some(tokens) = fits(chunk_text) {
                break Build::Chunk(Chunk {
                    start,
                    end,
                    tokens,
                    oversized: false,
                });
            }
            step += 1;
            let give = if step <= LINEAR_BACKOFF_STEPS {
                1
            } else {
                1usize << (step - LINEAR_BACKOFF_STEPS).min(20)
            };
            // The first new split with text: the chunk must keep it.
            let first_new = self.first_new(&cur, n_overlap);
            if cur.len() > first_new + 1 {
                self.give_back(&mut cur, first_new, give);
                continue;
            }
            if n_overlap > 0 {
                // Give up overlap, oldest first.
                let drop = give.min(n_overlap);
                cur.drain(..drop);
                n_overlap -= drop;
                continue;
            }
            // One split, alone, that does not fit once trimmed.
            let Some(&only) = cur.get(first_new) else {
                break Build::Retry;
            };
            match self.finer_level(only.start, only.end) {
                Some(level) => {
                    // Cut it finer and start over (whitespace before it is dropped).
                    self.stack.push(Item::Frame(Frame {
                        end: only.end,
                        level,
                        next: only.start,
                        search: only.start,
                    }));
                    break Build::Retry;
                }
                None => {
                    // A single character over the limit: hand it out alone.
                    let (start, end) = self.trimmed(std::slice::from_ref(&only));
                    let tokens = self
                        .tokenizer
                        .count(self.text.get(start..end).unwrap_or_default());
                    cur.clear();
                    cur.push(only);
                    tracing::debug!(
                        tokens,
                        chunk_size = size,
                        "a single character is larger than the chunk size"
                    );
                    break Build::Chunk(Chunk {
                        start,
                        end,
                        tokens,
                        oversized: true,
                    });
                }
            }
        };
        if let Build::Chunk(_) = result
            && let Some(last) = cur.last()
        {
            self.pos = last.end;
            std::mem::swap(&mut self.prev, &mut cur);
        }
        self.cur = cur;
        result
    }

    /// The index in `cur` of the first split after the overlap that is not whitespace
    /// (the chunk must keep it).
    fn first_new(&self, cur: &[Split], n_overlap: usize) -> usize {
        cur.iter()
            .enumerate()
            .skip(n_overlap)
            .find(|&(_, s)| !self.is_blank(*s))
            .map_or(n_overlap, |(i, _)| i)
    }

    /// Gives back up to `count` trailing splits with text (and the whitespace splits
    /// before and after them) to the stream, keeping at least `keep + 1` splits. Returns
    /// the tokens given back, by the splits' counts.
    fn give_back(&mut self, cur: &mut Vec<Split>, keep: usize, count: usize) -> usize {
        let mut given = 0;
        let mut tokens = 0;
        while cur.len() > keep + 1 {
            let Some(&s) = cur.last() else { break };
            let blank = self.is_blank(s);
            if !blank && given == count {
                break;
            }
            cur.pop();
            self.stack.push(Item::Split(s));
            tokens += s.tokens;
            if !blank {
                given += 1;
            }
        }
        tokens
    }

    /// An estimate of the token count of the trimmed text of `cur`, whose splits' counts
    /// sum to `sum`: the sum, less whitespace-only splits at the edges, with the edge
    /// splits counted without their outer whitespace (from the cache; long edge splits
    /// are left as they are).
    fn estimate_trimmed(&mut self, cur: &[Split], sum: usize) -> usize {
        let Some(first) = cur.iter().position(|s| !self.is_blank(*s)) else {
            return 0;
        };
        let last = cur
            .iter()
            .rposition(|s| !self.is_blank(*s))
            .unwrap_or(first);
        let blank_edges: usize = cur
            .get(..first)
            .unwrap_or_default()
            .iter()
            .map(|s| s.tokens)
            .sum::<usize>()
            + cur
                .get(last + 1..)
                .unwrap_or_default()
                .iter()
                .map(|s| s.tokens)
                .sum::<usize>();
        let est = sum.saturating_sub(blank_edges);
        let mut edge = |est: usize, s: Split, head: bool, tail: bool| -> usize {
            let raw = self.text.get(s.start..s.end).unwrap_or_default();
            if raw.len() >= CACHE_MAX_BYTES {
                return est;
            }
            let t = match (head, tail) {
                (true, true) => raw.trim(),
                (true, false) => raw.trim_start(),
                _ => raw.trim_end(),
            };
            if t.len() == raw.len() {
                return est;
            }
            let start = s.start + (raw.len() - raw.trim_start().len()) * usize::from(head);
            let n = self.count_cached(start, start + t.len());
            (est + n).saturating_sub(s.tokens)
        };
        match (cur.get(first), cur.get(last)) {
            (Some(&f), Some(_)) if first == last => edge(est, f, true, true),
            (Some(&f), Some(&l)) => {
                let est = edge(est, f, true, false);
                edge(est, l, false, true)
            }
            _ => est,
        }
    }

    /// The byte range of the splits' text with whitespace trimmed at both edges.
    fn trimmed(&self, splits: &[Split]) -> (usize, usize) {
        let (Some(first), Some(last)) = (splits.first(), splits.last()) else {
            return (self.pos, self.pos);
        };
        let raw = self.text.get(first.start..last.end).unwrap_or_default();
        let head = raw.trim_start();
        let start = first.start + (raw.len() - head.len());
        let end = start + head.trim_end().len();
        (start, end)
    }

    /// True when the split is whitespace only.
    fn is_blank(&self, s: Split) -> bool {
        self.text
            .get(s.start..s.end)
            .is_none_or(|t| t.chars().all(char::is_whitespace))
    }

    /// The next split of the stream for `size`.
    fn next_split(&mut self, size: usize) -> Option<Split> {
        loop {
            match self.stack.pop()? {
                Item::Split(s) => return Some(s),
                Item::Range(start, end) => {
                    if let Some(s) = self.measure(start, end, size) {
                        return Some(s);
                    }
                }
                Item::Frame(mut frame) => {
                    let piece = self.next_piece(&mut frame);
                    if let Some((start, end)) = piece {
                        if frame.next < frame.end {
                            self.stack.push(Item::Frame(frame));
                        }
                        if let Some(s) = self.measure(start, end, size) {
                            return Some(s);
                        }
                    }
                }
            }
        }
    }

    /// The split `start..end` if it fits in `size` (or is a single character); else pushes
    /// a frame that cuts it and returns `None`.
    fn measure(&mut self, start: usize, end: usize, size: usize) -> Option<Split> {
        if let Some(tokens) = self.fits(start, end, size) {
            return Some(Split { start, end, tokens });
        }
        match self.finer_level(start, end) {
            Some(level) => {
                self.stack.push(Item::Frame(Frame {
                    end,
                    level,
                    next: start,
                    search: start,
                }));
                None
            }
            None => {
                let tokens = self
                    .tokenizer
                    .count(self.text.get(start..end).unwrap_or_default());
                Some(Split { start, end, tokens })
            }
        }
    }

    /// The token count of `start..end` if it is at most `limit`.
    fn fits(&mut self, start: usize, end: usize, limit: usize) -> Option<usize> {
        if end - start < CACHE_MAX_BYTES {
            let tokens = self.count_cached(start, end);
            (tokens <= limit).then_some(tokens)
        } else {
            let piece = self.text.get(start..end).unwrap_or_default();
            self.tokenizer.count_till_limit(piece, limit)
        }
    }

    /// The token count of `start..end`, cached when it is short.
    fn count_cached(&mut self, start: usize, end: usize) -> usize {
        let piece = self.text.get(start..end).unwrap_or_default();
        if piece.len() >= CACHE_MAX_BYTES {
            return self.tokenizer.count(piece);
        }
        if let Some(key) = pack_small(piece) {
            if let Some(&n) = self.small_cache.get(&key) {
                return n;
            }
            let n = self.tokenizer.count(piece);
            if self.small_cache.len() >= CACHE_MAX_ENTRIES {
                self.small_cache.clear();
            }
            self.small_cache.insert(key, n);
            return n;
        }
        if let Some(&n) = self.cache.get(piece) {
            return n;
        }
        let n = self.tokenizer.count(piece);
        if self.cache.len() >= CACHE_MAX_ENTRIES {
            self.cache.clear();
        }
        self.cache.insert(piece, n);
        n
    }

    /// The first level (separator, or characters) that cuts `start..end` into more than
    /// one piece; `None` for a single character.
    fn finer_level(&mut self, start: usize, end: usize) -> Option<usize> {
        let text = self.text;
        for (level, sep) in self.seps.iter_mut().enumerate() {
            let len = sep.text.len();
            let Some(q) = sep.find(text, start).filter(|&q| q + len <= end) else {
                continue;
            };
            if q > start {
                return Some(level);
            }
            if sep
                .find(text, start + len)
                .is_some_and(|q2| q2 + len <= end)
            {
                return Some(level);
            }
        }
        let mut chars = text.get(start..end).unwrap_or_default().chars();
        match (chars.next(), chars.next()) {
            (Some(_), Some(_)) => Some(self.seps.len()),
            _ => None,
        }
    }

    /// The next piece of `frame`, advancing it.
    fn next_piece(&mut self, frame: &mut Frame) -> Option<(usize, usize)> {
        if frame.next >= frame.end {
            return None;
        }
        let text = self.text;
        let Some(sep) = self.seps.get_mut(frame.level) else {
            // Characters.
            let c = text.get(frame.next..frame.end)?.chars().next()?;
            let piece = (frame.next, frame.next + c.len_utf8());
            frame.next = piece.1;
            return Some(piece);
        };
        let len = sep.text.len();
        loop {
            let found = if frame.search < frame.end {
                sep.find(text, frame.search)
                    .filter(|&q| q + len <= frame.end)
            } else {
                None
            };
            match found {
                None => {
                    let piece = (frame.next, frame.end);
                    frame.next = frame.end;
                    return Some(piece);
                }
                Some(q) if q == frame.next => {
                    // The text starts with the separator: no empty first piece.
                    frame.search = q + len;
                }
                Some(q) => {
                    let piece = (frame.next, q);
                    frame.next = q;
                    frame.search = q + len;
                    return Some(piece);
                }
            }
        }
    }
}

/// A text of at most 15 bytes packed into one number (its bytes, then its length in the
/// top byte): an exact key that hashes and compares without touching memory.
#[inline]
fn pack_small(piece: &str) -> Option<u128> {
    let bytes = piece.as_bytes();
    if bytes.len() > 15 {
        return None;
    }
    let mut b = [0u8; 16];
    for (d, s) in b.iter_mut().zip(bytes) {
        *d = *s;
    }
    b[15] = bytes.len() as u8;
    Some(u128::from_le_bytes(b))
}

/// What one attempt at a chunk gave.
enum Build {
    Chunk(Chunk),
    Done,
    Retry,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{BpeTokenizer, Tokenizer};
    use std::sync::Arc;

    /// Tokens are whitespace-separated words.
    #[derive(Debug)]
    struct Words;

    impl Tokenizer for Words {
        fn name(&self) -> &str {
            "words"
        }
        fn count(&self, text: &str) -> usize {
            text.split_whitespace().count()
        }
        fn encode(&self, text: &str) -> Vec<u32> {
            text.split_whitespace().map(|_| 0).collect()
        }
        fn decode(&self, _tokens: &[u32]) -> Option<String> {
            None
        }
    }

    fn words(size: usize, overlap: usize) -> TokenTextSplitter {
        TokenTextSplitter::new(size, overlap, Arc::new(Words)).unwrap()
    }

    fn cl100k(size: usize, overlap: usize) -> TokenTextSplitter {
        TokenTextSplitter::new(size, overlap, BpeTokenizer::cl100k_base().shared()).unwrap()
    }

    #[test]
    fn settings_are_checked() {
        let tok = BpeTokenizer::cl100k_base().shared();
        assert_eq!(
            TokenTextSplitter::new(0, 0, tok.clone()).unwrap_err(),
            SplitError::ZeroChunkSize
        );
        let err = TokenTextSplitter::new(10, 11, tok.clone()).unwrap_err();
        assert_eq!(
            err,
            SplitError::OverlapTooLarge {
                overlap: 11,
                chunk_size: 10
            }
        );
        assert!(err.to_string().contains("at most the chunk size"));
        assert!(
            SplitError::ZeroChunkSize
                .to_string()
                .contains("greater than 0")
        );
        let s = TokenTextSplitter::new(10, 10, tok).unwrap();
        assert_eq!((s.chunk_size(), s.chunk_overlap()), (10, 10));
        assert_eq!(s.separator(), " ");
        assert_eq!(s.backup_separators(), ["\n"]);
    }

    #[test]
    fn reference_word_examples() {
        let text = "Hello world foo Hello world bar";
        assert_eq!(
            words(2, 0).split_text(text),
            ["Hello world", "foo Hello", "world bar"]
        );
        assert_eq!(
            words(1, 0).split_text(text),
            ["Hello", "world", "foo", "Hello", "world", "bar"]
        );
        assert_eq!(
            words(2, 1).split_text("foo bar hello world"),
            ["foo bar", "bar hello", "hello world"]
        );
        assert_eq!(words(1, 0).split_text("foo bar"), ["foo", "bar"]);
        assert_eq!(cl100k(1, 0).split_text("foo bar"), ["foo", "bar"]);
    }

    #[test]
    fn empty_and_blank() {
        let s = cl100k(10, 2);
        assert_eq!(s.split_text(""), [""]);
        assert!(s.split_chunks("").is_empty());
        assert!(s.split_text(" \n\t ").is_empty());
        assert!(s.split_chunks("   ").is_empty());
        let mut c = s.cursor("  \n ");
        assert!(c.is_done());
        assert_eq!(c.next_chunk(5, 0), None);
    }

    #[test]
    fn separators_stay_in_front() {
        // The reference's pieces: "Hello", ". World", ". Bye", ".".
        let s = words(2, 0)
            .with_separator(".")
            .with_backup_separators(vec![]);
        assert_eq!(
            s.split_text("Hello. World. Bye."),
            ["Hello", ". World", ". Bye", "."]
        );
        let s = words(1, 0)
            .with_separator(".")
            .with_backup_separators(vec![]);
        // ".b b" is two words: cut into characters, where "." and "b" count one each.
        assert_eq!(s.split_text("a a..b b"), ["a", "a", ".", ".", "b", "b"]);
        assert_eq!(words(1, 0).split_text(" a b"), ["a", "b"]);
    }

    #[test]
    fn abcde_at_100() {
        let text = "abcde".repeat(200);
        let chunks = cl100k(100, 0).split_chunks(&text);
        assert_eq!(chunks.len(), 10);
        assert!(chunks.iter().all(|c| c.tokens <= 100 && !c.oversized));
    }

    #[test]
    fn rocket_is_oversized() {
        let s = cl100k(1, 0);
        let chunks = s.split_chunks("🚀");
        assert_eq!(chunks.len(), 1);
        assert!(chunks.iter().all(|c| c.oversized && c.tokens > 1));
        assert_eq!(s.split_text("🚀"), ["🚀"]);
        let many = "🚀".repeat(20);
        let chunks = s.split_text(&many);
        assert_eq!(chunks.len(), 20);
        assert!(chunks.iter().all(|c| c == "🚀"));
    }

    #[test]
    fn newline_backup_separator() {
        let tok = BpeTokenizer::cl100k_base();
        let text = format!("{}\n{}", "a".repeat(49), "a".repeat(50));
        let whole = tok.count(&text);
        let halves = tok
            .count(&"a".repeat(49))
            .max(tok.count(&format!("\n{}", "a".repeat(50))));
        assert!(halves < whole);
        let chunks = cl100k(whole - 1, 0).split_text(&text);
        let lens: Vec<usize> = chunks.iter().map(String::len).collect();
        assert_eq!(lens, [49, 50]);
    }

    #[test]
    fn exact_limit_after_trim() {
        // The reference sums per-split counts, which undercounts once the first word
        // loses its leading space; the final text must still fit.
        let tok = BpeTokenizer::cl100k_base();
        let text = "initializing hexdigit longbyteschar shortstring setdefault ".repeat(40);
        for size in [5, 7, 16, 33, 64, 100, 256] {
            for c in cl100k(size, size / 10).split_chunks(&text) {
                assert_eq!(tok.count(c.text(&text)), c.tokens);
                assert!(c.tokens <= size, "{} > {size}", c.tokens);
            }
        }
    }

    #[test]
    fn cursor_matches_split_chunks() {
        let text = "The quick brown fox jumps over the lazy dog.\n\n".repeat(30);
        let s = cl100k(20, 4);
        let all = s.split_chunks(&text);
        let mut cursor = s.cursor(&text);
        let mut again = Vec::new();
        while let Some(c) = cursor.next_chunk(20, 4) {
            again.push(c);
        }
        assert_eq!(all, again);
        assert!(cursor.is_done());
    }

    #[test]
    fn is_done_right_after_last_chunk() {
        let text = "one two three four five six seven  \n ";
        let mut cursor = words(3, 1).cursor(text);
        let mut n = 0;
        while let Some(_c) = cursor.next_chunk(3, 1) {
            n += 1;
            if cursor.is_done() {
                break;
            }
        }
        assert!(cursor.is_done());
        assert_eq!(cursor.next_chunk(3, 1), None);
        assert!(n >= 3);
    }

    #[test]
    fn oversized_whitespace_is_dropped_not_the_text() {
        // U+2000 alone is more than one token; it must not end the splitting.
        assert_eq!(cl100k(1, 0).split_text("\u{2000}!"), ["!"]);
        assert_eq!(cl100k(1, 1).split_text("a\u{2000}\u{2000}b"), ["a", "b"]);
    }

    #[test]
    fn odd_inputs_do_not_panic() {
        let s = cl100k(3, 1);
        for text in [
            "a\r\nb\r\n\r\nc",
            "\0\0\0 \0",
            "e\u{301}\u{301}\u{301}\u{301}\u{301}\u{301}",
            "👩‍👩‍👧‍👦👩‍👩‍👧‍👦 👨‍🔬",
            "  leading and trailing  ",
            "中文文本没有空格但是很长很长很长很长很长",
        ] {
            let chunks = s.split_chunks(text);
            for c in &chunks {
                assert!(text.is_char_boundary(c.start) && text.is_char_boundary(c.end));
                assert!(c.tokens <= 3 || (c.oversized && c.text(text).chars().count() == 1));
            }
        }
    }
}
