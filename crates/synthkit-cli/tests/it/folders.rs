//! Folders as users have them, through the binary (issue 23): `tokens` and `split` read
//! files as `ask` does, the file size limit is a flag, a documentation folder's assets and
//! copies are left out and named with `-v` (hidden and ignored files counted), `ask` keeps
//! the best chunks of a folder by default, a large run over a model asks for `--yes`,
//! markers of sources past 9,999 are citations, and the usage errors of an empty question
//! and duplicate node ids.

use std::path::Path;

use serde_json::Value;
use tempfile::TempDir;

use crate::common::{
    ask_on, assert_has, assert_stderr_has, closed_port, gzip, on, source_ids, stderr, stdout,
    synthkit, write,
};

/// A page of `n` sentences about `topic`, each its own.
fn prose(topic: &str, n: usize) -> String {
    (0..n)
        .map(|i| format!("Fact {i} about {topic} is recorded in this file and nowhere else. "))
        .collect()
}

#[test]
fn tokens_and_split_read_gz_and_refuse_binaries() {
    let dir = tempfile::tempdir().unwrap();
    let text = "The primary mirror is cleaned every three months.\n";
    let plain = write(dir.path(), "NEWS", text);
    let packed = write(dir.path(), "NEWS.gz", gzip(text.as_bytes()));
    let count = |p: &Path| {
        let out = synthkit().arg("tokens").arg(p).output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out).trim().to_string()
    };
    assert_eq!(count(&packed), count(&plain));
    let out = on(&packed, &["split", "--chunk-size", "5", "--json"]);
    let chunks: Vec<String> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(chunks.concat().contains("mirror is cleaned"), "{chunks:?}");

    // An ELF-like binary: refused, nothing counted.
    let elf = write(
        dir.path(),
        "tool",
        b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00binary",
    );
    for verb in [vec!["tokens"], vec!["split", "--chunk-size", "8"]] {
        let out = on(&elf, &verb);
        assert_eq!(out.status.code(), Some(1), "{verb:?}");
        assert!(stdout(&out).is_empty());
        assert_stderr_has(&out, "binary file, not text");
    }
}

