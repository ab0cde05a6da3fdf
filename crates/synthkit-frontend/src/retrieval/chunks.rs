//! The chunks of the paths a command reads, through the folder index when it applies:
//! what `ask`, `summarize`, `batch` lines and `eval` cases rank and send.
//!
//! With an index folder and a folder among the paths (no standard input), the paths are
//! first walked for their fingerprint ([`folder_index::fingerprint`]: names, sizes and
//! times). The same as last time: the read's notes are said again and the chunks stay in
//! the index, ranked there ([`Chunks::top_k`]) and loaded only when kept. Else the paths
//! are read (files unchanged since taken from the index), split (documents split before
//! taken from the index), and kept as the new snapshot. Whatever goes wrong with the
//! index is said in a note and the paths are read without it: the index changes how soon
//! an answer comes, never what it says.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use synthkit::Node;
use synthkit::text::TokenTextSplitter;
use synthkit_documents::ReadOptions;

use super::index::{self as folder_index, FolderIndex, Pieces, Snapshot};
use super::paths::OptionNames;
use super::read as input;
use super::{Progress, Say, rank, thousands};

/// What to read and how.
pub struct ChunkSource<'a> {
    /// Files and folders (`-`: standard input).
    pub paths: &'a [PathBuf],
    /// How they are read.
    pub options: &'a ReadOptions,
    /// Where folder indexes are kept; `None`: no index.
    pub index_dir: Option<&'a Path>,
    /// How documents are cut into chunks.
    pub splitter: &'a TokenTextSplitter,
    /// What else decides the chunks besides the splitter (a `paths` root that names
    /// documents), part of the index's fingerprint.
    pub naming: &'a str,
    /// How a document is named before it is chunked (a batch line's paths: relative to
    /// its root); `None`: as found.
    pub rename: Option<&'a dyn Fn(&str) -> String>,
    /// How much to say.
    pub say: Say<'a>,
}

