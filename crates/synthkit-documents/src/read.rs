//! Reading files and folders into [`Document`]s, naming every file skipped and why.
//!
//! Folders are walked as [`walk`](super::walk) says (ripgrep's rules: ignore files, hidden
//! entries, globs, symbolic links with loop detection, sorted order). Each file found is
//! read by its content, not its extension:
//!
//! 1. Larger than [`ReadOptions::max_file_size`] (default [`DEFAULT_MAX_FILE_SIZE`]):
//!    skipped, [`SkipReason::TooLarge`].
//! 2. gzip data (by its magic bytes, whatever the name) is decompressed (within the same
//!    size limit) and the rest applies to what is inside, named without `.gz`.
//! 3. PDF (`%PDF-` in the first 1024 bytes): its text, [`Format::Plain`]. See
//!    [`pdf`](super::pdf).
//! 4. Anything else is decoded as [`decode`](super::decode) says (byte-order marks,
//!    UTF-8, windows-1252 for legacy 8-bit text) or skipped as [`SkipReason::Binary`]. So
//!    `README.Debian`, `changelog.1`, `copyright` and files without extension are read
//!    when they are text, and a `.txt` that is really an image is not.
//! 5. HTML (`.html`, `.htm`, `.xhtml`, or text starting with `<!DOCTYPE html` or `<html`)
//!    is converted to Markdown-style text ([`html`](super::html)), [`Format::Markdown`].
//!    `.md`, `.markdown`, `.mdown`, `.mkd`, `.mkdn` are [`Format::Markdown`]; `.rst` and
//!    `.rest` [`Format::Rst`]; the rest [`Format::Plain`].
//! 6. No text left (a zero-byte file, white space only, a PDF of scanned images):
//!    skipped, [`SkipReason::Empty`].
//! 7. Found in a folder, text that is mostly lines of over 1,000 characters with under 8%
//!    white space (minified JavaScript or CSS, a search index, a data dump) is skipped
//!    as [`SkipReason::Minified`]: it is not prose, and its words would crowd out the
//!    documents' own (the search index of an mdBook holds every page again). Long lines
//!    of prose (about 15% white space) are read; a file named on its own is always read.
//!
//! 8. Found in a folder, text that is not prose for a reader is skipped as
//!    [`SkipReason::Asset`]: stylesheets, scripts and source maps, SVG images and JSON
//!    data by their extension (inside a `.gz` too, and without being read), SVG by its
//!    content, and HTML pages that only redirect to another ([`prose`]).
//!
//! The same file reached twice (named twice, or through a symbolic link) is read once;
//! the second path is [`SkipReason::Duplicate`]. Once everything is read, documents found
//! in folders whose text is (nearly) all in other documents read (mdBook's `print.html`,
//! a page both as Markdown and HTML, a file copied) are moved to the skipped files as
//! [`SkipReason::Copy`] ([`Reader::leave_out_copies`]; [`read_paths`] does it). With
//! [`ReadOptions::keep_all`], assets and copies are read like the rest.
//!
//! A walk also says what it did not visit: hidden files and folders and those an ignore
//! file leaves out, counted in [`ReadReport::left_out`] (a folder once).
//! [`Reader::on_progress`] reports each file as it is read.

pub use crate::error::ReadError;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use flate2::read::MultiGzDecoder;

use super::decode::decode;
use super::html::{html_to_markdown, looks_like_html};
use super::pdf::{is_pdf, pdf_text};
use super::report::{Asset, ReadNote, ReadReport, SkipReason, Skipped};
use super::walk::{Found, WalkOptions, walk};
use super::{Document, Format};
use super::{copies, prose};

/// The default limit on a file's size (and on a `.gz` file's decompressed size): 64 MiB.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 64 * 1024 * 1024;

/// How files and folders are read: what to visit ([`WalkOptions`]) and the size limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadOptions {
    walk: WalkOptions,
    max_file_size: Option<u64>,
    keep_all: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        Self {
            walk: WalkOptions::default(),
            max_file_size: Some(DEFAULT_MAX_FILE_SIZE),
            keep_all: false,
        }
    }
}

impl ReadOptions {
    /// The default options: ripgrep's walking rules, files up to 64 MiB.
    pub fn new() -> Self {
        Self::default()
    }

