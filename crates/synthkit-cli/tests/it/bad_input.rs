//! Bad input through the `synthkit` binary (offline extractive backend): files that are
//! not UTF-8, binary files, empty folders, a huge single-line file, broken templates,
//! impossible windows, braces in documents and questions, a question larger than the
//! window, and the `--rpm`/`--tpm` limits (malformed `--nodes` files: `bad_nodes`).
//!
//! Every case checks the same contract: no panic (exit code never 101, no "panicked" on
//! standard error), the documented exit code (0 success, 1 failure, 2 usage), and for
//! failures an `error:` line on standard error that says what to change.

use std::process::Output;
use std::time::Instant;

use serde_json::Value;

use crate::bad_nodes::Rng;
use crate::common::{
    assert_has, assert_stdout_has, run_in as run, stderr, stdout, synthkit, write,
};

const DOC: &str = "The primary mirror is cleaned every three months with carbon dioxide snow. \
The dome motors are greased every year.\n";

/// No panic, whatever happened.
pub fn assert_no_panic(out: &Output, what: &str) {
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
pub fn assert_ok(out: &Output, what: &str) {
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
pub fn assert_error(out: &Output, code: i32, needles: &[&str], what: &str) -> String {
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
        assert_stdout_has(&out, "\u{e9}very three months");
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
    assert_has(
        "standard error",
        &err,
        "note: skipping binary file docs/image.txt",
    );
    assert_has(
        "standard error",
        &err,
        "note: skipping binary file docs/blob",
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
        // Shown, not asserted: a test never fails on speed (it took 25-28 s here with a
        // model server beside it, and failed a 90 s limit once under two builds).
        println!("huge single line ({mode}): {:.1}s", took.as_secs_f64());
        assert_no_panic(&out, mode);
        assert_eq!(out.status.code(), Some(0), "{mode}: {}", stderr(&out));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(!report["answer"].as_str().unwrap().is_empty());
        assert!(report["sources"].as_array().unwrap().len() > 1000);
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
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            // The last line is the run's record (`run`), not a call.
            .filter(|v| v.get("call").is_some())
            .map(|v| v["prompt"].as_str().unwrap().to_string())
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
    // A call larger than the whole tokens-per-minute budget fails, naming --tpm. (That it
    // fails at once, with no wait for the budget, is the limiter's test on tokio's paused
    // clock: `limit::oversized_call_errors_instead_of_hanging` in the library's tests.
    // Here a wait would be a hang, which the binary's safety timeout turns into a failure.)
    let out = run(dir.path(), &["ask", q, "doc.md", "--tpm", "100"]);
    assert_error(
        &out,
        1,
        &["raise --tpm to at least", "--num-output"],
        "tpm 100",
    );
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
