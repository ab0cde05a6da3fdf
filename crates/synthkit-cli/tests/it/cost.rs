//! Issue 45, budgets in money: with the user's prices, `--json`'s usage says what the run
//! cost (cached prompt tokens at their own price) and `--plan` what it may cost at most;
//! `--max-cost` refuses a run whose plan may cost more before any call, with the plan's
//! figure, and `--yes` does not lift it.

use axum::Router;
use axum::response::IntoResponse;
use axum::routing::post;
use serde_json::{Value, json};
use synthkit_testkit::Server;
use synthkit_testkit::openai::{chat_reply, error_reply};

use crate::common::{
    QUESTION, assert_has, assert_usage_error, docs, json_of, server_flags, stderr, synthkit,
};

/// A server that answers every chat call with 100 prompt tokens, 60 of them cached, and 4
/// completion tokens; counts the calls.
fn server() -> (Server, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = calls.clone();
    let chat = move |axum::Json(_): axum::Json<Value>| {
        let seen = seen.clone();
        async move {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let usage = json!({"prompt_tokens": 100, "completion_tokens": 4,
                               "prompt_tokens_details": {"cached_tokens": 60}});
            axum::Json(chat_reply("m", "Every three months.", "stop", &usage)).into_response()
        }
    };
    let app = Router::new()
        .route("/v1/chat/completions", post(chat))
        .fallback(|| async { error_reply(404, None, "not found") });
    (Server::start(app), calls)
}

/// The flags both verbs run with: the server, a 4,096-token window, evidence off.
fn model_flags(server: &Server) -> Vec<&str> {
    let checks = ["--evidence", "off", "--on-unsupported", "warn"];
    [server_flags(&server.base), checks.to_vec()].concat()
}

fn ask(server: &Server, extra: &[&str]) -> std::process::Output {
    let dir = docs();
    synthkit()
        .args(["ask", QUESTION])
        .args(model_flags(server))
        .args(extra)
        .arg(dir.path())
        .env("OPENAI_API_KEY", "")
        .output()
        .unwrap()
}

#[test]
fn json_usage_says_what_the_run_cost_at_the_prices_given() {
    let (server, _) = server();
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("run.html");
    let out = ask(
        &server,
        &[
            "--report",
            page.to_str().unwrap(),
            "--json",
            "--price-input",
            "2",
            "--price-cached-input",
            "0.5",
            "--price-output",
            "8",
        ],
    );
    let v = json_of(&out);
    let usage = &v["usage"];
    let calls = usage["calls"].as_f64().unwrap();
    assert!(calls >= 1.0, "{v}");
    // Per call: 40 fresh at 2, 60 cached at 0.5, 4 out at 8, per million.
    let expected = calls * (40.0 * 2.0 + 60.0 * 0.5 + 4.0 * 8.0) / 1e6;
    let cost = usage["cost_usd"].as_f64().unwrap();
    assert!(
        (cost - expected).abs() < 1e-6,
        "{cost} against {expected}: {v}"
    );
    assert_has("standard error", &stderr(&out), "cost: $");
    // The report's settings and usage show it too.
    let html = std::fs::read_to_string(&page).unwrap();
    assert_has(
        "the report",
        &html,
        &format!("${expected:.6} at the prices given"),
    );
    // Without prices, no cost is made up.
    let v = json_of(&ask(&server, &["--json"]));
    assert!(v["usage"].get("cost_usd").is_none(), "{v}");
}

