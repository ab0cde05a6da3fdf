//! The properties every chunk list of the token text splitter must have, checked by the
//! splitter's property tests and its fuzz test alike.

use synthkit::text::Tokenizer;
use synthkit::text::splitter::Chunk;

/// Checks every property a chunk list of `text` must have: valid trimmed ranges in
/// order, each chunk's token count right and within its size (`sizes`, by index; but a
/// lone oversized character), no overlap when `overlap_zero`, no text lost; returns a
/// message on failure.
pub fn check_chunks(
    text: &str,
    chunks: &[Chunk],
    sizes: &[usize],
    overlap_zero: bool,
    tok: &dyn Tokenizer,
) -> Result<(), String> {
    let mut prev: Option<&Chunk> = None;
    let mut rebuilt = String::new();
    for (i, c) in chunks.iter().enumerate() {
        let size = sizes.get(i).copied().unwrap_or(1).max(1);
        if !(c.start < c.end && text.is_char_boundary(c.start) && text.is_char_boundary(c.end)) {
            return Err(format!("chunk {i} bad range {}..{}", c.start, c.end));
        }
        let t = &text[c.start..c.end];
        if t.trim() != t {
            return Err(format!("chunk {i} not trimmed: {t:?}"));
        }
        let n = tok.count(t);
        if n != c.tokens {
            return Err(format!("chunk {i} says {} tokens, has {n}", c.tokens));
        }
        if c.oversized {
            if t.chars().count() != 1 || n <= size {
                return Err(format!("chunk {i} wrongly oversized: {t:?} {n} <= {size}"));
            }
        } else if n > size {
            return Err(format!("chunk {i} has {n} tokens > {size}: {t:?}"));
        }
        let new_from = match prev {
            None => {
                if !text[..c.start].trim().is_empty() {
                    return Err("text lost before the first chunk".into());
                }
                c.start
            }
            Some(p) => {
                if c.start < p.start || c.end <= p.end {
                    return Err(format!("chunk {i} out of order"));
                }
                if overlap_zero && c.start < p.end {
                    return Err(format!("chunk {i} overlaps without overlap"));
                }
                if c.start > p.end && !text[p.end..c.start].trim().is_empty() {
                    return Err(format!(
                        "text lost between chunks: {:?}",
                        &text[p.end..c.start]
                    ));
                }
                c.start.max(p.end)
            }
        };
        rebuilt.push_str(&text[new_from..c.end]);
        prev = Some(c);
    }
    let end = prev.map_or(0, |p| p.end);
    if !text[end..].trim().is_empty() {
        return Err("text lost after the last chunk".into());
    }
    let strip = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
    if strip(&rebuilt) != strip(text) {
        return Err("rebuilt text differs".into());
    }
    Ok(())
}
