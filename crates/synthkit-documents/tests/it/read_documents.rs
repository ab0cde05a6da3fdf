//! `synthkit_documents` reading folders like ripgrep does: one test per rule, on a tree
//! built in a temporary folder (symbolic links, binary, gzip and PDF files are made here
//! rather than committed).

use std::io::Write;
use std::path::Path;

use synthkit_documents::{
    Document, Format, ReadOptions, ReadReport, Reader, SkipReason, read_paths,
};
use tempfile::TempDir;

use crate::common::{read_within_deadline, rel, write, write_all};

const MIRROR: &str = "The primary mirror is cleaned every three months.";

fn gzip(text: &str) -> Vec<u8> {
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

const HTML: &str = r#"<!DOCTYPE html>
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
fn tree() -> TempDir {
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
fn read_tree() -> (TempDir, ReadReport) {
    let dir = tree();
    let report = read(&dir.path().join("docs"), ReadOptions::new());
    (dir, report)
}

fn read(root: &Path, options: ReadOptions) -> ReadReport {
    read_within_deadline(root, options)
}

fn doc<'a>(report: &'a ReadReport, root: &Path, name: &str) -> &'a Document {
    report
        .documents
        .iter()
        .find(|d| rel(root, &d.path) == name)
        .unwrap_or_else(|| panic!("{name} not read: {:#?}", names(report, root)))
}

/// The document read from `name`, which was read as `format`.
fn doc_as<'a>(report: &'a ReadReport, root: &Path, name: &str, format: Format) -> &'a Document {
    let d = doc(report, root, name);
    assert_eq!(d.format, format, "{name}");
    d
}

/// Asserts that the document read from `name` is `text`.
fn assert_text(report: &ReadReport, root: &Path, name: &str, text: &str) {
    assert_eq!(doc(report, root, name).text, text, "{name}");
}

fn names(report: &ReadReport, root: &Path) -> Vec<String> {
    report
        .documents
        .iter()
        .map(|d| rel(root, &d.path))
        .collect()
}

fn skip_reason<'a>(report: &'a ReadReport, root: &Path, name: &str) -> Option<&'a SkipReason> {
    report
        .skipped
        .iter()
        .find(|s| rel(root, &s.path) == name)
        .map(|s| &s.reason)
}

/// Fails the test unless `name` was skipped, for a reason of `kind`.
#[track_caller]
fn assert_skipped_as(report: &ReadReport, root: &Path, name: &str, kind: &str) {
    let reason = skip_reason(report, root, name);
    assert_eq!(
        reason.map(SkipReason::kind),
        Some(kind),
        "{name}: {reason:?}"
    );
}

#[test]
fn symlinked_folders_are_followed() {
    let (dir, report) = read_tree();
    assert_text(
        &report,
        dir.path(),
        "docs/link/linked.md",
        "Reached through a symbolic link.\n",
    );
}

#[test]
fn a_symlink_loop_is_a_named_skip_and_the_walk_ends() {
    let (dir, report) = read_tree();
    let reason = skip_reason(&report, dir.path(), "docs/debian/up").unwrap();
    assert_eq!(reason.kind(), "symlink loop");
    assert!(
        reason.to_string().starts_with("symlink loop (back to "),
        "{reason}"
    );
    let reason = skip_reason(&report, dir.path(), "docs/debian/top").unwrap();
    assert_eq!(reason.kind(), "symlink loop");
    // Nothing was read twice through a loop.
    assert!(
        !names(&report, dir.path())
            .iter()
            .any(|n| n.contains("/up/") || n.contains("/top/")),
        "{:?}",
        names(&report, dir.path())
    );
    assert!(
        report
            .skipped
            .iter()
            .all(|s| !matches!(s.reason, SkipReason::Duplicate { .. }))
    );
}

#[test]
fn a_dangling_symlink_is_unreadable() {
    let (dir, report) = read_tree();
    assert_skipped_as(&report, dir.path(), "docs/dangling.md", "unreadable");
}