    /// Visit hidden files and folders too (names starting with `.`).
    pub fn hidden(self, yes: bool) -> Self {
        self.walking(|walk| walk.hidden(yes))
    }

    /// Do not honour `.gitignore`, `.ignore`, `.git/info/exclude` or git's global excludes.
    pub fn no_ignore(self, yes: bool) -> Self {
        self.walking(|walk| walk.no_ignore(yes))
    }

    /// Read only files matching this glob (or another include glob). Repeatable.
    pub fn include(self, glob: impl Into<String>) -> Self {
        self.walking(|walk| walk.include(glob))
    }

    /// Never read files (or enter folders) matching this glob. Repeatable.
    pub fn exclude(self, glob: impl Into<String>) -> Self {
        self.walking(|walk| walk.exclude(glob))
    }

    /// Skip files larger than this many bytes (`None`: no limit).
    pub fn max_file_size(self, bytes: Option<u64>) -> Self {
        self.with(|options| options.max_file_size = bytes)
    }

    /// Read nothing outside `root` (a canonical path), links resolved
    /// ([`WalkOptions::confine_to`]): a path given outside it, or a file reached through
    /// a link out of it, is skipped as [`SkipReason::OutsideRoot`].
    pub fn confine_to(self, root: impl Into<PathBuf>) -> Self {
        self.walking(|walk| walk.confine_to(root))
    }

    /// Enter no folder `depth` levels or more below a path read ([`WalkOptions::max_depth`]).
    pub fn max_depth(self, depth: Option<usize>) -> Self {
        self.walking(|walk| walk.max_depth(depth))
    }

    /// Whether a path given that is a named pipe, socket or device is read (the default).
    /// Off, such a file is never opened, and every file is opened without waiting for a
    /// writer (a file swapped for a pipe after it was looked at is skipped, not waited on)
    /// ([`WalkOptions::special_files`]).
    pub fn special_files(self, yes: bool) -> Self {
        self.walking(|walk| walk.special_files(yes))
    }

    /// Read what is not prose (stylesheets, scripts, SVG, JSON, redirect pages) and
    /// copies of other documents too, when found in folders.
    pub fn keep_all(self, yes: bool) -> Self {
        self.with(|options| options.keep_all = yes)
    }

    /// The options with `change` applied to the walking options.
    fn walking(mut self, change: impl FnOnce(WalkOptions) -> WalkOptions) -> Self {
        self.walk = change(self.walk);
        self
    }

    /// The options with `set` applied: the one body of the setters above.
    fn with(mut self, set: impl FnOnce(&mut Self)) -> Self {
        set(&mut self);
        self
    }

    /// The walking options.
    pub fn walk_options(&self) -> &WalkOptions {
        &self.walk
    }

    /// The size limit (`None`: no limit).
    pub fn size_limit(&self) -> Option<u64> {
        self.max_file_size
    }

    /// Whether assets and copies are read too.
    pub fn keeps_all(&self) -> bool {
        self.keep_all
    }
}

/// How far a read has come, reported after each file ([`Reader::on_progress`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadProgress<'a> {
    /// The file just looked at.
    pub path: &'a Path,
    /// Files looked at so far by this reader (read or skipped).
    pub files: usize,
    /// Bytes of text read so far.
    pub bytes: u64,
}

/// A callback for [`Reader::on_progress`].
pub type ProgressFn = Arc<dyn Fn(ReadProgress<'_>) + Send + Sync>;

/// Files read before, kept by a front end (an on-disk index): consulted before any file
/// [`Reader::read_path`] reads from disk (a file named on its own or found in a folder;
/// standard input never), told of each file read. What a file read as is only
/// reused while its size and modification time are those it had ([`fs::Metadata`] of
/// the file as it really is, links followed); a store is free to forget anything.
pub trait ReadCache: Send + Sync {
    /// What the file found at `path`, now with `meta`, read as before, if it is known and
    /// unchanged.
    fn get(&self, path: &Path, meta: &fs::Metadata) -> Option<ReadFile>;
    /// Remembers what the file at `path`, with `meta`, read as.
    fn put(&self, path: &Path, meta: &fs::Metadata, read: &ReadFile);
}

/// Reads files and folders, remembering what it has read so that a file reached twice
/// is read once.
#[derive(Clone, Default)]
pub struct Reader {
    options: ReadOptions,
    /// Canonical path of each file read (or skipped), to the path it was first found by.
    seen: HashMap<PathBuf, PathBuf>,
    /// Documents read from files found in folders (only they may be copies).
    in_folders: HashSet<PathBuf>,
    progress: Option<ProgressFn>,
    cache: Option<Arc<dyn ReadCache>>,
    files: usize,
    bytes: u64,
}

impl fmt::Debug for Reader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reader")
            .field("options", &self.options)
            .field("files", &self.files)
            .field("bytes", &self.bytes)
            .finish_non_exhaustive()
    }
}

