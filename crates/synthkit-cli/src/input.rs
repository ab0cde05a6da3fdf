//! Reading input: files, folders, standard input and pre-retrieved nodes.
//!
//! Files and folders are read by the library (`synthkit::documents`): folders are walked
//! like ripgrep does (.gitignore/.ignore and hidden files respected unless `--no-ignore` /
//! `--hidden`, `--include`/`--exclude` globs, symbolic links followed with loops named, in
//! sorted order), and every file is read by its content: text in any name (`README.Debian`,
//! `changelog.1`), UTF-16 with a byte-order mark, windows-1252 for legacy 8-bit text (with
//! a warning naming the file), `.gz` transparently, HTML as Markdown-style text, PDF text.
//! Every file skipped is named with its reason (the first few by default, all with `-v`)
//! and a note counts them: `read 37 files (2 skipped: 1 binary, 1 symlink loop)`. A file
//! named on the command line is read even when hidden or ignored.

use std::fs;
use std::io::{self, IsTerminal, Read};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use synthkit::Node;
use synthkit::documents::chunk::chunk_nodes;
use synthkit::documents::decode::decode_always;
use synthkit::documents::{Format, ReadOptions, ReadReport, Reader, SkipReason, Skipped};
use synthkit::text::TokenTextSplitter;
use tracing_subscriber::filter::LevelFilter;

use crate::args::SynthArgs;
use crate::error::usage;
use crate::output::{note, warn};

/// How a document read from standard input is named.
pub const STDIN_NAME: &str = "<stdin>";
/// Skipped files named one by one without `-v` (all are counted).
const NAMED_SKIPS: usize = 10;

/// A document: where it came from and its text.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// The path as given or found (`<stdin>` for standard input).
    pub path: String,
    /// The text.
    pub text: String,
    /// The markup of the text, which decides how it is chunked.
    pub format: Format,
}

/// Whether `path` means standard input.
fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Reads all of standard input.
pub fn read_stdin() -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    io::stdin()
        .read_to_end(&mut buf)
        .context("cannot read standard input")?;
    Ok(buf)
}

/// Text from bytes, whatever they hold (the library's rule: byte-order marks, UTF-8,
/// windows-1252 for legacy 8-bit text), with a warning naming `name` when the decoding was
/// not clean.
pub fn decode(bytes: Vec<u8>, name: &str) -> String {
    let decoded = decode_always(&bytes);
    if let Some(n) = &decoded.note {
        warn(&format!("{name} {n}"));
    }
    decoded.text
}

/// Reads one file, or standard input for `None` or `-` (for `tokens` and `split`).
pub fn read_single(path: Option<&Path>) -> Result<String> {
    match path {
        None => Ok(decode(read_stdin()?, STDIN_NAME)),
        Some(p) if is_stdin(p) => Ok(decode(read_stdin()?, STDIN_NAME)),
        Some(p) => {
            let bytes =
                fs::read(p).map_err(|e| usage(format!("cannot read `{}`: {e}", p.display())))?;
            Ok(decode(bytes, &p.display().to_string()))
        }
    }
}

/// The reading options given on the command line.
pub fn read_options(args: &SynthArgs) -> ReadOptions {
    let mut options = ReadOptions::new()
        .hidden(args.hidden)
        .no_ignore(args.no_ignore);
    for glob in &args.include {
        options = options.include(glob.clone());
    }
    for glob in &args.exclude {
        options = options.exclude(glob.clone());
    }
    options
}

/// Whether `-v` (or a `RUST_LOG` at info or more) asked for every step's notes.
fn verbose() -> bool {
    LevelFilter::current() >= LevelFilter::INFO
}

/// Reads every path of the command line: files, folders and `-` for standard input. With
/// no path, standard input is read unless it is a terminal.
pub fn read_documents(args: &SynthArgs) -> Result<Vec<Document>> {
    read_documents_with(&args.paths, &read_options(args), args.quiet, verbose())
}

/// What is said about skipped files: each named until [`NAMED_SKIPS`] (all when verbose).
struct SkipNotes {
    quiet: bool,
    verbose: bool,
    named: usize,
    unnamed: usize,
}