#[test]
fn text_is_recognised_by_content_not_extension() {
    let (dir, report) = read_tree();
    for (name, text) in [
        ("docs/debian/README.Debian", "Debian notes"),
        ("docs/debian/changelog.Debian", "urgency=low"),
        ("docs/debian/NEWS.Debian", "config file moved"),
        ("docs/debian/changelog.1", "first release"),
        ("docs/debian/copyright", "MIT"),
    ] {
        let d = doc_as(&report, dir.path(), name, Format::Plain);
        assert!(d.text.contains(text), "{name}: {:?}", d.text);
    }
    assert_eq!(
        doc(&report, dir.path(), "docs/guide.md").format,
        Format::Markdown
    );
    assert_eq!(
        doc(&report, dir.path(), "docs/notes.rst").format,
        Format::Rst
    );
}

#[test]
fn gz_files_are_read_transparently() {
    let (dir, report) = read_tree();
    let d = doc(&report, dir.path(), "docs/debian/changelog.Debian.gz");
    assert!(
        d.text.contains("Fixed the restricted shell."),
        "{:?}",
        d.text
    );
    assert_eq!(d.format, Format::Plain);
    // Damaged gzip data is a named skip.
    let broken = write(
        dir.path(),
        "broken/notes.txt.gz",
        b"\x1f\x8b\x08\x00garbage",
    );
    let report = read(broken.parent().unwrap(), ReadOptions::new());
    let reason = skip_reason(&report, dir.path(), "broken/notes.txt.gz").unwrap();
    assert!(
        reason
            .to_string()
            .starts_with("unreadable: invalid gzip data"),
        "{reason}"
    );
    // A gzipped Markdown file is Markdown.
    let md = write(dir.path(), "gzmd/guide.md.gz", gzip("# Title\n\nText.\n"));
    let report = read(md.parent().unwrap(), ReadOptions::new());
    assert_eq!(report.documents[0].format, Format::Markdown);
}

#[test]
fn html_keeps_headings_lists_and_tables_and_drops_scripts() {
    let (dir, report) = read_tree();
    let d = doc_as(&report, dir.path(), "docs/manual.html", Format::Markdown);
    assert_eq!(
        d.text,
        "# Observatory manual\n\n\
         The dome opens at dusk.\n\n\
         ## Schedule\n\n\
         - Clean the mirror\n- Grease the motors\n\n\
         | Task | Every |\n| --- | --- |\n| mirror | three months |\n"
    );
    assert!(!d.text.contains("SCRIPT TEXT") && !d.text.contains("color"));
    // HTML recognised by content, without an extension.
    let d = doc(&report, dir.path(), "docs/page");
    assert_eq!(
        (d.text.as_str(), d.format),
        ("## Sniffed\n\nBy content.\n", Format::Markdown)
    );
}

#[test]
fn pdf_text_is_extracted() {
    let (dir, report) = read_tree();
    let d = doc_as(&report, dir.path(), "docs/paper.pdf", Format::Plain);
    assert!(
        d.text.contains("The telescope dome opens at dusk."),
        "{:?}",
        d.text
    );
    // A damaged PDF is a named skip, not a panic.
    let bad = write(
        dir.path(),
        "badpdf/bad.pdf",
        b"%PDF-1.7\n1 0 obj << /Type /Catalog",
    );
    let report = read(bad.parent().unwrap(), ReadOptions::new());
    assert_skipped_as(&report, dir.path(), "badpdf/bad.pdf", "unreadable");
}

#[test]
fn utf16_with_a_byte_order_mark_is_decoded() {
    let (dir, report) = read_tree();
    assert_text(
        &report,
        dir.path(),
        "docs/utf16le.txt",
        "Grüße aus UTF-16 LE.",
    );
    assert_text(
        &report,
        dir.path(),
        "docs/utf16be.txt",
        "Grüße aus UTF-16 BE.",
    );
    assert!(
        report
            .notes
            .iter()
            .all(|n| !n.path.ends_with("utf16le.txt"))
    );
}

