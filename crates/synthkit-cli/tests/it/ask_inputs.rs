//! End-to-end tests of what `ask` reads: standard input, empty and missing input, binary,
//! hidden and legacy-encoded files in a folder, and nodes given as JSON or JSON Lines.

use crate::common::{
    MIRROR, QUESTION, ask_on, assert_stderr_has, docs, json_lines, json_of, on, source_ids, stderr,
    stdout, synthkit, temp_file, write,
};

#[test]
fn stdin_is_a_document() {
    let out = synthkit()
        .args(["ask", QUESTION, "-q"])
        .write_stdin(format!("Unrelated words. {MIRROR}"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with(MIRROR), "{text}");
    assert!(text.contains("<stdin>#1"), "{text}");
}

#[test]
fn empty_input_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = ask_on(dir.path(), QUESTION, &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.starts_with("error: no text files found under "),
        "{err}"
    );

    let out = synthkit()
        .args(["ask", QUESTION])
        .write_stdin("")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_stderr_has(&out, "no text to work on");

    let out = synthkit()
        .args(["ask", QUESTION, "/definitely/not/here"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot read `/definitely/not/here`"));
}

#[test]
fn binary_and_hidden_files_are_skipped() {
    let dir = docs();
    write(dir.path(), "blob.txt", b"\x00\x01\x02binary\x00data");
    write(dir.path(), "image", b"\x89PNG\r\n\x1a\n\x00\x00");
    write(
        dir.path(),
        ".git/config.md",
        "The primary mirror is never cleaned.",
    );
    write(dir.path(), "picture.png", "not read");
    let out = ask_on(dir.path(), QUESTION, &["--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("skipping binary file") && err.contains("blob.txt"),
        "{err}"
    );
    let v = json_of(&out);
    let ids = source_ids(&v);
    // Issue 11: text is recognised by content, not extension: `picture.png` holding text
    // is read (it was skipped as another type before).
    assert_eq!(ids.len(), 4, "{ids:?}");
    assert!(ids.iter().any(|id| id.contains("picture.png")), "{ids:?}");
    assert!(
        ids.iter()
            .all(|id| !id.contains("blob") && !id.contains("image") && !id.contains(".git"))
    );
    assert_eq!(v["answer"], MIRROR);
}

#[test]
fn invalid_utf8_is_decoded_lossily_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = b"The caf\xe9 opens at nine. ".to_vec();
    bytes.extend_from_slice(MIRROR.as_bytes());
    write(dir.path(), "latin1.txt", bytes);
    let out = on(
        dir.path(),
        &["ask", "When does the cafe open?", "--mode", "context_only"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("warning: ") && err.contains("latin1.txt") && err.contains("not valid UTF-8"),
        "{err}"
    );
    assert!(
        // Issue 11: legacy 8-bit text is decoded as windows-1252 (was U+FFFD before).
        stdout(&out).contains("caf\u{e9} opens"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn nodes_from_json_and_jsonl() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = serde_json::json!([
        {"id": "n1", "text": "The dome opens at dusk.", "metadata": {"file_path": "a.md"}, "score": 0.4},
        {"id": "n2", "text": MIRROR, "metadata": {"file_path": "b.md", "secret": "x"}, "excluded_llm_metadata_keys": ["secret"], "score": 0.9}
    ]);
    let json_path = write(
        dir.path(),
        "nodes.json",
        serde_json::to_string_pretty(&nodes).unwrap(),
    );
    let jsonl = json_lines(&nodes);
    let jsonl_path = write(dir.path(), "nodes.jsonl", jsonl);
    for path in [&json_path, &jsonl_path] {
        let out = synthkit()
            .args(["ask", QUESTION, "--json", "-q", "--nodes"])
            .arg(path)
            .output()
            .unwrap();
        let v = json_of(&out);
        assert_eq!(v["answer"], MIRROR);
        let n2 = v["sources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == "n2")
            .unwrap();
        assert_eq!(n2["path"], "b.md");
        assert_eq!(n2["score"], 0.9);
    }
}

#[test]
fn malformed_jsonl_names_the_line() {
    let (dir, path) = temp_file(
        "nodes.jsonl",
        "{\"id\":\"a\",\"text\":\"x\"}\n\n{\"id\":\"b\",\"text\":\"y\"}\n{\"id\":\"c\",\"txt\":\"z\"}\n",
    );
    let out = ask_on(&path, QUESTION, &["--nodes"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.starts_with("error: ") && err.contains("nodes.jsonl: line 4"),
        "{err}"
    );
    assert!(err.contains("node 3 has no `text`"), "{err}");

    let path = write(
        dir.path(),
        "broken.jsonl",
        "{\"id\":\"a\",\"text\":\"x\"}\n{not json\n",
    );
    let out = ask_on(&path, QUESTION, &["--nodes"]);
    assert_eq!(out.status.code(), Some(1));
    assert_stderr_has(&out, "line 2");
}
