//! Walking folders like ripgrep does, on ripgrep's own `ignore` crate.
//!
//! - `.gitignore`, `.ignore`, `.git/info/exclude` and git's global excludes file are
//!   honoured (a `.gitignore` counts whether or not the folder is inside a git repository),
//!   and hidden files and folders (names starting with `.`) are not visited;
//!   [`WalkOptions::no_ignore`] and [`WalkOptions::hidden`] turn each off.
//! - [`WalkOptions::include`] and [`WalkOptions::exclude`] add globs (gitignore syntax,
//!   `ignore::overrides`), matched against the path below the folder walked (`*.md` at any
//!   depth, `/drafts` or `drafts/**` from the top). An exclude glob wins over everything and
//!   prunes whole folders. With any include glob, only files matching one are read; unlike
//!   ripgrep's `--glob`, an include glob only narrows: it never brings back a hidden or
//!   ignored file (that is what `hidden` and `no_ignore` are for).
//! - Symbolic links are followed, to files and to folders; a link back to one of its own
//!   ancestors (or to the folder walked, or above it) is reported as
//!   [`SkipReason::SymlinkLoop`] and not followed, so a walk always ends and reads nothing
//!   twice through a loop. A dangling link is [`SkipReason::Unreadable`].
//! - Entries are visited in sorted order (by file name, bytewise, in each folder), so the
//!   same tree always gives the same documents in the same order.
//! - Files and folders ignored or hidden are not visited; everything visited is reported:
//!   a file to read ([`Found::File`]) or a [`Found::Skipped`] with its reason. After a walk,
//!   [`Walker::left_out`] looks again, hidden files and ignore files aside, for what the
//!   walk did not visit (a folder counts once; at most [`MAX_LEFT_OUT`] are named).
//!
//! The path given to [`walk`] is always visited, even when hidden or ignored: a file named
//! explicitly is read (whatever its kind: a named pipe too, unless
//! [`WalkOptions::special_files`] is off).
//!
//! For paths that come from someone else (a `batch` line, an `eval` case), three options
//! bound what a walk reaches: [`WalkOptions::confine_to`] (nothing outside a folder, links
//! resolved: a symbolic link that leads out of it is [`SkipReason::OutsideRoot`] and not
//! followed), [`WalkOptions::max_depth`] (a folder that deep is [`SkipReason::TooDeep`] and
//! not entered) and [`WalkOptions::special_files`] (off: a named pipe, socket or device is
//! [`SkipReason::NotAFile`] even when it is the path given).

use std::path::{Path, PathBuf};

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver};

use ignore::overrides::{Override, OverrideBuilder};
use ignore::{DirEntry, Walk, WalkBuilder};

use super::report::{LeftOut, LeftOutReason, SkipReason, Skipped};
use crate::error::ReadError;

/// The most hidden or ignored entries [`Walker::left_out`] names (it stops looking there).
pub const MAX_LEFT_OUT: usize = 10_000;
/// The most visited paths a walk remembers for [`Walker::left_out`]; past it, a walk
/// (of over a million files) does not look for what it left out.
const MAX_REMEMBERED: usize = 1_000_000;

/// What to visit when walking a folder. The default is ripgrep's: ignore files honoured,
/// hidden entries left out, no globs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalkOptions {
    hidden: bool,
    no_ignore: bool,
    include: Vec<String>,
    exclude: Vec<String>,
    confine: Option<PathBuf>,
    max_depth: Option<usize>,
    special_files: bool,
}

impl Default for WalkOptions {
    fn default() -> Self {
        Self {
            hidden: false,
            no_ignore: false,
            include: Vec::new(),
            exclude: Vec::new(),
            confine: None,
            max_depth: None,
            special_files: true,
        }
    }
}

impl WalkOptions {
    /// The default options.
    pub fn new() -> Self {
        Self::default()
    }

    /// Visit hidden files and folders too (names starting with `.`).
    pub fn hidden(mut self, yes: bool) -> Self {
        self.hidden = yes;
        self
    }

    /// Do not honour `.gitignore`, `.ignore`, `.git/info/exclude` or git's global excludes.
    pub fn no_ignore(mut self, yes: bool) -> Self {
        self.no_ignore = yes;
        self
    }

