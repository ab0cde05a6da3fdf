//! Reading folders through the `synthkit` binary (issue 11): files read by content, the
//! walking flags (`--hidden`, `--no-ignore`, `--include`, `--exclude`), every skipped file
//! named with its reason (the first ten by default, all with `-v`), and the summary note
//! counting skips by reason.

use std::path::Path;
use std::process::Output;

use serde_json::Value;
use tempfile::TempDir;

use crate::common::{assert_has, assert_stderr_has, gzip, run_in as run, stderr, write};

const QUESTION: &str = "How often is the primary mirror cleaned?";

/// `docs/`: text under Debian-style names, HTML, a binary file, a symlink loop, a hidden
/// file and a .gitignore'd one.
fn tree() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "docs/README.Debian",
        "The primary mirror is cleaned every three months.\n",
    );
    write(
        root,
        "docs/changelog.1",
        "Version 1 added the dome motors.\n",
    );
    write(
        root,
        "docs/guide.html",
        "<!DOCTYPE html><html><body><h1>Guide</h1><ul><li>Open the dome at dusk.</li></ul>\
         <script>var x = 'SCRIPT';</script></body></html>",
    );
    write(root, "docs/image.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
    write(root, "docs/.secret.md", "Hidden notes.\n");
    write(root, "docs/.gitignore", "draft.md\n");
    write(root, "docs/draft.md", "Draft notes.\n");
    std::os::unix::fs::symlink("..", root.join("docs/loop")).unwrap();
    dir
}

