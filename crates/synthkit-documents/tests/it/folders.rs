//! Folders as users have them (issue 23): what is not prose for a question is left out
//! and named (stylesheets, scripts, SVG, JSON, redirect pages, copies such as mdBook's
//! `print.html`), hidden and ignored files are counted, and progress is reported. Trees in
//! the shape of an mdBook build and a Debian `/usr/share/doc`, written here.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use synthkit_documents::{
    Asset, LeftOutReason, ReadOptions, ReadReport, Reader, SkipReason, read_paths,
};
use tempfile::TempDir;

use crate::common::{read_within_deadline, rel, write, write_all};

/// A chapter page as mdBook writes it: navigation, the chapter in `<main>`, scripts.
fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html><html><head><title>{title}</title>\
         <link rel=\"stylesheet\" href=\"book.css\"></head><body>\
         <nav><a href=\"ch1.html\">1. Ownership</a><a href=\"ch2.html\">2. Borrowing</a></nav>\
         <main>{body}</main><script src=\"book.js\"></script></body></html>"
    )
}

fn chapter(topic: &str) -> String {
    let sentences: String = (0..30)
        .map(|i| format!("<p>Rule {i} of {topic} says something only this chapter says.</p>"))
        .collect();
    format!("<h1>{topic}</h1>{sentences}")
}

/// An mdBook build: chapters, `print.html` holding them all, assets, a redirect page.
fn book() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let (one, two) = (chapter("Ownership"), chapter("Borrowing"));
    write(root, "book/ch1.html", page("Ownership", &one));
    write(root, "book/ch2.html", page("Borrowing", &two));
    write(
        root,
        "book/print.html",
        page("The Book", &format!("{one}{two}")),
    );
    write(
        root,
        "book/book.css",
        "body { margin: 0 auto; max-width: 40em; }\n",
    );
    write(
        root,
        "book/book.js",
        "window.addEventListener('load', () => { highlight(); });\n",
    );
    write(
        root,
        "book/ferris.svg",
        "<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\"><text>Ferris</text></svg>\n",
    );
    write(
        root,
        "book/old-chapter.html",
        "<!DOCTYPE html><html><head><meta http-equiv=\"refresh\" content=\"0;URL=ch1.html\">\
         <title>Redirection</title></head><body><p>Redirecting to <a href=\"ch1.html\">ch1.html</a>...</p>\
         </body></html>",
    );
    write(
        root,
        "book/searchindex.json",
        "{\"doc_urls\": [\"ch1.html\"]}\n",
    );
    // A web font: binary, but expected beside HTML, so an asset rather than a binary skip.
    write(
        root,
        "book/FiraSans-Regular.woff2",
        b"wOF2\0\x01\0\0\0\0\x12\x34",
    );
    dir
}

fn read(root: &Path, options: ReadOptions) -> ReadReport {
    read_within_deadline(&root.join("book"), options)
}

#[test]
fn assets_and_copies_in_a_folder_are_named_skips() {
    let dir = book();
    let root = dir.path();
    let report = read(root, ReadOptions::new());
    let docs: Vec<String> = report
        .documents
        .iter()
        .map(|d| rel(root, &d.path))
        .collect();
    assert_eq!(docs, vec!["book/ch1.html", "book/ch2.html"]);
    let reason = |name: &str| {
        report
            .skipped
            .iter()
            .find(|s| rel(root, &s.path) == name)
            .map(|s| s.reason.clone())
    };
    for (name, asset) in [
        ("book/book.css", Asset::Style),
        ("book/book.js", Asset::Script),
        ("book/ferris.svg", Asset::Svg),
        ("book/searchindex.json", Asset::Data),
        ("book/old-chapter.html", Asset::Redirect),
        ("book/FiraSans-Regular.woff2", Asset::Font),
    ] {
        assert_eq!(reason(name), Some(SkipReason::Asset(asset)), "{name}");
    }
    match reason("book/print.html") {
        Some(SkipReason::Copy { of, percent }) => {
            assert!(percent >= 90, "{percent}");
            assert!(
                of.ends_with("ch1.html") || of.ends_with("ch2.html"),
                "{of:?}"
            );
        }
        other => panic!("print.html: {other:?}"),
    }
    let summary = report.skip_summary().unwrap();
    assert!(
        summary.contains("1 copy") && summary.contains("1 stylesheet"),
        "{summary}"
    );
    let shown = SkipReason::Copy {
        of: PathBuf::from("ch1.html"),
        percent: 99,
    }
    .to_string();
    assert!(
        shown.contains("99%") && shown.contains("ch1.html"),
        "{shown}"
    );
}

