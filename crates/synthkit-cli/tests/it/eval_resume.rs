//! `synthkit eval -o ROWS` run again: a second run resumes without new model calls (a
//! loopback fake counts them), a cut last line and a new mode run alone, runs that failed
//! in an outage run again once the server is back, and an edited case or answers line is
//! run or scored again.

use std::path::Path;

use serde_json::json;
use synthkit_testkit::{FakeConfig, FakeOpenAi};

use crate::common::{json_of, stderr, synthkit, write};
use crate::eval_common::{cases, row};

/// `synthkit eval --json -q -o ROWS` against the OpenAI-compatible server at `base` (a
/// 2048-token window, 64 tokens out, a 20 s timeout, no evidence pass); the caller adds
/// the modes, the model, the cases and any other flag.
fn eval_into(rows: &Path, base: &str) -> assert_cmd::Command {
    let mut cmd = synthkit();
    cmd.args(["eval", "--json", "-q", "-o"])
        .arg(rows)
        .args(["--llm", "openai", "--base-url", base])
        .args(["--context-window", "2048", "--num-output", "64"])
        .args(["--timeout", "20", "--evidence", "off"]);
    cmd
}

#[test]
fn a_second_run_resumes_without_new_model_calls() {
    let fake = FakeOpenAi::start(FakeConfig::replying("Every three months."));
    let dir = tempfile::tempdir().unwrap();
    let cases = cases(dir.path());
    let rows = dir.path().join("rows.jsonl");
    let run = |modes: &str| {
        eval_into(&rows, &fake.base)
            .args(["--modes", modes, "--model", "fake-model"])
            .arg(&cases)
            .output()
            .unwrap()
    };
    let first = run("compact");
    assert!(first.status.success(), "{}", stderr(&first));
    let calls = fake.requests();
    assert_eq!(calls, 3, "one compact call per case");
    let report = json_of(&first);
    assert_eq!(row(&report, "c1", "compact")["correct"], true);
    assert_eq!(
        row(&report, "c3", "compact")["correct"],
        false,
        "it did not abstain"
    );
    let written = std::fs::read_to_string(&rows).unwrap();
    assert_eq!(written.lines().count(), 3);

    let again = run("compact");
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(fake.requests(), calls, "no new call on a resumed run");
    assert_eq!(
        json_of(&again),
        report,
        "the same results from the rows file"
    );
    assert_eq!(std::fs::read_to_string(&rows).unwrap(), written);

    // A cut last line (a run killed while writing) is run again; a new mode runs alone.
    let cut = &written[..written.len() - 10];
    std::fs::write(&rows, cut).unwrap();
    let more = run("compact,refine");
    assert!(more.status.success(), "{}", stderr(&more));
    let report = json_of(&more);
    assert_eq!(report["rows"].as_array().unwrap().len(), 6);
    let refine_calls: u64 = ["c1", "c2", "c3"]
        .iter()
        .map(|id| row(&report, id, "refine")["calls"].as_u64().unwrap())
        .sum();
    assert!(refine_calls >= 3);
    assert_eq!(
        fake.requests() as u64,
        calls as u64 + 1 + refine_calls,
        "the cut row's run and the refine runs, nothing else"
    );
}

