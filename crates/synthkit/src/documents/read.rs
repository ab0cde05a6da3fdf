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
//! The same file reached twice (named twice, or through a symbolic link) is read once;
//! the second path is [`SkipReason::Duplicate`].

use std::collections::HashMap;
use std::fmt;
use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use flate2::read::MultiGzDecoder;

use super::decode::decode;
use super::html::{html_to_markdown, looks_like_html};
use super::pdf::{is_pdf, pdf_text};
use super::walk::{Found, WalkOptions, walk};
use super::{Document, Format};

/// The default limit on a file's size (and on a `.gz` file's decompressed size): 64 MiB.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 64 * 1024 * 1024;

/// How files and folders are read: what to visit ([`WalkOptions`]) and the size limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadOptions {
    walk: WalkOptions,
    max_file_size: Option<u64>,
}

impl Default for ReadOptions {
    fn default() -> Self {
        Self {
            walk: WalkOptions::default(),
            max_file_size: Some(DEFAULT_MAX_FILE_SIZE),
        }
    }
}

impl ReadOptions {
    /// The default options: ripgrep's walking rules, files up to 64 MiB.
    pub fn new() -> Self {
        Self::default()
    }

    /// Visit hidden files and folders too (names starting with `.`).
    pub fn hidden(mut self, yes: bool) -> Self {
        self.walk = self.walk.hidden(yes);
        self
    }

    /// Do not honour `.gitignore`, `.ignore`, `.git/info/exclude` or git's global excludes.
    pub fn no_ignore(mut self, yes: bool) -> Self {
        self.walk = self.walk.no_ignore(yes);
        self
    }

    /// Read only files matching this glob (or another include glob). Repeatable.
    pub fn include(mut self, glob: impl Into<String>) -> Self {
        self.walk = self.walk.include(glob);
        self
    }

    /// Never read files (or enter folders) matching this glob. Repeatable.
    pub fn exclude(mut self, glob: impl Into<String>) -> Self {
        self.walk = self.walk.exclude(glob);
        self
    }

    /// Skip files larger than this many bytes (`None`: no limit).
    pub fn max_file_size(mut self, bytes: Option<u64>) -> Self {
        self.max_file_size = bytes;
        self
    }

    /// The walking options.
    pub fn walk_options(&self) -> &WalkOptions {
        &self.walk
    }
}

/// Why a file was not read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkipReason {
    /// Not text: a NUL byte, or too many control characters, near its start.
    Binary,
    /// No text: zero bytes, white space only, or a PDF without text.
    Empty,
    /// Over the size limit (for `.gz`, once decompressed).
    TooLarge {
        /// The limit, in bytes.
        limit: u64,
    },
    /// A symbolic link to one of its own ancestor folders: not followed.
    SymlinkLoop {
        /// The folder the link leads back to.
        ancestor: PathBuf,
    },
    /// Not a regular file (a named pipe, socket or device found in a folder).
    NotAFile,
    /// The same file as one already read, reached by another path.
    Duplicate {
        /// The path it was read by.
        of: PathBuf,
    },
    /// It could not be read: the I/O error, a broken link, damaged gzip data or a PDF
    /// whose text cannot be extracted.
    Unreadable(String),
    /// Minified code or generated data (mostly very long lines with little white space),
    /// found in a folder; name the file on its own to read it.
    Minified,
}

impl SkipReason {
    /// The reason's short name, as counted in summaries: `binary`, `empty`, `too large`,
    /// `symlink loop`, `not a file`, `duplicate`, `unreadable`, `minified`.
    pub fn kind(&self) -> &'static str {
        match self {
            SkipReason::Binary => "binary",
            SkipReason::Empty => "empty",
            SkipReason::TooLarge { .. } => "too large",
            SkipReason::SymlinkLoop { .. } => "symlink loop",
            SkipReason::NotAFile => "not a file",
            SkipReason::Duplicate { .. } => "duplicate",
            SkipReason::Unreadable(_) => "unreadable",
            SkipReason::Minified => "minified",
        }
    }

    /// Every kind, in the order summaries list them.
    pub const KINDS: [&'static str; 8] = [
        "binary",
        "minified",
        "empty",
        "too large",
        "symlink loop",
        "not a file",
        "duplicate",
        "unreadable",
    ];
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::Binary => f.write_str("binary"),
            SkipReason::Empty => f.write_str("empty"),
            SkipReason::TooLarge { limit } => write!(f, "too large (over {})", human(*limit)),
            SkipReason::SymlinkLoop { ancestor } => {
                write!(f, "symlink loop (back to {})", ancestor.display())
            }
            SkipReason::NotAFile => f.write_str("not a file (a pipe, socket or device)"),
            SkipReason::Duplicate { of } => write!(f, "duplicate (same file as {})", of.display()),
            SkipReason::Unreadable(e) => write!(f, "unreadable: {e}"),
            SkipReason::Minified => f.write_str(
                "minified or generated (long lines, little white space; name the file to read it)",
            ),
        }
    }
}

fn human(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// A file visited and not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The path, as found.
    pub path: PathBuf,
    /// Why.
    pub reason: SkipReason,
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.reason)
    }
}

/// Something worth saying about a document that was read: its text may not be exactly
/// what the file meant (invalid UTF-8 replaced, or decoded as windows-1252).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadNote {
    /// The file.
    pub path: PathBuf,
    /// What happened, to follow the path: `is not valid UTF-8 (first bad byte at offset
    /// 8); decoded as windows-1252`.
    pub message: String,
}