#[test]
fn keep_all_reads_them_and_a_file_named_alone_is_always_read() {
    let dir = book();
    let root = dir.path();
    let report = read(root, ReadOptions::new().keep_all(true));
    assert_eq!(report.documents.len(), 8, "{:?}", report.skipped);
    // print.html named on its own, beside its chapters' folder: read, not a copy.
    let report = read_paths(
        &[root.join("book/print.html"), root.join("book/book.css")],
        &ReadOptions::new(),
    )
    .unwrap();
    assert_eq!(report.documents.len(), 2, "{:?}", report.skipped);
}

#[test]
fn exact_copies_across_package_folders_keep_the_first() {
    // /usr/share/doc: the same changelog under two packages, and a licence shared by
    // many copyright files, each with its own header (boilerplate, not a copy).
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let log = "libfoo (1.2-1) unstable; urgency=low\n\n  * New upstream release.\n\n -- Maintainer <m@example.org>  Mon, 01 Jan 2024 00:00:00 +0000\n";
    write(root, "doc/libfoo-dev/changelog.Debian", log);
    write(root, "doc/libfoo1/changelog.Debian", log);
    let licence: String = (0..40)
        .map(|i| format!("Licence clause {i} grants the same permissions to everyone. "))
        .collect();
    for i in 0..10 {
        let header: String = (0..20)
            .map(|k| format!("Package pkg{i} file {k} is maintained by person {i}. "))
            .collect();
        write(
            root,
            &format!("doc/pkg{i}/copyright"),
            format!("{header}\n\n{licence}\n"),
        );
    }
    let report = read_paths(&[root.join("doc")], &ReadOptions::new()).unwrap();
    let copies: Vec<String> = report
        .skipped
        .iter()
        .filter(|s| matches!(s.reason, SkipReason::Copy { .. }))
        .map(|s| rel(root, &s.path))
        .collect();
    assert_eq!(copies, vec!["doc/libfoo1/changelog.Debian"]);
    assert_eq!(report.documents.len(), 11);
}

#[test]
fn hidden_and_ignored_files_are_counted_once_per_folder() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_all(
        root,
        &[
            ("docs/guide.md", "The dome opens at dusk.\n"),
            ("docs/.notes.md", "Hidden notes.\n"),
            ("docs/.cache/a.md", "Cached.\n"),
            ("docs/.cache/b.md", "Cached.\n"),
            ("docs/.gitignore", "draft.md\nbuild/\n"),
            ("docs/draft.md", "Draft.\n"),
            ("docs/build/out.md", "Built.\n"),
            ("docs/build/more/out2.md", "Built.\n"),
        ],
    );
    let report = read_paths(&[root.join("docs")], &ReadOptions::new()).unwrap();
    let mut left: Vec<(String, LeftOutReason, bool)> = report
        .left_out
        .iter()
        .map(|l| (rel(root, &l.path), l.reason, l.folder))
        .collect();
    left.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        left,
        vec![
            ("docs/.cache".into(), LeftOutReason::Hidden, true),
            ("docs/.gitignore".into(), LeftOutReason::Hidden, false),
            ("docs/.notes.md".into(), LeftOutReason::Hidden, false),
            ("docs/build".into(), LeftOutReason::Ignored, true),
            ("docs/draft.md".into(), LeftOutReason::Ignored, false),
        ]
    );
    assert_eq!(
        report.left_out_summary().as_deref(),
        Some("not visited: 3 hidden, 2 ignored")
    );
    // What the flags bring back is no longer counted.
    let all = ReadOptions::new().hidden(true).no_ignore(true);
    let report = read_paths(&[root.join("docs")], &all).unwrap();
    assert!(report.left_out.is_empty(), "{:?}", report.left_out);
    let hidden = ReadOptions::new().hidden(true);
    let report = read_paths(&[root.join("docs")], &hidden).unwrap();
    assert_eq!(
        report.left_out_summary().as_deref(),
        Some("not visited: 2 ignored")
    );
}

#[test]
fn progress_is_reported_for_every_file() {
    let dir = book();
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&seen);
    let mut reader = Reader::new(ReadOptions::new()).on_progress(Arc::new(move |p| {
        counter.store(p.files, Ordering::SeqCst);
    }));
    let report = reader.read_path(&dir.path().join("book")).unwrap();
    assert_eq!(
        seen.load(Ordering::SeqCst),
        report.documents.len() + report.skipped.len()
    );
}
