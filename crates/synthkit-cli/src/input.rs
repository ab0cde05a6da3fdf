//! Reading input: files, folders, standard input and pre-retrieved nodes.
//!
//! Folders are read recursively in sorted path order. A folder's files are read when their
//! extension is `.txt`, `.md`, `.markdown` or `.rst` (any case), or when they have no
//! extension and are valid UTF-8. Hidden entries (names starting with `.`) are skipped;
//! files whose first 8 KiB contain a NUL byte are binary and skipped with a note. A file
//! named on the command line is read whatever its extension (unless binary). Text that is
//! not valid UTF-8 is decoded lossily with a warning naming the file.

use std::collections::HashSet;
use std::fs;
use std::io::{self, IsTerminal, Read};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use synthkit::Node;
use synthkit::text::TokenTextSplitter;

use crate::error::usage;
use crate::output::{note, warn};

/// How a document read from standard input is named.
pub const STDIN_NAME: &str = "<stdin>";
/// Bytes inspected for a NUL byte to tell binary files.
const BINARY_PROBE: usize = 8192;
/// Extensions read from folders.
const TEXT_EXTENSIONS: &[&str] = &["txt", "md", "markdown", "rst"];

/// A document: where it came from and its text.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// The path as given or found (`<stdin>` for standard input).
    pub path: String,
    /// The text.
    pub text: String,
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

/// Text from bytes: UTF-8 without a byte-order mark, else decoded lossily with a warning.
pub fn decode(bytes: Vec<u8>, name: &str) -> String {
    let bytes = match bytes.strip_prefix(b"\xEF\xBB\xBF") {
        Some(rest) => rest.to_vec(),
        None => bytes,
    };
    match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => {
            warn(&format!(
                "{name} is not valid UTF-8 (first bad byte at offset {}); invalid bytes were replaced with U+FFFD",
                e.utf8_error().valid_up_to()
            ));
            String::from_utf8_lossy(e.as_bytes()).into_owned()
        }
    }
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

/// What a folder walk found.
#[derive(Debug, Default)]
struct Walk {
    files: Vec<PathBuf>,
    hidden: usize,
    other: usize,
}

fn has_text_extension(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| TEXT_EXTENSIONS.iter().any(|t| e.eq_ignore_ascii_case(t)))
}

fn walk_dir(dir: &Path, out: &mut Walk) {
    let entries = match fs::read_dir(dir) {
        Ok(rd) => rd.filter_map(|e| e.ok()).collect::<Vec<_>>(),
        Err(e) => {
            warn(&format!(
                "cannot read folder {}: {e}; skipped",
                dir.display()
            ));
            return;
        }
    };
    let mut entries = entries;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            out.hidden += 1;
            continue;
        }
        let Ok(ft) = entry.file_type() else { continue };
        // Symbolic links are followed to files only, so a walk never loops.
        let is_file =
            ft.is_file() || (ft.is_symlink() && fs::metadata(&path).is_ok_and(|m| m.is_file()));
        if ft.is_dir() {
            walk_dir(&path, out);
        } else if is_file {
            if has_text_extension(&path) || path.extension().is_none() {
                out.files.push(path);
            } else {
                out.other += 1;
            }
        }
    }
}

/// Reads one file. `explicit`: named on the command line (any extension is read).
/// `None` when it is skipped (binary, or extensionless and not UTF-8).
fn load(path: &Path, explicit: bool, quiet: bool) -> Result<Option<Document>> {
    let name = path.display().to_string();
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if explicit => return Err(usage(format!("cannot read `{name}`: {e}"))),
        Err(e) => {
            warn(&format!("cannot read {name}: {e}; skipped"));
            return Ok(None);
        }
    };
    let probe = bytes.get(..BINARY_PROBE).unwrap_or(&bytes);
    if probe.contains(&0) {
        note(quiet, &format!("skipping binary file {name}"));
        return Ok(None);
    }
    if !explicit && !has_text_extension(path) && std::str::from_utf8(&bytes).is_err() {
        note(
            quiet,
            &format!("skipping {name}: no text extension and not valid UTF-8"),
        );
        return Ok(None);
    }
    Ok(Some(Document {
        path: name,
        text: decode(bytes, &path.display().to_string()),
    }))
}

