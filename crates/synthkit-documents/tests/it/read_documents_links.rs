//! `synthkit_documents` following symbolic links like ripgrep does, on the tree of
//! [`crate::read_documents_common`]: linked folders are followed, a loop and a dangling
//! link are named skips, a file reached twice is read once, and a read confined to a
//! folder stays in it.

use synthkit_documents::{ReadOptions, SkipReason, read_paths};
use tempfile::TempDir;

use crate::common::{read_within_deadline, write};
use crate::read_documents_common::{
    MIRROR, assert_skipped_as, assert_text, names, read_tree, skip_reason, tree,
};

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
