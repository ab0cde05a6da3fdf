//! Bad input through the `synthkit` binary (offline extractive backend): files that are
//! not UTF-8, binary files, empty folders, a huge single-line file, broken templates,
//! impossible windows, malformed `--nodes` files (and 200 random ones), braces in documents
//! and questions, a question larger than the window, and the `--rpm`/`--tpm` limits.
//!
//! Every case checks the same contract: no panic (exit code never 101, no "panicked" on
//! standard error), the documented exit code (0 success, 1 failure, 2 usage), and for
//! failures an `error:` line on standard error that says what to change.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use assert_cmd::Command;
use serde_json::Value;

const DOC: &str = "The primary mirror is cleaned every three months with carbon dioxide snow. \
The dome motors are greased every year.\n";

fn synthkit() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_synthkit"));
    cmd.env_remove("SYNTHKIT_BASE_URL")
        .env_remove("SYNTHKIT_MODEL")
        .env_remove("OPENAI_BASE_URL")
        .timeout(Duration::from_secs(180));
    cmd
}

fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&path, bytes).unwrap();
    path
}

fn run(dir: &Path, args: &[&str]) -> Output {
    synthkit().current_dir(dir).args(args).output().unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// No panic, whatever happened.
fn assert_no_panic(out: &Output, what: &str) {
    assert_ne!(
        out.status.code(),
        Some(101),
        "{what}: panicked\n{}",
        stderr(out)
    );
    assert!(out.status.code().is_some(), "{what}: killed by a signal");
    assert!(
        !stderr(out).contains("panicked"),
        "{what}: panicked\n{}",
        stderr(out)
    );
}

/// Success: exit 0 and an answer on standard output.
fn assert_ok(out: &Output, what: &str) {
    assert_no_panic(out, what);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}: failed\n{}",
        stderr(out)
    );
    assert!(!stdout(out).trim().is_empty(), "{what}: no answer");
}

/// Failure with `code` and an `error:` line containing every one of `needles`; returns the
/// line.
fn assert_error(out: &Output, code: i32, needles: &[&str], what: &str) -> String {
    assert_no_panic(out, what);
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "{what}: stderr:\n{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or_else(|| panic!("{what}: no `error:` line in:\n{err}"))
        .to_string();
    for n in needles {
        assert!(line.contains(n), "{what}: `{n}` not in: {line}");
    }
    line
}

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

// ------------------------------------------------------------------ files and folders

#[test]
fn invalid_utf8_is_read_lossily_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "docs/latin1.md",
        b"The mirror is cleaned \xe9very three months \xff\xfe with snow.\n",
    );
    for target in ["docs", "docs/latin1.md"] {
        let out = run(
            dir.path(),
            &["ask", "How often is the mirror cleaned?", target],
        );
        assert_ok(&out, target);
        let err = stderr(&out);
        assert!(
            err.lines().any(|l| l.starts_with("warning:")
                && l.contains("latin1.md")
                && l.contains("not valid UTF-8")),
            "{err}"
        );
        // Issue 11: invalid UTF-8 with no multi-byte sequence is legacy 8-bit text,
        // decoded as windows-1252 (it was U+FFFD replacements before).
        assert!(
            stdout(&out).contains("\u{e9}very three months"),
            "{}",
            stdout(&out)
        );
    }
    // Standard input too.
    let out = synthkit()
        .current_dir(dir.path())
        .args(["ask", "sky"])
        .write_stdin(&b"The sky \xff is blue."[..])
        .output()
        .unwrap();
    assert_ok(&out, "stdin");
    assert!(stderr(&out).contains("warning: <stdin> is not valid UTF-8"));
}