#[test]
fn legacy_8bit_text_is_decoded_as_windows_1252_with_a_note() {
    let (dir, report) = read_tree();
    assert_text(
        &report,
        dir.path(),
        "docs/latin1.txt",
        "The café opens at nine.\n",
    );
    let note = report
        .notes
        .iter()
        .find(|n| n.path.ends_with("latin1.txt"))
        .unwrap();
    assert!(
        note.to_string().ends_with(
            "latin1.txt is not valid UTF-8 (first bad byte at offset 7); decoded as windows-1252"
        ),
        "{note}"
    );
}

#[test]
fn binary_and_empty_files_are_named_skips() {
    let (dir, report) = read_tree();
    for name in ["docs/image.png", "docs/fake.txt"] {
        assert_eq!(
            skip_reason(&report, dir.path(), name),
            Some(&SkipReason::Binary),
            "{name}"
        );
    }
    assert_eq!(
        skip_reason(&report, dir.path(), "docs/empty.txt"),
        Some(&SkipReason::Empty)
    );
}

#[test]
fn hidden_and_ignored_files_are_not_read_by_default() {
    let dir = tree();
    let docs = dir.path().join("docs");
    let default = names(&read(&docs, ReadOptions::new()), dir.path());
    for name in [
        "docs/.hidden.md",
        "docs/ignored.md",
        "docs/build/out.txt",
        "docs/scratch.txt",
    ] {
        assert!(
            !default.contains(&name.to_owned()),
            "{name} read: {default:?}"
        );
    }
    // Not visited means not reported either.
    let report = read(&docs, ReadOptions::new());
    assert!(
        report
            .skipped
            .iter()
            .all(|s| !s.path.ends_with("ignored.md"))
    );

    let hidden = names(&read(&docs, ReadOptions::new().hidden(true)), dir.path());
    assert!(hidden.contains(&"docs/.hidden.md".to_owned()), "{hidden:?}");
    assert!(!hidden.contains(&"docs/ignored.md".to_owned()));
    // The ignore files themselves are hidden text files: read with --hidden.
    assert!(hidden.contains(&"docs/.gitignore".to_owned()));

    let no_ignore = names(&read(&docs, ReadOptions::new().no_ignore(true)), dir.path());
    for name in ["docs/ignored.md", "docs/build/out.txt", "docs/scratch.txt"] {
        assert!(
            no_ignore.contains(&name.to_owned()),
            "{name}: {no_ignore:?}"
        );
    }
    assert!(!no_ignore.contains(&"docs/.hidden.md".to_owned()));

    // A path given explicitly is read even when hidden or ignored.
    let explicit = read(&docs.join(".hidden.md"), ReadOptions::new());
    assert_eq!(explicit.documents.len(), 1);
}

#[test]
fn include_and_exclude_globs() {
    let dir = tree();
    let docs = dir.path().join("docs");
    let md = names(&read(&docs, ReadOptions::new().include("*.md")), dir.path());
    assert_eq!(md, ["docs/guide.md", "docs/link/linked.md"]);

    let two = names(
        &read(&docs, ReadOptions::new().include("*.md").include("*.rst")),
        dir.path(),
    );
    assert_eq!(
        two,
        ["docs/guide.md", "docs/link/linked.md", "docs/notes.rst"]
    );

    let report = read(&docs, ReadOptions::new().exclude("debian").exclude("*.txt"));
    let kept = names(&report, dir.path());
    assert!(
        kept.iter()
            .all(|n| !n.contains("debian") && !n.ends_with(".txt")),
        "{kept:?}"
    );
    assert!(kept.contains(&"docs/guide.md".to_owned()));
    // Excluded paths are not visited: the loop under debian/ is not reported.
    assert!(skip_reason(&report, dir.path(), "docs/debian/up").is_none());

    let err = read_paths(&[&docs], &ReadOptions::new().include("a{b")).unwrap_err();
    assert!(err.to_string().starts_with("invalid glob `a{b`"), "{err}");
}

