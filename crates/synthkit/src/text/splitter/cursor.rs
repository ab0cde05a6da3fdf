//! The internals of [`ChunkCursor`]: the lazy split stream (separators, frames, the
//! count cache) and the packing of one chunk (overlap, greedy merge, exact fit).

use super::{Chunk, ChunkCursor};

/// Splits shorter than this many bytes have their counts cached.
const CACHE_MAX_BYTES: usize = 64;
/// The cache is emptied when it holds this many entries.
const CACHE_MAX_ENTRIES: usize = 1 << 16;
/// Back-off steps that give back one split at a time before giving back more.
const LINEAR_BACKOFF_STEPS: usize = 3;

/// A split: the byte range `start..end` of the text and its token count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Split {
    start: usize,
    end: usize,
    tokens: usize,
}

/// An entry of the split stream.
#[derive(Debug, Clone, Copy)]
pub(super) enum Item {
    /// A finished split.
    Split(Split),
    /// A range still to be measured (and cut if too large).
    Range(usize, usize),
    /// A range being cut into pieces at one level.
    Frame(Frame),
}

/// A range cut lazily at one level (a separator, or characters past the last one).
#[derive(Debug, Clone, Copy)]
pub(super) struct Frame {
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
pub(super) struct Sep {
    text: String,
    single: Option<char>,
    /// The first occurrence at or after `from` is `found` (`None`: none to the end).
    memo: Option<(usize, Option<usize>)>,
}

impl Sep {
    pub(super) fn new(text: &str) -> Self {
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

impl ChunkCursor<'_> {
    /// Restarts the split stream at the first byte not handed out, for `size`.
    pub(super) fn reset_stream(&mut self, size: usize) {
        self.stack.clear();
        if self.pos < self.text.len() {
            self.stack.push(Item::Range(self.pos, self.text.len()));
        }
        self.stream_size = Some(size);
    }

    /// One attempt at the next chunk.
    pub(super) fn build_chunk(
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
pub(super) enum Build {
    Chunk(Chunk),
    Done,
    Retry,
}
