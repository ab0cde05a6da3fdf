//! Replies cut at the output limit (`finish_reason: "length"`) are surfaced by the command:
//! `--json` counts them in `usage.truncated_calls`, a warning after the answer names
//! `--num-output` (hidden by `-q`), and `--on-truncation error` exits with 1.

use serde_json::Value;
use synthkit_testkit::{FakeConfig, FakeOpenAi};

use crate::common::{assert_has, assert_lacks, examples_docs, synthkit};

const CUT: &str = "The primary mirror is cleaned every";

/// A chat server that answers every call with [`CUT`] and `finish_reason`.
fn server(finish_reason: &str) -> FakeOpenAi {
    FakeOpenAi::start(FakeConfig {
        finish_reason: finish_reason.into(),
        ..FakeConfig::replying(CUT)
    })
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn ask(server: &FakeOpenAi, extra: &[&str]) -> Run {
    let out = synthkit()
        .args(["ask", "How often is the mirror cleaned?"])
        .arg(examples_docs())
        .args(["--base-url", &server.base])
        .args(["--num-output", "64", "--retries", "1"])
        .args(extra)
        .output()
        .unwrap();
    Run {
        code: out.status.code(),
        stdout: crate::common::stdout(&out),
        stderr: crate::common::stderr(&out),
    }
}

/// A successful `ask --json` run and its report.
fn ask_json(server: &FakeOpenAi) -> (Run, Value) {
    let run = ask(server, &["--json"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let report = serde_json::from_str(&run.stdout).unwrap();
    (run, report)
}

const WARNING: &str = "cut at the output limit (--num-output 64); raise --num-output";

#[test]
fn json_counts_cut_replies_and_stderr_warns() {
    let server = server("length");
    let (run, v) = ask_json(&server);
    let calls = v["usage"]["calls"].as_u64().unwrap();
    assert!(calls >= 1, "{v}");
    assert_eq!(v["usage"]["truncated_calls"].as_u64(), Some(calls), "{v}");
    assert_eq!(v["answer"], CUT);
    let line = run
        .stderr
        .lines()
        .find(|l| l.starts_with("warning: ") && l.contains(WARNING))
        .unwrap_or_else(|| panic!("no warning line: {}", run.stderr));
    let expected = if calls == 1 {
        "1 model reply was".to_string()
    } else {
        format!("{calls} model replies were")
    };
    assert!(line.contains(&expected), "{line}");
}

#[test]
fn the_warning_follows_a_text_or_streamed_answer_unless_quiet() {
    let server = server("length");
    for extra in [&[][..], &["--stream"][..]] {
        let run = ask(&server, extra);
        assert_eq!(run.code, Some(0), "{extra:?}: {}", run.stderr);
        assert!(run.stdout.contains(CUT), "{extra:?}: {}", run.stdout);
        assert!(run.stderr.contains(WARNING), "{extra:?}: {}", run.stderr);
    }
    let run = ask(&server, &["-q"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_lacks("standard error", &run.stderr, "cut at the output limit");
}

#[test]
fn whole_replies_give_no_warning() {
    let server = server("stop");
    let (run, v) = ask_json(&server);
    assert_eq!(v["usage"]["truncated_calls"].as_u64(), Some(0), "{v}");
    assert_lacks("standard error", &run.stderr, "cut at the output limit");
}

#[test]
fn on_truncation_error_exits_1() {
    let server = server("length");
    for extra in [&["--json"][..], &["--stream"][..]] {
        let mut args = vec!["--on-truncation", "error"];
        args.extend_from_slice(extra);
        let run = ask(&server, &args);
        assert_eq!(run.code, Some(1), "{extra:?}: {}", run.stderr);
        let error = run
            .stderr
            .lines()
            .find(|l| l.starts_with("error: "))
            .unwrap_or_else(|| panic!("{extra:?}: no error line: {}", run.stderr));
        assert_has(
            "the error line",
            error,
            "cut at the output limit (--num-output 64)",
        );
        assert!(error.contains("raise --num-output"), "{error}");
        assert!(
            !run.stdout.contains("\"truncated_calls\""),
            "{}",
            run.stdout
        );
    }
    // A bad value is a usage error.
    let run = ask(&server, &["--on-truncation", "ignore"]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
}

/// `eval` takes ask's window flags and answers as `ask` does with them: a cut reply is
/// counted in the row with the default policy, and fails the run with
/// `--on-truncation error` (the row says so; the evaluation goes on).
#[test]
fn eval_runs_with_asks_truncation_policy() {
    let server = server("length");
    let dir = tempfile::tempdir().unwrap();
    let case = serde_json::json!({
        "id": "c1", "query": "How often is the mirror cleaned?",
        "nodes": [{"id": "mirror", "text": "The primary mirror is cleaned every three months."}],
        "answers": ["three months"], "answerable": true,
    });
    let cases = crate::common::write(dir.path(), "cases.jsonl", format!("{case}\n"));
    let eval = |extra: &[&str]| {
        let out = synthkit()
            .arg("eval")
            .arg(&cases)
            .args(["--base-url", &server.base, "--model", "m"])
            .args(["--num-output", "64", "--retries", "1", "--evidence", "off"])
            .args(["--json", "--quiet"])
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            crate::common::stderr(&out)
        );
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        report["rows"][0].clone()
    };
    let warned = eval(&[]);
    assert!(warned["error"].is_null(), "{warned}");
    assert!(warned["truncated_calls"].as_u64() >= Some(1), "{warned}");
    let failed = eval(&["--on-truncation", "error"]);
    assert_has(
        "the row's error",
        failed["error"].as_str().unwrap_or_default(),
        "output limit",
    );
}

/// `eval --overlap` is checked as `ask`'s is, naming the flag.
#[test]
fn eval_checks_the_overlap_as_ask_does() {
    let dir = tempfile::tempdir().unwrap();
    let cases = crate::common::write(
        dir.path(),
        "cases.jsonl",
        "{\"id\": \"c1\", \"query\": \"q\", \"nodes\": [{\"id\": \"a\", \"text\": \"t\"}], \"answers\": [\"t\"], \"answerable\": true}\n",
    );
    let out = synthkit()
        .arg("eval")
        .arg(&cases)
        .args(["--overlap", "2", "--quiet"])
        .output()
        .unwrap();
    crate::common::assert_usage_error(&out, "see --overlap");
}