/// A file that was read: the document and, when its decoding was not clean, a note.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(into = "SavedRead")]
#[non_exhaustive]
pub struct ReadFile {
    /// The document.
    pub document: Document,
    /// What to say about its decoding (see [`ReadNote::message`]).
    pub note: Option<String>,
    /// The encoding its text was decoded with (see [`crate::decode::Decoded::encoding`];
    /// `UTF-8` for a PDF's text).
    pub encoding: &'static str,
    /// What its content says it is when it is not prose (an SVG image, a redirect page).
    pub asset: Option<Asset>,
}

/// A [`ReadFile`] as saved: its encoding by name.
#[derive(serde::Serialize, serde::Deserialize)]
struct SavedRead {
    document: Document,
    note: Option<String>,
    encoding: String,
    asset: Option<Asset>,
}

impl From<ReadFile> for SavedRead {
    fn from(r: ReadFile) -> Self {
        Self {
            document: r.document,
            note: r.note,
            encoding: r.encoding.to_owned(),
            asset: r.asset,
        }
    }
}

impl<'de> serde::Deserialize<'de> for ReadFile {
    fn deserialize<D: serde::Deserializer<'de>>(input: D) -> Result<Self, D::Error> {
        <SavedRead as serde::Deserialize>::deserialize(input)?
            .try_into()
            .map_err(serde::de::Error::custom)
    }
}

impl TryFrom<SavedRead> for ReadFile {
    type Error = String;
    fn try_from(r: SavedRead) -> Result<Self, String> {
        Ok(Self {
            encoding: crate::decode::encoding_named(&r.encoding)
                .ok_or_else(|| format!("unknown encoding `{}`", r.encoding))?,
            document: r.document,
            note: r.note,
            asset: r.asset,
        })
    }
}

impl Reader {
    /// A reader with these options.
    pub fn new(options: ReadOptions) -> Self {
        Self {
            options,
            ..Self::default()
        }
    }

    /// Calls `progress` after each file looked at (from the reading thread; keep it
    /// quick).
    pub fn on_progress(mut self, progress: ProgressFn) -> Self {
        self.progress = Some(progress);
        self
    }

    /// Consults `cache` before reading a file from disk (named or found in a folder), and
    /// tells it what each such file read as ([`ReadCache`]).
    pub fn with_cache(mut self, cache: Arc<dyn ReadCache>) -> Self {
        self.cache = Some(cache);
        self
    }

    /// Reads the file at `file` (really at `open`), named or found in a folder, as
    /// [`read_file_at`](Self::read_file_at) does, or takes what the cache kept of it.
    fn read_found(&self, open: &Path, file: &Path) -> Result<ReadFile, SkipReason> {
        let cache = self.cache.as_ref();
        let meta = cache.and_then(|_| fs::metadata(open).ok());
        if let (Some(cache), Some(meta)) = (cache, &meta)
            && let Some(kept) = cache.get(file, meta)
            && kept.document.path == file
        {
            return Ok(kept);
        }
        let read = self.read_file_at(open, file);
        if let (Some(cache), Some(meta), Ok(read)) = (cache, &meta, &read) {
            cache.put(file, meta, read);
        }
        read
    }

    fn report_progress(&mut self, path: &Path, bytes: usize) {
        self.files += 1;
        self.bytes += bytes as u64;
        if let Some(p) = &self.progress {
            p(ReadProgress {
                path,
                files: self.files,
                bytes: self.bytes,
            });
        }
    }

