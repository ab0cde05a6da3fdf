//! What a read found besides the documents: every file skipped and why, what the walk
//! left out (hidden and ignored files), and notes on documents whose decoding was not clean.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::Document;

/// Why a file was not read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
    /// Not a regular file (a named pipe, socket or device found in a folder, or given
    /// when special files are not read).
    NotAFile,
    /// Outside the folder the read is confined to (a symbolic link out of it, or a path
    /// given outside it): not read.
    OutsideRoot {
        /// The folder.
        root: PathBuf,
    },
    /// A folder this many levels below the path read, or more: not entered.
    TooDeep {
        /// The depth limit.
        limit: usize,
    },
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
    /// Text that is not prose for a reader (a stylesheet, a script, an SVG image, JSON
    /// data, a redirect page), found in a folder.
    Asset(Asset),
    /// Its text is (nearly) all in another file read: an exact copy, a near duplicate, or
    /// a page generated from others (mdBook's `print.html`, an `all.html`), found in a
    /// folder.
    Copy {
        /// The file sharing the most text with it.
        of: PathBuf,
        /// The share of its text found in other files, in percent.
        percent: u8,
    },
}

/// Kinds of text files that are not prose (see [`SkipReason::Asset`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Asset {
    /// CSS (`.css`, `.scss`, `.sass`, `.less`).
    Style,
    /// JavaScript (`.js`, `.mjs`, `.cjs`) or a source map (`.map`).
    Script,
    /// An SVG image (`.svg`, or text starting with `<svg`).
    Svg,
    /// JSON data (`.json`).
    Data,
    /// An HTML page that only redirects to another (`<meta http-equiv="refresh">`).
    Redirect,
    /// A web font (`.woff`, `.woff2`, `.ttf`, `.otf`, `.eot`): binary, and expected beside
    /// HTML documentation, so counted rather than named as a binary file.
    Font,
}

impl Asset {
    /// The short name counted in summaries.
    pub fn kind(self) -> &'static str {
        match self {
            Asset::Style => "stylesheet",
            Asset::Script => "script",
            Asset::Svg => "svg image",
            Asset::Data => "json data",
            Asset::Redirect => "redirect page",
            Asset::Font => "font",
        }
    }
}

impl SkipReason {
    /// The reason's short name, as counted in summaries: `binary`, `empty`, `too large`,
    /// `symlink loop`, `not a file`, `outside root`, `too deep`, `duplicate`, `unreadable`,
    /// `minified`, `stylesheet`, `script`, `svg image`, `json data`, `redirect page`,
    /// `font`, `copy`.
    pub fn kind(&self) -> &'static str {
        match self {
            SkipReason::Binary => "binary",
            SkipReason::Empty => "empty",
            SkipReason::TooLarge { .. } => "too large",
            SkipReason::SymlinkLoop { .. } => "symlink loop",
            SkipReason::NotAFile => "not a file",
            SkipReason::OutsideRoot { .. } => "outside root",
            SkipReason::TooDeep { .. } => "too deep",
            SkipReason::Duplicate { .. } => "duplicate",
            SkipReason::Unreadable(_) => "unreadable",
            SkipReason::Minified => "minified",
            SkipReason::Asset(a) => a.kind(),
            SkipReason::Copy { .. } => "copy",
        }
    }

    /// Every kind, in the order summaries list them.
    pub const KINDS: [&'static str; 17] = [
        "binary",
        "minified",
        "stylesheet",
        "script",
        "svg image",
        "json data",
        "redirect page",
        "font",
        "copy",
        "empty",
        "too large",
        "symlink loop",
        "not a file",
        "outside root",
        "too deep",
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
            SkipReason::OutsideRoot { root } => {
                write!(
                    f,
                    "outside {} (the folder paths are read under)",
                    root.display()
                )
            }
            SkipReason::TooDeep { limit } => {
                write!(
                    f,
                    "too deep (a folder {limit} levels down or more: not entered)"
                )
            }
            SkipReason::Duplicate { of } => write!(f, "duplicate (same file as {})", of.display()),
            SkipReason::Unreadable(e) => write!(f, "unreadable: {e}"),
            SkipReason::Minified => f.write_str(
                "minified or generated (long lines, little white space; name the file to read it)",
            ),
            SkipReason::Asset(a) => write!(f, "not prose ({}; name the file to read it)", a.kind()),
            SkipReason::Copy { of, percent } => write!(
                f,
                "copy ({percent}% of its text is in other files read, such as {}; name the file to read it)",
                of.display()
            ),
        }
    }
}

