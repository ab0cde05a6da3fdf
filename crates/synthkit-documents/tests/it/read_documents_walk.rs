//! Which files `synthkit_documents` reads in a folder, like ripgrep does, on the tree of
//! [`crate::read_documents_common`]: hidden and ignored files left out unless asked for,
//! include and exclude globs, a sorted and deterministic order, every visited file read or
//! skipped (with a summary), and files over the size limit skipped.

use synthkit_documents::{ReadOptions, SkipReason, read_paths};

use crate::common::{rel, write};
use crate::read_documents_common::{gzip, names, read, read_tree, skip_reason, tree};

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