/// An outage in the middle of an evaluation: the runs that failed are rows with their
/// error, and the next run (the server back) runs exactly those again; with
/// `--no-retry-failed` they are kept.
#[test]
fn failed_runs_are_run_again_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let cases = cases(dir.path());
    let rows = dir.path().join("rows.jsonl");
    // A port nothing listens on: every call is refused.
    let refused = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/v1", listener.local_addr().unwrap())
    };
    let run = |base: &str, extra: &[&str]| {
        eval_into(&rows, base)
            .args(["--modes", "compact", "--model", "m", "--retries", "1"])
            .args(extra)
            .arg(&cases)
            .output()
            .unwrap()
    };
    let down = run(&refused, &[]);
    assert!(down.status.success(), "{}", stderr(&down));
    let report = json_of(&down);
    for id in ["c1", "c2", "c3"] {
        let r = row(&report, id, "compact");
        assert!(r["error"].is_string(), "{r:#}");
        assert_eq!(r["correct"], false);
    }

    // Kept when asked.
    let fake = FakeOpenAi::start(FakeConfig::replying("Every three months."));
    let kept = run(&fake.base, &["--no-retry-failed"]);
    assert!(kept.status.success(), "{}", stderr(&kept));
    assert_eq!(fake.requests(), 0, "the failed rows were kept");
    assert!(row(&json_of(&kept), "c1", "compact")["error"].is_string());

    // Run again by default: one call per failed case, and the new rows count.
    let again = run(&fake.base, &[]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(fake.requests(), 3);
    let report = json_of(&again);
    assert_eq!(report["rows"].as_array().unwrap().len(), 3, "{report:#}");
    assert!(row(&report, "c1", "compact")["error"].is_null());
    assert_eq!(row(&report, "c1", "compact")["correct"], true);

    // And a further run has nothing left to do; the rows file holds both attempts, the
    // last of each counting.
    let done = run(&fake.base, &[]);
    assert!(done.status.success(), "{}", stderr(&done));
    assert_eq!(fake.requests(), 3);
    assert_eq!(json_of(&done), report);
    assert_eq!(std::fs::read_to_string(&rows).unwrap().lines().count(), 6);
}

/// Issue 42, item 7: a row keeps the hashes of its case and of its answers line, so a
/// resumed evaluation runs an edited case again (one call: only it) and scores an edited
/// answers line again, instead of keeping the stale rows.
#[test]
fn an_edited_case_or_answers_line_is_run_or_scored_again() {
    let fake = FakeOpenAi::start(FakeConfig::replying("Every three months."));
    let dir = tempfile::tempdir().unwrap();
    let cases = cases(dir.path());
    let rows = dir.path().join("rows.jsonl");
    let answers = |answer: &str| {
        let line = json!({"id": "c2", "mode": "compact", "system": "other", "answer": answer});
        write(dir.path(), "other.jsonl", format!("{line}\n"))
    };
    let run = |answers: &Path| {
        eval_into(&rows, &fake.base)
            .args(["--modes", "compact", "--model", "m", "--answers"])
            .arg(answers)
            .arg(&cases)
            .output()
            .unwrap()
    };
    let first = run(&answers("at dusk"));
    assert!(first.status.success(), "{}", stderr(&first));
    assert_eq!(fake.requests(), 3);
    assert_eq!(row(&json_of(&first), "c2", "compact")["correct"], false);

    // c2 now asks what the model answers; the other answers file says "at dawn".
    let text = std::fs::read_to_string(&cases)
        .unwrap()
        .replace(r#""answers":["at dawn"]"#, r#""answers":["three months"]"#);
    assert!(
        text.contains("three months\"],\"evidence\":[\"dome\"]"),
        "{text}"
    );
    std::fs::write(&cases, text).unwrap();
    let again = run(&answers("at dawn"));
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(fake.requests(), 4, "only the edited case runs again");
    let report = json_of(&again);
    assert_eq!(report["rows"].as_array().unwrap().len(), 4, "{report:#}");
    let synthkit_c2 = report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "c2" && r["system"] == "synthkit")
        .unwrap();
    assert_eq!(synthkit_c2["correct"], true, "{synthkit_c2:#}");
    let other_c2 = report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "c2" && r["system"] == "other")
        .unwrap();
    assert_eq!(other_c2["answer"], "at dawn", "the edited answers line");
    assert_eq!(other_c2["correct"], false);

    // Nothing changed: nothing runs, nothing is scored again.
    let written = std::fs::read_to_string(&rows).unwrap();
    let same = run(&answers("at dawn"));
    assert!(same.status.success(), "{}", stderr(&same));
    assert_eq!(fake.requests(), 4);
    assert_eq!(std::fs::read_to_string(&rows).unwrap(), written);
    assert_eq!(json_of(&same), report);
}
