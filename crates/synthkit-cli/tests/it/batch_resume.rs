//! `synthkit batch` run again over its own output: a cut output and a batch killed with
//! `kill -9` resume with every id once, an outage (the server down, then up: transient
//! failures retried, one line per id) and a batch killed while retrying, and a changed
//! input found by the request hashes.
//!
//! Every wait is bounded; the kill comes once the output holds some lines (a polled file
//! with a deadline), and the checks after it are counts, not timings.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use synthkit_testkit::{FakeConfig, FakeOpenAi};

use crate::batch_common::{
    RUN_TIMEOUT, batch, batch_with_notes, ids, line, numbered, results, run, slow_fake, write_lines,
};
use crate::common::{assert_stderr_has, stderr};

/// Each id and how many lines carry it.
fn id_counts(results: &[Value]) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for r in results {
        *counts.entry(r["id"].to_string()).or_default() += 1;
    }
    counts
}

/// Polls until `path` holds at least `n` complete lines; false past `deadline`.
fn wait_for_lines(path: &Path, n: usize, deadline: Instant, child: &mut Child) -> bool {
    while Instant::now() < deadline {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.matches('\n').count() >= n {
            return true;
        }
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

/// Every output line: one per id, in this order, each answering the input line it
/// names (its source node is the fact of its question).
fn assert_one_answer_per_id(results: &[Value], expected: &[(Value, &str)]) {
    let got: Vec<Value> = ids(results);
    let want: Vec<Value> = expected.iter().map(|(id, _)| id.clone()).collect();
    assert_eq!(got, want);
    for (r, (_, query)) in results.iter().zip(expected) {
        assert_eq!(
            r["response"]["source_nodes"][0]["text"],
            json!(format!("A fact about {query}.")),
            "{r}"
        );
    }
}

/// [`assert_one_answer_per_id`] for the lines of [`numbered`]`(n)`: ids `q0`, `q1`, ...
/// in order, each answering its question.
fn assert_numbered_answers(results: &[Value], n: usize) {
    let expected: Vec<(Value, String)> = (0..n)
        .map(|i| (json!(format!("q{i}")), format!("question {i}")))
        .collect();
    let expected: Vec<(Value, &str)> = expected
        .iter()
        .map(|(id, q)| (id.clone(), q.as_str()))
        .collect();
    assert_one_answer_per_id(results, &expected);
}

#[test]
fn a_cut_output_resumes_with_every_id_once() {
    let fake = FakeOpenAi::start(FakeConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let input = write_lines(dir.path(), "in.jsonl", &numbered(6));
    let output = dir.path().join("out.jsonl");
    let out = run(&mut batch(&fake, &input, &output));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(fake.requests(), 6);
    // Cut the output in the middle of its fourth line.
    let text = std::fs::read_to_string(&output).unwrap();
    let third_end = text.match_indices('\n').nth(2).unwrap().0 + 1;
    std::fs::write(&output, &text[..third_end + 10]).unwrap();

    let out = run(&mut batch(&fake, &input, &output));
    assert!(out.status.success(), "{}", stderr(&out));
    let results = results(&output);
    let expected: Vec<Value> = (0..6).map(|i| json!(format!("q{i}"))).collect();
    assert_eq!(ids(&results), expected);
    assert_eq!(
        fake.requests(),
        6 + 3,
        "only the lines not in OUT ran again"
    );
    assert_stderr_has(&out, "3 already in");
}

#[test]
fn a_killed_batch_resumes_from_the_cache() {
    const LINES: usize = 24;
    const JOBS: usize = 3;
    let fake = slow_fake(150);
    let dir = tempfile::tempdir().unwrap();
    let input = write_lines(dir.path(), "in.jsonl", &numbered(LINES));
    let output = dir.path().join("out.jsonl");
    let cache = dir.path().join("cache.sqlite");
    let mut cmd = batch(&fake, &input, &output);
    cmd.args(["--jobs", &JOBS.to_string()])
        .arg("--cache")
        .arg(&cache)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let written = wait_for_lines(&output, 6, Instant::now() + RUN_TIMEOUT, &mut child);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(written, "the batch wrote too few lines before the deadline");
    let first_run = fake.requests();
    let kept = results(&output).len();
    assert!(kept < LINES, "the batch finished before the kill");

    fake.set(FakeConfig::default());
    let out = run(batch(&fake, &input, &output)
        .args(["--jobs", &JOBS.to_string()])
        .arg("--cache")
        .arg(&cache));
    assert!(out.status.success(), "{}", stderr(&out));
    let results = results(&output);
    let counts = id_counts(&results);
    assert_eq!(results.len(), LINES, "{counts:?}");
    assert!(counts.values().all(|&n| n == 1), "{counts:?}");
    // One call per line: only the calls in flight at the kill were sent twice.
    let repeated = fake.requests() - LINES;
    assert!(
        repeated <= JOBS,
        "{repeated} calls sent twice (first run {first_run}, {kept} lines kept)"
    );
    let mut prompts: HashMap<String, usize> = HashMap::new();
    for body in fake.bodies() {
        *prompts.entry(body["messages"].to_string()).or_default() += 1;
    }
    assert_eq!(prompts.len(), LINES);
}

#[test]
fn an_outage_is_retried_once_the_server_is_back() {
    const LINES: usize = 20;
    let mut fake = FakeOpenAi::start(FakeConfig::default());
    fake.stop(); // down: connections refused
    let dir = tempfile::tempdir().unwrap();
    let mut lines = numbered(LINES);
    lines.push("not json at all".into()); // line 21: an input error, kept as it is
    let input = write_lines(dir.path(), "in.jsonl", &lines);
    let output = dir.path().join("out.jsonl");
    let down = run(batch(&fake, &input, &output).args(["--retries", "1"]));
    assert_eq!(down.status.code(), Some(1), "{}", stderr(&down));
    let first = results(&output);
    assert_eq!(first.len(), LINES + 1);
    for r in &first[..LINES] {
        assert_eq!(r["error"]["kind"], "model_error", "{r}");
        assert_eq!(r["error"]["transient"], "transport", "{r}");
    }
    assert_eq!(first[LINES]["error"]["kind"], "invalid_request");
    assert!(first[LINES]["error"].get("transient").is_none());

    // `--no-retry-failed` keeps the error lines: no call, and a failed exit.
    fake.restart();
    let kept = run(batch(&fake, &input, &output).arg("--no-retry-failed"));
    assert_eq!(kept.status.code(), Some(1), "{}", stderr(&kept));
    assert_eq!(fake.requests(), 0);
    assert_stderr_has(&kept, "21 lines of ");

    // Up again: the 20 transient failures run again, the input error stays.
    let up = run(&mut batch_with_notes(&fake, &input, &output));
    let err = stderr(&up);
    assert!(
        err.contains("1 result kept (an error line, not retried: 1 invalid_request)"),
        "{err}"
    );
    assert!(
        err.contains("20 failed lines to retry (model_error: transport)"),
        "{err}"
    );
    assert_eq!(fake.requests(), LINES);
    // OUT holds an error line still (line 21): the exit says so.
    assert_eq!(up.status.code(), Some(1), "{err}");
    assert!(
        err.contains("1 line of ") && err.contains("is an error line"),
        "{err}"
    );
    let after = results(&output);
    assert_numbered_answers(&after[..LINES], LINES);
    assert_eq!(after.len(), LINES + 1);
    assert_eq!(after[LINES]["id"], json!(21));
    assert_eq!(after[LINES]["error"]["kind"], "invalid_request");

    // Once more: nothing to do, and still a failed exit while OUT holds an error line.
    let again = run(&mut batch(&fake, &input, &output));
    assert_eq!(again.status.code(), Some(1), "{}", stderr(&again));
    assert_eq!(fake.requests(), LINES);
    assert_eq!(results(&output).len(), LINES + 1);
}

#[test]
fn a_batch_killed_while_retrying_resumes_with_one_line_per_id() {
    const LINES: usize = 16;
    const JOBS: usize = 2;
    let mut fake = slow_fake(150);
    fake.stop();
    let dir = tempfile::tempdir().unwrap();
    let input = write_lines(dir.path(), "in.jsonl", &numbered(LINES));
    let output = dir.path().join("out.jsonl");
    let down = run(batch(&fake, &input, &output).args(["--retries", "1"]));
    assert_eq!(down.status.code(), Some(1), "{}", stderr(&down));
    assert_eq!(results(&output).len(), LINES);

    // The server is back, slow; the retrying run is killed part-way: its new results
    // were appended after the old error lines.
    fake.restart();
    let mut child = batch(&fake, &input, &output)
        .args(["--jobs", &JOBS.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let grown = wait_for_lines(&output, LINES + 4, Instant::now() + RUN_TIMEOUT, &mut child);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(
        grown,
        "the retrying run wrote too few lines before the deadline"
    );
    let answered_before = results(&output).len() - LINES;
    assert!(
        answered_before < LINES,
        "the retrying run finished before the kill"
    );

    fake.set(FakeConfig::default());
    let out = run(batch_with_notes(&fake, &input, &output).args(["--jobs", &JOBS.to_string()]));
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!(": {answered_before} result")),
        "{err}"
    );
    assert_numbered_answers(&results(&output), LINES);
    // Only the calls in flight at the kill were sent twice.
    let repeated = fake.requests() - LINES;
    assert!(repeated <= JOBS, "{repeated} calls sent twice");
    assert!(!dir.path().join(".out.jsonl.compacting").exists());
}

#[test]
fn a_line_inserted_on_top_is_asked_and_answers_stay_with_their_questions() {
    let fake = FakeOpenAi::start(FakeConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let questions = ["second", "third", "fourth"];
    let lines: Vec<String> = questions.iter().map(|q| line(None, q)).collect();
    let input = write_lines(dir.path(), "in.jsonl", &lines);
    let output = dir.path().join("out.jsonl");
    let out = run(&mut batch(&fake, &input, &output));
    assert!(out.status.success(), "{}", stderr(&out));
    let first = results(&output);
    let hash = first[0]["request_sha256"].as_str().unwrap().to_string();
    assert_eq!(hash.len(), 64, "{}", first[0]);
    assert_eq!(fake.requests(), 3);

    // A new question on top: every line without an id is now named by another number.
    let mut lines = lines;
    lines.insert(0, line(None, "first"));
    let input = write_lines(dir.path(), "in.jsonl", &lines);
    let out = run(&mut batch_with_notes(&fake, &input, &output));
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("3 lines whose request changed since its result to run again"),
        "{err}"
    );
    assert_eq!(fake.requests(), 3 + 4);
    let after = results(&output);
    let expected = [
        (json!(1), "first"),
        (json!(2), "second"),
        (json!(3), "third"),
        (json!(4), "fourth"),
    ];
    assert_one_answer_per_id(&after, &expected);
    // The unchanged request of "second" hashes as before, under its new id.
    assert_eq!(after[1]["request_sha256"], json!(hash));

    // Unchanged: nothing runs.
    let out = run(&mut batch_with_notes(&fake, &input, &output));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(fake.requests(), 7);
    assert_stderr_has(&out, "4 results kept");
}
