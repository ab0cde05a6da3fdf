//! Where the `paths` of a `batch` line, an `eval` case or a Python request may be read:
//! under one folder, the root (the command line's `--paths-root DIR`, by default the folder
//! of the input file, the current folder for standard input; Python's `paths_root=`).
//!
//! Those paths come from a file that someone else may have written (a pipeline that
//! queues user requests into `batch`): without a bound, `"paths": ["/etc/passwd"]` or a
//! symbolic link out of the folder would be read, sent to the model and returned in
//! `source_nodes`. So, unless `--allow-paths-outside` is given:
//!
//! - a path is relative to the root; an absolute path, or one with a `..` component, is
//!   refused;
//! - a path whose real location (symbolic links resolved) is outside the root is refused,
//!   and inside a folder a link that leads out of the root is skipped and not followed
//!   (the reader checks every file it opens again: [`ReadOptions::confine_to`]).
//!
//! Whatever the flags, a named pipe, socket or device among the paths is skipped with a
//! note and never opened (a FIFO would block the reading for good); folders are entered
//! at most [`MAX_PATHS_DEPTH`] levels down; and a line or case reads at most
//! [`MAX_PATHS_FILES`] files and [`MAX_PATHS_BYTES`] bytes.
//! The nodes read are named after the paths as written: `PATH#N`, `PATH` relative to the
//! root.

use std::fs;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use synthkit::Node;
use synthkit::text::{SharedTokenizer, TokenTextSplitter};
use synthkit_documents::ReadOptions;

use super::chunks::{ChunkSource, read_chunks};
use super::read::is_stdin;
use super::{
    DEFAULT_CHUNK_SIZE, DEFAULT_FOLDER_TOP_K, Quiet, Say, TopK, default_overlap,
    input_error as usage,
};

/// What a front end calls the options its messages name: the ones of reading `paths`, and
/// the hints of a read's notes (`None`: the front end has no such option, and the note
/// names none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct OptionNames {
    /// The root: `--paths-root`.
    pub root: &'static str,
    /// Paths outside the root allowed: `--allow-paths-outside`.
    pub outside: &'static str,
    /// The chunk size: `--chunk-size`.
    pub chunk_size: &'static str,
    /// What names every file skipped, not only the first few: `-v`.
    pub verbose: &'static str,
    /// How a read goes without the folder index: `give --no-index`.
    pub no_index: &'static str,
    /// The size limit of a file: `--max-file-size`.
    pub max_file_size: Option<&'static str>,
    /// Hidden files read: `--hidden`.
    pub hidden: Option<&'static str>,
    /// Ignored files read: `--no-ignore`.
    pub no_ignore: Option<&'static str>,
    /// Stylesheets, scripts, SVG and JSON read: `--keep-all`.
    pub keep_all: Option<&'static str>,
}

impl OptionNames {
    /// The command line's flags.
    pub const COMMAND_LINE: Self = Self {
        root: "--paths-root",
        outside: "--allow-paths-outside",
        chunk_size: "--chunk-size",
        verbose: "-v",
        no_index: "give --no-index",
        max_file_size: Some("--max-file-size"),
        hidden: Some("--hidden"),
        no_ignore: Some("--no-ignore"),
        keep_all: Some("--keep-all"),
    };
    /// The Python package's keyword arguments (its reads keep the default walk: no
    /// option reads hidden or ignored files there).
    pub const PYTHON: Self = Self {
        root: "paths_root=",
        outside: "allow_paths_outside=True",
        chunk_size: "chunk_size=",
        verbose: "the synthkit_rs logger at DEBUG",
        no_index: "leave out index_dir=",
        max_file_size: None,
        hidden: None,
        no_ignore: None,
        keep_all: None,
    };
}

/// The deepest a `paths` folder is walked: a folder this many levels below a path is
/// not entered (skipped, and named).
pub const MAX_PATHS_DEPTH: usize = 32;

