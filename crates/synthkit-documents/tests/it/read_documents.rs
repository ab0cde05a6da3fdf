//! `synthkit_documents` reading each kind of file, one test per rule on the tree of
//! [`crate::read_documents_common`]: text recognised by its content, gzip, HTML, PDF,
//! UTF-16 and legacy 8-bit text decoded, binary, empty and minified files named skips, and
//! bytes from elsewhere read by their content.

use std::path::Path;

use synthkit_documents::{Format, ReadOptions, Reader, SkipReason, read_paths};

use crate::common::write;
use crate::read_documents_common::{
    HTML, MIRROR, assert_skipped_as, assert_text, doc, doc_as, gzip, read, read_tree, skip_reason,
};

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