    /// Moves the documents of `report` found in folders whose text is (nearly) all in
    /// other documents of it to its skipped files, as [`SkipReason::Copy`] (see
    /// [`copies`]); nothing with [`ReadOptions::keep_all`]. Call it once
    /// everything is read, on the report of all the paths.
    pub fn leave_out_copies(&self, report: &mut ReadReport) {
        if self.options.keep_all {
            return;
        }
        let found = copies::find(&report.documents, |i| {
            report
                .documents
                .get(i)
                .is_none_or(|d| !self.in_folders.contains(&d.path))
        });
        if found.is_empty() {
            return;
        }
        let of: HashMap<usize, (PathBuf, u8)> = found
            .iter()
            .filter_map(|c| {
                let path = report.documents.get(c.of)?.path.clone();
                Some((c.index, (path, c.percent)))
            })
            .collect();
        let docs = std::mem::take(&mut report.documents);
        for (i, doc) in docs.into_iter().enumerate() {
            match of.get(&i) {
                Some((of, percent)) => report.skipped.push(Skipped {
                    path: doc.path,
                    reason: SkipReason::Copy {
                        of: of.clone(),
                        percent: *percent,
                    },
                }),
                None => report.documents.push(doc),
            }
        }
    }

    /// The options.
    pub fn options(&self) -> &ReadOptions {
        &self.options
    }

    /// Reads a file, or every file under a folder. Errors: the path cannot be looked at,
    /// or a glob is invalid; everything else is in the report.
    pub fn read_path(&mut self, path: &Path) -> Result<ReadReport, ReadError> {
        fs::metadata(path).map_err(|source| ReadError::Path {
            path: path.to_path_buf(),
            source,
        })?;
        let in_folder = fs::metadata(path).is_ok_and(|m| m.is_dir());
        let sift = in_folder && !self.options.keep_all;
        let mut report = ReadReport::default();
        if let Some(root) = self.options.walk.confinement()
            && !fs::canonicalize(path).is_ok_and(|real| real.starts_with(root))
        {
            // Not walked at all: the whole of it is outside.
            report.skipped.push(Skipped {
                path: path.to_path_buf(),
                reason: SkipReason::OutsideRoot {
                    root: root.to_path_buf(),
                },
            });
            return Ok(report);
        }
        let mut walker = walk(path, &self.options.walk)?;
        for found in walker.by_ref() {
            match found {
                Found::Skipped(s) => {
                    self.report_progress(&s.path, 0);
                    report.skipped.push(s);
                }
                Found::File(file) => {
                    let name = file.file_name().map(|n| n.to_string_lossy().into_owned());
                    if sift && let Some(asset) = name.as_deref().and_then(prose::by_name) {
                        self.report_progress(&file, 0);
                        report.skipped.push(Skipped {
                            path: file,
                            reason: SkipReason::Asset(asset),
                        });
                        continue;
                    }
                    let canonical = fs::canonicalize(&file);
                    if let Some(root) = self.options.walk.confinement() {
                        // Confined: the file as it really is must be under the root, and
                        // is opened by that path (what was checked).
                        let reason = match &canonical {
                            Ok(real) if real.starts_with(root) => None,
                            Ok(_) => Some(SkipReason::OutsideRoot {
                                root: root.to_path_buf(),
                            }),
                            Err(e) => Some(SkipReason::Unreadable(e.to_string())),
                        };
                        if let Some(reason) = reason {
                            self.report_progress(&file, 0);
                            report.skipped.push(Skipped { path: file, reason });
                            continue;
                        }
                    }
                    let key = canonical.unwrap_or_else(|_| file.clone());
                    if let Some(first) = self.seen.get(&key) {
                        report.skipped.push(Skipped {
                            path: file,
                            reason: SkipReason::Duplicate { of: first.clone() },
                        });
                        continue;
                    }
                    self.seen.insert(key.clone(), file.clone());
                    let read = if self.options.walk.confinement().is_some() {
                        self.read_found(&key, &file)
                    } else {
                        self.read_found(&file, &file)
                    };
                    let bytes = read.as_ref().map_or(0, |r| r.document.text.len());
                    self.report_progress(&file, bytes);
                    match read {
                        Ok(read) if in_folder && looks_minified(&read.document.text) => {
                            report.skipped.push(Skipped {
                                path: file,
                                reason: SkipReason::Minified,
                            });
                        }
                        Ok(ReadFile {
                            asset: Some(asset), ..
                        }) if sift => {
                            report.skipped.push(Skipped {
                                path: file,
                                reason: SkipReason::Asset(asset),
                            });
                        }
                        Ok(read) => {
                            if in_folder {
                                self.in_folders.insert(read.document.path.clone());
                            }
                            if let Some(message) = read.note {
                                report.notes.push(ReadNote {
                                    path: file.clone(),
                                    message,
                                    encoding: read.encoding,
                                });
                            }
                            report.documents.push(read.document);
                        }
                        Err(reason) => report.skipped.push(Skipped { path: file, reason }),
                    }
                }
            }
        }
        report.left_out = walker.left_out();
        Ok(report)
    }