/// Reads every path: files, folders (recursively) and `-` for standard input. With no
/// path, standard input is read unless it is a terminal.
pub fn read_documents(paths: &[PathBuf], quiet: bool) -> Result<Vec<Document>> {
    if paths.is_empty() {
        if io::stdin().is_terminal() {
            return Err(usage(
                "no input: give files or folders to read, `-` for standard input, or --nodes FILE",
            ));
        }
        return Ok(vec![Document {
            path: STDIN_NAME.to_string(),
            text: decode(read_stdin()?, STDIN_NAME),
        }]);
    }
    if paths.iter().filter(|p| is_stdin(p)).count() > 1 {
        return Err(usage("`-` (standard input) can be given only once"));
    }
    let mut seen: HashSet<PathBuf> = HashSet::new();
    let mut first_time =
        |p: &Path| seen.insert(fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf()));
    let mut docs = Vec::new();
    let (mut hidden, mut other) = (0usize, 0usize);
    for path in paths {
        if is_stdin(path) {
            docs.push(Document {
                path: STDIN_NAME.to_string(),
                text: decode(read_stdin()?, STDIN_NAME),
            });
            continue;
        }
        let meta = fs::metadata(path)
            .map_err(|e| usage(format!("cannot read `{}`: {e}", path.display())))?;
        if meta.is_dir() {
            let mut walk = Walk::default();
            walk_dir(path, &mut walk);
            hidden += walk.hidden;
            other += walk.other;
            let before = docs.len();
            let mut repeated = 0usize;
            for file in &walk.files {
                if !first_time(file) {
                    repeated += 1;
                    continue;
                }
                if let Some(doc) = load(file, false, quiet)? {
                    docs.push(doc);
                }
            }
            if docs.len() == before && repeated == 0 {
                return Err(anyhow!(
                    "no text files found under {}: looked for .txt, .md, .markdown, .rst and files without extension{}",
                    path.display(),
                    skipped_summary(walk.hidden, walk.other + walk.files.len())
                ));
            }
        } else if first_time(path)
            && let Some(doc) = load(path, true, quiet)?
        {
            docs.push(doc);
        }
    }
    if hidden + other > 0 {
        let mut parts = Vec::new();
        if hidden > 0 {
            parts.push(format!(
                "{hidden} hidden file{} or folder{}",
                plural(hidden),
                plural(hidden)
            ));
        }
        if other > 0 {
            parts.push(format!("{other} file{} of other types", plural(other)));
        }
        note(quiet, &format!("skipped {}", parts.join(" and ")));
    }
    Ok(docs)
}

fn skipped_summary(hidden: usize, other: usize) -> String {
    match (hidden, other) {
        (0, 0) => String::new(),
        (h, 0) => format!(
            " ({h} hidden entr{} skipped)",
            if h == 1 { "y" } else { "ies" }
        ),
        (0, o) => format!(" ({o} other file{} skipped)", plural(o)),
        (h, o) => format!(
            " ({h} hidden entr{} and {o} other file{} skipped)",
            if h == 1 { "y" } else { "ies" },
            plural(o)
        ),
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Splits each document into nodes: id `PATH#N` (N from 1), metadata `file_path` and
/// `chunk` (N), with `chunk` hidden from the model. Whitespace-only text gives no node.
pub fn nodes_from_documents(docs: &[Document], splitter: &TokenTextSplitter) -> Vec<Node> {
    let mut nodes = Vec::new();
    for doc in docs {
        let chunks = splitter.split_chunks(&doc.text);
        for (i, chunk) in chunks.iter().enumerate() {
            let text = chunk.text(&doc.text);
            if text.trim().is_empty() {
                continue;
            }
            let n = i + 1;
            nodes.push(
                Node::new(format!("{}#{n}", doc.path), text)
                    .with_metadata("file_path", doc.path.clone())
                    .with_metadata("chunk", n)
                    .exclude_from_llm("chunk"),
            );
        }
    }
    nodes
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
    parse_nodes(&text, &name)
}

/// A serde_json message without its trailing ` at line L column C`.
fn bare_message(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(i) => s.get(..i).unwrap_or(&s).to_string(),
        None => s,
    }
}

/// Parses nodes: a JSON array, or JSON lines (one node per line; blank lines ignored).
/// Errors name the line.
pub fn parse_nodes(text: &str, name: &str) -> Result<Vec<Node>> {
    let trimmed = text.trim_start();
    let nodes = if trimmed.starts_with('[') {
        serde_json::from_str::<Vec<Node>>(text).map_err(|e| {
            anyhow!(
                "{name}: line {}, column {}: not a valid array of nodes: {} (each node needs `id` and `text`; optional `metadata`, `excluded_llm_metadata_keys`, `score`)",
                e.line(),
                e.column(),
                bare_message(&e)
            )
        })?
    } else {
        let mut nodes = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Node>(line) {
                Ok(n) => nodes.push(n),
                Err(e) => {
                    // A single pretty-printed object is not JSON lines, but it is clear.
                    if trimmed.starts_with('{')
                        && let Ok(n) = serde_json::from_str::<Node>(text)
                    {
                        return Ok(vec![n]);
                    }
                    // A line holding only `{` opens an object spanning lines (pretty-printed):
                    // its own error says where it breaks, not "EOF on line 1".
                    if line.trim() == "{"
                        && let Err(whole) = serde_json::from_str::<Node>(text)
                    {
                        return Err(anyhow!(
                            "{name}: line {}, column {}: not a valid node: {} (a node is a JSON object with `id` and `text`; optional `metadata`, `excluded_llm_metadata_keys`, `score`)",
                            whole.line(),
                            whole.column(),
                            bare_message(&whole)
                        ));
                    }
                    return Err(anyhow!(
                        "{name}: line {}, column {}: not a valid node: {} (each line must be a JSON object with `id` and `text`; optional `metadata`, `excluded_llm_metadata_keys`, `score`)",
                        i + 1,
                        e.column(),
                        bare_message(&e)
                    ));
                }
            }
        }
        nodes
    };
    if nodes.is_empty() {
        return Err(anyhow!(
            "{name} has no nodes: give a JSON array or one JSON node per line"
        ));
    }
    Ok(nodes)
}

