//! The folder index: what `ask` and `summarize` read, split and ranked from folders, kept
//! on disk so that asking again reads only what changed.
//!
//! One SQLite file per set of paths (as given, from the same working folder) and reading
//! options, under the index folder (the command line's `--index-dir`). It
//! holds:
//!
//! - every document read from those folders (keyed by path, size and modification time),
//!   so that when files change only they are read again ([`ReadCache`]);
//! - every document's chunks, each node once, with their words counted (keyed by its name,
//!   markup, text and the chunking), so that only the documents that changed are split
//!   again ([`FolderIndex::pieces`]);
//! - a *snapshot*: which chunks the last read gave, in order, with each chunk's length and
//!   each word's chunks for BM25 (an inverted index), and what the read said on standard
//!   error, valid while the walk finds the same files with the same sizes and times, and
//!   the chunking (size, overlap, tokenizer) is the same.
//!
//! A question over an unchanged folder walks it (names and `stat` only), finds the
//! snapshot, scores the chunks holding the question's words from their postings and
//! loads only the best: no file is opened and no chunk's text is read but those kept. The
//! scores are [`rank::Query`]'s, those of ranking in memory to the bit, so the index
//! changes how fast an answer comes, never which chunks it comes from.
//!
//! Bounded: all indexes together at most [`MAX_INDEX_BYTES`]; after each write, indexes
//! unused for [`UNUSED_DAYS`] days are removed, then the least recently used until the rest
//! fit. Another process writing the same index, a damaged file or a full disk is said
//! once and the folder is read without the index; nothing is lost.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow};
use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use synthkit::Node;
use synthkit_documents::walk::{Found, walk};
use synthkit_documents::{ReadCache, ReadFile, ReadOptions};

use super::Say;
use super::rank::{self, Analyzer, Corpus, Query};
use super::read::Told;

mod bytes;
mod room;
mod splits;

use bytes::{deflate, hex, inflate, postings, varint};
use room::make_room;
pub use room::remove;
pub use splits::Pieces;

/// The most disk all folder indexes together may take (2 GiB).
pub const MAX_INDEX_BYTES: u64 = 2 << 30;
/// An index not used for this many days is removed.
pub const UNUSED_DAYS: u64 = 30;
/// How long to wait for another process writing the same index before reading without it.
const BUSY_WAIT: Duration = Duration::from_secs(2);
/// A file modified this recently may change again within its timestamp's granularity
/// without its size or time changing: it is read, never taken from or kept in the index
/// (git's "racy" files), and a read holding one keeps no snapshot.
const RACY: Duration = Duration::from_secs(2);
/// The layout of the tables; an index of another layout is emptied and rebuilt.
const LAYOUT: i64 = 3;
/// The extension of index files.
const EXTENSION: &str = "sqlite";
/// The bytes of one chunk's entry in the snapshot's `lengths`: its length in words (u32),
/// whether it is its document's first chunk (u8) and its node's id (i64), little-endian.
const ENTRY: usize = 13;

/// One folder index (see the [module documentation](self)).
pub struct FolderIndex {
    conn: Mutex<Connection>,
    file: PathBuf,
    /// The read generation: files looked at by this read are marked with it, and those of
    /// older generations (gone from the folders) removed when it is saved.
    generation: i64,
    /// Files of this read taken from the index.
    reused: AtomicUsize,
    /// Files of this read read from disk.
    read: AtomicUsize,
}

impl std::fmt::Debug for FolderIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FolderIndex")
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

/// What the last read of the folders found, valid while their [`fingerprint`] is the same.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Snapshot {
    /// The fingerprint it is valid for.
    pub fingerprint: String,
    /// What the read said.
    pub told: Told,
    /// Whether some path was a folder.
    pub from_folder: bool,
    /// The image files found.
    pub images: Vec<PathBuf>,
    /// The chunks, and their words in all.
    pub corpus: Corpus,
}