#[test]
fn binary_files_are_skipped_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "docs/good.md", DOC);
    write(
        dir.path(),
        "docs/image.txt",
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR",
    );
    write(dir.path(), "docs/blob", b"ELF\x02\x01\0\0\0\0\x7f");
    let out = run(
        dir.path(),
        &["ask", "How often is the mirror cleaned?", "docs"],
    );
    assert_ok(&out, "folder with binaries");
    let err = stderr(&out);
    assert!(
        err.contains("note: skipping binary file docs/image.txt"),
        "{err}"
    );
    assert!(
        err.contains("note: skipping binary file docs/blob"),
        "{err}"
    );
    assert!(stdout(&out).contains("three months"));

    // Nothing but binaries: a clear error, exit 1.
    let out = run(dir.path(), &["ask", "q", "docs/image.txt"]);
    assert_error(&out, 1, &["no text to work on", "skipped"], "binary file");
    std::fs::remove_file(dir.path().join("docs/good.md")).unwrap();
    let out = run(dir.path(), &["ask", "q", "docs"]);
    assert_error(
        &out,
        1,
        &["no text files found under docs"],
        "binary folder",
    );
}

#[test]
fn empty_folders_are_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("empty/nested/deeper")).unwrap();
    let out = run(dir.path(), &["ask", "q", "empty"]);
    assert_error(
        &out,
        1,
        // Issue 11: any text file is read now; the error says what was not looked at.
        &["no text files found under empty", "--hidden", "--no-ignore"],
        "empty folder",
    );
    // Only hidden files and binary files: said so. (Issue 11: a .csv holding text is
    // read now, so the file of another type is a binary one.)
    write(dir.path(), "empty/.hidden.md", DOC);
    write(dir.path(), "empty/data.bin", b"\x00\x01binary");
    let out = run(dir.path(), &["ask", "q", "empty"]);
    assert_error(&out, 1, &["no text files found", "skipped"], "hidden only");
    // Text files with no text.
    write(dir.path(), "blank/a.md", "");
    write(dir.path(), "blank/b.txt", " \n\t\n");
    let out = run(dir.path(), &["ask", "q", "blank"]);
    assert_error(&out, 1, &["no text to work on", "empty"], "blank files");
    // A path that does not exist: usage error.
    let out = run(dir.path(), &["ask", "q", "missing"]);
    assert_error(&out, 2, &["cannot read `missing`"], "missing path");
}

/// 5 MB on one line, no spaces or newlines: every cut is a character cut. Must answer
/// (measured about 3-5 s in a debug build).
#[test]
fn huge_single_line_file_answers() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x5eed);
    let alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let text: Vec<u8> = (0..5_000_000)
        .map(|_| alphabet[rng.below(alphabet.len())])
        .collect();
    write(dir.path(), "huge.txt", &text);
    for mode in ["compact", "tree_summarize"] {
        let start = Instant::now();
        let out = run(
            dir.path(),
            &[
                "ask",
                "What is in it?",
                "huge.txt",
                "--mode",
                mode,
                "--json",
            ],
        );
        let took = start.elapsed();
        println!("huge single line ({mode}): {:.1}s", took.as_secs_f64());
        assert_no_panic(&out, mode);
        assert_eq!(out.status.code(), Some(0), "{mode}: {}", stderr(&out));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(!report["answer"].as_str().unwrap().is_empty());
        assert!(report["sources"].as_array().unwrap().len() > 1000);
        assert!(took < Duration::from_secs(90), "{mode} took {took:?}");
    }
}

// ------------------------------------------------------------------ templates and windows

#[test]
fn templates_missing_variables_name_the_variable() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "doc.md", DOC);
    write(dir.path(), "no_context.txt", "Answer {query_str} please.");
    write(dir.path(), "no_answer.txt", "{query_str} {context_msg}");
    write(dir.path(), "empty.txt", "");
    write(
        dir.path(),
        "garbage.txt",
        "{{{ }}} {context_str {1x} {\"a\":1}",
    );
    let cases: [(&[&str], &str, &str); 5] = [
        (
            &["ask", "q", "doc.md", "--qa-template", "no_context.txt"],
            "qa",
            "{context_str}",
        ),
        (
            &[
                "ask",
                "q",
                "doc.md",
                "--mode",
                "refine",
                "--refine-template",
                "no_answer.txt",
            ],
            "refine",
            "{existing_answer}",
        ),
        (
            &[
                "summarize",
                "doc.md",
                "--summary-template",
                "no_context.txt",
            ],
            "summary",
            "{context_str}",
        ),
        (
            &["ask", "q", "doc.md", "--qa-template", "empty.txt"],
            "qa",
            "{context_str}",
        ),
        (
            &["ask", "q", "doc.md", "--qa-template", "garbage.txt"],
            "qa",
            "{context_str}",
        ),
    ];
    for (args, kind, var) in cases {
        let out = run(dir.path(), args);
        let what = args.join(" ");
        let line = assert_error(&out, 2, &[var, "add"], &what);
        assert!(line.contains(&format!("the {kind} template")), "{line}");
    }
    // A template that cannot be read: usage error naming the file.
    let out = run(
        dir.path(),
        &["ask", "q", "doc.md", "--qa-template", "nope.txt"],
    );
    assert_error(&out, 2, &["nope.txt"], "missing template");
}