#[cfg(test)]
mod tests {

    /// The `--nodes` parser on 10,000 arbitrary byte strings (decoded lossily, as the CLI
    /// reads them) and 10,000 JSON-shaped ones: nodes or an error, never a panic.
    #[test]
    fn nodes_parser_never_panics_on_arbitrary_bytes() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};
        let mut runner = TestRunner::new(Config {
            cases: 10_000,
            ..Config::default()
        });
        let bytes = proptest::collection::vec(any::<u8>(), 0..400);
        runner
            .run(&bytes, |b| {
                let text = String::from_utf8_lossy(&b);
                let _ = parse_nodes(&text, "fuzz.jsonl");
                Ok(())
            })
            .unwrap();
        let jsonish = proptest::string::string_regex(
            r#"[\[\]{}",:\n a-z0-9"]{0,200}|\{"id": ?"[a-z]{0,4}", ?"text": ?"[^"\\]{0,20}"(, ?"score": ?-?[0-9.e]{1,6})?\}(\n\{"id":"x","text":"y"\})*"#,
        )
        .unwrap();
        runner
            .run(&jsonish, |t| {
                if let Ok(nodes) = parse_nodes(&t, "fuzz.json") {
                    // What parses survives a round trip through the array form.
                    let again = parse_nodes(&serde_json::to_string(&nodes).unwrap(), "again.json");
                    prop_assert_eq!(again.ok(), Some(nodes));
                }
                Ok(())
            })
            .unwrap();
        println!("nodes parser: {} cases", 2 * 10_000);
    }

    use super::*;
    use synthkit::text::BpeTokenizer;

    #[test]
    fn jsonl_and_array() {
        let jsonl =
            "{\"id\":\"a\",\"text\":\"x\"}\n\n{\"id\":\"b\",\"text\":\"y\",\"score\":0.5}\n";
        let n = parse_nodes(jsonl, "n.jsonl").unwrap();
        assert_eq!(n.len(), 2);
        assert_eq!(n[1].score, Some(0.5));
        let arr = "[{\"id\":\"a\",\"text\":\"x\",\"metadata\":{\"k\":1}}]";
        assert_eq!(parse_nodes(arr, "n.json").unwrap()[0].metadata["k"], 1);
        let pretty = "{\n  \"id\": \"a\",\n  \"text\": \"x\"\n}\n";
        assert_eq!(parse_nodes(pretty, "n.json").unwrap().len(), 1);
    }

    #[test]
    fn errors_name_the_line() {
        let bad = "{\"id\":\"a\",\"text\":\"x\"}\n{\"id\":\"b\"}\n";
        let e = parse_nodes(bad, "n.jsonl").unwrap_err().to_string();
        assert!(e.contains("line 2"), "{e}");
        assert!(e.contains("missing field `text`"), "{e}");
        assert!(!e.contains("at line 1 column"), "{e}");
        // A pretty-printed object: the line where it breaks, not line 1.
        let e = parse_nodes("{\n  \"id\": \"a\",\n  \"txt\": \"x\"\n}\n", "n.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 4"), "{e}");
        assert!(e.contains("missing field `text`"), "{e}");
        let e = parse_nodes("{\n  \"id\": \"a\",\n  \"text\": oops\n}\n", "n.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 3"), "{e}");
        let e = parse_nodes("[{\"id\":\"a\",\n\"text\": 3}]", "n.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2"), "{e}");
        assert!(parse_nodes("  \n", "n").is_err());
    }

    #[test]
    fn nodes_have_ids_and_hidden_chunk_numbers() {
        let splitter = TokenTextSplitter::new(5, 0, BpeTokenizer::cl100k_base().shared()).unwrap();
        let docs = vec![
            Document {
                path: "a.md".into(),
                text: "one two three four five six seven eight nine ten".into(),
            },
            Document {
                path: "b.md".into(),
                text: "   ".into(),
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
        assert_eq!(decode(b"a\xFFb".to_vec(), "x"), "a\u{FFFD}b");
    }
}