impl SkipNotes {
    fn say(&mut self, skipped: &Skipped) {
        let path = skipped.path.display();
        if let SkipReason::Unreadable(e) = &skipped.reason {
            // A file that should have been read and was not: always shown.
            warn(&format!("cannot read {path}: {e}; skipped"));
            return;
        }
        if self.quiet {
            return;
        }
        if !self.verbose && self.named >= NAMED_SKIPS {
            self.unnamed += 1;
            return;
        }
        self.named += 1;
        note(
            false,
            &match &skipped.reason {
                SkipReason::Binary => format!("skipping binary file {path}"),
                SkipReason::Empty => format!("skipping empty file {path}"),
                other => format!("skipping {path}: {other}"),
            },
        );
    }
}

fn read_documents_with(
    paths: &[PathBuf],
    options: &ReadOptions,
    quiet: bool,
    verbose: bool,
) -> Result<Vec<Document>> {
    let mut reader = Reader::new(options.clone());
    if paths.is_empty() {
        if io::stdin().is_terminal() {
            return Err(usage(
                "no input: give files or folders to read, `-` for standard input, or --nodes FILE",
            ));
        }
        return Ok(read_stdin_document(&reader, quiet)?.into_iter().collect());
    }
    if paths.iter().filter(|p| is_stdin(p)).count() > 1 {
        return Err(usage("`-` (standard input) can be given only once"));
    }
    let mut notes = SkipNotes {
        quiet,
        verbose,
        named: 0,
        unnamed: 0,
    };
    let mut all = ReadReport::default();
    let mut docs = Vec::new();
    for path in paths {
        if is_stdin(path) {
            docs.extend(read_stdin_document(&reader, quiet)?);
            continue;
        }
        let meta = fs::metadata(path)
            .map_err(|e| usage(format!("cannot read `{}`: {e}", path.display())))?;
        let report = reader.read_path(path).map_err(|e| usage(e.to_string()))?;
        if !meta.is_dir()
            && let Some(SkipReason::Unreadable(e)) = report.skipped.first().map(|s| &s.reason)
        {
            return Err(usage(format!("cannot read `{}`: {e}", path.display())));
        }
        for n in &report.notes {
            warn(&n.to_string());
        }
        for skipped in &report.skipped {
            notes.say(skipped);
        }
        let read_elsewhere = report
            .skipped
            .iter()
            .any(|s| matches!(s.reason, SkipReason::Duplicate { .. }));
        if meta.is_dir() && report.documents.is_empty() && !read_elsewhere {
            return Err(nothing_found(path, &report, options));
        }
        docs.extend(report.documents.iter().map(|d| Document {
            path: d.path.display().to_string(),
            text: d.text.clone(),
            format: d.format,
        }));
        all.extend(report);
    }
    let files = all.documents.len();
    let summary = match all.skip_summary() {
        Some(s) if notes.unnamed > 0 => format!(" ({s}; -v names them all)"),
        Some(s) => format!(" ({s})"),
        None => String::new(),
    };
    if verbose || !summary.is_empty() {
        note(
            quiet,
            &format!("read {files} file{}{summary}", plural(files)),
        );
    }
    Ok(docs)
}

/// The error for a folder that gave no document.
fn nothing_found(path: &Path, report: &ReadReport, options: &ReadOptions) -> anyhow::Error {
    let empties: Vec<String> = report
        .skipped
        .iter()
        .filter(|s| s.reason == SkipReason::Empty)
        .map(|s| s.path.display().to_string())
        .collect();
    if !empties.is_empty() && empties.len() == report.skipped.len() {
        let verb = if empties.len() == 1 { "is" } else { "are" };
        return anyhow!("no text to work on: {} {verb} empty", empties.join(", "));
    }
    let walk = options.walk_options();
    let mut left_out = Vec::new();
    if !walk.is_hidden() {
        left_out.push("hidden files (--hidden)");
    }
    if !walk.is_no_ignore() {
        left_out.push("files ignored by .gitignore or .ignore (--no-ignore)");
    }
    if !walk.includes().is_empty() {
        left_out.push("files not matching --include");
    }
    if !walk.excludes().is_empty() {
        left_out.push("files matching --exclude");
    }
    let mut detail = Vec::new();
    if let Some(s) = report.skip_summary() {
        detail.push(s);
    }
    if !left_out.is_empty() {
        detail.push(format!("not looked at: {}", left_out.join(", ")));
    }
    let detail = if detail.is_empty() {
        String::new()
    } else {
        format!(" ({})", detail.join("; "))
    };
    anyhow!("no text files found under {}{detail}", path.display())
}