    /// Read only files matching this glob (or another include glob). Repeatable.
    pub fn include(mut self, glob: impl Into<String>) -> Self {
        self.include.push(glob.into());
        self
    }

    /// Never read files (or enter folders) matching this glob. Repeatable.
    pub fn exclude(mut self, glob: impl Into<String>) -> Self {
        self.exclude.push(glob.into());
        self
    }

    /// Visit nothing outside `root` (a canonical path: `std::fs::canonicalize`'s), with
    /// symbolic links resolved: a link that leads out of it is skipped as
    /// [`SkipReason::OutsideRoot`] and not followed.
    pub fn confine_to(mut self, root: impl Into<PathBuf>) -> Self {
        self.confine = Some(root.into());
        self
    }

    /// Enter no folder `depth` levels or more below the path walked (`None`: no limit):
    /// such a folder is skipped as [`SkipReason::TooDeep`].
    pub fn max_depth(mut self, depth: Option<usize>) -> Self {
        self.max_depth = depth;
        self
    }

    /// Whether the path given is read when it is a named pipe, socket or device (the
    /// default: `ask <(cmd)` reads a pipe). Off, it is skipped as [`SkipReason::NotAFile`],
    /// never opened. Such files found in a folder are always skipped.
    pub fn special_files(mut self, yes: bool) -> Self {
        self.special_files = yes;
        self
    }

    /// The folder a walk is confined to, if any.
    pub fn confinement(&self) -> Option<&Path> {
        self.confine.as_deref()
    }

    /// The depth of the folders a walk does not enter, if any.
    pub fn depth_limit(&self) -> Option<usize> {
        self.max_depth
    }

    /// Whether the path given is read when it is not a regular file or folder.
    pub fn reads_special_files(&self) -> bool {
        self.special_files
    }

    /// Whether hidden entries are visited.
    pub fn is_hidden(&self) -> bool {
        self.hidden
    }

    /// Whether ignore files are disregarded.
    pub fn is_no_ignore(&self) -> bool {
        self.no_ignore
    }

    /// The include globs.
    pub fn includes(&self) -> &[String] {
        &self.include
    }

    /// The exclude globs.
    pub fn excludes(&self) -> &[String] {
        &self.exclude
    }
}

/// What a walk finds.
#[derive(Debug, Clone, PartialEq)]
pub enum Found {
    /// A file to read.
    File(PathBuf),
    /// A path that was visited but cannot be read, and why.
    Skipped(Skipped),
}

/// The files under `root` (or `root` itself when it is a file), in sorted order. Errors:
/// an include or exclude glob that does not parse.
pub fn walk(root: &Path, options: &WalkOptions) -> Result<Walker, ReadError> {
    let (mut builder, include) = builder(root, options, options.hidden, options.no_ignore)?;
    // A link to the folder walked or to one of its ancestors is a loop too, though the
    // walker only sees loops to folders it entered: not followed, reported in its place.
    // Links out of the folder a walk is confined to, and folders too deep, are not
    // entered either: reported the same way.
    let (loops_tx, loops) = mpsc::channel();
    let confine = options.confine.clone();
    let max_depth = options.max_depth;
    if let Ok(top) = std::fs::canonicalize(root) {
        builder.filter_entry(move |entry| {
            let skip = |reason: SkipReason| {
                let _ = loops_tx.send(Skipped {
                    path: entry.path().to_path_buf(),
                    reason,
                });
                false
            };
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            if entry.depth() > 0
                && is_dir
                && let Some(limit) = max_depth.filter(|&limit| entry.depth() >= limit)
            {
                return skip(SkipReason::TooDeep { limit });
            }
            if entry.depth() == 0 || !entry.path_is_symlink() {
                return true;
            }
            let target = std::fs::canonicalize(entry.path());
            if let (Some(root), Ok(target)) = (&confine, &target)
                && !target.starts_with(root)
            {
                return skip(SkipReason::OutsideRoot { root: root.clone() });
            }
            match target {
                Ok(target) if is_dir && top.starts_with(&target) => {
                    skip(SkipReason::SymlinkLoop { ancestor: target })
                }
                _ => true,
            }
        });
    }
    Ok(Walker {
        inner: builder.build(),
        root: root.to_path_buf(),
        options: options.clone(),
        include,
        loops,
        queue: VecDeque::new(),
        visited: HashSet::new(),
        forgot: false,
        skipped: HashSet::new(),
    })
}

