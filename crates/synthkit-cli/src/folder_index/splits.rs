//! Each document's chunks, kept in the index by what decides them, so that a folder in
//! which one file changed splits only that file again.
//!
//! A document's chunks depend on its name, its markup, its text and the chunking (size,
//! overlap, tokenizer, naming) and on nothing else: their key is a SHA-256 of those, so a
//! split is reused whenever all of them are the same, whatever happened to the file's
//! time (a file rewritten with the same text, a file too recent to trust, a folder asked
//! through another index of the same documents is not: one index, one table). Each chunk
//! is kept as its node (deflated JSON, as the `chunks` table holds it) with its words
//! counted for BM25, so the snapshot is written from the pieces without splitting or
//! counting again. Splits no document of the read used are removed when it is saved.

use anyhow::{Result, anyhow};
use rusqlite::{OptionalExtension, params};
use sha2::{Digest, Sha256};
use synthkit::Node;
use synthkit::text::TokenTextSplitter;
use synthkit_documents::chunk::chunk_nodes;

use super::{FolderIndex, LAYOUT, deflate, inflate, read_varint, varint};
use crate::input::Document;
use crate::rank::{self, Analyzer, Terms};

/// One chunk as the index keeps it.
pub struct Piece {
    /// The node, deflated JSON.
    pub node: Vec<u8>,
    /// Whether it is its document's first chunk (ranking favours it a little).
    pub first: bool,
    /// Its words for BM25.
    pub terms: Terms,
}

/// The chunks of a read, in order, and how many documents were split for them.
pub struct Pieces {
    /// Every chunk of every document, in order.
    pub pieces: Vec<Piece>,
    /// Documents split now.
    pub split: usize,
    /// Documents whose kept split was reused.
    pub reused: usize,
}

impl Pieces {
    /// The nodes (for a read that could not be saved and goes on from memory).
    pub fn nodes(&self) -> Result<Vec<Node>> {
        self.pieces
            .iter()
            .map(|p| Ok(serde_json::from_slice(&inflate(&p.node)?)?))
            .collect()
    }
}

