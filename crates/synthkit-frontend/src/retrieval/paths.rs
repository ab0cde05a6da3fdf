//! Where the `paths` of a `batch` line or an `eval` case may be read: under one folder,
//! the root (`--paths-root DIR`, by default the folder of the input file; the current
//! folder for standard input).
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
//! [`crate::input::MAX_PATHS_FILES`] files and [`crate::input::MAX_PATHS_BYTES`] bytes.
//! The nodes read are named after the paths as written: `PATH#N`, `PATH` relative to the
//! root.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use synthkit::Node;
use synthkit::text::{SharedTokenizer, TokenTextSplitter};
use synthkit_documents::ReadOptions;

use crate::error::usage;
use crate::flags::TopK;
use crate::settings::batch::LinePaths;

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
    /// The root `dir` (a usage error when it is not a folder); `outside`: paths outside
    /// it are allowed.
    pub fn new(dir: &Path, outside: bool) -> Result<Self> {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        let real = std::fs::canonicalize(dir).map_err(|e| {
            usage(format!(
                "cannot use {} as the folder `paths` are read under: {e} (see --paths-root)",
                dir.display()
            ))
        })?;
        if !real.is_dir() {
            return Err(usage(format!(
                "{} is not a folder: `paths` are read under a folder (see --paths-root)",
                dir.display()
            )));
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            real,
            outside,
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
        let allow = "name a file or folder under it (relative to it), or pass \
                     --allow-paths-outside (or another --paths-root)";
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

/// How the `paths` of a `batch` line or an `eval` case are read: `ask`'s reader and
/// chunking (`--chunk-size`), ranked with the line's or case's `top_k`, else `--top-k`,
/// else ask's default for a folder; under a [`PathsRoot`], at most
/// [`crate::input::MAX_PATHS_FILES`] files and [`crate::input::MAX_PATHS_BYTES`] bytes
/// each, through the folder index when one is kept.
#[derive(Clone)]
pub struct PathsReader {
    splitter: Arc<TokenTextSplitter>,
    top_k: Option<TopK>,
    root: Arc<PathsRoot>,
    /// Where the folder indexes of `paths` are kept (`--index-dir`); `None`: none.
    index_dir: Option<Arc<Path>>,
}

impl PathsReader {
    /// The reading `settings` ask for, under `root`, chunked with `tokenizer`.
    pub fn new(
        settings: &LinePaths,
        root: Arc<PathsRoot>,
        tokenizer: SharedTokenizer,
    ) -> Result<Self> {
        let splitter =
            TokenTextSplitter::new(settings.chunk_size, settings.chunk_overlap, tokenizer)
                .map_err(|e| usage(format!("{e} (see --chunk-size)")))?;
        Ok(Self {
            splitter: Arc::new(splitter),
            top_k: settings.top_k,
            root,
            index_dir: settings.index_dir.as_deref().map(Arc::from),
        })
    }

    /// The nodes of `paths` for `query` ([`crate::input::nodes_from_paths`]), read on a
    /// blocking thread (never a runtime's); the error says why there is nothing to read.
    pub async fn read(
        &self,
        paths: Vec<String>,
        query: String,
        top_k: Option<usize>,
    ) -> std::result::Result<Vec<Node>, String> {
        let reader = self.clone();
        tokio::task::spawn_blocking(move || {
            crate::input::nodes_from_paths(
                &paths,
                &reader.root,
                &query,
                top_k,
                reader.top_k,
                &reader.splitter,
                reader.index_dir.as_deref(),
            )
        })
        .await
        .unwrap_or_else(|e| Err(format!("the reading stopped: {e}")))
    }
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
