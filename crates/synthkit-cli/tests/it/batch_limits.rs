//! `synthkit batch`'s limits and failures: a bad line or an empty query becomes an error
//! line and the batch goes on, duplicate ids are refused before any call, `--jobs` bounds
//! the syntheses at once, `--plan` sums the batch without calling the model,
//! `--max-prompt-tokens` is the default of lines that set none, and a 10,000-line batch
//! runs in bounded memory.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;
use synthkit_testkit::{FakeConfig, FakeOpenAi};

use crate::batch_common::{
    RUN_TIMEOUT, batch, ids, line, numbered, results, run, slow_fake, write_lines,
};
use crate::common::{assert_stderr_has, stderr, wait_writing};

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
    // No bound on the run's time: only a run that stops writing lines (and using CPU)
    // fails, as hung.
    let (status, peak) = wait_writing(&mut child, "synthkit batch of 10,000 lines", &output);
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
