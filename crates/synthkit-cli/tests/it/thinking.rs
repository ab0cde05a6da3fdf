//! Reasoning models from the command line: a reply's `<think>` block never reaches the
//! answer (plain, `--json` or `--stream`), `--json` reports the reasoning tokens, and a
//! reply that only thought fails with a message that says so, never "Empty Response".

use serde_json::Value;
use synthkit_testkit::{FakeConfig, FakeOpenAi};

use crate::common::{examples_docs, synthkit};

const SECRET: &str = "SECRET-THOUGHT";

fn ask(reply: &str, extra: &[&str]) -> (Option<i32>, String, String) {
    let server = FakeOpenAi::start(FakeConfig::replying(reply));
    let out = synthkit()
        .args(["ask", "How often is the mirror cleaned?"])
        .arg(examples_docs())
        .args(["--base-url", &server.base, "--retries", "1"])
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code(),
        crate::common::stdout(&out),
        crate::common::stderr(&out),
    )
}

#[test]
fn thinking_stays_out_of_the_answer_and_its_tokens_are_reported() {
    let reply = format!("<think>{SECRET}: the docs say six months.</think>\n\nEvery six months.");
    let (code, stdout, stderr) = ask(
        &reply,
        &["--json", "--thinking-reserve", "128", "--evidence", "off"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["answer"], "Every six months.", "{v}");
    assert!(v["usage"]["reasoning_tokens"].as_u64().unwrap() > 0, "{v}");
    for extra in [
        &["--evidence", "off"][..],
        &["--stream", "--evidence", "off"][..],
    ] {
        let (code, stdout, stderr) = ask(&reply, extra);
        assert_eq!(code, Some(0), "{extra:?}: {stderr}");
        assert!(stdout.contains("Every six months."), "{extra:?}: {stdout}");
        assert!(
            !stdout.contains(SECRET) && !stdout.contains("think>"),
            "{stdout}"
        );
    }
}

#[test]
fn a_reply_that_only_thought_fails_and_says_so() {
    let reply = format!("<think>{SECRET}: hmm, let me see.</think>");
    for extra in [&[][..], &["--stream"][..]] {
        let (code, stdout, stderr) = ask(&reply, extra);
        assert_eq!(code, Some(1), "{extra:?}: {stdout}");
        assert!(
            stderr.contains("thought and wrote no answer"),
            "{extra:?}: {stderr}"
        );
        assert!(!stdout.contains("Empty Response"), "{extra:?}: {stdout}");
        assert!(!stdout.contains(SECRET), "{extra:?}: {stdout}");
    }
}

#[test]
fn the_trace_and_the_report_keep_the_thinking_beside_the_reply() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let html = dir.path().join("report.html");
    let reply = format!("<think>{SECRET}: weigh it.</think>\n\nEvery six months.");
    let (code, _, stderr) = ask(&reply, &["--trace", trace.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{stderr}");
    let text = std::fs::read_to_string(&trace).unwrap();
    let calls: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v.get("call").is_some())
        .collect();
    assert!(!calls.is_empty());
    for c in &calls {
        assert!(c["thinking"].as_str().unwrap().contains(SECRET), "{c}");
        assert!(!c["response"].as_str().unwrap().contains(SECRET), "{c}");
        assert!(c["reasoning_tokens"].as_u64().unwrap() > 0, "{c}");
    }
    let out = synthkit()
        .args([
            "report",
            trace.to_str().unwrap(),
            "-o",
            html.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", crate::common::stderr(&out));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("class=\"thinking\""),
        "no thinking in the report"
    );
    assert!(page.contains(SECRET));
}