impl FolderIndex {
    /// Opens (or creates) the index of `paths` read with `options` under `dir`; a damaged
    /// one is said (`say`) and built anew.
    pub fn open(
        dir: &Path,
        paths: &[PathBuf],
        options: &ReadOptions,
        say: Say<'_>,
    ) -> Result<Self> {
        fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the index folder {}", dir.display()))?;
        let cwd = std::env::current_dir().unwrap_or_default();
        let mut key = Sha256::new();
        key.update(format!("{LAYOUT}\n{}\n{options:?}\n", cwd.display()));
        for p in paths {
            key.update(p.as_os_str().as_encoded_bytes());
            key.update([0]);
        }
        let name = hex(&key.finalize()[..16]);
        let file = dir.join(format!("{name}.{EXTENSION}"));
        let conn = match prepare(&file) {
            Ok(conn) => conn,
            Err(e) if is_damage(&e) => {
                say.warn(&format!(
                    "the folder index {} was damaged ({e}); it is built anew",
                    file.display()
                ));
                remove(&file);
                prepare(&file)?
            }
            Err(e) => {
                return Err(
                    anyhow!(e).context(format!("cannot open the folder index {}", file.display()))
                );
            }
        };
        let generation: i64 = conn.query_row(
            "SELECT MAX(COALESCE((SELECT MAX(generation) FROM files), 0),
                        COALESCE((SELECT MAX(generation) FROM splits), 0)) + 1",
            [],
            |r| r.get(0),
        )?;
        // Used now: the last to be removed when indexes must make room.
        let _ = fs::File::open(&file).and_then(|f| f.set_modified(SystemTime::now()));
        Ok(Self {
            conn: Mutex::new(conn),
            file,
            generation,
            reused: AtomicUsize::new(0),
            read: AtomicUsize::new(0),
        })
    }

    /// The index file.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Files of this read taken from the index, and read from disk.
    pub fn counts(&self) -> (usize, usize) {
        (
            self.reused.load(Ordering::Relaxed),
            self.read.load(Ordering::Relaxed),
        )
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The snapshot, if it is the one for `fingerprint`. When it is, a read transaction
    /// stays open, so that what [`top_k`](Self::top_k) and [`nodes`](Self::nodes) read is
    /// that snapshot's even if another process writes a new one meanwhile.
    pub fn snapshot(&self, fingerprint: &str) -> Result<Option<Snapshot>> {
        let conn = self.conn();
        conn.execute_batch("BEGIN")?;
        let found = (|| -> Result<Option<Snapshot>> {
            let bytes: Option<Vec<u8>> = conn
                .query_row("SELECT value FROM meta WHERE key = 'snapshot'", [], |r| {
                    r.get(0)
                })
                .optional()?;
            let Some(bytes) = bytes else { return Ok(None) };
            let snapshot: Snapshot = serde_json::from_slice(&inflate(&bytes)?)?;
            Ok((snapshot.fingerprint == fingerprint).then_some(snapshot))
        })();
        if !matches!(found, Ok(Some(_))) {
            let _ = conn.execute_batch("ROLLBACK");
        }
        found
    }

    /// Starts a read: what is written until [`save`](Self::save) is one transaction.
    pub fn begin(&self) -> Result<()> {
        self.conn().execute_batch("BEGIN IMMEDIATE")?;
        Ok(())
    }

    /// Ends a read that failed: nothing it wrote is kept.
    pub fn abandon(&self) {
        let _ = self.conn().execute_batch("ROLLBACK");
    }

    /// Keeps `pieces` (every chunk of the read, in order: [`pieces`](Self::pieces), whose
    /// nodes are already in the index) and what the read said as the snapshot for
    /// `fingerprint` (none when a file was too recently modified to be trusted: `None`),
    /// forgets the files and splits the read did not use, and commits.
    pub fn save(
        &self,
        fingerprint: Option<&str>,
        snapshot: Snapshot,
        pieces: &Pieces,
    ) -> Result<Option<Snapshot>> {
        let Some(fingerprint) = fingerprint else {
            let conn = self.conn();
            conn.execute_batch("DELETE FROM words; DELETE FROM meta;")?;
            self.forget_unused(&conn)?;
            conn.execute_batch("COMMIT")?;
            return Ok(None);
        };
        let pieces = &pieces.pieces;
        let mut lengths: Vec<u8> = Vec::with_capacity(pieces.len() * ENTRY);
        let mut postings: HashMap<u32, (u32, Vec<u8>)> = HashMap::new();
        let mut corpus = Corpus::default();
        let conn = self.conn();
        conn.execute_batch("DELETE FROM words;")?;
        {
            for (id, piece) in pieces.iter().enumerate() {
                let id = u32::try_from(id).map_err(|_| anyhow!("too many chunks to index"))?;
                let terms = &piece.terms;
                corpus = Corpus {
                    chunks: corpus.chunks + 1,
                    words: corpus.words + u64::from(terms.length),
                };
                lengths.extend_from_slice(&terms.length.to_le_bytes());
                lengths.push(u8::from(piece.first));
                lengths.extend_from_slice(&piece.id.to_le_bytes());
                for &(word, count) in &terms.counts {
                    let (last, list) = postings.entry(word).or_insert((0, Vec::new()));
                    // Chunk ids ascending: each stored as its distance from the last.
                    varint(list, id - *last);
                    varint(list, count);
                    *last = id;
                }
            }
            let mut insert = conn.prepare("INSERT INTO words (word, postings) VALUES (?1, ?2)")?;
            for (word, (_, list)) in &postings {
                insert.execute(params![word, list])?;
            }
        }
        let snapshot = Snapshot {
            fingerprint: fingerprint.to_owned(),
            corpus,
            ..snapshot
        };
        let meta = "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)";
        conn.execute(meta, params!["lengths", lengths])?;
        conn.execute(
            meta,
            params!["snapshot", deflate(&serde_json::to_vec(&snapshot)?)?],
        )?;
        self.forget_unused(&conn)?;
        conn.execute_batch("COMMIT")?;
        drop(conn);
        make_room(self.file.parent().unwrap_or(Path::new(".")), &self.file);
        Ok(Some(snapshot))
    }

    /// Removes the files and splits (with their nodes) this read did not look at or use.
    fn forget_unused(&self, conn: &Connection) -> Result<()> {
        conn.execute(
            "DELETE FROM files WHERE generation < ?1",
            params![self.generation],
        )?;
        self.forget_unused_splits(conn)
    }

    /// The snapshot's chunk entries ([`ENTRY`] bytes each, in order).
    fn lengths(conn: &Connection) -> Result<Vec<u8>> {
        let lengths: Vec<u8> =
            conn.query_row("SELECT value FROM meta WHERE key = 'lengths'", [], |r| {
                r.get(0)
            })?;
        if !lengths.len().is_multiple_of(ENTRY) {
            return Err(anyhow!("the index is damaged (cut chunk lengths)"));
        }
        Ok(lengths)
    }

    /// Every chunk of the snapshot, in order.
    pub fn nodes(&self) -> Result<Vec<Node>> {
        let conn = self.conn();
        let lengths = Self::lengths(&conn)?;
        let mut select = conn.prepare("SELECT node FROM nodes WHERE id = ?1")?;
        lengths
            .chunks_exact(ENTRY)
            .map(|entry| load(&mut select, node_id(entry)))
            .collect()
    }

    /// The `k` chunks of the snapshot most relevant to `query`, best first, with their
    /// scores, as [`rank::top_k`] ranks them all in memory.
    pub fn top_k(&self, snapshot: &Snapshot, query: &str, k: usize) -> Result<Vec<Node>> {
        let conn = self.conn();
        let lengths = Self::lengths(&conn)?;
        let chunks = lengths.len() / ENTRY;
        if k == 0 || chunks == 0 {
            return Ok(Vec::new());
        }
        let analyzer = Analyzer::new();
        let asked = Query::new(&analyzer, query, |_| 0, snapshot.corpus).distinct_words();
        // Each word of the question: the chunks holding it, and how often.
        let mut held: HashMap<u32, Vec<(u32, u32)>> = HashMap::new();
        let mut select = conn.prepare("SELECT postings FROM words WHERE word = ?1")?;
        for word in &asked {
            let list: Option<Vec<u8>> = select.query_row([word], |r| r.get(0)).optional()?;
            if let Some(list) = list {
                held.insert(*word, postings(&list)?);
            }
        }
        let frequency = |w: u32| held.get(&w).map_or(0, |l| l.len() as u32);
        let q = Query::new(&analyzer, query, frequency, snapshot.corpus);
        // The candidates: chunks holding a word of the question (all others score 0).
        let mut counts: HashMap<u32, Vec<(u32, u32)>> = HashMap::new();
        for (word, list) in &held {
            for &(chunk, count) in list {
                counts.entry(chunk).or_default().push((*word, count));
            }
        }
        let mut scores = vec![0.0f64; chunks];
        for (chunk, words) in &counts {
            let at = *chunk as usize * ENTRY;
            let Some(entry) = lengths.get(at..at + ENTRY) else {
                return Err(anyhow!("the index is damaged (a chunk past its end)"));
            };
            let length = u32::from_le_bytes([entry[0], entry[1], entry[2], entry[3]]);
            let count = |w: u32| words.iter().find(|(x, _)| *x == w).map_or(0, |(_, c)| *c);
            if let Some(s) = scores.get_mut(*chunk as usize) {
                *s = q.score(length, count, entry[4] == 1);
            }
        }
        let mut select = conn.prepare("SELECT node FROM nodes WHERE id = ?1")?;
        rank::best_first(&scores, k)
            .into_iter()
            .map(|(chunk, score)| {
                let at = chunk * ENTRY;
                let entry = &lengths[at..at + ENTRY];
                Ok(load(&mut select, node_id(entry))?.with_score(score))
            })
            .collect()
    }
}