#[test]
fn windows_too_small_say_what_to_change() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "doc.md", DOC);
    // The default output reserve (256) does not fit a 64-token window.
    for args in [
        &["ask", "q", "doc.md", "--context-window", "64"][..],
        &[
            "ask",
            "q",
            "doc.md",
            "--context-window",
            "64",
            "--mode",
            "refine",
        ],
        &["summarize", "doc.md", "--context-window", "0"],
    ] {
        let out = run(dir.path(), args);
        assert_error(
            &out,
            2,
            &["--context-window", "--num-output"],
            &args.join(" "),
        );
    }
    // The output fits but the template leaves no room for context.
    for mode in ["compact", "refine", "tree_summarize", "accumulate"] {
        let args = [
            "ask",
            "q",
            "doc.md",
            "--context-window",
            "40",
            "--num-output",
            "16",
            "--mode",
            mode,
        ];
        let out = run(dir.path(), &args);
        assert_error(&out, 1, &["--context-window", "--num-output"], mode);
    }
}

#[test]
fn num_output_not_below_the_window_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "doc.md", DOC);
    for (window, output) in [("500", "500"), ("500", "900"), ("1", "1")] {
        let out = run(
            dir.path(),
            &[
                "ask",
                "q",
                "doc.md",
                "--context-window",
                window,
                "--num-output",
                output,
            ],
        );
        assert_error(
            &out,
            2,
            &[
                "smaller than the context window",
                "--context-window",
                "--num-output",
            ],
            &format!("{window}/{output}"),
        );
    }
    // --plan checks the same before planning.
    let out = run(
        dir.path(),
        &[
            "ask",
            "q",
            "doc.md",
            "--plan",
            "--context-window",
            "100",
            "--num-output",
            "100",
        ],
    );
    assert_error(&out, 2, &["--num-output"], "plan");
}

// ------------------------------------------------------------------ --nodes

