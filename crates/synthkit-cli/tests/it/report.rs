//! `--steps`, `--report`, `synthkit report TRACE` and `batch --report-dir`.

use std::path::Path;
use std::process::Output;

use axum::response::IntoResponse;
use serde_json::{Value, json};
use synthkit_testkit::Server;
use synthkit_testkit::openai::{chat_reply, error_reply};
use synthkit_testkit::record::numbered;

use crate::common::{QUESTION, docs, json_of, server_flags, stderr, synthkit, write};

/// `synthkit ask -q --mode refine EXTRA --report PAGE --trace TRACE` over two of the sample
/// documents in `docs`.
fn ask_refine_with_report(docs: &Path, extra: &[&str], page: &Path, trace: &Path) -> Output {
    synthkit()
        .args(["ask", QUESTION, "-q", "--mode", "refine"])
        .args(extra)
        .arg("--report")
        .arg(page)
        .arg("--trace")
        .arg(trace)
        .arg(docs.join("maintenance.md"))
        .arg(docs.join("about.md"))
        .output()
        .unwrap()
}

/// `synthkit batch INPUT -o DIR/out.jsonl --report-dir REPORTS EXTRA`.
fn batch_with_reports(dir: &Path, input: &Path, reports: &Path, extra: &[&str]) -> Output {
    synthkit()
        .arg("batch")
        .arg(input)
        .arg("-o")
        .arg(dir.join("out.jsonl"))
        .arg("--report-dir")
        .arg(reports)
        .args(extra)
        .output()
        .unwrap()
}

/// `synthkit report TRACE -o PAGE`.
fn report_verb(trace: &Path, page: &Path) -> Output {
    synthkit()
        .arg("report")
        .arg(trace)
        .arg("-o")
        .arg(page)
        .output()
        .unwrap()
}

#[test]
fn steps_come_with_the_json_on_request() {
    let dir = docs();
    let out = synthkit()
        .args([
            "ask", QUESTION, "--json", "-q", "--mode", "refine", "--steps",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    let v = json_of(&out);
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len() as u64, v["usage"]["calls"].as_u64().unwrap());
    for s in steps {
        assert!(!s["node_ids"].as_array().unwrap().is_empty(), "{s}");
        for key in [
            "step",
            "level",
            "index",
            "prompt_tokens",
            "completion_tokens",
            "ms",
            "reply",
        ] {
            assert!(s.get(key).is_some(), "{key}: {s}");
        }
    }
    let out = synthkit()
        .args(["ask", QUESTION, "--steps"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "--steps needs --json: {}",
        stderr(&out)
    );
}

/// A run that fails after its first call still writes its report and its trace's `run`
/// line: the failure, and the call that was made before it.
#[test]
fn a_failed_run_reports_its_calls_so_far() {
    let dir = docs();
    let server = answers_once_then_refuses();
    let page = dir.path().join("failed.html");
    let trace = dir.path().join("failed.jsonl");
    let mut flags = vec!["--yes", "--retries", "1"];
    flags.extend(server_flags(&server.base));
    let out = ask_refine_with_report(dir.path(), &flags, &page, &trace);
    assert!(!out.status.success(), "the run fails: {}", stderr(&out));
    assert!(stderr(&out).contains("400"), "{}", stderr(&out));
    let html = std::fs::read_to_string(&page).expect("a failed run writes its report");
    assert_failed_page(&html);
    // The trace ends with the failed run, and `synthkit report` says so.
    let again = dir.path().join("again.html");
    let out = report_verb(&trace, &again);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("failed"), "{}", stderr(&out));
    let from_trace = std::fs::read_to_string(&again).unwrap();
    assert!(from_trace.contains("The run failed") && from_trace.contains("id=\"call-1\""));
}

#[test]
fn a_report_from_the_run_and_from_its_trace() {
    let dir = docs();
    let page = dir.path().join("run.html");
    let trace = dir.path().join("run.jsonl");
    let out = ask_refine_with_report(dir.path(), &["--json"], &page, &trace);
    let v = json_of(&out);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("id=\"call-1\"") && html.contains("id=\"call-2\""));
    assert!(v.get("steps").is_none(), "steps only with --steps");
    let again = dir.path().join("again.html");
    let out = report_verb(&trace, &again);
    assert!(out.status.success(), "{}", stderr(&out));
    let from_trace = std::fs::read_to_string(&again).unwrap();
    assert!(from_trace.contains("id=\"call-2\"") && from_trace.contains("Answer"));
    assert!(
        from_trace.contains("class=\"node\" href=\"#src-"),
        "node ids kept in the trace"
    );
    // A trace cut before its run line still gives the calls.
    let text = std::fs::read_to_string(&trace).unwrap();
    let calls_only: String = text
        .lines()
        .filter(|l| !l.starts_with("{\"run\""))
        .map(|l| format!("{l}\n"))
        .collect();
    let cut = write(dir.path(), "cut.jsonl", calls_only);
    let out = report_verb(&cut, &again);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("calls alone"), "{}", stderr(&out));
    // Bad input is a usage error, not a panic.
    let bad = write(dir.path(), "bad.jsonl", "{oops\n");
    let out = report_verb(&bad, &again);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("line 1"), "{}", stderr(&out));
}