/// Standard input as a document, read by its content like a file (HTML converted, binary
/// skipped). Empty input is kept, so that the error says `<stdin> is empty`.
fn read_stdin_document(reader: &Reader, quiet: bool) -> Result<Option<Document>> {
    let bytes = read_stdin()?;
    match reader.read_bytes(Path::new(STDIN_NAME), bytes) {
        Ok(read) => {
            if let Some(n) = &read.note {
                warn(&format!("{STDIN_NAME} {n}"));
            }
            Ok(Some(Document {
                path: STDIN_NAME.to_string(),
                text: read.document.text,
                format: read.document.format,
            }))
        }
        Err(SkipReason::Empty) => Ok(Some(Document {
            path: STDIN_NAME.to_string(),
            text: String::new(),
            format: Format::Plain,
        })),
        Err(SkipReason::Binary) => {
            note(quiet, &format!("skipping binary input {STDIN_NAME}"));
            Ok(None)
        }
        Err(reason) => Err(anyhow!("cannot read standard input: {reason}")),
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Cuts each document into structure-aware nodes (`synthkit::documents::chunk`: headings
/// first, code blocks and lists kept whole, at most the splitter's chunk size): id
/// `PATH#N` (N from 1), metadata `file_path`, `section` (the heading path, when there is
/// one) and `chunk` (N), with `chunk` hidden from the model. Whitespace-only text gives no
/// node.
pub fn nodes_from_documents(docs: &[Document], splitter: &TokenTextSplitter) -> Vec<Node> {
    docs.iter()
        .flat_map(|doc| chunk_nodes(&doc.path, &doc.text, doc.format, splitter))
        .collect()
}

/// Reads pre-retrieved nodes from a file (`-`: standard input).
pub fn read_nodes(path: &Path) -> Result<Vec<Node>> {
    let (text, name) = if is_stdin(path) {
        (decode(read_stdin()?, STDIN_NAME), STDIN_NAME.to_string())
    } else {
        let bytes = fs::read(path)
            .map_err(|e| usage(format!("cannot read --nodes `{}`: {e}", path.display())))?;
        let name = path.display().to_string();
        (decode(bytes, &name), name)
    };
    crate::node_json::parse_nodes(&text, &name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use synthkit::text::BpeTokenizer;

    #[test]
    fn nodes_have_ids_and_hidden_chunk_numbers() {
        let splitter = TokenTextSplitter::new(5, 0, BpeTokenizer::cl100k_base().shared()).unwrap();
        let docs = vec![
            Document {
                path: "a.md".into(),
                text: "one two three four five six seven eight nine ten".into(),
                format: Format::Markdown,
            },
            Document {
                path: "b.md".into(),
                text: "   ".into(),
                format: Format::Markdown,
            },
        ];
        let nodes = nodes_from_documents(&docs, &splitter);
        assert_eq!(nodes.len(), 2);
        assert_eq!(nodes[1].id, "a.md#2");
        assert_eq!(nodes[1].metadata["chunk"], 2);
        assert_eq!(
            nodes[0].llm_text(),
            "file_path: a.md\n\none two three four five"
        );
    }

    #[test]
    fn lossy_decoding_and_bom() {
        assert_eq!(decode(b"\xEF\xBB\xBFhi".to_vec(), "x"), "hi");
        // Legacy 8-bit text is windows-1252; damaged UTF-8 keeps U+FFFD.
        assert_eq!(decode(b"a\xFFb".to_vec(), "x"), "a\u{FF}b");
        assert_eq!(decode(b"\xC3\xA9 \xFF".to_vec(), "x"), "\u{E9} \u{FFFD}");
    }
}
