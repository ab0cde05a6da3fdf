//! The tree the reading tests walk, built in a temporary folder (symbolic links, binary,
//! gzip and PDF files are made here rather than committed), and what they look up in a
//! read's report: a document by name, the names read, why a file was skipped.

use std::io::Write;
use std::path::Path;

use synthkit_documents::{Document, Format, ReadOptions, ReadReport, SkipReason};
use tempfile::TempDir;

use crate::common::{read_within_deadline, rel, write, write_all};

/// The sentence of `docs/guide.md`.
pub const MIRROR: &str = "The primary mirror is cleaned every three months.";

/// `text` compressed with gzip.
pub fn gzip(text: &str) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(text.as_bytes()).unwrap();
    enc.finish().unwrap()
}

/// A one-page PDF showing `text` in Helvetica, with a correct cross-reference table.
fn pdf(text: &str) -> Vec<u8> {
    let content = format!("BT /F1 18 Tf 72 720 Td ({text}) Tj ET");
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_owned(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R \
         /Resources << /Font << /F1 5 0 R >> >> >>"
            .to_owned(),
        format!(
            "<< /Length {} >>\nstream\n{content}\nendstream",
            content.len()
        ),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
            .to_owned(),
    ];
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend(format!("{} 0 obj\n{body}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes());
    for off in offsets {
        out.extend(format!("{off:010} 00000 n \n").as_bytes());
    }
    out.extend(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

fn utf16(text: &str, big_endian: bool) -> Vec<u8> {
    let mut bytes = if big_endian {
        vec![0xFE, 0xFF]
    } else {
        vec![0xFF, 0xFE]
    };
    for unit in text.encode_utf16() {
        bytes.extend(if big_endian {
            unit.to_be_bytes()
        } else {
            unit.to_le_bytes()
        });
    }
    bytes
}

/// The page of `docs/manual.html`: headings, a list and a table among scripts, a style
/// and navigation.
pub const HTML: &str = r#"<!DOCTYPE html>
<html><head><title>Manual</title><style>body { color: red }</style>
<script>var secret = "SCRIPT TEXT";</script></head>
<body><nav><a href="index.html">Home</a></nav>
<main>
<h1>Observatory manual</h1>
<p>The dome opens at dusk.</p>
<h2>Schedule</h2>
<ul><li>Clean the mirror</li><li>Grease the motors</li></ul>
<table><tr><th>Task</th><th>Every</th></tr><tr><td>mirror</td><td>three months</td></tr></table>
<script>document.write("SCRIPT TEXT")</script>
</main></body></html>
"#;

/// The fixture tree: `docs/` with one file per rule, and `outside/` reached through a
/// symbolic link.
pub fn tree() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "docs/guide.md", format!("# Guide\n\n{MIRROR}\n"));
    write(
        root,
        "docs/notes.rst",
        "Notes\n=====\n\nThe dome opens at dusk.\n",
    );
    write(
        root,
        "docs/debian/README.Debian",
        "Debian notes: the package is split.\n",
    );
    write(
        root,
        "docs/debian/changelog.Debian",
        "pkg (1.0-1) unstable; urgency=low\n",
    );
    write(
        root,
        "docs/debian/NEWS.Debian",
        "News: the config file moved.\n",
    );
    write(
        root,
        "docs/debian/changelog.1",
        "Older changes: the first release.\n",
    );
    write(
        root,
        "docs/debian/copyright",
        "Copyright 2024 The Authors. MIT.\n",
    );
    write(
        root,
        "docs/debian/changelog.Debian.gz",
        gzip("pkg (0.9-1) unstable; urgency=high\n  * Fixed the restricted shell.\n"),
    );
    write(root, "docs/manual.html", HTML);
    write(
        root,
        "docs/page",
        "<!doctype html><html><body><h2>Sniffed</h2><p>By content.</p></body></html>",
    );
    write(
        root,
        "docs/paper.pdf",
        pdf("The telescope dome opens at dusk."),
    );
    write(
        root,
        "docs/utf16le.txt",
        utf16("Grüße aus UTF-16 LE.", false),
    );
    write(
        root,
        "docs/utf16be.txt",
        utf16("Grüße aus UTF-16 BE.", true),
    );
    write(root, "docs/latin1.txt", b"The caf\xe9 opens at nine.\n");
    write(root, "docs/image.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
    write(root, "docs/fake.txt", b"ELF\x02\x01\0\0\0\0\x7f");
    write_all(
        root,
        &[
            ("docs/empty.txt", ""),
            ("docs/.hidden.md", "Hidden text.\n"),
            ("docs/.gitignore", "ignored.md\nbuild/\n"),
            ("docs/ignored.md", "Ignored text.\n"),
            ("docs/build/out.txt", "Build output.\n"),
            ("docs/.ignore", "scratch.txt\n"),
            ("docs/scratch.txt", "Scratch text.\n"),
        ],
    );
    write(
        root,
        "outside/linked.md",
        "Reached through a symbolic link.\n",
    );
    std::os::unix::fs::symlink(root.join("outside"), root.join("docs/link")).unwrap();
    // A link back to its own ancestor folder: a loop.
    std::os::unix::fs::symlink("..", root.join("docs/debian/up")).unwrap();
    // A link above the folder walked: a loop too, though the walk never entered it.
    std::os::unix::fs::symlink("../..", root.join("docs/debian/top")).unwrap();
    std::os::unix::fs::symlink("nowhere.md", root.join("docs/dangling.md")).unwrap();
    dir
}

/// The test tree, and its `docs` folder read with the default options.
pub fn read_tree() -> (TempDir, ReadReport) {
    let dir = tree();
    let report = read(&dir.path().join("docs"), ReadOptions::new());
    (dir, report)
}

/// `root` read with `options`, within the deadline of [`read_within_deadline`].
pub fn read(root: &Path, options: ReadOptions) -> ReadReport {
    read_within_deadline(root, options)
}

/// The document read from `name` (relative to `root`); none fails the test.
pub fn doc<'a>(report: &'a ReadReport, root: &Path, name: &str) -> &'a Document {
    report
        .documents
        .iter()
        .find(|d| rel(root, &d.path) == name)
        .unwrap_or_else(|| panic!("{name} not read: {:#?}", names(report, root)))
}

/// The document read from `name`, which was read as `format`.
pub fn doc_as<'a>(report: &'a ReadReport, root: &Path, name: &str, format: Format) -> &'a Document {
    let d = doc(report, root, name);
    assert_eq!(d.format, format, "{name}");
    d
}

/// Asserts that the document read from `name` is `text`.
pub fn assert_text(report: &ReadReport, root: &Path, name: &str, text: &str) {
    assert_eq!(doc(report, root, name).text, text, "{name}");
}

/// The names of the documents read, relative to `root`, in order.
pub fn names(report: &ReadReport, root: &Path) -> Vec<String> {
    report
        .documents
        .iter()
        .map(|d| rel(root, &d.path))
        .collect()
}

/// Why `name` (relative to `root`) was skipped, if it was.
pub fn skip_reason<'a>(report: &'a ReadReport, root: &Path, name: &str) -> Option<&'a SkipReason> {
    report
        .skipped
        .iter()
        .find(|s| rel(root, &s.path) == name)
        .map(|s| &s.reason)
}

/// Fails the test unless `name` was skipped, for a reason of `kind`.
#[track_caller]
pub fn assert_skipped_as(report: &ReadReport, root: &Path, name: &str, kind: &str) {
    let reason = skip_reason(report, root, name);
    assert_eq!(
        reason.map(SkipReason::kind),
        Some(kind),
        "{name}: {reason:?}"
    );
}
