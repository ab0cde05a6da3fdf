//! Reading files, folders and standard input into documents.
//!
//! Files and folders are read by the library (`synthkit-documents`): folders are walked
//! like ripgrep does (.gitignore/.ignore and hidden files respected unless `--no-ignore` /
//! `--hidden`, `--include`/`--exclude` globs, symbolic links followed with loops named, in
//! sorted order), and every file is read by its content: text in any name (`README.Debian`,
//! `changelog.1`), UTF-16 with a byte-order mark, windows-1252 for legacy 8-bit text (with
//! a warning naming the file), `.gz` transparently, HTML as Markdown-style text, PDF text.
//! Every file skipped is named with its reason (the first few by default, all with `-v`)
//! and a note counts them: `read 37 files (2 skipped: 1 binary, 1 symlink loop)`. A file
//! named on the command line is read even when hidden or ignored.
//!
//! Image files (PNG, JPEG, WebP, GIF: a known name whose first bytes are that image) are
//! set apart from the binary files skipped ([`Documents::images`]): a front end makes them
//! image nodes when the model takes images.

use std::fs;
use std::io::{self, IsTerminal, Read};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use synthkit::Node;
use synthkit::text::TokenTextSplitter;
use synthkit_documents::chunk::chunk_nodes;
use synthkit_documents::{
    Format, LeftOut, LeftOutReason, ReadNote, ReadOptions, ReadReport, Reader, SkipReason, Skipped,
};

use super::paths::OptionNames;
use super::{Progress, Say, input_error as usage};

/// How a document read from standard input is named.
pub const STDIN_NAME: &str = "<stdin>";
/// Skipped files named one by one without `-v` (all are counted).
const NAMED_SKIPS: usize = 10;

/// How many imperfectly decoded files are named on standard error before the rest are
/// counted in one line (all are named with -v).
const NAMED_READ_NOTES: usize = 3;

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
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// What `reader` holds, read up to one byte past `max` (`None`: no limit): a caller that
/// checks the size sees an input over the limit without holding all of it.
pub fn read_capped(reader: impl Read, max: Option<u64>) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    reader
        .take(max.map_or(u64::MAX, |m| m.saturating_add(1)))
        .read_to_end(&mut buf)?;
    Ok(buf)
}

/// Standard input, read up to one byte past `max` ([`read_capped`]).
pub fn read_stdin(max: Option<u64>) -> Result<Vec<u8>> {
    read_capped(io::stdin().lock(), max).context("cannot read standard input")
}

/// The documents read, and whether a folder was among the paths.
#[derive(Debug, Default)]
pub struct Documents {
    /// The documents, in order.
    pub docs: Vec<Document>,
    /// Whether some path was a folder (`ask` then keeps the best chunks by default).
    pub from_folder: bool,
    /// The image files found (not counted as skipped), in order.
    pub images: Vec<PathBuf>,
    /// What was said of the read.
    pub told: Told,
}

/// The names of the image files read: `.png`, `.jpg`, `.jpeg`, `.webp`, `.gif`.
const IMAGE_EXTENSIONS: [&str; 5] = ["png", "jpg", "jpeg", "webp", "gif"];

/// Whether `path` is an image file: a known image name, and first bytes that are a PNG,
/// JPEG, WebP or GIF image.
pub fn is_image_file(path: &Path) -> bool {
    let named = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| IMAGE_EXTENSIONS.iter().any(|x| e.eq_ignore_ascii_case(x)));
    if !named {
        return false;
    }
    let mut head = Vec::with_capacity(12);
    fs::File::open(path)
        .and_then(|f| f.take(12).read_to_end(&mut head))
        .is_ok()
        && synthkit::node::ImageFormat::sniff(&head).is_some()
}

/// Says what was read imperfectly (text not valid UTF-8, decoded as windows-1252 or with
/// U+FFFD): the first [`NAMED_READ_NOTES`] named, then one line counting the rest by what
/// became of them (all named with -v). A documentation folder may hold dozens of legacy
/// 8-bit files; one warning each buries the rest of standard error.
fn say_read_notes(notes: &[ReadNote], say: Say<'_>) {
    let named = if say.verbose {
        notes.len()
    } else {
        NAMED_READ_NOTES.min(notes.len())
    };
    for n in &notes[..named] {
        say.warn(&n.to_string());
    }
    let rest = &notes[named..];
    if rest.is_empty() {
        return;
    }
    // Counted by what the decoding did (a Unicode encoding kept, its bad bytes replaced;
    // else a legacy one used), in order of first sight.
    let mut outcomes: Vec<(String, usize)> = Vec::new();
    for n in rest {
        let outcome = if n.encoding.starts_with("UTF-") {
            "with bad bytes replaced by U+FFFD".to_string()
        } else {
            format!("decoded as {}", n.encoding)
        };
        match outcomes.iter_mut().find(|(o, _)| *o == outcome) {
            Some((_, count)) => *count += 1,
            None => outcomes.push((outcome, 1)),
        }
    }
    let counts: Vec<String> = outcomes
        .iter()
        .map(|(outcome, n)| format!("{n} {outcome}"))
        .collect();
    say.warn(&format!(
        "{} more file{} decoded imperfectly ({}; {} names them all)",
        rest.len(),
        plural(rest.len()),
        counts.join(", "),
        say.to.names().verbose
    ));
}