impl FolderIndex {
    /// The chunks of `docs` split by `splitter` (`chunking` says all that decides them
    /// besides each document): a document's kept split when there is one, else split
    /// now and kept, inside the read's transaction ([`begin`](Self::begin)).
    pub fn pieces(
        &self,
        docs: &[Document],
        splitter: &TokenTextSplitter,
        chunking: &str,
    ) -> Result<Pieces> {
        let analyzer = Analyzer::new();
        let conn = self.conn();
        let mut find = conn.prepare("SELECT chunks FROM splits WHERE key = ?1")?;
        let mut mark = conn.prepare("UPDATE splits SET generation = ?2 WHERE key = ?1")?;
        let mut keep = conn.prepare(
            "INSERT OR REPLACE INTO splits (key, generation, chunks) VALUES (?1, ?2, ?3)",
        )?;
        let mut out = Pieces {
            pieces: Vec::new(),
            split: 0,
            reused: 0,
        };
        for doc in docs {
            let key = key(chunking, doc);
            let kept: Option<Vec<u8>> = find.query_row(params![key], |r| r.get(0)).optional()?;
            // A split that cannot be decoded is split again (and replaced).
            if let Some(pieces) = kept.and_then(|bytes| decode(&bytes).ok()) {
                mark.execute(params![key, self.generation])?;
                out.pieces.extend(pieces);
                out.reused += 1;
                continue;
            }
            let nodes = chunk_nodes(&doc.path, &doc.text, doc.format, splitter);
            let pieces = nodes
                .iter()
                .map(|node| {
                    Ok(Piece {
                        node: deflate(&serde_json::to_vec(node)?)?,
                        first: rank::is_first_chunk(node),
                        terms: analyzer.terms(node),
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            keep.execute(params![key, self.generation, encode(&pieces)])?;
            out.pieces.extend(pieces);
            out.split += 1;
        }
        Ok(out)
    }
}

/// The key of `doc`'s split under `chunking`.
fn key(chunking: &str, doc: &Document) -> Vec<u8> {
    let mut key = Sha256::new();
    key.update(format!("{LAYOUT}\n{chunking}\n{:?}\n", doc.format));
    key.update(doc.path.len().to_le_bytes());
    key.update(doc.path.as_bytes());
    key.update(doc.text.as_bytes());
    key.finalize().to_vec()
}

/// A split as stored: its chunk count, then for each chunk its node's length and bytes,
/// its first-chunk flag, its length in words and its words (a 4-byte hash, then a count).
fn encode(pieces: &[Piece]) -> Vec<u8> {
    let mut out = Vec::new();
    varint(&mut out, len32(pieces.len()));
    for p in pieces {
        varint(&mut out, len32(p.node.len()));
        out.extend_from_slice(&p.node);
        out.push(u8::from(p.first));
        varint(&mut out, p.terms.length);
        varint(&mut out, len32(p.terms.counts.len()));
        for &(word, count) in &p.terms.counts {
            out.extend_from_slice(&word.to_le_bytes());
            varint(&mut out, count);
        }
    }
    out
}

/// A length as stored (a chunk's node or word list is far below 4 GiB; saturated).
fn len32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The pieces of a stored split ([`encode`]); an error when it is cut or damaged.
fn decode(bytes: &[u8]) -> Result<Vec<Piece>> {
    let damaged = || anyhow!("a kept split is damaged");
    let mut at = 0;
    let take = |at: &mut usize, n: usize| -> Result<&[u8]> {
        let end = at
            .checked_add(n)
            .filter(|&e| e <= bytes.len())
            .ok_or_else(damaged)?;
        let slice = &bytes[*at..end];
        *at = end;
        Ok(slice)
    };
    let count = read_varint(bytes, &mut at)? as usize;
    // Each piece takes at least 4 bytes: a count past that is damage, not an allocation.
    let mut pieces = Vec::with_capacity(count.min(bytes.len() / 4));
    for _ in 0..count {
        let len = read_varint(bytes, &mut at)? as usize;
        let node = take(&mut at, len)?.to_vec();
        let first = take(&mut at, 1)?[0] == 1;
        let length = read_varint(bytes, &mut at)?;
        let words = read_varint(bytes, &mut at)? as usize;
        let mut counts = Vec::with_capacity(words.min(bytes.len() / 5));
        for _ in 0..words {
            let word = take(&mut at, 4)?;
            let word = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
            counts.push((word, read_varint(bytes, &mut at)?));
        }
        pieces.push(Piece {
            node,
            first,
            terms: Terms { length, counts },
        });
    }
    if at != bytes.len() {
        return Err(damaged());
    }
    Ok(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(word: u32) -> Piece {
        Piece {
            node: vec![1, 2, 3],
            first: word == 7,
            terms: Terms {
                length: 9,
                counts: vec![(word, 2), (u32::MAX, 300)],
            },
        }
    }

    #[test]
    fn splits_round_trip_and_damage_is_an_error() {
        let bytes = encode(&[piece(7), piece(8)]);
        let back = decode(&bytes).unwrap();
        assert_eq!(back.len(), 2);
        assert!(back[0].first && !back[1].first);
        assert_eq!(back[1].node, vec![1, 2, 3]);
        assert_eq!(back[1].terms, piece(8).terms);
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).is_err());
        // A huge count in a few bytes is an error, not an allocation.
        assert!(decode(&[0xff, 0xff, 0xff, 0xff, 0x0f]).is_err());
    }

    #[test]
    fn the_key_changes_with_each_part() {
        use synthkit_documents::Format;
        let doc = |path: &str, text: &str| Document {
            path: path.into(),
            text: text.into(),
            format: Format::Markdown,
        };
        let base = key("60 0 cl100k", &doc("a.md", "text"));
        assert_eq!(base, key("60 0 cl100k", &doc("a.md", "text")));
        assert_ne!(base, key("80 0 cl100k", &doc("a.md", "text")));
        assert_ne!(base, key("60 0 cl100k", &doc("b.md", "text")));
        assert_ne!(base, key("60 0 cl100k", &doc("a.md", "text!")));
        // The path's length is part of the key: no path and text run into each other.
        assert_ne!(key("c", &doc("ab", "c")), key("c", &doc("a", "bc")));
    }
}
