//! The retriever every front end shares: files and folders read into chunks, ranked for a
//! question, and kept in an on-disk folder index so that a folder asked again is not read
//! again. `ask` and `summarize` read the paths given on the command line through it, and a
//! `batch` line's or an `eval` case's `paths` are read through it under a root
//! ([`paths::PathsRoot`]), by the command line and the Python package (Ray) alike.
//!
//! - [`read`]: files, folders and standard input read into documents
//!   ([`read::read_documents`]), and what is said of the read ([`read::Told`]);
//! - [`chunks`]: the documents split into chunks, through the folder index when it
//!   applies ([`chunks::read_chunks`]);
//! - [`index`]: the folder index (SQLite), keyed by each file's path, size and time;
//! - [`rank`]: Okapi BM25 over the chunks ([`rank::top_k`]);
//! - [`paths`]: the `paths` of a request, confined to a root and bounded in files and
//!   bytes ([`paths::PathsReader`]).
//!
//! A front end says how notes and progress reach its user ([`Tell`], [`Progress`]): the
//! command line writes `note:` and `warning:` lines and shows a spinner, the Python package
//! hands them to Python's `logging`.
//!
//! ```
//! use synthkit_frontend::retrieval::paths::{PathsReader, PathsRoot, PathsSettings};
//! use synthkit_frontend::retrieval::{Quiet, Say};
//!
//! let dir = tempfile::tempdir()?;
//! std::fs::create_dir(dir.path().join("docs"))?;
//! std::fs::write(dir.path().join("docs/tides.md"), "The tide turns every six hours.")?;
//! let root = PathsRoot::new(dir.path(), false)?;
//! let tokenizer = synthkit::text::BpeTokenizer::cl100k_base().shared();
//! let reader = PathsReader::new(&PathsSettings::default(), root.into(), tokenizer)?;
//! let nodes = reader
//!     .read_now(&["docs".to_string()], "When does the tide turn?", None, Say::new(&Quiet))
//!     .map_err(anyhow::Error::msg)?;
//! assert_eq!(nodes[0].id, "docs/tides.md#1");
//! # Ok::<(), anyhow::Error>(())
//! ```

pub mod chunks;
pub mod index;
pub mod paths;
pub mod rank;
pub mod read;

use synthkit_documents::ProgressFn;

/// The default chunk size (tokens) when files are split into nodes.
pub const DEFAULT_CHUNK_SIZE: usize = 1024;
/// The default overlap (tokens) between the chunks of one file.
pub const DEFAULT_CHUNK_OVERLAP: usize = 20;

/// The default overlap between the chunks of a file: [`DEFAULT_CHUNK_OVERLAP`] tokens,
/// capped below the size.
pub fn default_overlap(chunk_size: usize) -> usize {
    DEFAULT_CHUNK_OVERLAP.min(chunk_size.saturating_sub(1))
}

/// The chunks kept by default when a folder is read: the most relevant to the question
/// (BM25). Chosen on the 33-question trial of issue 23 (docs/command-line.md, "Ranking"):
/// the answer's chunk is among the best 20 for 28 of the 33 questions (40 add one more),
/// and 20 chunks take one call of about 5,000 prompt tokens at an 8k window.
pub const DEFAULT_FOLDER_TOP_K: usize = 20;

/// How many chunks to keep: a number, or all of them (the command line's `--top-k`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopK {
    /// Keep every chunk.
    All,
    /// Keep the N best.
    Best(usize),
}

/// Where a read's notes and warnings go.
pub trait Tell: Sync {
    /// An informational note (a front end's `--quiet` hides them: [`Say::quiet`]).
    fn note(&self, message: &str);
    /// A warning: something was read imperfectly or left out that should not have been.
    fn warn(&self, message: &str);
    /// Whether every file skipped or left out is to be named (the command line's `-v`),
    /// for the reads that make their own [`Say`] ([`paths::PathsReader::read`]).
    fn verbose(&self) -> bool {
        false
    }
    /// What the front end calls the options the notes name (the command line's flags
    /// unless it says otherwise).
    fn names(&self) -> &'static paths::OptionNames {
        &paths::OptionNames::COMMAND_LINE
    }
}

/// Nothing said: notes and warnings dropped.
#[derive(Debug, Clone, Copy, Default)]
pub struct Quiet;

impl Tell for Quiet {
    fn note(&self, _: &str) {}
    fn warn(&self, _: &str) {}
}

impl Progress for Quiet {}

/// How much a read says, and to whom.
#[derive(Clone, Copy)]
pub struct Say<'a> {
    /// No notes (warnings still go).
    pub quiet: bool,
    /// Every file skipped or left out named (else the first few, then a count).
    pub verbose: bool,
    /// Where it goes.
    pub to: &'a dyn Tell,
}

impl<'a> Say<'a> {
    /// Notes and warnings to `to`, files named up to the usual few.
    pub fn new(to: &'a dyn Tell) -> Self {
        Self {
            quiet: false,
            verbose: false,
            to,
        }
    }

    /// With notes hidden (`true`) or shown.
    pub fn quiet(self, quiet: bool) -> Self {
        Self { quiet, ..self }
    }

    /// With every file named (`true`) or the first few.
    pub fn verbose(self, verbose: bool) -> Self {
        Self { verbose, ..self }
    }

    /// A note, unless quiet.
    pub fn note(&self, message: &str) {
        if !self.quiet {
            self.to.note(message);
        }
    }

    /// A warning (quiet or not).
    pub fn warn(&self, message: &str) {
        self.to.warn(message);
    }
}

impl std::fmt::Debug for Say<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Say")
            .field("quiet", &self.quiet)
            .field("verbose", &self.verbose)
            .finish_non_exhaustive()
    }
}

/// What a long read shows while it works (a spinner); every method does nothing unless
/// a front end says otherwise.
pub trait Progress: Sync {
    /// What is being done now.
    fn set(&self, _what: &str) {}
    /// Done: nothing shown.
    fn clear(&self) {}
    /// The documents reader's callback after each file, if progress is shown.
    fn reading(&self) -> Option<ProgressFn> {
        None
    }
}

/// An input named that cannot be used as given (a path that does not exist, a file over
/// the size limit, a chunk size the splitter refuses): the command line's usage error
/// (exit status 2). Found in an [`anyhow::Error`]'s chain.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InputError(pub String);

/// An [`InputError`] as an [`anyhow::Error`].
pub(crate) fn input_error(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(InputError(message.into()))
}

/// `n` with thousands separated by commas: `1,204` ([`synthkit::text::thousands`]).
pub fn thousands(n: usize) -> String {
    synthkit::text::thousands(u64::try_from(n).unwrap_or(u64::MAX))
}