/// What is said about skipped files: each named until [`NAMED_SKIPS`] (all when verbose).
struct SkipNotes<'a> {
    say: Say<'a>,
    named: usize,
    unnamed: usize,
}

impl SkipNotes<'_> {
    fn say(&mut self, skipped: &Skipped) {
        let path = skipped.path.display();
        if let SkipReason::Unreadable(e) = &skipped.reason {
            // A file that should have been read and was not: always shown.
            self.say.warn(&format!("cannot read {path}: {e}; skipped"));
            return;
        }
        if let SkipReason::OutsideRoot { .. } = &skipped.reason {
            // A link out of the folder `paths` are read under: always shown.
            self.say
                .warn(&format!("not reading {path}: {}", skipped.reason));
            return;
        }
        // Left out as not prose (an asset, a minified or generated page) or as a copy:
        // expected in a documentation folder, so named with -v only (and counted in the
        // summary).
        let expected = matches!(
            skipped.reason,
            SkipReason::Asset(_)
                | SkipReason::Minified
                | SkipReason::Copy { .. }
                | SkipReason::Duplicate { .. }
        );
        if !self.allowed(expected) {
            return;
        }
        self.say.to.note(&match &skipped.reason {
            SkipReason::Binary => format!("skipping binary file {path}"),
            SkipReason::Empty => format!("skipping empty file {path}"),
            too_large @ SkipReason::TooLarge { .. } => match self.say.to.names().max_file_size {
                Some(flag) => format!("skipping {path}: {too_large}; {flag} raises the limit"),
                None => format!("skipping {path}: {too_large}"),
            },
            other => format!("skipping {path}: {other}"),
        });
    }

    fn say_left_out(&mut self, left: &LeftOut) {
        if !self.allowed(true) {
            return;
        }
        let names = self.say.to.names();
        let (what, flag) = match left.reason {
            LeftOutReason::Hidden => ("hidden", names.hidden),
            _ => ("ignored", names.no_ignore),
        };
        let kind = if left.folder { "folder" } else { "file" };
        let hint = flag.map_or_else(String::new, |flag| format!(" ({flag} reads it)"));
        self.say.to.note(&format!(
            "not visiting {what} {kind} {}{hint}",
            left.path.display()
        ));
    }

    /// Whether to name one more file: always with -v; else the first [`NAMED_SKIPS`],
    /// `expected` ones never.
    fn allowed(&mut self, expected: bool) -> bool {
        if self.say.quiet {
            return false;
        }
        if !self.say.verbose && (expected || self.named >= NAMED_SKIPS) {
            self.unnamed += 1;
            return false;
        }
        self.named += 1;
        true
    }
}

/// Reads every path given (files, folders and `-` for standard input; with no path,
/// standard input unless it is a terminal) with `options`, taking the files found in
/// folders that `cache` kept (unchanged since) from it instead of reading them. `spinner`
/// shows the progress.
pub fn read_documents(
    paths: &[PathBuf],
    options: &ReadOptions,
    cache: Option<std::sync::Arc<dyn synthkit_documents::ReadCache>>,
    say: Say<'_>,
    spinner: &dyn Progress,
) -> Result<Documents> {
    let mut reader = Reader::new(options.clone());
    if let Some(progress) = spinner.reading() {
        reader = reader.on_progress(progress);
    }
    if let Some(cache) = cache {
        reader = reader.with_cache(cache);
    }
    if paths.is_empty() {
        if io::stdin().is_terminal() {
            return Err(usage(
                "no input: give files or folders to read, `-` for standard input, or --nodes FILE",
            ));
        }
        let docs = read_stdin_document(&reader, say)?.into_iter().collect();
        return Ok(Documents {
            docs,
            ..Documents::default()
        });
    }
    if paths.iter().filter(|p| is_stdin(p)).count() > 1 {
        return Err(usage("`-` (standard input) can be given only once"));
    }
    let mut all = ReadReport::default();
    let mut from_folder = false;
    let mut images = Vec::new();
    for path in paths {
        if is_stdin(path) {
            if let Some(doc) = read_stdin_document(&reader, say)? {
                all.documents.push(synthkit_documents::Document::new(
                    STDIN_NAME, doc.text, doc.format,
                ));
            }
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
        let read_elsewhere = report
            .skipped
            .iter()
            .any(|s| matches!(s.reason, SkipReason::Duplicate { .. }));
        let mut report = report;
        let before = images.len();
        report.skipped.retain(|s| {
            let image = s.reason == SkipReason::Binary && is_image_file(&s.path);
            if image {
                images.push(s.path.clone());
            }
            !image
        });
        let has_images = images.len() > before;
        if meta.is_dir() && report.documents.is_empty() && !read_elsewhere && !has_images {
            spinner.clear();
            return Err(nothing_found(path, &report, options, say.to.names()));
        }
        from_folder |= meta.is_dir();
        all.extend(report);
    }
    spinner.set("looking for copies");
    reader.leave_out_copies(&mut all);
    spinner.clear();
    let told = Told {
        files: all.documents.len(),
        notes: all.notes,
        skipped: all.skipped,
        left_out: all.left_out,
    };
    say_told(&told, say);
    let docs = all
        .documents
        .into_iter()
        .map(|d| Document {
            path: d.path.display().to_string(),
            text: d.text,
            format: d.format,
        })
        .collect();
    Ok(Documents {
        docs,
        from_folder,
        images,
        told,
    })
}

/// What a read says on standard error once it is done: the files read imperfectly, the
/// files skipped and left out, and how many were read. Kept by the folder index, so that a
/// folder asked again says what it said the first time.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Told {
    /// Documents read.
    pub files: usize,
    /// Documents read imperfectly.
    pub notes: Vec<ReadNote>,
    /// Files skipped, with the reason.
    pub skipped: Vec<Skipped>,
    /// Files and folders the walk left out.
    pub left_out: Vec<LeftOut>,
}