/// `64 MiB`, `1 KiB`, `100 bytes`.
pub(crate) fn human(bytes: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * 1024;
    const GIB: u64 = 1024 * 1024 * 1024;
    if bytes >= GIB && bytes.is_multiple_of(GIB) {
        format!("{} GiB", bytes / GIB)
    } else if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{} KiB", bytes / KIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// A file visited and not read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

/// Why the walk did not visit a file or folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum LeftOutReason {
    /// Its name starts with `.` (read with the walk's `hidden` option).
    Hidden,
    /// A `.gitignore`, `.ignore` or git exclude file leaves it out (read with the walk's
    /// `no_ignore` option).
    Ignored,
}

/// A file or folder the walk did not visit (a folder is counted once, not its files).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftOut {
    /// The path.
    pub path: PathBuf,
    /// Why.
    pub reason: LeftOutReason,
    /// Whether it is a folder.
    pub folder: bool,
}

/// Something worth saying about a document that was read: its text may not be exactly
/// what the file meant (invalid UTF-8 replaced, or decoded as windows-1252).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(into = "SavedNote")]
pub struct ReadNote {
    /// The file.
    pub path: PathBuf,
    /// What happened, to follow the path: `is not valid UTF-8 (first bad byte at offset
    /// 8); decoded as windows-1252`.
    pub message: String,
    /// The encoding the text was decoded with: `windows-1252` (or the one an HTML
    /// `<meta charset>` named) for legacy text, `UTF-8` or `UTF-16..` when bad bytes were
    /// replaced with U+FFFD.
    pub encoding: &'static str,
}

/// A [`ReadNote`] as saved: its encoding by name.
#[derive(Serialize, Deserialize)]
struct SavedNote {
    path: PathBuf,
    message: String,
    encoding: String,
}

impl From<ReadNote> for SavedNote {
    fn from(n: ReadNote) -> Self {
        Self {
            path: n.path,
            message: n.message,
            encoding: n.encoding.to_owned(),
        }
    }
}

impl<'de> Deserialize<'de> for ReadNote {
    fn deserialize<D: serde::Deserializer<'de>>(input: D) -> Result<Self, D::Error> {
        SavedNote::deserialize(input)?
            .try_into()
            .map_err(serde::de::Error::custom)
    }
}

impl TryFrom<SavedNote> for ReadNote {
    type Error = String;
    fn try_from(n: SavedNote) -> Result<Self, String> {
        Ok(Self {
            encoding: crate::decode::encoding_named(&n.encoding)
                .ok_or_else(|| format!("unknown encoding `{}`", n.encoding))?,
            path: n.path,
            message: n.message,
        })
    }
}

impl fmt::Display for ReadNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.path.display(), self.message)
    }
}

/// What reading found: the documents, the files skipped, what the walk left out, and
/// notes on what was read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReadReport {
    /// The documents, in walk order.
    pub documents: Vec<Document>,
    /// Every file visited and not read, with the reason.
    pub skipped: Vec<Skipped>,
    /// Hidden and ignored files and folders the walk did not visit (at most
    /// [`super::walk::MAX_LEFT_OUT`] of them are looked for in a folder).
    pub left_out: Vec<LeftOut>,
    /// Notes on documents whose decoding was not clean.
    pub notes: Vec<ReadNote>,
}

impl ReadReport {
    /// Adds another report's findings after this one's.
    pub fn extend(&mut self, other: ReadReport) {
        self.documents.extend(other.documents);
        self.skipped.extend(other.skipped);
        self.left_out.extend(other.left_out);
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

    /// What the walk left out, counted: `not visited: 3 hidden, 1 ignored`; `None` when
    /// nothing was.
    pub fn left_out_summary(&self) -> Option<String> {
        let count = |r: LeftOutReason| self.left_out.iter().filter(|l| l.reason == r).count();
        let parts: Vec<String> = [
            (count(LeftOutReason::Hidden), "hidden"),
            (count(LeftOutReason::Ignored), "ignored"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
        (!parts.is_empty()).then(|| format!("not visited: {}", parts.join(", ")))
    }
}
