//! `--cite=quotes` (and `--cite-quotes`): the prompt asks for quoted citations, `--json`
//! shows each quote's status and character offsets and the numbers no cited source has,
//! and `eval` records and tabulates quote statuses; a bare `--cite` still means markers
//! and never takes the next argument.

use std::path::Path;

use serde_json::{Value, json};
use synthkit_testkit::{FakeConfig, FakeOpenAi};

use crate::common::{json_of, stderr, stdout, synthkit, write};

/// Non-ASCII text before the quoted words: character and byte offsets differ.
const NOTE: &str = "Größe: 4 Meter — the mirror is cleaned every three months.";
/// A verified quote, a fabricated one, and a number the source lacks.
const REPLY: &str = "Every three months [1] \"the mirror is cleaned every three months\", by 5 people [1] \"by five people\".";

fn docs(dir: &Path) {
    write(dir, "note.md", format!("{NOTE}\n"));
}

fn ask(server: &FakeOpenAi, dir: &Path, extra: &[&str]) -> std::process::Output {
    synthkit()
        .args(["ask", "How often is the mirror cleaned?"])
        .arg(dir)
        .args(["--base-url", &server.base, "--retries", "1", "-q"])
        .args(["--context-window", "2048", "--num-output", "64"])
        .args(extra)
        .output()
        .unwrap()
}

fn chars(text: &str, start: u64, end: u64) -> String {
    text.chars()
        .skip(start as usize)
        .take((end - start) as usize)
        .collect()
}

#[test]
fn cite_quotes_json_shows_each_quote_with_status_and_character_offsets() {
    let server = FakeOpenAi::start(FakeConfig::replying(REPLY));
    let dir = tempfile::tempdir().unwrap();
    docs(dir.path());
    for flag in ["--cite=quotes", "--cite-quotes"] {
        let v = json_of(&ask(&server, dir.path(), &[flag, "--json"]));
        let quotes = v["quotes"].as_array().unwrap_or_else(|| panic!("{v:#}"));
        assert_eq!(quotes.len(), 2, "{v:#}");
        assert_eq!(quotes[0]["status"], "verified");
        let (start, end) = (
            quotes[0]["start"].as_u64().unwrap(),
            quotes[0]["end"].as_u64().unwrap(),
        );
        assert_eq!(
            chars(NOTE, start, end),
            "the mirror is cleaned every three months"
        );
        assert_eq!(quotes[1]["status"], "not_found");
        assert_eq!(quotes[1]["start"], Value::Null);
        assert_eq!(v["unsupported_numbers"][0]["number"], "5", "{v:#}");
        // The quotes stay in the answer as written.
        assert_eq!(v["answer"], REPLY);
    }
    let body = server.bodies().last().unwrap().to_string();
    assert!(body.contains("exact words from source n"), "{body}");
}

#[test]
fn a_bare_cite_still_means_markers_and_checks_no_quotes() {
    let server = FakeOpenAi::start(FakeConfig::replying(REPLY));
    let dir = tempfile::tempdir().unwrap();
    docs(dir.path());
    // `--cite` before the folder: the folder stays a positional argument.
    let out = synthkit()
        .args(["ask", "How often is the mirror cleaned?", "--cite"])
        .arg(dir.path())
        .args(["--base-url", &server.base, "--retries", "1", "-q", "--json"])
        .args(["--context-window", "2048", "--num-output", "64"])
        .output()
        .unwrap();
    let v = json_of(&out);
    assert!(v.get("quotes").is_none(), "{v:#}");
    assert_eq!(v["citations"][0]["marker"], 1);
    let body = server.bodies().last().unwrap().to_string();
    assert!(!body.contains("exact words"), "{body}");
    // An unknown style is refused with a usage error.
    let bad = ask(&server, dir.path(), &["--cite=pages"]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
}

#[test]
fn eval_cite_quotes_records_quote_statuses_per_row_and_in_the_table() {
    let server = FakeOpenAi::start(FakeConfig::replying(REPLY));
    let dir = tempfile::tempdir().unwrap();
    let case = json!({"id": "q1", "query": "How often?", "nodes": [{"id": "n", "text": NOTE}],
                      "answers": ["three months"], "evidence": ["n"]});
    let cases = write(dir.path(), "cases.jsonl", format!("{case}\n"));
    let run = |extra: &[&str]| {
        synthkit()
            .args(["eval", "-q", "--cite=quotes", "--base-url", &server.base])
            .args(["--model", "fake-model", "--retries", "1"])
            .args(["--evidence", "off"])
            .args(["--context-window", "2048", "--num-output", "64"])
            .args(extra)
            .arg(&cases)
            .output()
            .unwrap()
    };
    let report = json_of(&run(&["--json"]));
    let row = &report["rows"][0];
    assert_eq!(
        row["quotes"],
        json!({"verified": 1, "misattributed": 0, "not_found": 1}),
        "{report:#}"
    );
    let out = run(&[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let table = stdout(&out);
    assert!(table.contains("quotes v/m/nf"), "{table}");
    assert!(table.contains("1/0/1"), "{table}");
}

#[test]
fn cite_quotes_json_lists_unchecked_quotes_with_their_reason_and_counts_removed_markers() {
    // A one-letter quote, a curly quote closed by a straight mark, a whole-word miss, and
    // more markers naming unseen sources than are listed.
    let reply = format!(
        "Cleaned [1] \"a\", every [1] \u{201C}three months\", by [1] \"irror is cleaned\".{}",
        " [9]".repeat(100)
    );
    let server = FakeOpenAi::start(FakeConfig::replying(&reply));
    let dir = tempfile::tempdir().unwrap();
    docs(dir.path());
    let v = json_of(&ask(&server, dir.path(), &["--cite=quotes", "--json"]));
    let quotes = v["quotes"].as_array().unwrap_or_else(|| panic!("{v:#}"));
    let got: Vec<(&str, &str)> = quotes
        .iter()
        .map(|q| {
            let reason = q.get("reason").and_then(Value::as_str).unwrap_or("-");
            (q["status"].as_str().unwrap(), reason)
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("unchecked", "too_short"),
            ("unchecked", "unclosed"),
            ("not_found", "-")
        ],
        "{v:#}"
    );
    assert_eq!(v["citations"], json!([]), "no quote supports [1]: {v:#}");
    assert_eq!(v["citations_removed"].as_array().unwrap().len(), 64);
    assert_eq!(v["citations_removed_count"], 100);
}

#[test]
fn with_evidence_a_bare_marker_is_shown_with_its_verified_quote() {
    // A small model cites by number and copies no words.
    let server = FakeOpenAi::start(FakeConfig::replying("Every three months [1]."));
    let dir = tempfile::tempdir().unwrap();
    docs(dir.path());
    let out = ask(&server, dir.path(), &["--cite=quotes", "--evidence", "on"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}{}", stderr(&out));
    let line = text
        .lines()
        .find(|l| l.contains("(verified, from the evidence"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("the mirror is cleaned every three months."),
        "{line}"
    );
    let v = json_of(&ask(
        &server,
        dir.path(),
        &["--cite=quotes", "--evidence", "on", "--json"],
    ));
    let q = &v["quotes"][0];
    assert_eq!(
        (q["status"].as_str(), q["origin"].as_str()),
        (Some("verified"), Some("evidence")),
        "{v:#}"
    );
    let at = chars(
        NOTE,
        q["start"].as_u64().unwrap(),
        q["end"].as_u64().unwrap(),
    );
    assert_eq!(at, q["quote"].as_str().unwrap());
    // The answer stays as the model wrote it.
    assert_eq!(v["answer"], "Every three months [1].");
}