impl fmt::Display for ReadNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.path.display(), self.message)
    }
}

/// What reading found: the documents, the files skipped, and notes on what was read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReadReport {
    /// The documents, in walk order.
    pub documents: Vec<Document>,
    /// Every file visited and not read, with the reason.
    pub skipped: Vec<Skipped>,
    /// Notes on documents whose decoding was not clean.
    pub notes: Vec<ReadNote>,
}

impl ReadReport {
    /// Adds another report's findings after this one's.
    pub fn extend(&mut self, other: ReadReport) {
        self.documents.extend(other.documents);
        self.skipped.extend(other.skipped);
        self.notes.extend(other.notes);
    }

    /// How many files were skipped for each reason ([`SkipReason::kind`]), in the order
    /// of [`SkipReason::KINDS`], reasons with none left out.
    pub fn skip_counts(&self) -> Vec<(&'static str, usize)> {
        SkipReason::KINDS
            .iter()
            .map(|kind| {
                let n = self
                    .skipped
                    .iter()
                    .filter(|s| s.reason.kind() == *kind)
                    .count();
                (*kind, n)
            })
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// The skips counted by reason, `2 skipped: 1 binary, 1 symlink loop`; `None` when
    /// nothing was skipped.
    pub fn skip_summary(&self) -> Option<String> {
        if self.skipped.is_empty() {
            return None;
        }
        let parts: Vec<String> = self
            .skip_counts()
            .iter()
            .map(|(kind, n)| format!("{n} {kind}"))
            .collect();
        Some(format!(
            "{} skipped: {}",
            self.skipped.len(),
            parts.join(", ")
        ))
    }
}

/// Why a read could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// A path given to read does not exist or cannot be looked at.
    #[error("cannot read `{}`: {source}", path.display())]
    Path {
        /// The path.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// An include or exclude glob does not parse.
    #[error("invalid glob `{glob}`: {message}")]
    Glob {
        /// The glob as given.
        glob: String,
        /// What is wrong with it.
        message: String,
    },
}

/// Reads files and folders, remembering what it has read so that a file reached twice
/// is read once.
#[derive(Debug, Clone, Default)]
pub struct Reader {
    options: ReadOptions,
    /// Canonical path of each file read (or skipped), to the path it was first found by.
    seen: HashMap<PathBuf, PathBuf>,
}

/// A file that was read: the document and, when its decoding was not clean, a note.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ReadFile {
    /// The document.
    pub document: Document,
    /// What to say about its decoding (see [`ReadNote::message`]).
    pub note: Option<String>,
}

impl Reader {
    /// A reader with these options.
    pub fn new(options: ReadOptions) -> Self {
        Self {
            options,
            seen: HashMap::new(),
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
        let mut report = ReadReport::default();
        for found in walk(path, &self.options.walk)? {
            match found {
                Found::Skipped(s) => report.skipped.push(s),
                Found::File(file) => {
                    let key = fs::canonicalize(&file).unwrap_or_else(|_| file.clone());
                    if let Some(first) = self.seen.get(&key) {
                        report.skipped.push(Skipped {
                            path: file,
                            reason: SkipReason::Duplicate { of: first.clone() },
                        });
                        continue;
                    }
                    self.seen.insert(key, file.clone());
                    match self.read_file(&file) {
                        Ok(read) if in_folder && looks_minified(&read.document.text) => {
                            report.skipped.push(Skipped {
                                path: file,
                                reason: SkipReason::Minified,
                            });
                        }
                        Ok(read) => {
                            if let Some(message) = read.note {
                                report.notes.push(ReadNote {
                                    path: file.clone(),
                                    message,
                                });
                            }
                            report.documents.push(read.document);
                        }
                        Err(reason) => report.skipped.push(Skipped { path: file, reason }),
                    }
                }
            }
        }
        Ok(report)
    }

    /// Reads one file by its content (the rules are in the [module documentation](self)).
    pub fn read_file(&self, path: &Path) -> Result<ReadFile, SkipReason> {
        let limit = self.options.max_file_size;
        if let (Some(limit), Ok(meta)) = (limit, fs::metadata(path))
            && meta.len() > limit
        {
            return Err(SkipReason::TooLarge { limit });
        }
        let file = File::open(path).map_err(|e| SkipReason::Unreadable(e.to_string()))?;
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
        let (doc, note) = if is_pdf(&bytes) {
            let text = pdf_text(&bytes).map_err(SkipReason::Unreadable)?;
            (document(text, Format::Plain), None)
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
                (document(text, Format::Markdown), decoded.note)
            } else {
                let format = format.unwrap_or(Format::Plain);
                (document(decoded.text, format), decoded.note)
            }
        };
        if doc.text.trim().is_empty() {
            return Err(SkipReason::Empty);
        }
        Ok(ReadFile {
            document: doc,
            note,
        })
    }
}

/// Reads every path (files, and folders walked) with one [`Reader`]: the documents and
/// skips of all of them, in order. Errors: a path that cannot be looked at, or an
/// invalid glob.
pub fn read_paths<P: AsRef<Path>>(
    paths: &[P],
    options: &ReadOptions,
) -> Result<ReadReport, ReadError> {
    let mut reader = Reader::new(options.clone());
    let mut report = ReadReport::default();
    for path in paths {
        report.extend(reader.read_path(path.as_ref())?);
    }
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