/// A walk builder with ripgrep's rules as `options` say, hidden entries and ignore files
/// as given; and the include globs, which filter the files it yields.
fn builder(
    root: &Path,
    options: &WalkOptions,
    hidden: bool,
    no_ignore: bool,
) -> Result<(WalkBuilder, Option<Override>), ReadError> {
    let mut builder = WalkBuilder::new(root);
    let honour = !no_ignore;
    builder
        .follow_links(true)
        .hidden(!hidden)
        .ignore(honour)
        .git_ignore(honour)
        .git_global(honour)
        .git_exclude(honour)
        .parents(honour)
        .require_git(false)
        .sort_by_file_name(|a, b| a.cmp(b));
    let bad = |glob: &str, e: ignore::Error| ReadError::Glob {
        glob: glob.to_owned(),
        message: glob_message(&e),
    };
    // Excludes are overrides of the walk itself (pruning folders); includes filter the
    // files the walk yields, so that they cannot whitelist hidden or ignored files.
    if !options.exclude.is_empty() {
        let mut globs = OverrideBuilder::new(root);
        for glob in &options.exclude {
            globs.add(&format!("!{glob}")).map_err(|e| bad(glob, e))?;
        }
        builder.overrides(globs.build().map_err(|e| bad("", e))?);
    }
    let include = if options.include.is_empty() {
        None
    } else {
        let mut globs = OverrideBuilder::new(root);
        for glob in &options.include {
            globs.add(glob).map_err(|e| bad(glob, e))?;
        }
        Some(globs.build().map_err(|e| bad("", e))?)
    };
    Ok((builder, include))
}

/// The files of a walk, in order (see [`walk`]).
pub struct Walker {
    inner: Walk,
    root: PathBuf,
    options: WalkOptions,
    include: Option<Override>,
    /// Every path visited (folders and files), for [`Walker::left_out`], up to
    /// [`MAX_REMEMBERED`].
    visited: HashSet<PathBuf>,
    /// More paths were visited than remembered.
    forgot: bool,
    /// Paths reported as skipped (symlink loops, walk errors): never entered again.
    skipped: HashSet<PathBuf>,
    /// Links to the walked folder or its ancestors, reported by the entry filter.
    loops: Receiver<Skipped>,
    /// What is found, in order, not yet handed out.
    queue: VecDeque<Found>,
}

impl std::fmt::Debug for Walker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Walker").field("root", &self.root).finish()
    }
}

impl Iterator for Walker {
    type Item = Found;

    fn next(&mut self) -> Option<Found> {
        loop {
            if let Some(found) = self.queue.pop_front() {
                return Some(found);
            }
            let next = self.inner.next();
            // Loops the filter met while looking for `next` come before it.
            let loops: Vec<Skipped> = self.loops.try_iter().collect();
            for skipped in loops {
                self.remember_skipped(&skipped.path);
                self.queue.push_back(Found::Skipped(skipped));
            }
            match next {
                None => return self.queue.pop_front(),
                Some(item) => {
                    if let Some(found) = self.found(item) {
                        self.queue.push_back(found);
                    }
                }
            }
        }
    }
}

impl Walker {
    /// What one item of the underlying walk is, if anything to report.
    fn found(&mut self, item: Result<DirEntry, ignore::Error>) -> Option<Found> {
        let entry = match item {
            Ok(entry) => entry,
            Err(e) => {
                let skipped = skipped_from_error(&e, &self.root);
                self.remember_skipped(&skipped.path);
                return Some(Found::Skipped(skipped));
            }
        };
        self.remember(entry.path());
        let file_type = entry.file_type()?;
        if file_type.is_dir() {
            return None;
        }
        if entry.depth() > 0
            && let Some(include) = &self.include
            && !include.matched(entry.path(), false).is_whitelist()
        {
            return None;
        }
        // The root itself is read whatever it is (a named pipe from `<(...)` too) unless
        // special files are off; below it, only regular files (reading a FIFO or a device
        // could block).
        if file_type.is_file() || (entry.depth() == 0 && self.options.special_files) {
            return Some(Found::File(entry.into_path()));
        }
        Some(Found::Skipped(Skipped {
            path: entry.into_path(),
            reason: SkipReason::NotAFile,
        }))
    }
}

