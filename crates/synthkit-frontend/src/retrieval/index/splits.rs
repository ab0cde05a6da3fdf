//! Each document's chunks, kept in the index by what decides them, so that a folder in
//! which one file changed splits only that file again.
//!
//! A document's chunks depend on its name, its markup, its text and the chunking (size,
//! overlap, tokenizer, naming) and on nothing else: their key is a SHA-256 of those, so a
//! split is reused whenever all of them are the same, whatever happened to the file's
//! time (a file rewritten with the same text, a file too recent to trust, a folder asked
//! through another index of the same documents is not: one index, one table). A split
//! keeps each chunk's words counted for BM25 and where its node is: the `nodes` table
//! holds each chunk's node once (deflated JSON), under ids that follow one another within
//! a split, and the snapshot points at them, so the snapshot is written from the pieces
//! without splitting, counting or copying a chunk's text again. Splits no document of the
//! read used are removed with their nodes when it is saved.

use anyhow::{Result, anyhow};
use rusqlite::{Connection, OptionalExtension, params};
use sha2::{Digest, Sha256};
use synthkit::Node;
use synthkit::text::TokenTextSplitter;
use synthkit_documents::chunk::chunk_nodes;

use super::bytes::{deflate, inflate, read_varint, varint};
use super::{FolderIndex, LAYOUT};
use crate::retrieval::rank::{self, Analyzer, Terms};
use crate::retrieval::read::Document;

/// One chunk as the index keeps it.
pub struct Piece {
    /// The id of its node in the `nodes` table.
    pub id: i64,
    /// The node, deflated JSON, when the document was split by this read (else it is
    /// only in the index).
    pub node: Option<Vec<u8>>,
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
    /// The nodes (for a read that was not kept as a snapshot and goes on from memory):
    /// those split now from memory, the others from `ix`.
    pub fn nodes(&self, ix: &FolderIndex) -> Result<Vec<Node>> {
        let conn = ix.conn();
        let mut select = conn.prepare("SELECT node FROM nodes WHERE id = ?1")?;
        self.pieces
            .iter()
            .map(|p| {
                let json = match &p.node {
                    Some(bytes) => inflate(bytes)?,
                    None => inflate(&select.query_row([p.id], |r| r.get::<_, Vec<u8>>(0))?)?,
                };
                Ok(serde_json::from_slice(&json)?)
            })
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
        let mut find = conn.prepare("SELECT first, count, terms FROM splits WHERE key = ?1")?;
        let mut mark = conn.prepare("UPDATE splits SET generation = ?2 WHERE key = ?1")?;
        let mut keep = conn.prepare(
            "INSERT OR REPLACE INTO splits (key, generation, first, count, terms)
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )?;
        let mut node = conn.prepare("INSERT INTO nodes (id, node) VALUES (?1, ?2)")?;
        let mut next: i64 =
            conn.query_row("SELECT COALESCE(MAX(id), 0) + 1 FROM nodes", [], |r| {
                r.get(0)
            })?;
        let mut out = Pieces {
            pieces: Vec::new(),
            split: 0,
            reused: 0,
        };
        for doc in docs {
            let key = key(chunking, doc);
            let kept: Option<(i64, i64, Vec<u8>)> = find
                .query_row(params![key], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .optional()?;
            if let Some((first, count, terms)) = kept {
                // A split that cannot be decoded is split again (and replaced).
                if let Ok(pieces) = decode(first, count, &terms) {
                    mark.execute(params![key, self.generation])?;
                    out.pieces.extend(pieces);
                    out.reused += 1;
                    continue;
                }
                remove_nodes(&conn, first, count)?;
            }
            let nodes = chunk_nodes(&doc.path, &doc.text, doc.format, splitter);
            let first = next;
            let mut pieces = Vec::with_capacity(nodes.len());
            for n in &nodes {
                let bytes = deflate(&serde_json::to_vec(n)?)?;
                node.execute(params![next, bytes])?;
                pieces.push(Piece {
                    id: next,
                    node: Some(bytes),
                    first: rank::is_first_chunk(n),
                    terms: analyzer.terms(n),
                });
                next += 1;
            }
            let count = next - first;
            keep.execute(params![key, self.generation, first, count, encode(&pieces)])?;
            out.pieces.extend(pieces);
            out.split += 1;
        }
        Ok(out)
    }

    /// Removes the splits this read did not use, with their nodes.
    pub(super) fn forget_unused_splits(&self, conn: &Connection) -> Result<()> {
        let stale: Vec<(i64, i64)> = {
            let mut select =
                conn.prepare("SELECT first, count FROM splits WHERE generation < ?1")?;
            let rows = select.query_map([self.generation], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        for (first, count) in stale {
            remove_nodes(conn, first, count)?;
        }
        conn.execute(
            "DELETE FROM splits WHERE generation < ?1",
            params![self.generation],
        )?;
        Ok(())
    }
}

/// Removes the `count` nodes of a split from `first` on.
fn remove_nodes(conn: &Connection, first: i64, count: i64) -> rusqlite::Result<()> {
    conn.execute(
        "DELETE FROM nodes WHERE id >= ?1 AND id < ?2",
        params![first, first.saturating_add(count.max(0))],
    )?;
    Ok(())
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

/// A split's words as stored: its chunk count, then for each chunk its first-chunk flag,
/// its length in words and its words (a 4-byte hash, then a count).
fn encode(pieces: &[Piece]) -> Vec<u8> {
    let mut out = Vec::new();
    varint(&mut out, len32(pieces.len()));
    for p in pieces {
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

/// A length as stored (a chunk's word list is far below 4 GiB; saturated).
fn len32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The pieces of a stored split whose `count` nodes have ids from `first` on
/// ([`encode`]); an error when it is cut, damaged or holds another count.
fn decode(first: i64, count: i64, bytes: &[u8]) -> Result<Vec<Piece>> {
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
    let stored = read_varint(bytes, &mut at)?;
    if i64::from(stored) != count || first < 1 || first.checked_add(count).is_none() {
        return Err(damaged());
    }
    // Each piece takes at least 3 bytes: a count past that is damage, not an allocation.
    let mut pieces = Vec::with_capacity((stored as usize).min(bytes.len() / 3));
    for id in first..first + count {
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
            id,
            node: None,
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
            id: 0,
            node: Some(vec![1, 2, 3]),
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
        let back = decode(40, 2, &bytes).unwrap();
        assert_eq!(back.len(), 2);
        assert!(back[0].first && !back[1].first);
        assert_eq!((back[0].id, back[1].id), (40, 41));
        assert!(back[1].node.is_none());
        assert_eq!(back[1].terms, piece(8).terms);
        for cut in 0..bytes.len() {
            assert!(decode(40, 2, &bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(40, 2, &longer).is_err());
        // Another count than the row's, or ids that cannot be, is damage.
        assert!(decode(40, 3, &bytes).is_err());
        assert!(decode(0, 2, &bytes).is_err());
        assert!(decode(i64::MAX, 2, &bytes).is_err());
        // A huge count in a few bytes is an error, not an allocation.
        assert!(decode(1, 0xffff_ffff, &[0xff, 0xff, 0xff, 0xff, 0x0f]).is_err());
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