/// The folder `paths` are read under, and whether paths outside it are allowed.
#[derive(Debug, Clone)]
pub struct PathsRoot {
    /// The folder as given: relative paths are joined to it, and node ids named from it.
    dir: PathBuf,
    /// Its real location, which "under" is checked against.
    real: PathBuf,
    /// `--allow-paths-outside`: absolute paths, `..` and links out of the root are read.
    outside: bool,
    /// How the messages name the options.
    names: OptionNames,
}

/// A path of `paths` that is read, or skipped with a note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// Read this (the root joined to the path as written).
    Read(PathBuf),
    /// Not read, and why (a note for standard error).
    Skipped(String),
}

impl PathsRoot {
    /// The root `dir` (an [`InputError`](super::InputError) when it is not a folder);
    /// `outside`: paths outside it are allowed. Messages name the command line's flags
    /// ([`PathsRoot::named`] for other names).
    pub fn new(dir: &Path, outside: bool) -> Result<Self> {
        Self::named(dir, outside, OptionNames::COMMAND_LINE)
    }

    /// [`PathsRoot::new`], its messages naming the options as `names` says.
    pub fn named(dir: &Path, outside: bool, names: OptionNames) -> Result<Self> {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        let real = std::fs::canonicalize(dir).map_err(|e| {
            usage(format!(
                "cannot use {} as the folder `paths` are read under: {e} (see {})",
                dir.display(),
                names.root
            ))
        })?;
        if !real.is_dir() {
            return Err(usage(format!(
                "{} is not a folder: `paths` are read under a folder (see {})",
                dir.display(),
                names.root
            )));
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            real,
            outside,
            names,
        })
    }

    /// The folder as given.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The root of the paths in `input` (`-`: standard input): `flag` (`--paths-root`)
    /// when given, else the input file's folder, else (standard input) the current folder.
    pub fn for_input(input: &Path, flag: Option<&Path>, outside: bool) -> Result<Self> {
        let dir = match flag {
            Some(dir) => dir.to_path_buf(),
            None if input == Path::new("-") => PathBuf::from("."),
            None => input.parent().map(Path::to_path_buf).unwrap_or_default(),
        };
        Self::new(&dir, outside)
    }

    /// How files are read under this root: confined to it (unless paths outside are
    /// allowed), folders at most [`MAX_PATHS_DEPTH`] deep, special files never opened.
    pub fn read_options(&self) -> ReadOptions {
        let options = ReadOptions::new()
            .max_depth(Some(MAX_PATHS_DEPTH))
            .special_files(false);
        if self.outside {
            options
        } else {
            options.confine_to(self.real.clone())
        }
    }

    /// Where `path` (as written in a line or case) is read, a note when it is skipped (a
    /// named pipe, socket or device), or why it cannot be read (it does not exist, or it
    /// is outside the root).
    pub fn resolve(&self, path: &str) -> std::result::Result<Resolved, String> {
        let given = Path::new(path);
        let allow = format!(
            "name a file or folder under it (relative to it), or pass {} (or another {})",
            self.names.outside, self.names.root
        );
        if !self.outside {
            if given.has_root() || given.is_absolute() {
                return Err(format!(
                    "`{path}` is an absolute path, and `paths` are read under {}: {allow}",
                    self.dir.display()
                ));
            }
            if given
                .components()
                .any(|c| matches!(c, Component::ParentDir | Component::Prefix(_)))
            {
                return Err(format!(
                    "`{path}` goes up a folder (`..`), and `paths` are read under {}: {allow}",
                    self.dir.display()
                ));
            }
        }
        let full = if given.is_absolute() {
            given.to_path_buf()
        } else {
            self.dir.join(given)
        };
        let real = std::fs::canonicalize(&full).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                format!("the path `{path}` does not exist ({})", full.display())
            }
            _ => format!("cannot read `{path}` ({}): {e}", full.display()),
        })?;
        if !self.outside && !real.starts_with(&self.real) {
            return Err(format!(
                "`{path}` leads outside {} (to {}, through a symbolic link): {allow}",
                self.dir.display(),
                real.display()
            ));
        }
        // Looked at, never opened: a named pipe would block the reading.
        let kind = std::fs::metadata(&real).map_err(|e| format!("cannot read `{path}`: {e}"))?;
        if !kind.is_file() && !kind.is_dir() {
            return Ok(Resolved::Skipped(format!(
                "skipping `{path}`: not a file (a pipe, socket or device), never read"
            )));
        }
        Ok(Resolved::Read(full))
    }

    /// `path` (a document read) as written relative to the root: the root's folder taken
    /// off the front when it is there.
    pub fn name(&self, path: &str) -> String {
        Path::new(path)
            .strip_prefix(&self.dir)
            .ok()
            .filter(|rel| !rel.as_os_str().is_empty())
            .map_or_else(|| path.to_string(), |rel| rel.display().to_string())
    }
}