impl ReadCache for FolderIndex {
    fn get(&self, path: &Path, meta: &fs::Metadata) -> Option<ReadFile> {
        if is_racy(meta) {
            return None;
        }
        let (size, mtime) = stamp(meta)?;
        let key = path.as_os_str().as_encoded_bytes();
        let conn = self.conn();
        let kept: Option<Vec<u8>> = conn
            .query_row(
                "SELECT read FROM files WHERE path = ?1 AND size = ?2 AND mtime = ?3",
                params![key, size, mtime],
                |r| r.get(0),
            )
            .optional()
            .ok()
            .flatten();
        let read = kept
            .and_then(|bytes| inflate(&bytes).ok())
            .and_then(|json| serde_json::from_slice::<ReadFile>(&json).ok())?;
        let _ = conn.execute(
            "UPDATE files SET generation = ?2 WHERE path = ?1",
            params![key, self.generation],
        );
        self.reused.fetch_add(1, Ordering::Relaxed);
        Some(read)
    }

    fn put(&self, path: &Path, meta: &fs::Metadata, read: &ReadFile) {
        self.read.fetch_add(1, Ordering::Relaxed);
        if is_racy(meta) {
            return;
        }
        let Some((size, mtime)) = stamp(meta) else {
            return;
        };
        let Some(bytes) = serde_json::to_vec(read).ok().and_then(|j| deflate(&j).ok()) else {
            return;
        };
        let _ = self.conn().execute(
            "INSERT OR REPLACE INTO files (path, size, mtime, generation, read)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                path.as_os_str().as_encoded_bytes(),
                size,
                mtime,
                self.generation,
                bytes
            ],
        );
    }
}