#[test]
fn order_is_sorted_and_deterministic() {
    let dir = tree();
    let docs = dir.path().join("docs");
    let first = read(&docs, ReadOptions::new());
    let again = read(&docs, ReadOptions::new());
    assert_eq!(first, again);
    let order = names(&first, dir.path());
    assert_eq!(
        order,
        [
            "docs/debian/NEWS.Debian",
            "docs/debian/README.Debian",
            "docs/debian/changelog.1",
            "docs/debian/changelog.Debian",
            "docs/debian/changelog.Debian.gz",
            "docs/debian/copyright",
            "docs/guide.md",
            "docs/latin1.txt",
            "docs/link/linked.md",
            "docs/manual.html",
            "docs/notes.rst",
            "docs/page",
            "docs/paper.pdf",
            "docs/utf16be.txt",
            "docs/utf16le.txt",
        ]
    );
}

#[test]
fn every_visited_file_is_read_or_skipped_with_a_summary() {
    let (dir, report) = read_tree();
    let skipped: Vec<String> = report
        .skipped
        .iter()
        .map(|s| format!("{}: {}", rel(dir.path(), &s.path), s.reason.kind()))
        .collect();
    assert_eq!(
        skipped,
        [
            "docs/dangling.md: unreadable",
            "docs/debian/top: symlink loop",
            "docs/debian/up: symlink loop",
            "docs/empty.txt: empty",
            "docs/fake.txt: binary",
            "docs/image.png: binary",
        ]
    );
    assert_eq!(
        report.skip_summary().unwrap(),
        "6 skipped: 2 binary, 1 empty, 2 symlink loop, 1 unreadable"
    );
}

#[test]
fn a_file_reached_twice_is_read_once() {
    let dir = tree();
    let docs = dir.path().join("docs");
    let guide = docs.join("guide.md");
    let report = read_paths(&[&guide, &docs], &ReadOptions::new()).unwrap();
    assert_eq!(
        report
            .documents
            .iter()
            .filter(|d| d.path.ends_with("guide.md"))
            .count(),
        1
    );
    let reason = skip_reason(&report, dir.path(), "docs/guide.md").unwrap();
    assert_eq!(reason.kind(), "duplicate");
}

#[test]
fn files_over_the_size_limit_are_skipped() {
    let dir = tree();
    let docs = dir.path().join("docs");
    let report = read(
        &docs,
        ReadOptions::new()
            .max_file_size(Some(40))
            .include("*.md")
            .include("*.gz"),
    );
    assert_eq!(names(&report, dir.path()), ["docs/link/linked.md"]);
    let reason = skip_reason(&report, dir.path(), "docs/guide.md").unwrap();
    assert_eq!(reason.to_string(), "too large (over 40 bytes)");
    // The limit applies to what a .gz holds too.
    let big = write(dir.path(), "gzbig/big.txt.gz", gzip(&"word ".repeat(1000)));
    let report = read(
        big.parent().unwrap(),
        ReadOptions::new().max_file_size(Some(1000)),
    );
    assert_eq!(
        report.skipped[0].reason,
        SkipReason::TooLarge { limit: 1000 }
    );
}

#[test]
fn bytes_from_elsewhere_are_read_by_content() {
    let reader = Reader::new(ReadOptions::new());
    let read = reader
        .read_bytes(Path::new("<stdin>"), HTML.as_bytes().to_vec())
        .unwrap();
    assert!(read.document.text.starts_with("# Observatory manual"));
    assert_eq!(
        reader
            .read_bytes(Path::new("<stdin>"), b"\0\x01".to_vec())
            .unwrap_err(),
        SkipReason::Binary
    );
    let missing = read_paths(&["/definitely/not/here"], &ReadOptions::new()).unwrap_err();
    assert!(
        missing
            .to_string()
            .starts_with("cannot read `/definitely/not/here`"),
        "{missing}"
    );
}