/// How the `paths` of a request are read, alike for every front end: the chunking, the
/// run's top-k, and where folder indexes are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PathsSettings {
    /// Tokens a chunk holds at most (default [`DEFAULT_CHUNK_SIZE`]).
    pub chunk_size: usize,
    /// Tokens two chunks of a file share (default [`default_overlap`] of the size).
    pub chunk_overlap: usize,
    /// The chunks kept for a request that sets no `top_k` (the command line's `--top-k`);
    /// `None`: the [`DEFAULT_FOLDER_TOP_K`] best when a folder is read, else every chunk.
    pub top_k: Option<TopK>,
    /// Where folder indexes are kept; `None`: no index (every request reads its files).
    pub index_dir: Option<PathBuf>,
}

impl Default for PathsSettings {
    fn default() -> Self {
        Self {
            chunk_size: DEFAULT_CHUNK_SIZE,
            chunk_overlap: default_overlap(DEFAULT_CHUNK_SIZE),
            top_k: None,
            index_dir: None,
        }
    }
}

impl PathsSettings {
    /// Chunks of `chunk_size` tokens, overlapping by the default for that size.
    pub fn with_chunk_size(self, chunk_size: usize) -> Self {
        Self {
            chunk_size,
            chunk_overlap: default_overlap(chunk_size),
            ..self
        }
    }

    /// The chunks kept for a request that sets no `top_k`.
    pub fn with_top_k(self, top_k: Option<TopK>) -> Self {
        Self { top_k, ..self }
    }

    /// Folder indexes kept under `dir` (`None`: none).
    pub fn with_index_dir(self, dir: Option<PathBuf>) -> Self {
        Self {
            index_dir: dir,
            ..self
        }
    }
}

/// How the `paths` of a `batch` line or an `eval` case are read: `ask`'s reader and
/// chunking, ranked with the line's or case's `top_k`, else the settings' top-k, else
/// ask's default for a folder; under a [`PathsRoot`], at most [`MAX_PATHS_FILES`] files
/// and [`MAX_PATHS_BYTES`] bytes each, through the folder index when one is kept.
#[derive(Clone)]
pub struct PathsReader {
    splitter: Arc<TokenTextSplitter>,
    top_k: Option<TopK>,
    root: Arc<PathsRoot>,
    /// Where the folder indexes of `paths` are kept; `None`: none.
    index_dir: Option<Arc<Path>>,
}

impl std::fmt::Debug for PathsReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PathsReader")
            .field("root", &self.root.dir)
            .field("top_k", &self.top_k)
            .field("index_dir", &self.index_dir)
            .finish_non_exhaustive()
    }
}

impl PathsReader {
    /// The reading `settings` ask for, under `root`, chunked with `tokenizer`; an
    /// [`InputError`](super::InputError) when the splitter refuses the chunk size.
    pub fn new(
        settings: &PathsSettings,
        root: Arc<PathsRoot>,
        tokenizer: SharedTokenizer,
    ) -> Result<Self> {
        let splitter =
            TokenTextSplitter::new(settings.chunk_size, settings.chunk_overlap, tokenizer)
                .map_err(|e| usage(format!("{e} (see {})", root.names.chunk_size)))?;
        Ok(Self {
            splitter: Arc::new(splitter),
            top_k: settings.top_k,
            root,
            index_dir: settings.index_dir.as_deref().map(Arc::from),
        })
    }

