//! The folder index (issue 46): a folder asked again is not read again, only what changed
//! is (and only that is split again), the answer and its ranked sources are those of a fresh read, `--no-index` keeps
//! nothing, and a damaged index is said and read around. Counted by the files the command
//! says it read, never timed.

use std::path::Path;
use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::common::{stderr, stdout, synthkit, write};

/// Sets the modification time of `path` to `secs` past 14 November 2023: files written
/// this instant are "racy" (they could change again within their timestamp's
/// granularity) and the index never trusts them.
fn set_time(path: &Path, secs: u64) {
    let then = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs);
    let file = std::fs::File::options().append(true).open(path).unwrap();
    file.set_modified(then).unwrap();
}

/// Sets every file under `dir` to one time in the past ([`set_time`]).
fn age(dir: &Path) {
    for entry in walk(dir) {
        set_time(&entry, 0);
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// A documentation folder of `files` pages, each of a few paragraphs on its own topic.
fn manual(files: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let topics = [
        "mirror", "dome", "shutter", "camera", "filter", "mount", "guider", "focuser",
    ];
    for i in 0..files {
        let topic = topics[i % topics.len()];
        let mut page = format!("# The {topic}, part {i}\n\n");
        for p in 0..6 {
            page.push_str(&format!(
                "## Care {p}\n\nThe {topic} of unit {i} is checked every {} weeks by the \
                 night crew, who log it in book {p}. Cleaning the {topic} needs gloves.\n\n",
                i + p + 2
            ));
        }
        write(dir.path(), &format!("docs/{topic}-{i}.md"), page);
    }
    age(dir.path());
    dir
}

/// `ask QUESTION DIR -v FLAGS` with its own index folder (and `--chunk-size 60` unless
/// FLAGS give one).
fn ask(dir: &Path, index: &Path, question: &str, flags: &[&str]) -> std::process::Output {
    let size: &[&str] = if flags.contains(&"--chunk-size") {
        &[]
    } else {
        &["--chunk-size", "60"]
    };
    let out = synthkit()
        .args(["ask", question, "-v", "--index-dir"])
        .arg(index)
        .args(size)
        .args(flags)
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    out
}

/// What the index said it read: `(read, unchanged)`, or `None` when it said nothing was.
fn files_read(out: &std::process::Output) -> Option<(usize, usize)> {
    let err = stderr(out);
    if err.contains("no file changed since the last read; none read") {
        return None;
    }
    let line = err
        .lines()
        .find(|l| l.contains("folder index") && l.contains("unchanged taken from the index"))
        .unwrap_or_else(|| panic!("no index note in:\n{err}"));
    let unchanged = line.find(" unchanged").unwrap();
    let before: String = line[..unchanged]
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect();
    let unchanged: usize = before.chars().rev().collect::<String>().parse().unwrap();
    Some((number_after(line, ": read "), unchanged))
}

/// The number right after the first `word` in `line`.
fn number_after(line: &str, word: &str) -> usize {
    let at = line.find(word).unwrap() + word.len();
    let digits: String = line[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap()
}

/// What the index said it split: `(documents split, splits reused)`.
fn documents_split(out: &std::process::Output) -> (usize, usize) {
    let err = stderr(out);
    let line = err
        .lines()
        .find(|l| l.contains("folder index") && l.contains("; split "))
        .unwrap_or_else(|| panic!("no split note in:\n{err}"));
    (
        number_after(line, "; split "),
        number_after(line, ", reused "),
    )
}

#[test]
fn a_folder_asked_again_reads_only_what_changed() {
    let dir = manual(6);
    let index = tempfile::tempdir().unwrap();
    let q = "How often is the mirror checked?";
    let first = ask(dir.path(), index.path(), q, &[]);
    assert_eq!(files_read(&first), Some((6, 0)));
    assert_eq!(documents_split(&first), (6, 0));
    // Nothing changed: no file read.
    assert_eq!(files_read(&ask(dir.path(), index.path(), q, &[])), None);
    assert_eq!(
        files_read(&ask(dir.path(), index.path(), "What needs gloves?", &[])),
        None
    );
    // One page changed: it alone is read.
    let changed = dir.path().join("docs/dome-1.md");
    std::fs::write(
        &changed,
        "# The dome\n\nThe dome is painted white every spring.\n",
    )
    .unwrap();
    set_time(&changed, 60);
    let out = ask(dir.path(), index.path(), "When is the dome painted?", &[]);
    assert_eq!(files_read(&out), Some((1, 5)));
    // ... and it alone is split again: the others' chunks and word counts are reused.
    assert_eq!(documents_split(&out), (1, 5));
    assert!(
        stdout(&out).contains("painted white every spring"),
        "{}",
        stdout(&out)
    );
    // A page added is read; a page removed is no longer answered from.
    let roof = write(
        dir.path(),
        "docs/roof.md",
        "# Roof\n\nThe roof slides open on rails.\n",
    );
    set_time(&roof, 120);
    std::fs::remove_file(dir.path().join("docs/mirror-0.md")).unwrap();
    let out = ask(
        dir.path(),
        index.path(),
        "How often is the mirror checked?",
        &["--json"],
    );
    assert_eq!(files_read(&out), Some((1, 5)));
    assert_eq!(documents_split(&out), (1, 5));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    for s in report["sources"].as_array().unwrap() {
        assert!(!s["id"].as_str().unwrap().contains("mirror-0"), "{s}");
    }
    // Another chunk size: the documents are taken from the index and split again.
    let out = ask(dir.path(), index.path(), q, &["--chunk-size", "80"]);
    assert_eq!(files_read(&out), Some((0, 6)));
    assert_eq!(documents_split(&out), (6, 0));
    // A file written this instant is never trusted: read every time until it is older.
    // (Here its time is an hour ahead, so that it stays "just written" on a slow machine.)
    let fresh = write(
        dir.path(),
        "docs/fresh.md",
        "# Fresh\n\nThe fresh page was just written.\n",
    );
    let ahead = SystemTime::now() + Duration::from_secs(3600);
    let file = std::fs::File::options().append(true).open(&fresh).unwrap();
    file.set_modified(ahead).unwrap();
    // Its text is the same the second time: its split is reused.
    for split in [(1, 6), (0, 7)] {
        let out = ask(dir.path(), index.path(), q, &["--chunk-size", "80"]);
        assert_eq!(files_read(&out), Some((1, 6)));
        assert_eq!(documents_split(&out), split);
        assert!(stderr(&out).contains("the next question looks again"));
    }
}

#[test]
fn the_index_changes_no_answer_and_no_source() {
    let dir = manual(12);
    let index = tempfile::tempdir().unwrap();
    for q in [
        "How often is the shutter of unit 2 checked?",
        "Which book logs the camera care?",
        "What is the latest mount care?",
        "zebras and giraffes",
    ] {
        let fresh = ask(dir.path(), index.path(), q, &["--json", "--no-index"]);
        let first = ask(dir.path(), index.path(), q, &["--json"]);
        let again = ask(dir.path(), index.path(), q, &["--json"]);
        assert_eq!(files_read(&again), None, "{q}");
        let shape = |out: &std::process::Output| {
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            (v["answer"].clone(), v["sources"].clone())
        };
        assert_eq!(shape(&fresh), shape(&first), "{q}");
        assert_eq!(shape(&fresh), shape(&again), "{q}");
        // The notes of the read are said again, the same.
        let notes = |out: &std::process::Output| {
            stderr(out)
                .lines()
                .filter(|l| !l.contains("folder index"))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(notes(&fresh), notes(&again), "{q}");
    }
}

#[test]
fn no_index_keeps_nothing_and_a_damaged_index_is_read_around() {
    let dir = manual(3);
    let index = tempfile::tempdir().unwrap();
    let q = "How often is the dome checked?";
    let out = ask(dir.path(), index.path(), q, &["--no-index"]);
    assert!(!stderr(&out).contains("folder index"), "{}", stderr(&out));
    assert_eq!(std::fs::read_dir(index.path()).unwrap().count(), 0);

    ask(dir.path(), index.path(), q, &[]);
    let files: Vec<_> = walk(index.path())
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "sqlite"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    for f in walk(index.path()) {
        std::fs::write(&f, b"this is not an index").unwrap();
    }
    let out = ask(dir.path(), index.path(), q, &[]);
    assert!(
        stderr(&out).contains("was damaged") && stderr(&out).contains("built anew"),
        "{}",
        stderr(&out)
    );
    assert_eq!(files_read(&out), Some((3, 0)));
    assert!(stdout(&out).contains("dome"), "{}", stdout(&out));
    assert_eq!(files_read(&ask(dir.path(), index.path(), q, &[])), None);
}