/// The chunks read: in memory, or in the folder index (nothing changed since it was
/// kept).
pub enum Chunks {
    /// Every chunk, in order.
    Memory(Vec<Node>),
    /// The index's snapshot, ranked there (its chunks loaded from it when wanted), and
    /// what the front end calls its options (for the error of a damaged index).
    Indexed(Arc<FolderIndex>, Snapshot, &'static OptionNames),
}

impl Chunks {
    /// How many chunks.
    pub fn len(&self) -> usize {
        match self {
            Chunks::Memory(nodes) => nodes.len(),
            Chunks::Indexed(_, s, _) => usize::try_from(s.corpus.chunks).unwrap_or(usize::MAX),
        }
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `k` most relevant to `query`, best first ([`rank::top_k`]).
    pub fn top_k(self, query: &str, k: usize) -> Result<Vec<Node>> {
        match self {
            Chunks::Memory(nodes) => Ok(rank::top_k(nodes, query, k)),
            Chunks::Indexed(ix, snapshot, names) => ix
                .top_k(&snapshot, query, k)
                .map_err(|e| damaged(&ix, e, names)),
        }
    }

    /// Every chunk, in order.
    pub fn into_nodes(self) -> Result<Vec<Node>> {
        match self {
            Chunks::Memory(nodes) => Ok(nodes),
            Chunks::Indexed(ix, _, names) => ix.nodes().map_err(|e| damaged(&ix, e, names)),
        }
    }
}

/// What reading the paths gave.
pub struct ReadChunks {
    /// The chunks.
    pub chunks: Chunks,
    /// Whether some path was a folder.
    pub from_folder: bool,
    /// The image files found (not counted as skipped), in order.
    pub images: Vec<PathBuf>,
    /// The documents read, by name: when they gave no chunk, what the error names.
    pub names: Vec<String>,
}

/// Reads the chunks of `source` (see the [module documentation](self)).
pub fn read_chunks(source: &ChunkSource<'_>, spinner: &dyn Progress) -> Result<ReadChunks> {
    let index = open_index(source, spinner);
    let hit = index
        .as_ref()
        .and_then(|(ix, (fp, _), _)| match ix.snapshot(fp) {
            Ok(hit) => hit,
            Err(e) => {
                unusable(source.say, ix, &e);
                None
            }
        });
    if let (Some((ix, _, _)), Some(snapshot)) = (&index, hit) {
        spinner.clear();
        input::say_told(&snapshot.told, source.say);
        if source.say.verbose {
            source.say.note(&format!(
                "folder index {}: no file changed since the last read; none read",
                ix.file().display()
            ));
        }
        return Ok(ReadChunks {
            from_folder: snapshot.from_folder,
            images: snapshot.images.clone(),
            chunks: Chunks::Indexed(ix.clone(), snapshot, source.say.to.names()),
            names: Vec::new(),
        });
    }
    let writing = index.filter(|(ix, _, _)| match ix.begin() {
        Ok(()) => true,
        Err(e) => {
            unusable(source.say, ix, &e);
            false
        }
    });
    let cache = writing.as_ref().map(|(ix, _, _)| ix.clone() as Arc<_>);
    let read = input::read_documents(source.paths, source.options, cache, source.say, spinner);
    let mut read = match read {
        Ok(read) => read,
        Err(e) => {
            if let Some((ix, _, _)) = &writing {
                ix.abandon();
            }
            return Err(e);
        }
    };
    if let Some(rename) = source.rename {
        for doc in &mut read.docs {
            doc.path = rename(&doc.path);
        }
    }
    if read.docs.len() > 1 {
        spinner.set(&format!(
            "splitting {} files into chunks",
            thousands(read.docs.len())
        ));
    }
    // Split through the index when it is written: a document split before is not again.
    let pieces = writing.as_ref().and_then(|(ix, _, chunking)| {
        match ix.pieces(&read.docs, source.splitter, chunking) {
            Ok(pieces) => Some(pieces),
            Err(e) => {
                ix.abandon();
                unusable(source.say, ix, &e);
                None
            }
        }
    });
    let chunks = match (&writing, pieces) {
        (Some((ix, (fp, racy), _)), Some(pieces)) => {
            if pieces.pieces.is_empty() {
                // Nothing to keep: the error (or the images alone) comes from memory.
                ix.abandon();
                Chunks::Memory(Vec::new())
            } else {
                spinner.set(&format!(
                    "indexing {} chunks",
                    thousands(pieces.pieces.len())
                ));
                let snapshot = Snapshot {
                    fingerprint: String::new(),
                    told: read.told.clone(),
                    from_folder: read.from_folder,
                    images: read.images.clone(),
                    corpus: rank::Corpus::default(),
                };
                let fp = (!racy).then_some(fp.as_str());
                // Kept: ranked from the index (the words are counted once).
                // Not kept (a racy file, a failed save): from memory (the nodes split
                // before read back from the index), split again should one not load.
                match save(ix, fp, snapshot, &pieces, source.say) {
                    Some(snapshot) => Chunks::Indexed(ix.clone(), snapshot, source.say.to.names()),
                    None => Chunks::Memory(pieces.nodes(ix).unwrap_or_else(|_| {
                        input::nodes_from_documents(&read.docs, source.splitter)
                    })),
                }
            }
        }
        _ => Chunks::Memory(input::nodes_from_documents(&read.docs, source.splitter)),
    };
    let names: Vec<String> = read.docs.into_iter().map(|d| d.path).collect();
    spinner.clear();
    Ok(ReadChunks {
        chunks,
        from_folder: read.from_folder,
        images: read.images,
        names,
    })
}

/// The folder index of `source` with the fingerprint of what its paths hold now (and
/// whether a file is too new to trust), when it applies and opens (else a note says why,
/// and the paths are read without it).
fn open_index(
    source: &ChunkSource<'_>,
    spinner: &dyn Progress,
) -> Option<(Arc<FolderIndex>, (String, bool), String)> {
    let dir = source.index_dir?;
    let applies = source.paths.iter().all(|p| p.as_os_str() != "-")
        && source.paths.iter().any(|p| p.is_dir());
    if !applies {
        return None;
    }
    spinner.set("looking for changes since the last read");
    let tokenizer = source.splitter.tokenizer();
    let chunking = format!(
        "{} {} {} {}",
        source.splitter.chunk_size(),
        source.splitter.chunk_overlap(),
        tokenizer.name(),
        source.naming
    );
    let opened = FolderIndex::open(dir, source.paths, source.options, source.say).and_then(|ix| {
        let fp = folder_index::fingerprint(source.paths, source.options, &chunking)?;
        Ok((Arc::new(ix), fp, chunking))
    });
    match opened {
        Ok(opened) => Some(opened),
        Err(e) => {
            source.say.note(&format!(
                "the folder index cannot be used ({e:#}); reading without it"
            ));
            None
        }
    }
}

/// Says that the index at hand cannot be used; the paths are read without it.
fn unusable(say: Say<'_>, ix: &FolderIndex, e: &anyhow::Error) {
    let busy = e
        .downcast_ref::<rusqlite::Error>()
        .and_then(rusqlite::Error::sqlite_error_code)
        == Some(rusqlite::ErrorCode::DatabaseBusy);
    let why = if busy {
        "another synthkit is updating it".to_string()
    } else {
        format!("{e:#}")
    };
    say.note(&format!(
        "the folder index {} cannot be used ({why}); reading without it",
        ix.file().display()
    ));
}

/// Keeps a read in its index, and gives back the snapshot kept; a failure is said and
/// loses nothing (the read goes on from memory).
fn save(
    ix: &FolderIndex,
    fingerprint: Option<&str>,
    snapshot: Snapshot,
    pieces: &Pieces,
    say: Say<'_>,
) -> Option<Snapshot> {
    let saved = ix.save(fingerprint, snapshot, pieces);
    match &saved {
        Ok(_) if say.verbose => {
            let (reused, read) = ix.counts();
            let racy = if fingerprint.is_none() {
                " (a file changed in the last 2 s: the next question looks again)"
            } else {
                ""
            };
            say.note(&format!(
                "folder index {}: read {read} file{}, {reused} unchanged taken from the index; \
                     split {} document{}, reused {} split{}{racy}",
                ix.file().display(),
                if read == 1 { "" } else { "s" },
                pieces.split,
                if pieces.split == 1 { "" } else { "s" },
                pieces.reused,
                if pieces.reused == 1 { "" } else { "s" },
            ));
        }
        Ok(_) => {}
        Err(e) => {
            ix.abandon();
            say.note(
                &format!(
                    "the folder index {} was not saved ({e:#}); the next question reads the folders again",
                    ix.file().display()
                ),
            );
        }
    }
    saved.ok().flatten()
}

/// The error for an index that could not be read back: removed, so that the next
/// question builds it again.
fn damaged(ix: &FolderIndex, e: anyhow::Error, names: &OptionNames) -> anyhow::Error {
    let file = ix.file().display().to_string();
    folder_index::remove(ix.file());
    anyhow::anyhow!(
        "the folder index {file} could not be read ({e:#}); it was removed: ask again to build it anew, or {}",
        names.no_index
    )
}