/// Opens the SQLite file at `file` with the index's tables (emptied when they are of
/// another layout).
fn prepare(file: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(file)?;
    conn.busy_timeout(BUSY_WAIT)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    let layout: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if layout == LAYOUT {
        // Nothing to write: a question over an unchanged folder only reads.
        return Ok(conn);
    }
    // Another process may be making the same file: looked at again under the write lock.
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let layout: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if layout != LAYOUT {
        conn.execute_batch(
            "DROP TABLE IF EXISTS files; DROP TABLE IF EXISTS chunks;
             DROP TABLE IF EXISTS words; DROP TABLE IF EXISTS meta;
             DROP TABLE IF EXISTS splits; DROP TABLE IF EXISTS nodes;
             CREATE TABLE files (
                 path BLOB PRIMARY KEY, size INTEGER NOT NULL, mtime INTEGER NOT NULL,
                 generation INTEGER NOT NULL, read BLOB NOT NULL);
             CREATE TABLE nodes (id INTEGER PRIMARY KEY, node BLOB NOT NULL);
             CREATE TABLE words (word INTEGER PRIMARY KEY, postings BLOB NOT NULL);
             CREATE TABLE meta (key TEXT PRIMARY KEY, value BLOB NOT NULL);
             CREATE TABLE splits (
                 key BLOB PRIMARY KEY, generation INTEGER NOT NULL, first INTEGER NOT NULL,
                 count INTEGER NOT NULL, terms BLOB NOT NULL);",
        )?;
        conn.pragma_update(None, "user_version", LAYOUT)?;
    }
    conn.execute_batch("COMMIT")?;
    Ok(conn)
}