#[test]
fn max_cost_refuses_a_run_its_plan_may_pass_before_any_call() {
    let (server, calls) = server();
    let prices = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(prices.path(), r#"{"input": 1000, "output": 1000}"#).unwrap();
    let path = prices.path().to_str().unwrap();
    let out = ask(&server, &["--prices", path, "--max-cost", "0.001", "--yes"]);
    assert_usage_error(&out, "not started: this run may cost up to $");
    assert_has("standard error", &stderr(&out), "over --max-cost $0.001");
    // The plan was printed with the refusal, and nothing reached the server.
    assert_has("standard error", &stderr(&out), "plan: compact");
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0);
    // A cap the plan fits under runs.
    let out = ask(&server, &["--prices", path, "--max-cost", "100"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(calls.load(std::sync::atomic::Ordering::SeqCst) >= 1);
}

#[test]
fn plan_says_what_the_run_may_cost_at_most() {
    let (server, calls) = server();
    let v = json_of(&ask(
        &server,
        &[
            "--plan",
            "--json",
            "--price-input",
            "1",
            "--price-output",
            "3",
        ],
    ));
    let total = &v["total"];
    let bound = (total["prompt_tokens"].as_f64().unwrap() * 1.0
        + total["max_completion_tokens"].as_f64().unwrap() * 3.0)
        / 1e6;
    let said = v["max_cost_usd"].as_f64().unwrap();
    assert!((said - bound).abs() < 1e-9, "{said} against {bound}: {v}");
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0);
}

#[test]
fn cost_flags_that_cannot_work_are_usage_errors() {
    let (server, _) = server();
    assert_usage_error(
        &ask(&server, &["--max-cost", "1"]),
        "--max-cost needs the prices",
    );
    assert_usage_error(
        &ask(&server, &["--price-input=-1", "--price-output", "1"]),
        "input price must be a number of at least 0",
    );
    assert_usage_error(&ask(&server, &["--price-input", "1"]), "--price-output");
    let bad = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(bad.path(), r#"{"input": 1}"#).unwrap();
    assert_usage_error(
        &ask(&server, &["--prices", bad.path().to_str().unwrap()]),
        "the prices are not",
    );
}

/// `synthkit batch IN -o OUT` against `server` with `extra`.
fn batch(
    server: &Server,
    input: &std::path::Path,
    out: &std::path::Path,
    extra: &[&str],
) -> std::process::Output {
    synthkit()
        .arg("batch")
        .arg(input)
        .arg("-o")
        .arg(out)
        .args(model_flags(server))
        .args(["--quiet", "--jobs", "1"])
        .args(extra)
        .env("OPENAI_API_KEY", "")
        .output()
        .unwrap()
}

fn result_lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A batch's cap holds every line's calls: at a cap of 0 no call is sent and each line
/// fails as `cost_cap`, which a resumed batch (with its own cap) runs again; priced
/// lines say what they cost, and the summary what the batch did.
#[test]
fn batch_holds_the_whole_batch_to_max_cost_and_prices_each_line() {
    let (server, calls) = server();
    let dir = tempfile::tempdir().unwrap();
    let line = json!({"query": QUESTION, "nodes": [crate::common::MIRROR]});
    let input = crate::common::write(dir.path(), "in.jsonl", format!("{line}\n{line}\n"));
    let out = dir.path().join("out.jsonl");
    let prices = ["--price-input", "1", "--price-output", "1"];

    let capped = batch(
        &server,
        &input,
        &out,
        &[&prices[..], &["--max-cost", "0"]].concat(),
    );
    assert_eq!(capped.status.code(), Some(1), "{}", stderr(&capped));
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0);
    for line in result_lines(&out) {
        assert_eq!(line["error"]["transient"], "cost_cap", "{line}");
        assert_has(
            "the error",
            line["error"]["message"].as_str().unwrap(),
            "cost cap",
        );
    }

    let resumed = batch(
        &server,
        &input,
        &out,
        &[&prices[..], &["--max-cost", "10"]].concat(),
    );
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    let lines = result_lines(&out);
    assert_eq!(lines.len(), 2);
    for line in &lines {
        let usage = &line["response"]["usage"];
        let expected = usage["calls"].as_f64().unwrap() * (100.0 + 4.0) / 1e6;
        let cost = usage["cost_usd"].as_f64().unwrap();
        assert!((cost - expected).abs() < 1e-6, "{line}");
    }
    assert_has("the summary", &stderr(&resumed), "tokens, $0.000");
}

/// `eval` prices every system's rows alike (synthkit's runs and answers from a file), sums
/// them in the totals and shows a cost column.
#[test]
fn eval_prices_every_systems_rows_alike() {
    let (server, _) = server();
    let dir = tempfile::tempdir().unwrap();
    let case = json!({"id": "c1", "query": QUESTION, "nodes": [crate::common::MIRROR],
                      "answers": ["three months"], "answerable": true});
    let cases = crate::common::write(dir.path(), "cases.jsonl", format!("{case}\n"));
    let other = json!({"id": "c1", "mode": "compact", "system": "ref", "answer": "Every three months.",
                       "calls": 2, "prompt_tokens": 1000, "completion_tokens": 50});
    let answers = crate::common::write(dir.path(), "ref.jsonl", format!("{other}\n"));
    let eval = |extra: &[&str]| {
        synthkit()
            .arg("eval")
            .arg(&cases)
            .arg("--answers")
            .arg(&answers)
            .args([
                "--modes",
                "compact",
                "--base-url",
                &server.base,
                "--model",
                "m",
            ])
            .args(["--evidence", "off", "--on-unsupported", "warn", "--quiet"])
            .args(["--price-input", "2", "--price-output", "10"])
            .args(extra)
            .env("OPENAI_API_KEY", "")
            .output()
            .unwrap()
    };
    let v = json_of(&eval(&["--json"]));
    let rows = v["rows"].as_array().unwrap();
    let theirs = rows.iter().find(|r| r["system"] == "ref").unwrap();
    assert!(
        (theirs["cost_usd"].as_f64().unwrap() - (1000.0 * 2.0 + 50.0 * 10.0) / 1e6).abs() < 1e-9
    );
    let ours = rows.iter().find(|r| r["system"] == "synthkit").unwrap();
    let calls = ours["calls"].as_f64().unwrap();
    assert!(
        (ours["cost_usd"].as_f64().unwrap() - calls * (100.0 * 2.0 + 4.0 * 10.0) / 1e6).abs()
            < 1e-9
    );
    let total: f64 = v["totals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["cost_usd"].as_f64().unwrap())
        .sum();
    assert!(total > 0.0, "{v}");
    let table = crate::common::stdout(&eval(&[]));
    assert_has("the table", &table, "cost $");
}