/// Says what `told` holds as [`read_documents`] says it.
pub fn say_told(told: &Told, say: Say<'_>) {
    say_read_notes(&told.notes, say);
    let mut notes = SkipNotes {
        say,
        named: 0,
        unnamed: 0,
    };
    for skipped in &told.skipped {
        notes.say(skipped);
    }
    for left in &told.left_out {
        notes.say_left_out(left);
    }
    let report = ReadReport {
        skipped: told.skipped.clone(),
        left_out: told.left_out.clone(),
        ..ReadReport::default()
    };
    let mut parts: Vec<String> = report.skip_summary().into_iter().collect();
    if let Some(l) = report.left_out_summary() {
        parts.push(l);
    }
    let summary = match parts.join("; ") {
        s if s.is_empty() => String::new(),
        s if notes.unnamed > 0 => format!(" ({s}; {} names them all)", say.to.names().verbose),
        s => format!(" ({s})"),
    };
    let files = told.files;
    if say.verbose || !summary.is_empty() {
        say.note(&format!("read {files} file{}{summary}", plural(files)));
    }
}

/// The error for a folder that gave no document.
fn nothing_found(
    path: &Path,
    report: &ReadReport,
    options: &ReadOptions,
    names: &OptionNames,
) -> anyhow::Error {
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
    let with_flag = |what: &str, flag: Option<&str>| match flag {
        Some(flag) => format!("{what} ({flag})"),
        None => what.to_string(),
    };
    let mut left_out = Vec::new();
    if !walk.is_hidden() {
        left_out.push(with_flag("hidden files", names.hidden));
    }
    if !walk.is_no_ignore() {
        left_out.push(with_flag(
            "files ignored by .gitignore or .ignore",
            names.no_ignore,
        ));
    }
    // Only the command line has --include and --exclude: set, they are its flags.
    if !walk.includes().is_empty() {
        left_out.push("files not matching --include".to_string());
    }
    if !walk.excludes().is_empty() {
        left_out.push("files matching --exclude".to_string());
    }
    if !options.keeps_all() {
        left_out.push(with_flag(
            "stylesheets, scripts, SVG and JSON",
            names.keep_all,
        ));
    }
    let mut detail = Vec::new();
    if let Some(s) = report.skip_summary() {
        detail.push(s);
    }
    if let Some(s) = report.left_out_summary() {
        detail.push(s);
    }
    if !left_out.is_empty() {
        detail.push(format!("not read: {}", left_out.join(", ")));
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
fn read_stdin_document(reader: &Reader, say: Say<'_>) -> Result<Option<Document>> {
    let bytes = read_stdin(reader.options().size_limit())?;
    match reader.read_bytes(Path::new(STDIN_NAME), bytes) {
        Ok(read) => {
            if let Some(n) = &read.note {
                say.warn(&format!("{STDIN_NAME} {n}"));
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
            say.note(&format!("skipping binary input {STDIN_NAME}"));
            Ok(None)
        }
        Err(reason) => Err(anyhow!("cannot read standard input: {reason}")),
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Cuts each document into structure-aware nodes (`synthkit_documents::chunk`: headings
/// first, code blocks and lists kept whole, at most the splitter's chunk size): id
/// `PATH#N` (N from 1), metadata `file_path`, `section` (the heading path, when there is
/// one) and `chunk` (N), with `chunk` hidden from the model. Whitespace-only text gives no
/// node.
pub fn nodes_from_documents(docs: &[Document], splitter: &TokenTextSplitter) -> Vec<Node> {
    docs.iter()
        .flat_map(|doc| chunk_nodes(&doc.path, &doc.text, doc.format, splitter))
        .collect()
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
}