/// The node id of a snapshot entry ([`ENTRY`] bytes).
fn node_id(entry: &[u8]) -> i64 {
    let mut id = [0u8; 8];
    id.copy_from_slice(&entry[5..ENTRY]);
    i64::from_le_bytes(id)
}

/// The node with `id`; an error when the index has none (it is damaged).
fn load(select: &mut rusqlite::Statement<'_>, id: i64) -> Result<Node> {
    let bytes: Option<Vec<u8>> = select.query_row([id], |r| r.get(0)).optional()?;
    let bytes = bytes.ok_or_else(|| anyhow!("the index is damaged (a chunk's node is missing)"))?;
    Ok(serde_json::from_slice(&inflate(&bytes)?)?)
}

/// Whether SQLite found the file not to be a database, or damaged.
fn is_damage(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt)
    )
}

/// What makes a read of `paths` what it is: every file the walk finds with its size and
/// modification time, every entry it skips or leaves out, the reading options and
/// `chunking` (the chunk size, overlap and tokenizer). Names and `stat` only: no file is
/// opened. Also whether some file was modified too recently to be trusted ([`RACY`]).
pub fn fingerprint(
    paths: &[PathBuf],
    options: &ReadOptions,
    chunking: &str,
) -> Result<(String, bool)> {
    let mut racy = false;
    let mut hash = Sha256::new();
    hash.update(format!(
        "{LAYOUT}\n{}\n{chunking}\n{options:?}\n",
        env!("CARGO_PKG_VERSION")
    ));
    let mut file = |hash: &mut Sha256, path: &Path| {
        hash.update(path.as_os_str().as_encoded_bytes());
        let meta = fs::metadata(path).ok();
        racy |= meta.as_ref().is_none_or(is_racy);
        match meta.as_ref().and_then(stamp) {
            Some((size, mtime)) => hash.update(format!("\0{size}\0{mtime}\n")),
            None => hash.update("\0?\n"),
        }
    };
    for path in paths {
        if !path.is_dir() {
            file(&mut hash, path);
            continue;
        }
        hash.update(format!("dir {}\n", path.display()));
        let mut walker = walk(path, options.walk_options()).map_err(|e| anyhow!("{e}"))?;
        for found in walker.by_ref() {
            match found {
                Found::File(f) => file(&mut hash, &f),
                Found::Skipped(s) => hash.update(format!("skip {s}\n")),
            }
        }
        for left in walker.left_out() {
            hash.update(format!("left {}\n", left.path.display()));
        }
    }
    Ok((hex(&hash.finalize()), racy))
}

/// Whether a file was modified within [`RACY`] of now (or its time is unknown or ahead).
fn is_racy(meta: &fs::Metadata) -> bool {
    meta.modified()
        .ok()
        .and_then(|m| SystemTime::now().duration_since(m).ok())
        .is_none_or(|age| age < RACY)
}