#[test]
fn the_file_size_limit_is_a_flag() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "docs/small.md", "The dome opens at dusk.\n");
    write(dir.path(), "docs/big.md", prose("the archive", 200));
    let out = ask_on(
        &dir.path().join("docs"),
        "When does the dome open?",
        &["--max-file-size", "4K", "-v"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("big.md: too large (over 4 KiB"), "{err}");
    assert!(err.contains("1 too large"), "{err}");
    // tokens refuses a file over the limit, naming the flag.
    let out = on(
        &dir.path().join("docs/big.md"),
        &["tokens", "--max-file-size", "1K"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert_stderr_has(&out, "--max-file-size");
    // A size that is not one is a usage error.
    let out = synthkit()
        .args(["tokens", "--max-file-size", "12Q", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn an_empty_question_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.md", "The dome opens at dusk.\n");
    for q in ["", "   "] {
        let out = ask_on(dir.path(), q, &[]);
        assert_eq!(out.status.code(), Some(2), "{q:?}");
        assert_stderr_has(&out, "the question is empty");
    }
}

/// An mdBook build with assets and `print.html`, a hidden file and an ignored folder.
fn book() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let one = format!("<h1>Ownership</h1><p>{}</p>", prose("ownership", 30));
    let two = format!("<h1>Borrowing</h1><p>{}</p>", prose("borrowing", 30));
    let page = |body: &str| format!("<!DOCTYPE html><html><body><main>{body}</main></body></html>");
    write(root, "book/ch1.html", page(&one));
    write(root, "book/ch2.html", page(&two));
    write(root, "book/print.html", page(&format!("{one}{two}")));
    write(root, "book/book.css", "body { margin: 0; }\n");
    write(root, "book/book.js", "highlight();\n");
    write(
        root,
        "book/ferris.svg",
        "<svg xmlns=\"http://www.w3.org/2000/svg\"></svg>\n",
    );
    write(
        root,
        "book/.nojekyll",
        "This file makes sure that GitHub Pages does not process the site.\n",
    );
    write(root, "book/.gitignore", "drafts/\n");
    write(root, "book/drafts/next.md", "Unfinished.\n");
    dir
}

#[test]
fn assets_copies_hidden_and_ignored_files_are_counted_and_named_with_v() {
    let dir = book();
    let question = "What does fact 3 about ownership say?";
    let out = ask_on(&dir.path().join("book"), question, &["--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert_has(
        "standard error",
        &err,
        "read 2 files (4 skipped: 1 stylesheet, 1 script, 1 svg image, 1 copy; not visited: 2 hidden, 1 ignored; -v names them all)",
    );
    // Expected skips are not named without -v.
    assert!(!err.contains("print.html"), "{err}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids = source_ids(&v);
    assert!(ids.iter().all(|id| !id.contains("print.html")), "{ids:?}");

    let out = ask_on(&dir.path().join("book"), question, &["-v"]);
    let err = stderr(&out);
    for named in [
        "print.html: copy (",
        "book.css: not prose (stylesheet",
        "book.js: not prose (script",
        "ferris.svg: not prose (svg image",
        "not visiting hidden file",
        ".nojekyll (--hidden reads it)",
        "not visiting ignored folder",
        "drafts (--no-ignore reads it)",
    ] {
        assert!(err.contains(named), "{named}: {err}");
    }
    // --keep-all reads them all.
    let out = ask_on(&dir.path().join("book"), question, &["--keep-all", "-v"]);
    assert_stderr_has(&out, "read 6 files");
}

#[test]
fn ask_keeps_the_best_chunks_of_a_folder_by_default() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..30 {
        write(
            dir.path(),
            &format!("docs/{i:02}.md"),
            // Every file shares "primary" with the question: ranked, none has no relevance.
            prose(&format!("primary topic{i}"), 3),
        );
    }
    write(
        dir.path(),
        "docs/mirror.md",
        "The primary mirror is cleaned every three months.\n",
    );
    let run = |extra: &[&str]| {
        let out = synthkit()
            .args(["ask", "How often is the primary mirror cleaned?", "--json"])
            .args(extra)
            .arg(dir.path().join("docs"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        (v, stderr(&out))
    };
    let (v, err) = run(&[]);
    assert_eq!(v["sources"].as_array().unwrap().len(), 20);
    assert_eq!(
        v["answer"],
        "The primary mirror is cleaned every three months."
    );
    assert_has(
        "standard error",
        &err,
        "kept the 20 chunks most relevant to the question of 31",
    );
    let (v, err) = run(&["--top-k", "all"]);
    assert_eq!(v["sources"].as_array().unwrap().len(), 31);
    assert!(!err.contains("kept the"), "{err}");
    let (v, _) = run(&["--top-k", "3"]);
    assert_eq!(v["sources"].as_array().unwrap().len(), 3);
    // summarize keeps everything.
    let out = on(&dir.path().join("docs"), &["summarize", "--json", "-q"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["sources"].as_array().unwrap().len(), 31);
}

#[test]
fn a_large_run_over_a_model_prints_its_plan_and_asks_for_yes() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "docs/a.md", prose("the mirror", 60));
    // Nothing listens there: a call would fail with a connection error.
    let url = format!("http://127.0.0.1:{}/v1", closed_port());
    let run = |extra: &[&str]| {
        let calls = if extra.contains(&"--max-total-prompt-tokens") {
            "1000"
        } else {
            "3"
        };
        synthkit()
            .args(["ask", "How often is the mirror cleaned?", "--llm", "openai"])
            .args([
                "--base-url",
                &url,
                "--model",
                "m",
                "--context-window",
                "1024",
            ])
            .args([
                "--mode",
                "refine",
                "--chunk-size",
                "64",
                "--max-calls",
                calls,
            ])
            .args(["--evidence", "off"])
            .args(extra)
            .arg(dir.path().join("docs"))
            .output()
            .unwrap()
    };
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("not started: this run needs"), "{err}");
    assert!(err.contains("model calls (--max-calls 3)"), "{err}");
    assert!(err.contains("pass --yes to run it"), "{err}");
    assert!(err.contains("step") && err.contains("refine"), "{err}");
    assert!(stdout(&out).is_empty());
    // With --yes it starts, and meets the closed port.
    let out = run(&["--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(!stderr(&out).contains("not started"), "{}", stderr(&out));
    // The token threshold alone refuses too.
    let out = run(&["--max-total-prompt-tokens", "100"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("prompt tokens (--max-total-prompt-tokens 100)"));
}

#[test]
fn a_source_past_9999_is_cited_not_leaked() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = String::new();
    for i in 1..=12_000 {
        let text = if i == 11_234 {
            "The primary mirror is cleaned every three months.".to_string()
        } else {
            format!("Record {i} lists a cable of the dome.")
        };
        lines.push_str(&serde_json::json!({"id": format!("n{i}"), "text": text}).to_string());
        lines.push('\n');
    }
    let nodes = write(dir.path(), "nodes.jsonl", lines);
    for cite in [true, false] {
        let mut cmd = synthkit();
        cmd.args(["ask", "How often is the primary mirror cleaned?", "--nodes"])
            .arg(&nodes);
        if cite {
            cmd.arg("--cite");
        }
        let out = cmd.arg("-q").output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let text = stdout(&out);
        assert!(!text.contains("[11234]"), "{text}");
        assert!(!text.contains("No source was cited"), "{text}");
        assert!(text.contains("n11234"), "{text}");
        if cite {
            assert!(
                text.starts_with("The primary mirror is cleaned every three months [1]."),
                "{text}"
            );
        }
    }
}

#[test]
fn duplicate_node_ids_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    // Two nodes of one --nodes file with one id: the file is bad input (exit 1), and the
    // message names the line, the node and the id.
    let nodes = write(
        dir.path(),
        "nodes.json",
        r#"[{"id": "a", "text": "The dome opens at dusk."}, {"id": "a", "text": "The mirror is cleaned monthly."}]"#,
    );
    let out = ask_on(&nodes, "When does the dome open?", &["--nodes"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("line 1") && err.contains(r#"node 2 has the id "a", as node 1 does"#),
        "{err}"
    );

    // A --nodes id equal to the PATH#N id of a chunk of a file read beside it: the command
    // line asks for two sources with one name, a usage error (exit 2).
    write(dir.path(), "a.md", "The dome opens at dusk.\n");
    let clash = write(
        dir.path(),
        "clash.json",
        r#"[{"id": "a.md#1", "text": "The mirror is cleaned monthly."}]"#,
    );
    let out = synthkit()
        .current_dir(dir.path())
        .args(["ask", "When does the dome open?", "a.md", "--nodes"])
        .arg(&clash)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("`a.md#1`") && err.contains("PATH#N"), "{err}");
}

#[test]
fn grounded_is_false_where_no_source_is_used() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "a.md",
        "The primary mirror is cleaned every three months.\n",
    );
    let grounded = |mode: &str| {
        let out = synthkit()
            .args([
                "ask",
                "How often is the primary mirror cleaned?",
                "--json",
                "-q",
            ])
            .args(["--mode", mode])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["grounded"].clone()
    };
    assert_eq!(grounded("generation"), Value::Bool(false));
    assert_eq!(grounded("no_text"), Value::Bool(false));
    assert_eq!(grounded("compact"), Value::Bool(true));
    assert_eq!(grounded("context_only"), Value::Bool(true));
}

#[test]
fn folder_top_k_never_sends_a_chunk_with_no_relevance() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "docs/mirror.md",
        "The primary mirror is cleaned every three months.\n",
    );
    write(
        dir.path(),
        "docs/cafe.md",
        "Visitors park behind the cafe.\n",
    );
    let ask = |question: &str| {
        synthkit()
            // Ranked: a folder of more chunks than the top-k is ranked likewise.
            .args(["ask", question, "--json", "--top-k", "5"])
            .arg(dir.path().join("docs"))
            .output()
            .unwrap()
    };
    let out = ask("How often is the primary mirror cleaned?");
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let sources = v["sources"].as_array().unwrap();
    assert_eq!(sources.len(), 1, "{v}");
    assert!(sources[0].to_string().contains("mirror.md"), "{v}");
    assert!(!v.to_string().contains("cafe"), "{v}");
    // Nothing relevant: nothing is sent, and the answer says the sources do not answer
    // (exit 0, `answerable: false`), with the reason on stderr.
    let out = ask("Where do zebras sleep?");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_stderr_has(&out, "none of the 2 chunks read shares a word");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["answerable"], false, "{v}");
    assert_eq!(
        v["answer"], "The sources do not answer this question.",
        "{v}"
    );
    assert_eq!(v["sources"].as_array().map(Vec::len), Some(0), "{v}");
}