    /// The root the paths are read under.
    pub fn root(&self) -> &PathsRoot {
        &self.root
    }

    /// The nodes of `paths` for `query` ([`PathsReader::read_now`]), read on a blocking thread
    /// (never a runtime's); the error says why there is nothing to read. Warnings go to
    /// `tell` (notes do not), every file skipped named when it says it is verbose.
    pub async fn read(
        &self,
        paths: Vec<String>,
        query: String,
        top_k: Option<usize>,
        tell: Arc<dyn super::Tell + Send>,
    ) -> std::result::Result<Vec<Node>, String> {
        let reader = self.clone();
        tokio::task::spawn_blocking(move || {
            let say = Say::new(&*tell).quiet(true).verbose(tell.verbose());
            reader.read_now(&paths, &query, top_k, say)
        })
        .await
        .unwrap_or_else(|e| Err(format!("the reading stopped: {e}")))
    }

    /// Reads `paths` (files and folders, as a `batch` line or an `eval` case writes them)
    /// under the root, confined to it unless paths outside are allowed (named pipes and
    /// the like skipped with a note, folders at most [`MAX_PATHS_DEPTH`] deep, at most
    /// [`MAX_PATHS_FILES`] files and [`MAX_PATHS_BYTES`] bytes, counted first), into nodes
    /// as `ask` does (node ids `PATH#N`, `PATH` as written, relative to the root), then
    /// keeps the best for `query`: `top_k` (a line's or a case's), else the settings'
    /// top-k, else the [`DEFAULT_FOLDER_TOP_K`] best when a folder was read, else every
    /// chunk. On this thread (it blocks); [`PathsReader::read`] from async code.
    pub fn read_now(
        &self,
        paths: &[String],
        query: &str,
        top_k: Option<usize>,
        say: Say<'_>,
    ) -> std::result::Result<Vec<Node>, String> {
        nodes_from_paths(self, paths, query, top_k, say)
    }
}

/// What one request (a `batch` line, an `eval` case) may read through `paths`: at most
/// this many files...
pub const MAX_PATHS_FILES: usize = 10_000;
/// ... and at most this many bytes of files in all (64 MiB), counted before any is read.
pub const MAX_PATHS_BYTES: u64 = 64 << 20;

/// Refuses `paths` that hold more than [`MAX_PATHS_FILES`] files or [`MAX_PATHS_BYTES`]
/// bytes (the files the walk would read, by their size on disk), before reading any.
fn within_paths_bound(paths: &[PathBuf], options: &ReadOptions) -> std::result::Result<(), String> {
    let (mut files, mut bytes) = (0usize, 0u64);
    let mut add = |path: &Path| -> std::result::Result<(), String> {
        files += 1;
        bytes = bytes.saturating_add(fs::metadata(path).map_or(0, |m| m.len()));
        if files > MAX_PATHS_FILES || bytes > MAX_PATHS_BYTES {
            return Err(format!(
                "`paths` hold more than {MAX_PATHS_FILES} files or {} MiB, the most one line \
                 may read: name fewer files or a smaller folder",
                MAX_PATHS_BYTES >> 20
            ));
        }
        Ok(())
    };
    for path in paths {
        if !path.is_dir() {
            add(path)?;
            continue;
        }
        let walker = synthkit_documents::walk::walk(path, options.walk_options())
            .map_err(|e| e.to_string())?;
        for found in walker {
            if let synthkit_documents::walk::Found::File(file) = found {
                add(&file)?;
            }
        }
    }
    Ok(())
}