#[test]
fn malformed_nodes_files_name_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let deep = "[".repeat(100_000);
    let cases: [(&str, &[u8], &[&str]); 12] = [
        (
            "truncated.jsonl",
            b"{\"id\":\"a\",\"text\":\"x\"}\n\n{\"id\":\"b\",\"text\":\"y\"\n",
            &["line 3", "EOF"],
        ),
        (
            "missing.jsonl",
            b"{\"id\":\"a\",\"text\":\"x\"}\n{\"id\":\"b\"}\n",
            &["line 2", "node 2 has no `text`"],
        ),
        (
            "wrong_type.json",
            b"[{\"id\":\"a\",\"text\":\"x\"},\n {\"id\":2,\"text\":\"y\"}]",
            &[
                "line 2",
                "(index 1): node 2: `id` must be a string, got a number",
            ],
        ),
        (
            "pretty.json",
            b"{\n  \"id\": \"a\",\n  \"txt\": \"x\"\n}\n",
            &["line 4", "node 1 has no `text`", "\"txt\""],
        ),
        (
            "pretty_syntax.json",
            b"{\n  \"id\": \"a\",\n  \"text\": oops\n}\n",
            &["line 3", "expected value"],
        ),
        (
            "trailing_comma.json",
            b"[\n{\"id\":\"a\",\"text\":\"x\"},\n]\n",
            &["line 3", "trailing comma"],
        ),
        (
            "two_per_line.jsonl",
            b"{\"id\":\"a\",\"text\":\"x\"} {\"id\":\"b\",\"text\":\"y\"}\n",
            &["line 1", "trailing characters"],
        ),
        ("binary.jsonl", b"\xff\xfe\0garbage", &["line 1"]),
        ("deep.json", deep.as_bytes(), &["line 1"]),
        (
            "huge_number.jsonl",
            b"{\"id\":\"a\",\"text\":\"x\",\"score\":1e999}\n",
            &["line 1", "out of range"],
        ),
        (
            "not_a_node.jsonl",
            b"\"a string is a node\"\n3\n",
            &[
                "line 2",
                "node 2: expected a string (the node's text) or an object",
            ],
        ),
        (
            "duplicate.jsonl",
            b"{\"id\":\"a\",\"text\":\"x\"}\n{\"node\":{\"id_\":\"a\",\"text\":\"y\"}}\n",
            &["line 2", "node 2 has the id \"a\", as node 1 does"],
        ),
    ];
    for (name, bytes, needles) in cases {
        write(dir.path(), name, bytes);
        let out = run(dir.path(), &["ask", "q", "--nodes", name]);
        let mut all = vec![name];
        all.extend_from_slice(needles);
        assert_error(&out, 1, &all, name);
    }
    for (name, bytes) in [
        ("empty.jsonl", &b""[..]),
        ("blank.jsonl", b"\n \n"),
        ("none.json", b"[]"),
    ] {
        write(dir.path(), name, bytes);
        let out = run(dir.path(), &["ask", "q", "--nodes", name]);
        assert_error(&out, 1, &[name, "has no nodes"], name);
    }
    let out = run(dir.path(), &["ask", "q", "--nodes", "absent.json"]);
    assert_error(&out, 2, &["cannot read --nodes `absent.json`"], "absent");
}

/// JSON-ish fragments for random `--nodes` files.
const NODE_PIECES: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\n",
    " ",
    "\"",
    "\"id\"",
    "\"text\"",
    "\"metadata\"",
    "\"score\"",
    "{\"id\":\"a\",\"text\":\"x\"}",
    "{\"id\":\"b\",\"text\":\"y {query_str}\",\"score\":0.5}",
    "{\"id\":\"c\",\"text\":\"z\",\"metadata\":{\"k\":[1,{\"n\":null}],\"t\":true},\"excluded_llm_metadata_keys\":[\"t\"]}",
    "{\"id\":1,\"text\":\"x\"}",
    "{\"id\":\"c\"}",
    "null",
    "true",
    "1e999",
    "-0",
    "\"\\ud800\"",
    "\"\\u00e9\"",
    "\\",
    "[[[[[[[[",
    "]]]]",
    "\u{feff}",
    "\r\n",
    "🚀",
    "\u{0}",
];

/// Random text for node fields: braces, escapes, unicode, control characters.
fn random_text(rng: &mut Rng) -> String {
    const PIECES: &[&str] = &[
        "word",
        " ",
        "{query_str}",
        "{context_str}",
        "{",
        "}",
        "\"",
        "\\",
        "\n",
        "é",
        "🚀",
        "\u{0}",
        "\u{7f}",
        "\u{feff}",
        "\u{301}",
        "中文",
        "\t",
    ];
    (0..rng.below(8))
        .map(|_| PIECES[rng.below(PIECES.len())])
        .collect()
}

/// A valid node as JSON, with random fields.
fn random_node(rng: &mut Rng) -> Value {
    let mut node = serde_json::json!({"id": random_text(rng), "text": random_text(rng)});
    if rng.below(2) == 0 {
        node["metadata"] = serde_json::json!({
            random_text(rng): random_text(rng),
            "n": rng.below(1000),
            "list": [true, null, 1.5, {"k": random_text(rng)}],
        });
        node["excluded_llm_metadata_keys"] = serde_json::json!(["n"]);
    }
    if rng.below(3) == 0 {
        node["score"] = serde_json::json!(rng.below(100) as f64 / 7.0);
    }
    node
}