impl Walker {
    fn remember_skipped(&mut self, path: &Path) {
        self.remember(path);
        if self.skipped.len() < MAX_REMEMBERED {
            self.skipped.insert(path.to_path_buf());
        }
    }

    fn remember(&mut self, path: &Path) {
        if self.visited.len() < MAX_REMEMBERED {
            self.visited.insert(path.to_path_buf());
        } else {
            self.forgot = true;
        }
    }

    /// What the walk did not visit, once it is over: the hidden files and folders (when
    /// hidden entries are left out) and those an ignore file leaves out (when ignore
    /// files are honoured), each folder once without its contents, files not matching an
    /// include glob aside; at most [`MAX_LEFT_OUT`] of them. Empty when the walk shows
    /// everything, or the root is a file.
    pub fn left_out(&self) -> Vec<LeftOut> {
        let shows_all = self.options.hidden && self.options.no_ignore;
        if shows_all || self.forgot || !self.root.is_dir() {
            return Vec::new();
        }
        let Ok((mut builder, include)) = builder(&self.root, &self.options, true, true) else {
            return Vec::new();
        };
        let visited = Arc::new(self.visited.clone());
        let (tx, folders) = mpsc::channel();
        let seen = Arc::clone(&visited);
        let skipped = Arc::new(self.skipped.clone());
        // Folders not visited are reported, not entered; loops are not entered again.
        builder.filter_entry(move |entry| {
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            if skipped.contains(entry.path()) {
                return false;
            }
            if !is_dir || entry.depth() == 0 || seen.contains(entry.path()) {
                return true;
            }
            let _ = tx.send(entry.path().to_path_buf());
            false
        });
        let mut out = Vec::new();
        let reason = |path: &Path| {
            let hidden = path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'));
            if hidden && !self.options.hidden {
                LeftOutReason::Hidden
            } else {
                LeftOutReason::Ignored
            }
        };
        for entry in builder.build().flatten() {
            out.extend(folders.try_iter().map(|path| LeftOut {
                reason: reason(&path),
                path,
                folder: true,
            }));
            if out.len() >= MAX_LEFT_OUT {
                break;
            }
            let is_file = entry.file_type().is_some_and(|t| !t.is_dir());
            if !is_file || visited.contains(entry.path()) {
                continue;
            }
            if let Some(include) = &include
                && !include.matched(entry.path(), false).is_whitelist()
            {
                continue;
            }
            out.push(LeftOut {
                reason: reason(entry.path()),
                path: entry.into_path(),
                folder: false,
            });
        }
        out.extend(folders.try_iter().map(|path| LeftOut {
            reason: reason(&path),
            path,
            folder: true,
        }));
        out.truncate(MAX_LEFT_OUT);
        out
    }
}

/// A walk error as a named skip: the path it is about and why.
fn skipped_from_error(err: &ignore::Error, root: &Path) -> Skipped {
    let mut path = None;
    let mut err = err;
    loop {
        match err {
            ignore::Error::WithPath {
                path: p,
                err: inner,
            } => {
                path.get_or_insert_with(|| p.clone());
                err = inner;
            }
            ignore::Error::WithDepth { err: inner, .. }
            | ignore::Error::WithLineNumber { err: inner, .. } => err = inner,
            ignore::Error::Partial(errs) if errs.len() == 1 => match errs.first() {
                Some(inner) => err = inner,
                None => break,
            },
            ignore::Error::Loop { ancestor, child } => {
                return Skipped {
                    path: path.unwrap_or_else(|| child.clone()),
                    reason: SkipReason::SymlinkLoop {
                        ancestor: ancestor.clone(),
                    },
                };
            }
            _ => break,
        }
    }
    let reason = match err {
        ignore::Error::Io(io) if io.kind() == std::io::ErrorKind::NotFound => {
            SkipReason::Unreadable(format!("broken symbolic link or vanished file ({io})"))
        }
        ignore::Error::Io(io) => SkipReason::Unreadable(io.to_string()),
        other => SkipReason::Unreadable(other.to_string()),
    };
    Skipped {
        path: path.unwrap_or_else(|| root.to_path_buf()),
        reason,
    }
}

/// A glob error without the glob repeated.
fn glob_message(e: &ignore::Error) -> String {
    match e {
        ignore::Error::Glob { err, .. } => err.clone(),
        other => other.to_string(),
    }
}
