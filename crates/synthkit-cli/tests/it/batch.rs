//! `synthkit batch`: JSON lines in, one result line per request out, against loopback
//! fake models ([`synthkit_testkit::FakeOpenAi`]). Output order and ids, bad lines, an
//! empty input, resuming after a cut output and after `kill -9`, resuming after an
//! outage (the server down, then up: transient failures retried, one line per id),
//! changed lines (request hashes), duplicate ids, `--unordered`, `--jobs`, `--plan`, and
//! a 10,000-line batch in bounded memory.
//!
//! Every wait is bounded; the kill comes once the output holds some lines (a polled file
//! with a deadline), and the checks after it are counts, not timings.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use synthkit_testkit::{FakeConfig, FakeOpenAi};

use crate::common::{assert_stderr_has, cpu_ticks, stderr, wait_while_progressing};

/// How long one run of the binary may go on before the test calls it hung (the
/// 10,000-line run is only called hung when it stops making progress): a safety net no
/// healthy run comes near, not a bound on its speed.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// `synthkit batch IN -o OUT --quiet` against `fake`, with no model settings from the
/// environment.
fn batch(fake: &FakeOpenAi, input: &Path, output: &Path) -> Command {
    let mut cmd = batch_with_notes(fake, input, output);
    cmd.arg("--quiet");
    cmd
}