/// Damages `bytes` once: cut, drop a byte, insert a fragment or flip a byte.
fn mutate(rng: &mut Rng, bytes: &mut Vec<u8>) {
    if bytes.is_empty() {
        return;
    }
    let at = rng.below(bytes.len());
    match rng.below(4) {
        0 => bytes.truncate(at),
        1 => {
            bytes.remove(at);
        }
        2 => {
            let piece = NODE_PIECES[rng.below(NODE_PIECES.len())].as_bytes();
            bytes.splice(at..at, piece.iter().copied());
        }
        _ => bytes[at] = rng.next() as u8,
    }
}

/// A random `--nodes` file: raw bytes, JSON-ish fragments, or valid JSON lines or arrays
/// of random nodes, damaged half of the time.
fn random_nodes_file(rng: &mut Rng) -> Vec<u8> {
    match rng.below(6) {
        0 => (0..rng.below(200)).map(|_| rng.next() as u8).collect(),
        1 => (0..rng.below(30))
            .flat_map(|_| NODE_PIECES[rng.below(NODE_PIECES.len())].bytes())
            .collect(),
        kind => {
            let nodes: Vec<Value> = (0..1 + rng.below(5)).map(|_| random_node(rng)).collect();
            let mut bytes = match kind {
                2 | 3 => nodes
                    .iter()
                    .map(|n| format!("{n}\n"))
                    .collect::<String>()
                    .into_bytes(),
                4 => serde_json::to_vec(&nodes).unwrap(),
                _ => serde_json::to_vec_pretty(&nodes[0]).unwrap(),
            };
            if rng.below(2) == 0 {
                mutate(rng, &mut bytes);
            }
            bytes
        }
    }
}

/// 200 random `--nodes` files through the binary: nodes or a clear error, never a panic.
/// (The 10,000-case run of the same rules on the library's deserializer is
/// `crates/synthkit/tests/fuzz_props.rs`.)
#[test]
fn random_nodes_files_never_panic() {
    const CASES: usize = 200;
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x00c0_ffee);
    let (mut parsed, mut rejected) = (0usize, 0usize);
    let start = Instant::now();
    for case in 0..CASES {
        let bytes = random_nodes_file(&mut rng);
        let path = write(dir.path(), &format!("case{case}.jsonl"), &bytes);
        let mut args = vec!["ask", "q", "--nodes", path.to_str().unwrap(), "--mode"];
        args.push(["no_text", "compact", "context_only"][case % 3]);
        if case % 2 == 0 {
            args.push("--json");
        }
        let out = run(dir.path(), &args);
        let what = format!("case {case}: {:?}", String::from_utf8_lossy(&bytes));
        assert_no_panic(&out, &what);
        match out.status.code() {
            Some(0) => parsed += 1,
            Some(1) => {
                let line = assert_error(&out, 1, &[], &what);
                assert!(
                    line.contains(": line ") || line.contains("has no nodes"),
                    "{what}: {line}"
                );
                rejected += 1;
            }
            // Two nodes with one id: a usage error naming the id (issue 23).
            Some(2) => {
                let line = assert_error(&out, 2, &[], &what);
                assert!(line.contains("id"), "{what}: {line}");
                rejected += 1;
            }
            other => panic!("{what}: exit {other:?}\n{}", stderr(&out)),
        }
    }
    println!(
        "random --nodes files: {CASES} cases run through the binary ({parsed} parsed, {rejected} rejected) in {:.1}s",
        start.elapsed().as_secs_f64()
    );
    assert_eq!(parsed + rejected, CASES);
    assert!(
        parsed > 0 && rejected > 0,
        "{parsed} parsed, {rejected} rejected"
    );
}

// ------------------------------------------------------------------ queries

