//! `synthkit tokens` and `synthkit split`: counts and chunks of files and standard input,
//! and their usage errors.

use synthkit::text::{BpeTokenizer, Tokenizer};

use crate::common::{on, stderr, stdout, synthkit, temp_file};

#[test]
fn tokens_counts_a_file_and_stdin() {
    let (_dir, f) = temp_file("t.txt", "hello world");
    let file = f.to_str().unwrap();
    // (arguments after `tokens`, standard input, the count printed; None: usage error)
    let cases: [(&[&str], &str, Option<&str>); 5] = [
        (&[file], "", Some("2\n")),
        (&[], "hello world", Some("2\n")),
        (&["-"], "hello world", Some("2\n")),
        (&["--tokenizer", "o200k_base"], "", Some("0\n")),
        (&["--tokenizer", "gpt2"], "x", None),
    ];
    for (args, input, count) in cases {
        let run = synthkit()
            .arg("tokens")
            .args(args)
            .write_stdin(input)
            .assert();
        match count {
            Some(count) => run.success().stdout(count),
            None => run.code(2),
        };
    }
}

#[test]
fn split_json_chunks_fit_the_size() {
    let text = "The quick brown fox jumps over the lazy dog. ".repeat(40)
        + "Supercalifragilistic words appear too.";
    let out = synthkit()
        .args(["split", "--chunk-size", "25", "--overlap", "5", "--json"])
        .write_stdin(text)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let chunks: Vec<String> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(chunks.len() > 10);
    let tok = BpeTokenizer::cl100k_base();
    for c in &chunks {
        assert!(
            tok.count(c) <= 25,
            "chunk of {} tokens: {c:?}",
            tok.count(c)
        );
        assert!(!c.trim().is_empty());
    }
}

#[test]
fn split_text_has_delimiters_and_default_overlap_is_capped() {
    let (_dir, f) = temp_file("t.md", "one two three four five six seven eight nine ten");
    // chunk size 5 < default overlap 20: the default is capped, not an error.
    let out = on(&f, &["split", "--chunk-size", "5"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("--- chunk 1/"), "{text}");
    assert!(
        text.lines().filter(|l| l.starts_with("--- chunk ")).count() >= 2,
        "{text}"
    );
    synthkit()
        .args(["split", "--chunk-size", "5", "--json"])
        .write_stdin("")
        .assert()
        .success()
        .stdout("[]\n");
}

#[test]
fn split_overlap_larger_than_size_is_a_usage_error() {
    let out = synthkit()
        .args(["split", "--chunk-size", "10", "--overlap", "20"])
        .write_stdin("some text")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.starts_with("error: "), "{err}");
    assert!(
        err.contains("chunk overlap (20) is larger than chunk size (10)"),
        "{err}"
    );
    synthkit()
        .args(["split", "--chunk-size", "0"])
        .write_stdin("x")
        .assert()
        .code(2);
}