#[test]
fn minified_code_in_a_folder_is_a_named_skip_but_read_when_named() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let js = format!(
        "!function(){{{}}}();",
        "var a=b[c]||{};a.x=function(t){return t};".repeat(80)
    );
    // Without a script's extension (a `.js` is left out by name as a script, issue 23).
    let index = write(root, "searchindex.dat", &js);
    let prose = format!("{} ", MIRROR).repeat(100);
    write(root, "long-line.txt", &prose);
    let report = read(root, ReadOptions::default());
    assert_eq!(
        skip_reason(&report, root, "searchindex.dat"),
        Some(&SkipReason::Minified)
    );
    assert_eq!(report.skip_summary().unwrap(), "1 skipped: 1 minified");
    // A long line of prose is read.
    assert!(doc(&report, root, "long-line.txt").text.contains(MIRROR));
    // Named on its own, the file is read.
    let alone = read_paths(&[&index], &ReadOptions::default()).unwrap();
    assert_eq!(alone.documents.len(), 1);
}

/// Paths from elsewhere (`batch` lines, `eval` cases): confined to a folder, links out of
/// it are named skips and never followed, a folder too deep is not entered, and a named
/// pipe given is never opened.
#[cfg(unix)]
#[test]
fn a_confined_read_stays_in_its_folder() {
    let dir = TempDir::new().unwrap();
    let root = dir.path().join("root");
    write(&root, "docs/a.md", MIRROR);
    write(dir.path(), "outside/secret.md", "The vault code is 4711.");
    std::os::unix::fs::symlink(dir.path().join("outside"), root.join("docs/out")).unwrap();
    std::os::unix::fs::symlink(
        dir.path().join("outside/secret.md"),
        root.join("docs/secret.md"),
    )
    .unwrap();
    let deep = (0..5).fold(root.join("docs"), |p, i| p.join(format!("d{i}")));
    write(&deep, "deep.md", "Far down.");
    let real = std::fs::canonicalize(&root).unwrap();
    let options = ReadOptions::new()
        .confine_to(real.clone())
        .max_depth(Some(3));
    let report = read_within_deadline(&root.join("docs"), options.clone());
    let names: Vec<String> = report
        .documents
        .iter()
        .map(|d| d.path.display().to_string())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names[0].ends_with("docs/a.md"), "{names:?}");
    for link in ["docs/out", "docs/secret.md"] {
        let reason = skip_reason(&report, &root, link).unwrap();
        assert_eq!(reason.kind(), "outside root", "{link}: {reason}");
    }
    let deep = report
        .skipped
        .iter()
        .find(|s| s.reason.kind() == "too deep")
        .unwrap();
    assert!(deep.path.ends_with("docs/d0/d1/d2"), "{:?}", deep.path);
    // A path given outside the folder: not walked at all.
    let outside = read_within_deadline(&dir.path().join("outside"), options.clone());
    assert!(outside.documents.is_empty());
    assert_eq!(outside.skipped.len(), 1);
    assert_eq!(outside.skipped[0].reason.kind(), "outside root");
    // Unconfined, the same links are followed.
    let open = read_within_deadline(&root.join("docs"), ReadOptions::new());
    assert!(open.documents.iter().any(|d| d.text.contains("4711")));

    // A named pipe given is skipped without special files, never opened (no writer ever
    // comes: an open would block past the deadline).
    let fifo = root.join("fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let report = read_within_deadline(&fifo, options.special_files(false));
    assert!(report.documents.is_empty());
    assert_eq!(report.skipped[0].reason, SkipReason::NotAFile);
}