/// `{query_str}` and friends in documents and questions are text: never substituted.
#[test]
fn braces_in_documents_and_question_are_literal() {
    let dir = tempfile::tempdir().unwrap();
    let doc = "The mirror needs {query_str} and {context_str} cleaning {x} {{y}} {\"k\": 1} every month.\n";
    write(dir.path(), "doc.md", doc);
    let question = "What does the mirror need {context_str} {query_str} {existing_answer}?";
    for mode in [
        "compact",
        "refine",
        "tree_summarize",
        "accumulate",
        "simple_summarize",
    ] {
        let out = run(
            dir.path(),
            &[
                "ask",
                question,
                "doc.md",
                "--json",
                "--mode",
                mode,
                "--trace",
                "trace.jsonl",
            ],
        );
        assert_no_panic(&out, mode);
        assert_eq!(out.status.code(), Some(0), "{mode}: {}", stderr(&out));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["query"], question);
        assert!(
            report["answer"]
                .as_str()
                .unwrap()
                .contains("{query_str} and {context_str}"),
            "{mode}: {}",
            report["answer"]
        );
        // Every prompt sent holds the question verbatim; the first holds the document.
        let trace = std::fs::read_to_string(dir.path().join("trace.jsonl")).unwrap();
        let prompts: Vec<String> = trace
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                v["prompt"].as_str().unwrap().to_string()
            })
            .collect();
        let calls = prompts.len();
        for p in &prompts {
            assert!(p.contains(question), "{mode}: question altered: {p}");
        }
        assert!(
            prompts.iter().any(|p| p.contains(doc.trim())),
            "{mode}: document altered: {prompts:?}"
        );
        assert!(calls > 0, "{mode}: no call traced: {trace}");
    }
}

#[test]
fn question_larger_than_the_window_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "doc.md", DOC);
    let question = "Why is the sky blue and the grass green? ".repeat(1500);
    for mode in [
        "compact",
        "refine",
        "tree_summarize",
        "simple_summarize",
        "accumulate",
        "compact_accumulate",
        "generation",
    ] {
        let out = run(dir.path(), &["ask", &question, "doc.md", "--mode", mode]);
        assert_error(
            &out,
            1,
            &[
                "before any context",
                "shorten the query",
                "--context-window",
            ],
            mode,
        );
    }
    let out = run(dir.path(), &["ask", &question, "doc.md", "--plan"]);
    assert_error(&out, 1, &["shorten the query"], "plan");
    // Modes that make no call answer anyway.
    for mode in ["no_text", "context_only"] {
        let out = run(dir.path(), &["ask", &question, "doc.md", "--mode", mode]);
        assert_no_panic(&out, mode);
        assert_eq!(out.status.code(), Some(0), "{mode}: {}", stderr(&out));
    }
}

// ------------------------------------------------------------------ --rpm / --tpm

#[test]
fn rate_limit_flags() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "doc.md", DOC);
    let q = "How often is the mirror cleaned?";
    // Generous limits: the same answer as without.
    let plain = run(dir.path(), &["ask", q, "doc.md", "-q"]);
    assert_ok(&plain, "plain");
    let limited = run(
        dir.path(),
        &[
            "ask",
            q,
            "doc.md",
            "-q",
            "--rpm",
            "600",
            "--tpm",
            "100000",
            "--concurrency",
            "2",
        ],
    );
    assert_ok(&limited, "limited");
    assert_eq!(stdout(&plain), stdout(&limited));
    // A call larger than the whole tokens-per-minute budget fails at once, naming --tpm.
    let start = Instant::now();
    let out = run(dir.path(), &["ask", q, "doc.md", "--tpm", "100"]);
    assert_error(
        &out,
        1,
        &["raise --tpm to at least", "--num-output"],
        "tpm 100",
    );
    assert!(start.elapsed() < Duration::from_secs(30));
    // Zero, negative and non-numbers are usage errors.
    for bad in [
        ["--rpm", "0"],
        ["--tpm", "0"],
        ["--rpm", "-5"],
        ["--tpm", "lots"],
        ["--tpm", "99999999999"],
    ] {
        // `--flag=value`, so that `-5` is a value and not a flag.
        let arg = format!("{}={}", bad[0], bad[1]);
        let out = run(dir.path(), &["ask", q, "doc.md", &arg]);
        assert_error(&out, 2, &[bad[0]], &bad.join(" "));
    }
}