/// [`PathsReader::read_now`]'s reading (`reader`'s root, chunking, top-k and index).
fn nodes_from_paths(
    reader: &PathsReader,
    paths: &[String],
    query: &str,
    top_k: Option<usize>,
    say: Say<'_>,
) -> std::result::Result<Vec<Node>, String> {
    let root = &*reader.root;
    let flag = reader.top_k;
    let splitter = &*reader.splitter;
    let index_dir = reader.index_dir.as_deref();
    if paths.iter().any(|p| is_stdin(Path::new(p))) {
        return Err("`-` (standard input) is not a path a line can read".into());
    }
    let mut read_these = Vec::with_capacity(paths.len());
    let mut skipped = Vec::new();
    for path in paths {
        match root.resolve(path)? {
            Resolved::Read(full) => read_these.push(full),
            Resolved::Skipped(note) => {
                say.warn(&note);
                skipped.push(note);
            }
        }
    }
    if read_these.is_empty() {
        return Err(format!("nothing to read: {}", skipped.join("; ")));
    }
    let options = root.read_options();
    within_paths_bound(&read_these, &options)?;
    let rename = |path: &str| root.name(path);
    let source = ChunkSource {
        paths: &read_these,
        options: &options,
        index_dir,
        splitter,
        naming: &format!("paths root {}", root.dir().display()),
        rename: Some(&rename),
        say,
    };
    let read = read_chunks(&source, &Quiet).map_err(|e| format!("{e:#}"))?;
    let total = read.chunks.len();
    if read.chunks.is_empty() {
        return Err("no text to work on: every file of `paths` is empty or skipped".into());
    }
    let k = match (top_k, flag) {
        (Some(k), _) | (None, Some(TopK::Best(k))) => Some(k),
        (None, Some(TopK::All)) => None,
        // As `ask`: a folder of no more chunks than the default top-k goes whole.
        (None, None) => read
            .from_folder
            .then_some(DEFAULT_FOLDER_TOP_K)
            .filter(|&k| k < total),
    };
    let nodes = match k {
        // None kept (no chunk shares a word with the question): no nodes, whose
        // synthesis says the sources do not answer.
        Some(k) => read.chunks.top_k(query, k),
        None => read.chunks.into_nodes(),
    };
    nodes.map_err(|e| format!("{e:#}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_confined_to_the_root_unless_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("docs")).unwrap();
        std::fs::write(root.join("docs/a.md"), "a").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "s").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(dir.path().join("secret.txt"), root.join("link")).unwrap();
        let confined = PathsRoot::new(&root, false).unwrap();
        assert_eq!(
            confined.resolve("docs").unwrap(),
            Resolved::Read(root.join("docs"))
        );
        for (bad, why) in [
            ("/etc/passwd", "is an absolute path"),
            ("../secret.txt", "goes up a folder"),
            ("docs/../../secret.txt", "goes up a folder"),
            ("nowhere", "does not exist"),
        ] {
            let e = confined.resolve(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        #[cfg(unix)]
        {
            let e = confined.resolve("link").unwrap_err();
            assert!(e.contains("leads outside"), "{e}");
        }
        let open = PathsRoot::new(&root, true).unwrap();
        assert!(matches!(
            open.resolve("../secret.txt"),
            Ok(Resolved::Read(_))
        ));
        assert!(matches!(open.resolve("/etc/passwd"), Ok(Resolved::Read(_))));
        assert_eq!(
            confined.name(&root.join("docs/a.md").display().to_string()),
            "docs/a.md"
        );
        assert_eq!(confined.name("/elsewhere/a.md"), "/elsewhere/a.md");
    }

    #[test]
    fn the_root_of_an_input_is_its_folder() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.jsonl");
        let root = PathsRoot::for_input(&input, None, false).unwrap();
        assert_eq!(root.dir.as_path(), dir.path());
        let here = PathsRoot::for_input(Path::new("in.jsonl"), None, false).unwrap();
        assert_eq!(here.dir.as_path(), Path::new("."));
        assert_eq!(here.name("./docs/a.md"), "docs/a.md");
        let stdin = PathsRoot::for_input(Path::new("-"), None, false).unwrap();
        assert_eq!(stdin.dir.as_path(), Path::new("."));
        let e = PathsRoot::for_input(&input, Some(&input), false).unwrap_err();
        assert!(e.to_string().contains("--paths-root"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn a_named_pipe_is_skipped_and_never_opened() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let root = PathsRoot::new(dir.path(), true).unwrap();
        let Resolved::Skipped(note) = root.resolve("fifo").unwrap() else {
            panic!("a pipe is read")
        };
        assert!(note.contains("not a file"), "{note}");
    }
}
