//! Reading input: files, folders, standard input and pre-retrieved nodes.
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
//! set apart from the binary files skipped: [`image_nodes`] makes them image nodes when
//! `--images` and the model allow (`auto`: a model known to take images).

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

use crate::error::usage;
use crate::output::{note, warn};
use crate::paths_root::{PathsRoot, Resolved};
use crate::settings::templates::decode;
use crate::spinner::Spinner;

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
fn is_stdin(path: &Path) -> bool {
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

/// Reads one file, or standard input for `None` or `-` (for `tokens` and `split`), as
/// `ask` reads a file: `.gz` unpacked, HTML and PDF as text, the size limit applied; a
/// binary or empty file is an error.
pub fn read_single(path: Option<&Path>, max_file_size: Option<u64>) -> Result<String> {
    let reader = Reader::new(ReadOptions::new().max_file_size(max_file_size));
    let (name, read) = match path {
        Some(p) if !is_stdin(p) => {
            fs::metadata(p).map_err(|e| usage(format!("cannot read `{}`: {e}", p.display())))?;
            (p.display().to_string(), reader.read_file(p))
        }
        _ => (
            STDIN_NAME.to_string(),
            reader.read_bytes(Path::new(STDIN_NAME), read_stdin(max_file_size)?),
        ),
    };
    match read {
        Ok(read) => {
            if let Some(n) = &read.note {
                warn(&format!("{name} {n}"));
            }
            Ok(read.document.text)
        }
        Err(SkipReason::Empty) => Ok(String::new()),
        Err(SkipReason::Binary) => Err(anyhow!(
            "{name} is a binary file, not text: nothing to count or split"
        )),
        Err(reason @ SkipReason::TooLarge { .. }) => {
            Err(usage(format!("{name} is {reason} (see --max-file-size)")))
        }
        Err(reason) => Err(anyhow!("cannot read {name}: {reason}")),
    }
}

/// Whether `-v` (or a `RUST_LOG` at info or more) asked for every step's notes.
fn verbose() -> bool {
    crate::logging::verbose()
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

/// How much to say on standard error.
#[derive(Debug, Clone, Copy)]
pub struct Say {
    /// `--quiet`: no notes.
    pub quiet: bool,
    /// `-v`: every file named.
    pub verbose: bool,
}

impl Say {
    /// As `--quiet` and `-v` (or `RUST_LOG`) say.
    pub fn new(quiet: bool) -> Self {
        Self {
            quiet,
            verbose: verbose(),
        }
    }
}

/// Says what was read imperfectly (text not valid UTF-8, decoded as windows-1252 or with
/// U+FFFD): the first [`NAMED_READ_NOTES`] named, then one line counting the rest by what
/// became of them (all named with -v). A documentation folder may hold dozens of legacy
/// 8-bit files; one warning each buries the rest of standard error.
fn say_read_notes(notes: &[ReadNote], say: Say) {
    let named = if say.verbose {
        notes.len()
    } else {
        NAMED_READ_NOTES.min(notes.len())
    };
    for n in &notes[..named] {
        warn(&n.to_string());
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
    warn(&format!(
        "{} more file{} decoded imperfectly ({}; -v names them all)",
        rest.len(),
        plural(rest.len()),
        counts.join(", ")
    ));
}

/// What is said about skipped files: each named until [`NAMED_SKIPS`] (all when verbose).
struct SkipNotes {
    say: Say,
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
        if let SkipReason::OutsideRoot { .. } = &skipped.reason {
            // A link out of the folder `paths` are read under: always shown.
            warn(&format!("not reading {path}: {}", skipped.reason));
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
        note(
            false,
            &match &skipped.reason {
                SkipReason::Binary => format!("skipping binary file {path}"),
                SkipReason::Empty => format!("skipping empty file {path}"),
                too_large @ SkipReason::TooLarge { .. } => {
                    format!("skipping {path}: {too_large}; --max-file-size raises the limit")
                }
                other => format!("skipping {path}: {other}"),
            },
        );
    }

    fn say_left_out(&mut self, left: &LeftOut) {
        if !self.allowed(true) {
            return;
        }
        let (what, flag) = match left.reason {
            LeftOutReason::Hidden => ("hidden", "--hidden"),
            _ => ("ignored", "--no-ignore"),
        };
        let kind = if left.folder { "folder" } else { "file" };
        note(
            false,
            &format!(
                "not visiting {what} {kind} {} ({flag} reads it)",
                left.path.display()
            ),
        );
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
    say: Say,
    spinner: &Spinner,
) -> Result<Documents> {
    let mut reader = Reader::new(options.clone()).on_progress(spinner.reading());
    if let Some(cache) = cache {
        reader = reader.with_cache(cache);
    }
    if paths.is_empty() {
        if io::stdin().is_terminal() {
            return Err(usage(
                "no input: give files or folders to read, `-` for standard input, or --nodes FILE",
            ));
        }
        let docs = read_stdin_document(&reader, say.quiet)?
            .into_iter()
            .collect();
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
            if let Some(doc) = read_stdin_document(&reader, say.quiet)? {
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
            return Err(nothing_found(path, &report, options));
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
pub fn say_told(told: &Told, say: Say) {
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
        s if notes.unnamed > 0 => format!(" ({s}; -v names them all)"),
        s => format!(" ({s})"),
    };
    let files = told.files;
    if say.verbose || !summary.is_empty() {
        note(
            say.quiet,
            &format!("read {files} file{}{summary}", plural(files)),
        );
    }
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
    if !options.keeps_all() {
        left_out.push("stylesheets, scripts, SVG and JSON (--keep-all)");
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
fn read_stdin_document(reader: &Reader, quiet: bool) -> Result<Option<Document>> {
    let bytes = read_stdin(reader.options().size_limit())?;
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

/// Reads `paths` (files and folders, as a `batch` line or an `eval` case writes them)
/// under `root` ([`PathsRoot`]: confined to it unless paths outside are allowed, named
/// pipes and the like skipped with a note, folders at most
/// [`MAX_PATHS_DEPTH`](crate::paths_root::MAX_PATHS_DEPTH) deep, at most
/// [`MAX_PATHS_FILES`] files and [`MAX_PATHS_BYTES`] bytes, counted first) into nodes as
/// `ask` does (the same reader and chunking; node ids `PATH#N` with `PATH` as written,
/// relative to the root), then ranks them for `query` as `ask` does: `top_k` (a line's
/// or a case's), else `flag` (`--top-k`), else the
/// [`DEFAULT_FOLDER_TOP_K`](crate::flags::DEFAULT_FOLDER_TOP_K) best when a folder was
/// read, else every chunk. The error says why there is nothing to read; no chunk
/// relevant to `query` gives no nodes.
pub fn nodes_from_paths(
    paths: &[String],
    root: &PathsRoot,
    query: &str,
    top_k: Option<usize>,
    flag: Option<crate::flags::TopK>,
    splitter: &TokenTextSplitter,
    index_dir: Option<&Path>,
) -> std::result::Result<Vec<Node>, String> {
    use crate::flags::TopK;
    if paths.iter().any(|p| is_stdin(Path::new(p))) {
        return Err("`-` (standard input) is not a path a line can read".into());
    }
    let mut read_these = Vec::with_capacity(paths.len());
    let mut skipped = Vec::new();
    for path in paths {
        match root.resolve(path)? {
            Resolved::Read(full) => read_these.push(full),
            Resolved::Skipped(note) => {
                warn(&note);
                skipped.push(note);
            }
        }
    }
    if read_these.is_empty() {
        return Err(format!("nothing to read: {}", skipped.join("; ")));
    }
    let options = root.read_options();
    within_paths_bound(&read_these, &options)?;
    let spinner = Spinner::new(false);
    let rename = |path: &str| root.name(path);
    let source = crate::chunks::ChunkSource {
        paths: &read_these,
        options: &options,
        index_dir,
        splitter,
        naming: &format!("paths root {}", root.dir().display()),
        rename: Some(&rename),
        say: Say::new(true),
    };
    let read = crate::chunks::read_chunks(&source, &spinner).map_err(|e| format!("{e:#}"))?;
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
            .then_some(crate::flags::DEFAULT_FOLDER_TOP_K)
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
/// Reads pre-retrieved nodes from a file (`-`: standard input), refusing one larger than
/// `max` bytes (`--max-file-size`; `None`: no limit) before reading past it.
pub fn read_nodes(path: &Path, max: Option<u64>) -> Result<Vec<Node>> {
    let (bytes, name) = if is_stdin(path) {
        (read_stdin(max)?, STDIN_NAME.to_string())
    } else {
        let name = path.display().to_string();
        let cannot = |e: io::Error| usage(format!("cannot read --nodes `{name}`: {e}"));
        let file = fs::File::open(path).map_err(cannot)?;
        (read_capped(file, max).map_err(cannot)?, name)
    };
    if let Some(max) = max.filter(|&m| bytes.len() as u64 > m) {
        return Err(usage(format!(
            "--nodes {name} is larger than {max} bytes: raise --max-file-size (or `none`), or send fewer nodes"
        )));
    }
    let text = decode(&bytes, &name);
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
        assert_eq!(decode(b"\xEF\xBB\xBFhi", "x"), "hi");
        // Legacy 8-bit text is windows-1252; damaged UTF-8 keeps U+FFFD.
        assert_eq!(decode(b"a\xFFb", "x"), "a\u{FF}b");
        assert_eq!(decode(b"\xC3\xA9 \xFF", "x"), "\u{E9} \u{FFFD}");
    }
}