    /// Reads one file by its content (the rules are in the [module documentation](self)).
    pub fn read_file(&self, path: &Path) -> Result<ReadFile, SkipReason> {
        self.read_file_at(path, path)
    }

    /// Reads the file at `open`, naming the document `path`. Without special files, a
    /// path that is not a regular file is never opened, and the file is opened without
    /// waiting for a writer and checked again once open.
    fn read_file_at(&self, open: &Path, path: &Path) -> Result<ReadFile, SkipReason> {
        let limit = self.options.max_file_size;
        let meta = fs::metadata(open);
        let regular_only = !self.options.walk.reads_special_files();
        if regular_only && meta.as_ref().is_ok_and(|m| !m.is_file()) {
            return Err(SkipReason::NotAFile);
        }
        if let (Some(limit), Ok(meta)) = (limit, &meta)
            && meta.len() > limit
        {
            return Err(SkipReason::TooLarge { limit });
        }
        let file = if regular_only {
            open_regular(open)?
        } else {
            File::open(open).map_err(|e| SkipReason::Unreadable(e.to_string()))?
        };
        let bytes = read_limited(file, limit)?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.read_bytes_named(path, &name, bytes)
    }

    /// Reads bytes that came from elsewhere (standard input, a network response) by
    /// their content; `path` names the document, and its extension, if any, counts as
    /// a file's would.
    pub fn read_bytes(&self, path: &Path, bytes: Vec<u8>) -> Result<ReadFile, SkipReason> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.read_bytes_named(path, &name, bytes)
    }

    fn read_bytes_named(
        &self,
        path: &Path,
        name: &str,
        bytes: Vec<u8>,
    ) -> Result<ReadFile, SkipReason> {
        let limit = self.options.max_file_size;
        let (name, bytes) = if bytes.starts_with(&[0x1f, 0x8b]) {
            let inner = strip_suffix_ignore_case(name, ".gz").unwrap_or(name);
            let data =
                read_limited(MultiGzDecoder::new(bytes.as_slice()), limit).map_err(|reason| {
                    match reason {
                        SkipReason::Unreadable(e) => {
                            SkipReason::Unreadable(format!("invalid gzip data: {e}"))
                        }
                        other => other,
                    }
                })?;
            (inner.to_owned(), data)
        } else {
            (name.to_owned(), bytes)
        };
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(SkipReason::Empty);
        }
        let ext = Path::new(&name)
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        let document = |text: String, format: Format| Document::new(path, text, format);
        let mut asset = None;
        let (doc, note, encoding) = if is_pdf(&bytes) {
            let text = pdf_text(&bytes).map_err(SkipReason::Unreadable)?;
            (document(text, Format::Plain), None, "UTF-8")
        } else {
            let named_html = matches!(ext.as_str(), "html" | "htm" | "xhtml");
            let decoded = decode(&bytes, named_html).ok_or(SkipReason::Binary)?;
            let format = match ext.as_str() {
                "md" | "markdown" | "mdown" | "mkd" | "mkdn" => Some(Format::Markdown),
                "rst" | "rest" => Some(Format::Rst),
                _ => None,
            };
            if format.is_none() && (named_html || looks_like_html(&decoded.text)) {
                let text = html_to_markdown(&decoded.text);
                if prose::is_redirect(&decoded.text, &text) {
                    asset = Some(Asset::Redirect);
                }
                (
                    document(text, Format::Markdown),
                    decoded.note,
                    decoded.encoding,
                )
            } else {
                if prose::is_svg(&decoded.text) {
                    asset = Some(Asset::Svg);
                }
                let format = format.unwrap_or(Format::Plain);
                (
                    document(decoded.text, format),
                    decoded.note,
                    decoded.encoding,
                )
            }
        };
        if doc.text.trim().is_empty() {
            return Err(SkipReason::Empty);
        }
        Ok(ReadFile {
            document: doc,
            note,
            encoding,
            asset,
        })
    }
}