/// A killed run leaves a trace without its run line: each call line still names the
/// nodes its prompt held, so the report rebuilt from it says what every call read, and
/// it does not take the last level drawn for the final summary.
#[test]
fn a_killed_runs_trace_names_each_calls_nodes() {
    let dir = docs();
    let trace = dir.path().join("tree.jsonl");
    let out = synthkit()
        .args(["ask", QUESTION, "-q", "--mode", "tree_summarize", "--trace"])
        .arg(&trace)
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&trace).unwrap();
    let calls: Vec<Value> = text
        .lines()
        .filter(|l| !l.starts_with("{\"run\""))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!calls.is_empty(), "{text}");
    for c in &calls {
        let ids = c["node_ids"]
            .as_array()
            .unwrap_or_else(|| panic!("no node_ids: {c}"));
        assert!(!ids.is_empty() && ids.len() <= 100, "{c}");
        assert_eq!(c["nodes"].as_u64(), Some(ids.len() as u64), "{c}");
    }
    // The run killed before its end: the calls alone.
    let cut = write(
        dir.path(),
        "killed.jsonl",
        calls.iter().map(|c| format!("{c}\n")).collect::<String>(),
    );
    let page = dir.path().join("killed.html");
    let out = report_verb(&cut, &page);
    assert!(out.status.success(), "{}", stderr(&out));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("nodes (0): not known"), "{html}");
    assert!(
        html.contains("<span class=\"node\">"),
        "node ids drawn: {html}"
    );
    // The last level it reached is not called the final summary.
    assert!(!html.contains("call · the final summary"), "{html}");
    assert!(!html.contains("calls · the final summary"), "{html}");
    assert!(html.contains("did not finish"), "{html}");
    assert!(html.contains("not the final summary"), "{html}");
}

#[test]
fn batch_writes_one_report_per_line() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        r#"{"id": "q1", "query": "When does the dome open?", "nodes": ["The dome opens at dusk.", "Parking is behind the cafe."], "mode": "refine"}"#,
        r#"{"id": "../odd id", "query": "Where to park?", "nodes": ["Parking is behind the cafe."], "return_steps": true}"#,
    ];
    let input = write(dir.path(), "in.jsonl", lines.join("\n"));
    let reports = dir.path().join("reports");
    let out = batch_with_reports(dir.path(), &input, &reports, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut names: Vec<String> = std::fs::read_dir(&reports)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.contains(&"q1.html".to_string()));
    assert!(names.iter().all(|n| !n.contains("..")), "{names:?}");
    let results: Vec<Value> = std::fs::read_to_string(dir.path().join("out.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        results[0]["response"].get("steps").is_none(),
        "not asked for"
    );
    assert!(results[1]["response"]["steps"].is_array(), "asked for");
}

/// `batch --report-dir` writes the page of a line that failed too: the failure, and the
/// call made before it.
#[test]
fn batch_reports_a_failed_line() {
    let dir = tempfile::tempdir().unwrap();
    let server = answers_once_then_refuses();
    let line = r#"{"id": "q1", "query": "When does the dome open?", "nodes": ["The dome opens at dusk.", "Parking is behind the cafe."], "mode": "refine"}"#;
    let input = write(dir.path(), "in.jsonl", line);
    let reports = dir.path().join("reports");
    let flags = [server_flags(&server.base), vec!["--evidence", "off"]].concat();
    let out = batch_with_reports(dir.path(), &input, &reports, &flags);
    let result = std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap();
    assert!(
        result.contains("this request is refused"),
        "{result} {}",
        stderr(&out)
    );
    let page = std::fs::read_to_string(reports.join("q1.html")).expect("the failed line's page");
    assert_failed_page(&page);
}

/// A model server that answers the first chat call and refuses every later one (400).
fn answers_once_then_refuses() -> Server {
    Server::start(numbered("/v1/chat/completions", |n| {
        if n == 0 {
            let usage = json!({"prompt_tokens": 120, "completion_tokens": 5});
            return axum::Json(chat_reply("m", "Every six months.", "stop", &usage))
                .into_response();
        }
        error_reply(400, None, "this request is refused")
    }))
}

/// The page of a run refused after its first call: the failure, its reason, that call.
fn assert_failed_page(html: &str) {
    assert!(html.contains("The run failed"), "the failure is shown");
    assert!(html.contains("this request is refused"), "with its reason");
    assert!(html.contains("id=\"call-1\""), "the call made is drawn");
    assert!(!html.contains("id=\"call-2\""), "and only that one");
}