/// The files the nodes came from, in order, once each.
fn files(out: &Output) -> Vec<String> {
    assert!(out.status.success(), "{}", stderr(out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut files: Vec<String> = Vec::new();
    for s in v["sources"].as_array().unwrap() {
        let id = s["id"].as_str().unwrap();
        let file = id.rsplit_once('#').unwrap().0.to_owned();
        if !files.contains(&file) {
            files.push(file);
        }
    }
    files
}

fn ask_json(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["ask", QUESTION, "docs", "--json", "--mode", "no_text"];
    args.extend_from_slice(extra);
    run(dir, &args)
}

#[test]
fn text_is_read_by_content_and_skips_are_named_and_counted() {
    let dir = tree();
    let out = ask_json(dir.path(), &[]);
    assert_eq!(
        files(&out),
        ["docs/README.Debian", "docs/changelog.1", "docs/guide.html"]
    );
    let err = stderr(&out);
    assert_has(
        "standard error",
        &err,
        "note: skipping image file docs/image.png: the offline backend reads text only: a vision model behind --base-url reads images (llama.cpp: --mmproj)\n",
    );
    assert_has(
        "standard error",
        &err,
        "note: skipping docs/loop: symlink loop (back to ",
    );
    // Issue 23: the hidden and ignored files are counted too (named with -v).
    assert_has(
        "standard error",
        &err,
        "note: read 3 files (1 skipped: 1 symlink loop; not visited: 2 hidden, 1 ignored; -v names them all)\n",
    );
    // The HTML became Markdown-style text without its script.
    let out = run(
        dir.path(),
        &[
            "ask",
            "dome",
            "docs/guide.html",
            "--mode",
            "context_only",
            "-q",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("# Guide") && text.contains("- Open the dome at dusk."),
        "{text}"
    );
    assert!(!text.contains("SCRIPT"), "{text}");
}

#[test]
fn walking_flags() {
    let dir = tree();
    let hidden = files(&ask_json(dir.path(), &["--hidden"]));
    assert!(hidden.contains(&"docs/.secret.md".to_owned()), "{hidden:?}");
    assert!(!hidden.contains(&"docs/draft.md".to_owned()), "{hidden:?}");

    let no_ignore = files(&ask_json(dir.path(), &["--no-ignore"]));
    assert!(
        no_ignore.contains(&"docs/draft.md".to_owned()),
        "{no_ignore:?}"
    );
    assert!(
        !no_ignore.contains(&"docs/.secret.md".to_owned()),
        "{no_ignore:?}"
    );

    let only = files(&ask_json(
        dir.path(),
        &["--include", "*.Debian", "--include", "*.html"],
    ));
    assert_eq!(only, ["docs/README.Debian", "docs/guide.html"]);

    let out = ask_json(dir.path(), &["--exclude", "*.html", "--exclude", "loop"]);
    assert_eq!(files(&out), ["docs/README.Debian", "docs/changelog.1"]);
    // The excluded loop is not visited, so not reported.
    assert!(!stderr(&out).contains("symlink loop"), "{}", stderr(&out));

    let out = ask_json(dir.path(), &["--include", "a{b"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_stderr_has(&out, "invalid glob `a{b`");

    // A folder with nothing to read says what was not looked at.
    let out = run(dir.path(), &["ask", "q", "docs", "--include", "*.pdf"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_has(
        "standard error",
        &err,
        "error: no text files found under docs",
    );
    assert!(err.contains("files not matching --include"), "{err}");
}

#[test]
fn the_first_ten_skips_are_named_and_verbose_names_them_all() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "docs/a.md",
        "The primary mirror is cleaned often.\n",
    );
    for i in 0..12 {
        write(dir.path(), &format!("docs/blob{i:02}.bin"), b"\0\x01\x02");
    }
    let out = run(dir.path(), &["ask", QUESTION, "docs"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(
        err.matches("note: skipping binary file").count(),
        10,
        "{err}"
    );
    assert_has(
        "standard error",
        &err,
        "note: read 1 file (12 skipped: 12 binary; -v names them all)",
    );

    let out = run(dir.path(), &["ask", QUESTION, "docs", "-v"]);
    let err = stderr(&out);
    assert_eq!(
        err.matches("note: skipping binary file").count(),
        12,
        "{err}"
    );
    assert!(err.contains("docs/blob11.bin"), "{err}");
    assert_has(
        "standard error",
        &err,
        "note: read 1 file (12 skipped: 12 binary)\n",
    );

    // -q: none of it.
    let out = run(dir.path(), &["ask", QUESTION, "docs", "-q"]);
    assert!(!stderr(&out).contains("skipping"), "{}", stderr(&out));
}

#[test]
fn gz_and_utf16_files_are_read() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "docs/changelog.Debian.gz",
        gzip(b"pkg (1.0-1) unstable\n  * Fixed the mirror cleaning schedule.\n"),
    );
    let mut utf16 = vec![0xFF, 0xFE];
    for unit in "The dome opens at dusk.".encode_utf16() {
        utf16.extend(unit.to_le_bytes());
    }
    write(dir.path(), "docs/notes.txt", utf16);
    let out = run(
        dir.path(),
        &[
            "ask",
            "When does the dome open?",
            "docs",
            "--mode",
            "context_only",
            "-q",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_has(
        "standard output",
        &text,
        "Fixed the mirror cleaning schedule.",
    );
    assert!(text.contains("The dome opens at dusk."), "{text}");
}

#[test]
fn imperfect_decodings_are_named_a_few_then_counted() {
    let dir = tempfile::tempdir().unwrap();
    let words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"];
    for (i, word) in words.iter().enumerate() {
        let text =
            format!("The caf\u{e9} of {word} opens at {i} o'clock, after the {word} market.\n");
        // Legacy 8-bit text: é as one byte.
        let bytes: Vec<u8> = text.chars().map(|c| c as u32 as u8).collect();
        write(dir.path(), &format!("docs/{word}.txt"), bytes);
    }
    let out = run(dir.path(), &["ask", QUESTION, "docs", "--mode", "no_text"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    let named = err
        .lines()
        .filter(|l| l.starts_with("warning: docs/") && l.contains("not valid UTF-8"))
        .count();
    assert_eq!(named, 3, "{err}");
    assert_has(
        "standard error",
        &err,
        "warning: 3 more files decoded imperfectly (3 decoded as windows-1252; -v names them all)\n",
    );
    let out = run(
        dir.path(),
        &["ask", QUESTION, "docs", "--mode", "no_text", "-v"],
    );
    let err = stderr(&out);
    let named = err
        .lines()
        .filter(|l| l.contains("docs/") && l.contains("not valid UTF-8"))
        .count();
    assert_eq!(named, 6, "{err}");
    assert!(!err.contains("more files decoded"), "{err}");
}

#[test]
fn minified_pages_in_a_folder_are_counted_not_named() {
    let dir = tree();
    let packed: String = (0..400).map(|i| format!("a{i}=b{i};")).collect();
    write(dir.path(), "docs/bundle.txt", packed);
    let out = run(dir.path(), &["ask", QUESTION, "docs", "--mode", "no_text"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(!err.contains("bundle.txt"), "{err}");
    assert!(err.contains("1 minified"), "{err}");
    let out = run(
        dir.path(),
        &["ask", QUESTION, "docs", "--mode", "no_text", "-v"],
    );
    assert!(stderr(&out).contains("bundle.txt"), "{}", stderr(&out));
}