/// Opens `path` for reading only if it is a regular file: without waiting for a writer
/// (`O_NONBLOCK`, so a named pipe swapped in never blocks the open), then checked on the
/// open file itself.
fn open_regular(path: &Path) -> Result<File, SkipReason> {
    let mut options = fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options
        .open(path)
        .map_err(|e| SkipReason::Unreadable(e.to_string()))?;
    match file.metadata() {
        Ok(m) if m.is_file() => Ok(file),
        Ok(_) => Err(SkipReason::NotAFile),
        Err(e) => Err(SkipReason::Unreadable(e.to_string())),
    }
}

/// Reads every path (files, and folders walked) with one [`Reader`]: the documents and
/// skips of all of them, in order, copies left out ([`Reader::leave_out_copies`]).
/// Errors: a path that cannot be looked at, or an invalid glob.
pub fn read_paths<P: AsRef<Path>>(
    paths: &[P],
    options: &ReadOptions,
) -> Result<ReadReport, ReadError> {
    let mut reader = Reader::new(options.clone());
    let mut report = ReadReport::default();
    for path in paths {
        report.extend(reader.read_path(path.as_ref())?);
    }
    reader.leave_out_copies(&mut report);
    Ok(report)
}

/// Lines longer than this count towards [`looks_minified`].
const LONG_LINE: usize = 1000;

/// Whether `text` is mostly long lines with under 8% white space: minified code or
/// generated data rather than prose (which has about 15%).
pub(crate) fn looks_minified(text: &str) -> bool {
    let (mut long_bytes, mut long_space) = (0usize, 0usize);
    for line in text.lines().filter(|l| l.len() > LONG_LINE) {
        long_bytes += line.len();
        long_space += line.bytes().filter(u8::is_ascii_whitespace).count();
    }
    long_bytes * 2 >= text.len() && long_space * 100 < long_bytes * 8
}

/// All of `reader`, failing with [`SkipReason::TooLarge`] past `limit` bytes.
fn read_limited(reader: impl Read, limit: Option<u64>) -> Result<Vec<u8>, SkipReason> {
    let mut bytes = Vec::new();
    reader
        .take(limit.map_or(u64::MAX, |l| l.saturating_add(1)))
        .read_to_end(&mut bytes)
        .map_err(|e| SkipReason::Unreadable(e.to_string()))?;
    if let Some(limit) = limit
        && bytes.len() as u64 > limit
    {
        return Err(SkipReason::TooLarge { limit });
    }
    Ok(bytes)
}

fn strip_suffix_ignore_case<'a>(name: &'a str, suffix: &str) -> Option<&'a str> {
    let cut = name.len().checked_sub(suffix.len())?;
    let (stem, tail) = (name.get(..cut)?, name.get(cut..)?);
    (tail.eq_ignore_ascii_case(suffix) && !stem.is_empty()).then_some(stem)
}

#[cfg(test)]
mod tests {
    use super::looks_minified;

    #[test]
    fn minified_code_and_data_but_not_long_prose() {
        let js = format!(
            "!function(e){{{}}}",
            "var a=b[c]||{};e.x=function(t){return t};".repeat(100)
        );
        assert!(looks_minified(&js));
        let json = format!(
            "{{\"index\":[{}]}}",
            "{\"id\":1,\"body\":\"a b\"},".repeat(200)
        );
        assert!(looks_minified(&json));
        let prose =
            "The mirror is cleaned every three months with snow, in the first week. ".repeat(200);
        assert!(!looks_minified(&prose));
        let short = "let x = 1;\nlet y = 2;\n";
        assert!(!looks_minified(short));
    }
}
