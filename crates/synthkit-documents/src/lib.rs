//! Documents for synthkit: turning paths into text and text into nodes, usable without
//! the CLI.
//!
//! - `read`: walking folders like ripgrep does and reading each file as text (encodings,
//!   `.gz`, HTML, PDF), naming every file it skips and why (`walk`, `decode`, `html`,
//!   `pdf`, `prose` (what is not prose) and `copies` (documents whose text is in others)
//!   are its parts, `report` what it says). Start with [`read_paths`] or a [`Reader`].
//! - `chunk`: structure-aware chunks (headings first, code blocks and lists kept whole),
//!   each carrying its heading path as `section` metadata.

pub mod chunk;
pub mod copies;
pub mod decode;
pub mod error;
pub mod html;
pub mod pdf;
pub mod prose;
pub mod read;
pub mod report;
pub mod walk;

pub use read::{
    ProgressFn, ReadCache, ReadError, ReadFile, ReadOptions, ReadProgress, Reader, read_paths,
};
pub use report::{Asset, LeftOut, LeftOutReason, ReadNote, ReadReport, SkipReason, Skipped};
pub use walk::WalkOptions;

use std::path::PathBuf;

/// A document read from a file (or standard input): where it came from, its text, and
/// the markup that text is in.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Document {
    /// The path as given or found (`<stdin>` for standard input).
    pub path: PathBuf,
    /// The text (HTML and PDF already converted: HTML to Markdown-style text with `#`
    /// headings, lists and tables; PDF to plain text).
    pub text: String,
    /// The markup of `text`.
    pub format: Format,
}

impl Document {
    /// A document from its parts.
    pub fn new(path: impl Into<PathBuf>, text: impl Into<String>, format: Format) -> Self {
        Self {
            path: path.into(),
            text: text.into(),
            format,
        }
    }
}

/// The markup of a document's text, which decides how it is chunked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum Format {
    /// Plain text (also PDF text).
    Plain,
    /// Markdown (also HTML, converted to Markdown-style text).
    Markdown,
    /// reStructuredText.
    Rst,
}