/// [`batch`] without `--quiet`: with its notes (the resume's) on standard error.
fn batch_with_notes(fake: &FakeOpenAi, input: &Path, output: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_synthkit"));
    cmd.env_remove("SYNTHKIT_BASE_URL")
        .env_remove("SYNTHKIT_MODEL")
        .env_remove("SYNTHKIT_API")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .arg("batch")
        .arg(input)
        .arg("-o")
        .arg(output)
        .args(["--llm", "openai", "--base-url", &fake.base])
        .args(["--model", "fake-model", "--context-window", "2048"])
        .args(["--num-output", "64", "--timeout", "20"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Runs `cmd` to its end, at most `limit` (killed past it).
fn finish(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd.spawn().unwrap();
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "synthkit batch did not finish within {limit:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

fn run(cmd: &mut Command) -> Output {
    finish(cmd, RUN_TIMEOUT)
}

/// The output's lines as JSON.
fn results(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn ids(results: &[Value]) -> Vec<Value> {
    results.iter().map(|r| r["id"].clone()).collect()
}

/// Each id and how many lines carry it.
fn id_counts(results: &[Value]) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for r in results {
        *counts.entry(r["id"].to_string()).or_default() += 1;
    }
    counts
}

/// A request asking `query` of one short node.
fn line(id: Option<Value>, query: &str) -> String {
    let mut request = json!({"query": query, "nodes": [format!("A fact about {query}.")]});
    if let Some(id) = id {
        request["id"] = id;
    }
    request.to_string()
}

fn write_lines(dir: &Path, name: &str, lines: &[String]) -> PathBuf {
    let path = dir.join(name);
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(&path, text).unwrap();
    path
}

/// A fake answering every call after `ms` milliseconds.
fn slow_fake(ms: u64) -> FakeOpenAi {
    FakeOpenAi::start(FakeConfig {
        delay: Duration::from_millis(ms),
        ..FakeConfig::default()
    })
}

/// `n` one-call requests with ids `q0`, `q1`, ...
fn numbered(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| line(Some(json!(format!("q{i}"))), &format!("question {i}")))
        .collect()
}

#[test]
fn results_keep_the_input_order_and_ids() {
    let fake = FakeOpenAi::start(FakeConfig::replying("Answered."));
    let dir = tempfile::tempdir().unwrap();
    let lines = vec![
        line(Some(json!("a")), "first"),
        line(None, "second"),
        String::new(),
        line(Some(json!(7)), "fourth"),
        line(None, "fifth"),
    ];
    let input = write_lines(dir.path(), "in.jsonl", &lines);
    let output = dir.path().join("out.jsonl");
    let out = run(batch(&fake, &input, &output).args([
        "--jobs",
        "3",
        "--evidence",
        "off",
        "--on-unsupported",
        "warn",
    ]));
    assert!(out.status.success(), "{}", stderr(&out));
    let results = results(&output);
    // The default id is the line number (the blank line 3 counts, and is skipped).
    assert_eq!(ids(&results), [json!("a"), json!(2), json!(7), json!(5)]);
    // The response is the service's: synthkit::Response as JSON.
    let response = &results[0]["response"];
    let mut keys: Vec<&str> = response
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "answerable",
            "citations",
            "grounding",
            "metadata",
            "source_nodes",
            "structured",
            "text",
            "truncation",
            "usage"
        ]
    );
    assert_eq!(response["text"], "Answered.");
    assert_eq!(response["source_nodes"][0]["text"], "A fact about first.");
    assert_eq!(fake.requests(), 4);
    assert_stderr_has(&out, "batch: 4 lines: 4 answered, 0 failed");
}

#[test]
fn a_bad_line_becomes_an_error_line_and_the_batch_goes_on() {
    let fake = FakeOpenAi::start(FakeConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let lines = vec![
        line(Some(json!("a")), "first"),
        "{\"query\": \"x\", \"nodes\": [\"n\"], \"oops\": 1}".to_string(),
        "not json at all".to_string(),
        line(Some(json!(["a"])), "again"),
        line(Some(json!("d")), "last"),
    ];
    let input = write_lines(dir.path(), "in.jsonl", &lines);
    let output = dir.path().join("out.jsonl");
    let out = run(&mut batch(&fake, &input, &output));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let results = results(&output);
    assert_eq!(
        ids(&results),
        [json!("a"), json!(2), json!(3), json!(4), json!("d")]
    );
    for (i, r) in results.iter().enumerate() {
        let bad = (1..=3).contains(&i);
        assert_eq!(r.get("error").is_some(), bad, "line {}: {r}", i + 1);
        assert_eq!(r.get("response").is_some(), !bad, "line {}: {r}", i + 1);
    }
    let message = |i: usize| results[i]["error"]["message"].as_str().unwrap().to_string();
    assert_eq!(results[1]["error"]["kind"], "invalid_request");
    assert!(message(1).starts_with("line 2: ") && message(1).contains("oops"));
    assert!(message(2).starts_with("line 3: not JSON"), "{}", message(2));
    assert!(message(3).contains("`id` must be"), "{}", message(3));
    assert_eq!(fake.requests(), 2);
    let err = stderr(&out);
    assert!(err.contains("2 answered, 3 failed"), "{err}");
}

#[test]
fn an_empty_input_is_an_empty_output() {
    let fake = FakeOpenAi::start(FakeConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, "").unwrap();
    let output = dir.path().join("out.jsonl");
    let out = run(&mut batch(&fake, &input, &output));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&output).unwrap(), "");
    assert_stderr_has(&out, "batch: 0 lines");
    assert_eq!(fake.requests(), 0);

    // An unreadable input is a usage error.
    let missing = dir.path().join("missing.jsonl");
    let out = run(&mut batch(&fake, &missing, &output));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
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

/// Line 1 takes three calls (refine over three nodes), the others one each.
fn slow_first(dir: &Path) -> PathBuf {
    let mut lines = numbered(4);
    lines[0] = json!({"id": "q0", "query": "slow", "mode": "refine",
        "nodes": ["one fact.", "two facts.", "three facts."]})
    .to_string();
    write_lines(dir, "in.jsonl", &lines)
}

#[test]
fn unordered_writes_results_as_they_finish() {
    let fake = slow_fake(200);
    let dir = tempfile::tempdir().unwrap();
    let input = slow_first(dir.path());
    let output = dir.path().join("out.jsonl");
    let out = run(batch(&fake, &input, &output)
        .args(["--jobs", "4", "--unordered"])
        .args(["--evidence", "off"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let got = ids(&results(&output));
    assert_eq!(got.len(), 4);
    // Three 200 ms calls in a row finish after three single calls started with them.
    assert_eq!(got[3], json!("q0"), "{got:?}");

    let ordered = dir.path().join("ordered.jsonl");
    let out = run(batch(&fake, &input, &ordered).args(["--jobs", "4", "--evidence", "off"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let got = ids(&results(&ordered));
    assert_eq!(got, [json!("q0"), json!("q1"), json!("q2"), json!("q3")]);
}

#[test]
fn jobs_bound_the_syntheses_at_once() {
    let fake = slow_fake(200);
    let dir = tempfile::tempdir().unwrap();
    let input = write_lines(dir.path(), "in.jsonl", &numbered(9));
    for jobs in [1usize, 3] {
        let output = dir.path().join(format!("out{jobs}.jsonl"));
        let before = fake.requests();
        let mut child = batch(&fake, &input, &output)
            .args(["--jobs", &jobs.to_string()])
            .spawn()
            .unwrap();
        let deadline = Instant::now() + RUN_TIMEOUT;
        let mut peak = 0;
        while child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "the batch did not finish");
            peak = peak.max(fake.requests() - fake.finished());
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(child.wait().unwrap().success());
        assert_eq!(fake.requests() - before, 9);
        assert!(peak <= jobs, "{peak} calls at once with --jobs {jobs}");
        if jobs == 3 {
            assert_eq!(peak, 3, "the three jobs never ran together");
        }
    }
}

#[test]
fn plan_sums_the_batch_without_calling_the_model() {
    let fake = FakeOpenAi::start(FakeConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let mut lines = numbered(3);
    lines.push("{\"query\": 3}".into());
    let input = write_lines(dir.path(), "in.jsonl", &lines);
    let output = dir.path().join("out.jsonl");
    let out = run(batch(&fake, &input, &output).args(["--plan", "--price-per-1k", "0.5"]));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("plan: 3 requests"), "{text}");
    assert!(text.contains("total"), "{text}");
    assert!(text.contains("estimated prompt cost"), "{text}");
    assert_stderr_has(&out, "line 4: ");
    assert_eq!(fake.requests(), 0);
    assert!(!output.exists());
}

#[test]
fn max_prompt_tokens_is_the_default_of_lines_that_set_none() {
    let fake = FakeOpenAi::start(FakeConfig::replying("Yes."));
    let dir = tempfile::tempdir().unwrap();
    let nodes: Vec<String> = (0..16)
        .map(|k| format!("Fact {k}: {}", "the dome opens at dusk ".repeat(6)))
        .collect();
    let request = |limit: Option<u64>| {
        let mut v = json!({"query": "When?", "nodes": nodes, "mode": "compact"});
        if let Some(limit) = limit {
            v["max_prompt_tokens"] = json!(limit);
        }
        v.to_string()
    };
    let input = write_lines(dir.path(), "in.jsonl", &[request(None)]);
    let out = run(&mut batch(&fake, &input, &dir.path().join("a.jsonl")));
    assert!(out.status.success(), "{}", stderr(&out));
    let whole = fake.requests();
    let out =
        run(batch(&fake, &input, &dir.path().join("b.jsonl")).args(["--max-prompt-tokens", "200"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let limited = fake.requests() - whole;
    assert!(
        limited > whole,
        "{limited} calls under the limit, {whole} without"
    );
    // A line's own value wins over the flag.
    let input = write_lines(dir.path(), "own.jsonl", &[request(Some(4000))]);
    let before = fake.requests();
    let out =
        run(batch(&fake, &input, &dir.path().join("c.jsonl")).args(["--max-prompt-tokens", "200"]));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(fake.requests() - before, whole);
}

/// Peak resident set size of a running process, in KiB (`VmHWM`).
fn peak_rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| {
        l.strip_prefix("VmHWM:")?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    })
}

#[test]
fn ten_thousand_lines_in_bounded_memory() {
    const LINES: usize = 10_000;
    let fake = FakeOpenAi::start(FakeConfig::replying("Yes."));
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = (0..LINES)
        .map(|i| {
            let nodes: Vec<String> = (0..8)
                .map(|k| format!("Fact {k} of request {i}: the dome opens at dusk."))
                .collect();
            json!({"query": format!("When does dome {i} open?"), "nodes": nodes}).to_string()
        })
        .collect();
    let input = write_lines(dir.path(), "in.jsonl", &lines);
    let output = dir.path().join("out.jsonl");
    let started = Instant::now();
    let mut child = batch(&fake, &input, &output)
        .args(["--jobs", "8"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut peak = 0;
    // No bound on the run's time: only a run that stops writing lines (and using CPU)
    // fails, as hung.
    let status = wait_while_progressing(
        &mut child,
        "synthkit batch of 10,000 lines",
        || {
            let written = std::fs::metadata(&output).map_or(0, |m| m.len());
            written + cpu_ticks(pid).unwrap_or(0)
        },
        || peak = peak_rss_kb(pid).unwrap_or(peak).max(peak),
    );
    assert!(status.success());
    let results = results(&output);
    assert_eq!(results.len(), LINES);
    assert_eq!(results[LINES - 1]["id"], json!(LINES));
    assert_eq!(fake.requests(), LINES);
    eprintln!(
        "10,000 lines: {:.1} s (shown, not asserted), peak RSS {:.1} MiB",
        started.elapsed().as_secs_f64(),
        peak as f64 / 1024.0
    );
    assert!(peak > 0, "no RSS figure was read");
    assert!(peak < 200 * 1024, "peak RSS {peak} KiB");
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
    let expected: Vec<(Value, String)> = (0..LINES)
        .map(|i| (json!(format!("q{i}")), format!("question {i}")))
        .collect();
    let answered: Vec<(Value, &str)> = expected
        .iter()
        .map(|(id, q)| (id.clone(), q.as_str()))
        .collect();
    assert_one_answer_per_id(&after[..LINES], &answered);
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
    let expected: Vec<(Value, String)> = (0..LINES)
        .map(|i| (json!(format!("q{i}")), format!("question {i}")))
        .collect();
    let expected: Vec<(Value, &str)> = expected
        .iter()
        .map(|(i, q)| (i.clone(), q.as_str()))
        .collect();
    assert_one_answer_per_id(&results(&output), &expected);
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

#[test]
fn duplicate_ids_are_refused_before_any_call() {
    let fake = FakeOpenAi::start(FakeConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let lines = vec![
        line(Some(json!("a")), "first"),
        line(None, "second"),
        line(Some(json!("a")), "third"),
    ];
    let input = write_lines(dir.path(), "in.jsonl", &lines);
    let output = dir.path().join("out.jsonl");
    let out = run(&mut batch(&fake, &input, &output));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_stderr_has(&out, "lines 1 and 3 of the input have the same id \"a\"");
    assert_eq!(fake.requests(), 0);
    assert_eq!(std::fs::read_to_string(&output).unwrap_or_default(), "");

    // A line without an id is named by its number: an explicit id 2 on line 4 clashes.
    let lines = vec![
        line(None, "first"),
        line(None, "second"),
        line(Some(json!("2")), "a string id: another id"),
        line(Some(json!(2)), "third"),
    ];
    let input = write_lines(dir.path(), "in2.jsonl", &lines);
    let out = run(&mut batch(&fake, &input, &output));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_stderr_has(&out, "lines 2 and 4 of the input have the same id 2");
    assert_eq!(fake.requests(), 0);
}

#[test]
fn an_empty_query_is_an_error_line_and_no_call() {
    let fake = FakeOpenAi::start(FakeConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let lines = vec![
        json!({"query": "", "nodes": ["n"]}).to_string(),
        json!({"query": " \t", "nodes": ["n"], "mode": "tree_summarize"}).to_string(),
    ];
    let input = write_lines(dir.path(), "in.jsonl", &lines);
    let output = dir.path().join("out.jsonl");
    let out = run(&mut batch(&fake, &input, &output));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    for r in results(&output) {
        assert_eq!(r["error"]["kind"], "invalid_request", "{r}");
        let message = r["error"]["message"].as_str().unwrap();
        assert!(message.contains("`query` is empty"), "{message}");
    }
    assert_eq!(fake.requests(), 0);
}

/// The prompts the fake was sent, as one text.
fn prompts_sent(fake: &FakeOpenAi) -> String {
    fake.bodies()
        .iter()
        .map(|b| b["messages"].to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_line_with_paths_reads_and_ranks_its_files_as_ask_does() {
    let fake = FakeOpenAi::start(FakeConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(
        docs.join("mirror.md"),
        "The primary mirror is cleaned every three months.\n",
    )
    .unwrap();
    std::fs::write(
        docs.join("dome.md"),
        "The dome opens when the sky is clear.\n",
    )
    .unwrap();
    std::fs::write(docs.join("cafe.md"), "Visitors park behind the cafe.\n").unwrap();
    let question = "How often is the primary mirror cleaned, and when does the dome open?";
    let lines = vec![
        // A folder, relative to the current folder, ranked (its top_k): the cafe (no
        // shared word) left out.
        json!({"id": "folder", "query": question, "paths": ["docs"], "top_k": 5}).to_string(),
        // A folder of no more chunks than the default top-k: sent whole, as `ask` does.
        json!({"id": "small", "query": question, "paths": ["docs"]}).to_string(),
        // Its own top_k.
        json!({"id": "one", "query": question, "paths": ["docs"], "top_k": 1}).to_string(),
        // A file: read whole, not ranked.
        json!({"id": "file", "query": "What is behind the cafe?", "paths": ["docs/cafe.md"]})
            .to_string(),
        json!({"id": "both", "query": question, "nodes": ["n"], "paths": ["docs"]}).to_string(),
        json!({"id": "missing", "query": question, "paths": ["nowhere"]}).to_string(),
        json!({"id": "nothing", "query": "Zebras?", "paths": ["docs"], "top_k": 5}).to_string(),
    ];
    let input = write_lines(dir.path(), "in.jsonl", &lines);
    let output = dir.path().join("out.jsonl");
    let out = run(batch(&fake, &input, &output)
        .current_dir(dir.path())
        .args(["--evidence", "off"]));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let by_id: HashMap<String, Value> = results(&output)
        .into_iter()
        .map(|r| (r["id"].as_str().unwrap().to_string(), r))
        .collect();
    let sources = |id: &str| -> Vec<String> {
        let r = &by_id[id];
        r["response"]["source_nodes"]
            .as_array()
            .unwrap_or_else(|| panic!("{r}"))
            .iter()
            .map(|n| {
                n["node"]["id_"]
                    .as_str()
                    .or(n["id"].as_str())
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    let folder = sources("folder");
    assert_eq!(folder.len(), 2, "{folder:?}");
    assert!(folder.iter().all(|s| !s.contains("cafe")), "{folder:?}");
    assert_eq!(sources("small").len(), 3);
    assert_eq!(sources("one").len(), 1);
    assert_eq!(sources("file").len(), 1);
    let error = |id: &str| by_id[id]["error"].clone();
    assert_eq!(error("both")["kind"], "invalid_request");
    assert!(
        error("both")["message"]
            .as_str()
            .unwrap()
            .contains("not both"),
        "{}",
        error("both")
    );
    assert_eq!(error("missing")["kind"], "invalid_request");
    // No chunk shares a word with the question: nothing is sent, and the line says the
    // sources do not answer (a result, not an error).
    let nothing = &by_id["nothing"];
    assert_eq!(nothing["error"], Value::Null, "{nothing}");
    assert_eq!(nothing["response"]["answerable"], false, "{nothing}");
    assert_eq!(sources("nothing").len(), 0);
    // What reached the model: the cafe only from the small folder sent whole and from
    // the file, never from a ranked folder.
    let sent = prompts_sent(&fake);
    assert!(sent.contains("primary mirror is cleaned"), "{sent}");
    assert_eq!(fake.requests(), 4, "{sent}");
    assert_eq!(sent.matches("Visitors park").count(), 2, "{sent}");
}

/// A line whose node is a LlamaIndex `ImageNode` sends its image to the model as an image
/// part; its answer line is an answer.
#[test]
fn an_image_node_line_sends_its_image() {
    let fake = FakeOpenAi::start(FakeConfig::replying("A chart."));
    let dir = tempfile::tempdir().unwrap();
    let image =
        synthkit::node::NodeImage::from_bytes(&synthkit_testkit::png::png(8, 8, 5), None).unwrap();
    let request = json!({"id": "img", "query": "What does the chart show?", "nodes": [
        {"id_": "chart", "text": "The chart.", "image": image.base64(), "image_mimetype": "image/png"}
    ]});
    let input = write_lines(dir.path(), "in.jsonl", &[request.to_string()]);
    let output = dir.path().join("out.jsonl");
    let out = run(batch(&fake, &input, &output).args(["--evidence", "off"]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results = results(&output);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["id"], "img");
    assert_eq!(results[0]["response"]["text"], "A chart.", "{}", results[0]);
    let bodies = fake.bodies();
    assert_eq!(bodies.len(), 1, "{bodies:?}");
    let urls = synthkit_testkit::openai::image_urls(&bodies[0]);
    assert_eq!(urls, [image.data_url()]);
}

/// Issue 42, item 9: a line's `paths` are read under IN's folder (whatever the current
/// folder), an absolute path, `..` or a link out of it is an error line, a named pipe is
/// skipped with a note and never opened (on today's main the batch blocks on it), and
/// nothing outside reaches the model; `--allow-paths-outside` reads them.
#[cfg(unix)]
#[test]
fn line_paths_stay_under_the_input_folder_and_a_pipe_never_blocks() {
    let fake = FakeOpenAi::start(FakeConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "The vault code is 4711.\n").unwrap();
    let root = dir.path().join("jobs");
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::write(
        root.join("docs/vault.md"),
        "The vault code is kept at the desk.\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(&secret, root.join("leak.txt")).unwrap();
    std::os::unix::fs::symlink(&secret, root.join("docs/leak.txt")).unwrap();
    let made = Command::new("mkfifo")
        .arg(root.join("fifo"))
        .status()
        .unwrap();
    assert!(made.success());
    let q = "What is the vault code?";
    let lines = vec![
        json!({"id": "abs", "query": q, "paths": [secret.display().to_string()]}).to_string(),
        json!({"id": "up", "query": q, "paths": ["../secret.txt"]}).to_string(),
        json!({"id": "link", "query": q, "paths": ["leak.txt"]}).to_string(),
        json!({"id": "fifo", "query": q, "paths": ["fifo", "docs"]}).to_string(),
        json!({"id": "docs", "query": q, "paths": ["docs"]}).to_string(),
    ];
    let input = write_lines(&root, "in.jsonl", &lines);
    let output = dir.path().join("out.jsonl");
    // Run from elsewhere: the paths are IN's folder's.
    let out = finish(
        batch(&fake, &input, &output).current_dir(dir.path()),
        RUN_TIMEOUT,
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let by_id: HashMap<String, Value> = results(&output)
        .into_iter()
        .map(|r| (r["id"].as_str().unwrap().to_string(), r))
        .collect();
    for (id, why) in [
        ("abs", "is an absolute path"),
        ("up", "goes up a folder"),
        ("link", "leads outside"),
    ] {
        let e = &by_id[id]["error"];
        assert_eq!(e["kind"], "invalid_request", "{id}: {e}");
        assert!(e["message"].as_str().unwrap().contains(why), "{id}: {e}");
    }
    assert!(
        stderr(&out).contains("skipping `fifo`: not a file"),
        "{}",
        stderr(&out)
    );
    for id in ["fifo", "docs"] {
        let r = &by_id[id];
        let sources: Vec<&str> = r["response"]["source_nodes"]
            .as_array()
            .unwrap_or_else(|| panic!("{r}"))
            .iter()
            .map(|n| n["node"]["id_"].as_str().or(n["id"].as_str()).unwrap())
            .collect();
        // Named as the line wrote them, relative to IN's folder; the link not followed.
        assert_eq!(sources, ["docs/vault.md#1"], "{id}: {r}");
    }
    let sent = prompts_sent(&fake);
    assert!(!sent.contains("4711"), "{sent}");
    assert!(sent.contains("kept at the desk"), "{sent}");

    // Opted in: read (the pipe still skipped).
    std::fs::remove_file(&output).unwrap();
    let out = finish(
        batch(&fake, &input, &output).arg("--allow-paths-outside"),
        RUN_TIMEOUT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(prompts_sent(&fake).contains("4711"));
}