/// A file's size and modification time (nanoseconds since 1970), as the index keys it.
fn stamp(meta: &fs::Metadata) -> Option<(i64, i64)> {
    let size = i64::try_from(meta.len()).ok()?;
    let mtime = meta.modified().ok()?;
    let nanos = match mtime.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_nanos()).ok()?,
        Err(e) => -i64::try_from(e.duration().as_nanos()).ok()?,
    };
    Some((size, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieval::read::Document;
    use synthkit::text::{BpeTokenizer, TokenTextSplitter};
    use synthkit_documents::Format;

    fn doc(path: &str, text: &str) -> Document {
        Document {
            path: path.into(),
            text: text.into(),
            format: Format::Markdown,
        }
    }

    fn rows(ix: &FolderIndex, table: &str) -> i64 {
        ix.conn()
            .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
            .unwrap()
    }

    fn snapshot() -> Snapshot {
        Snapshot {
            fingerprint: String::new(),
            told: Told::default(),
            from_folder: true,
            images: Vec::new(),
            corpus: Corpus::default(),
        }
    }

    /// Reads `docs` as one question's read would, and keeps it.
    fn read(ix: &FolderIndex, docs: &[Document]) -> (Pieces, Snapshot) {
        let splitter = TokenTextSplitter::new(5, 0, BpeTokenizer::cl100k_base().shared()).unwrap();
        ix.begin().unwrap();
        let pieces = ix.pieces(docs, &splitter, "5 0 cl100k").unwrap();
        let kept = ix.save(Some("fp"), snapshot(), &pieces).unwrap().unwrap();
        (pieces, kept)
    }

    #[test]
    fn each_node_is_kept_once_and_goes_with_its_document() {
        let dir = tempfile::tempdir().unwrap();
        let open = || {
            FolderIndex::open(
                dir.path(),
                &[dir.path().into()],
                &ReadOptions::default(),
                super::super::Say::new(&super::super::Quiet),
            )
            .unwrap()
        };
        let words = "one two three four five six seven eight nine ten eleven twelve";
        let docs = [
            doc("a.md", words),
            doc("b.md", "alpha beta gamma delta epsilon zeta eta"),
        ];
        let ix = open();
        let (first, kept) = read(&ix, &docs);
        assert_eq!((first.split, first.reused), (2, 0));
        let chunks = first.pieces.len() as i64;
        assert!(chunks > 2, "{chunks} chunks");
        assert_eq!(rows(&ix, "nodes"), chunks);
        let all = ix.nodes().unwrap();
        assert_eq!(all.len() as i64, chunks);
        assert!(all[0].text.starts_with("one"), "{}", all[0].text);
        let best = ix.top_k(&kept, "gamma", 1).unwrap();
        assert!(best[0].text.contains("gamma"), "{}", best[0].text);
        drop(ix);

        // b.md changes: a.md's split and nodes are reused, b.md's old nodes go.
        let ix = open();
        let docs = [
            doc("a.md", words),
            doc("b.md", "omega psi chi phi upsilon tau sigma rho"),
        ];
        let (second, kept) = read(&ix, &docs);
        assert_eq!((second.split, second.reused), (1, 1));
        assert_eq!(rows(&ix, "nodes"), second.pieces.len() as i64);
        assert_eq!(rows(&ix, "splits"), 2);
        assert!(
            ix.top_k(&kept, "gamma", 3)
                .unwrap()
                .iter()
                .all(|n| !n.text.contains("gamma"))
        );
        let best = ix.top_k(&kept, "sigma", 1).unwrap();
        assert!(best[0].text.contains("sigma"), "{}", best[0].text);
        // A read not kept goes on from memory: the reused nodes come from the index.
        let texts: Vec<String> = second
            .nodes(&ix)
            .unwrap()
            .into_iter()
            .map(|n| n.text)
            .collect();
        let kept: Vec<String> = ix.nodes().unwrap().into_iter().map(|n| n.text).collect();
        assert_eq!(texts, kept);
    }
}
