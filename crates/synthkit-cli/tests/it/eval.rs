//! `synthkit eval`: cases run with the offline extractive backend (deterministic) and
//! scored, answers produced elsewhere scored from a file, bad input refused with exit 2,
//! a stopped evaluation resumed without new model calls (a loopback fake counts them),
//! and the HTML page linking each answer to its run's report.

use std::path::Path;

use serde_json::{Value, json};
use synthkit_testkit::{FakeConfig, FakeOpenAi};

use crate::common::{MIRROR, QUESTION, assert_usage_error, json_of, stderr, synthkit, write};

/// Three cases: one the nodes answer, one whose accepted answer is not in the nodes, one
/// the nodes cannot answer.
fn cases(dir: &Path) -> std::path::PathBuf {
    let nodes = json!([
        {"id": "mirror", "text": MIRROR},
        {"id": "dome", "text": "The dome opens at dusk and closes before sunrise."}
    ]);
    let lines = [
        json!({"id": "c1", "query": QUESTION, "nodes": nodes,
               "answers": ["three months", {"regex": "\\b3 months\\b"}], "evidence": ["mirror"],
               "answerable": true, "tags": ["needle"]}),
        json!({"id": "c2", "query": "When does the dome open?", "nodes": nodes,
               "answers": ["at dawn"], "evidence": ["dome"], "answerable": true}),
        json!({"id": "c3", "query": "Which bank financed the observatory's parking garage?",
               "nodes": nodes, "answers": [], "answerable": false}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    write(dir, "cases.jsonl", text)
}

fn row<'a>(report: &'a Value, id: &str, mode: &str) -> &'a Value {
    report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id && r["mode"] == mode)
        .unwrap_or_else(|| panic!("no row {id} {mode} in {report:#}"))
}

#[test]
fn offline_runs_are_scored_per_case_and_mode() {
    let dir = tempfile::tempdir().unwrap();
    let cases = cases(dir.path());
    let out = synthkit()
        .args([
            "eval",
            "--modes",
            "compact,refine",
            "--cite",
            "--json",
            "-q",
        ])
        .arg(&cases)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let report = json_of(&out);
    assert_eq!(report["rows"].as_array().unwrap().len(), 6, "{report:#}");
    for mode in ["compact", "refine"] {
        let c1 = row(&report, "c1", mode);
        assert_eq!(c1["system"], "synthkit");
        assert_eq!(c1["correct"], true, "{c1:#}");
        assert_eq!(c1["in_nodes"], true);
        assert_eq!(c1["in_prompts"], true);
        assert_eq!(c1["cite_precision"], 1.0, "{c1:#}");
        assert_eq!(c1["cite_recall"], 1.0);
        assert_eq!(c1["tags"], json!(["needle"]));
        assert!(c1["calls"].as_u64().unwrap() >= 1);
        assert!(c1["prompt_tokens"].as_u64().unwrap() > 0);
        assert!(!c1["answer"].as_str().unwrap().contains("[1]"));
        let c2 = row(&report, "c2", mode);
        assert_eq!(c2["correct"], false);
        assert_eq!(c2["in_nodes"], false, "{c2:#}");
        let c3 = row(&report, "c3", mode);
        assert_eq!(c3["answerable"], false);
        assert_eq!(c3["abstained"], true, "{c3:#}");
        assert_eq!(c3["correct"], true);
    }
    let totals = report["totals"].as_array().unwrap();
    assert_eq!(totals.len(), 2);
    for (t, mode) in totals.iter().zip(["compact", "refine"]) {
        assert_eq!(t["mode"], mode);
        assert_eq!(t["cases"], 3);
        assert_eq!(t["correct"], 2);
        assert_eq!(t["answerable"], 2);
        assert_eq!(t["answerable_correct"], 1);
        assert_eq!(t["abstained_right"], 1);
        assert_eq!(t["false_abstentions"], 0);
        assert_eq!(t["lost_in_retrieval"], 1);
    }

    // The table: one line per mode.
    let out = synthkit()
        .args(["eval", "--modes", "compact,refine", "-q"])
        .arg(&cases)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let table = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = table.lines().collect();
    // The heading, one line per mode, the cases each got wrong, and the modes compared
    // case by case.
    assert_eq!(lines.len(), 6, "{table}");
    assert_eq!(lines[3], "wrong in synthkit/compact (1): c2", "{table}");
    assert_eq!(lines[4], "wrong in synthkit/refine (1): c2", "{table}");
    assert!(
        lines[5].starts_with("synthkit/compact vs synthkit/refine on 3 cases"),
        "{table}"
    );
    assert!(
        lines[0].starts_with("system") && lines[0].contains("correct"),
        "{table}"
    );
    assert!(
        lines[1].starts_with("synthkit") && lines[1].contains("compact"),
        "{table}"
    );
    assert!(
        lines[1].contains("2 (67%)") && lines[1].contains("1/2"),
        "{table}"
    );
    assert!(lines[2].contains("refine"), "{table}");
}

#[test]
fn answers_from_elsewhere_are_scored_by_the_same_code() {
    let dir = tempfile::tempdir().unwrap();
    let cases = cases(dir.path());
    let answers = [
        json!({"id": "c1", "mode": "compact", "system": "other", "answer": "Every 3 months.",
               "calls": 2, "prompt_tokens": 100, "completion_tokens": 7, "wall_ms": 1500,
               "prompts": ["Context: every three months ..."], "citations": ["mirror", "dome"]}),
        json!({"id": "c2", "mode": "compact", "system": "other", "answer": "",
               "error": "timed out", "calls": 1}),
        json!({"id": "c3", "mode": "compact", "system": "other", "answer": "Blue Bank."}),
        json!({"id": "c1", "mode": "refine", "answer": "The context does not mention it.",
               "abstained": null, "prompts": ["nothing useful"]}),
    ];
    let text: String = answers.iter().map(|l| format!("{l}\n")).collect();
    let file = write(dir.path(), "answers.jsonl", text);
    let out = synthkit()
        .args(["eval", "--json", "-q", "--system", "fallback"])
        .arg(&cases)
        .arg("--answers")
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let report = json_of(&out);
    assert_eq!(
        report["rows"].as_array().unwrap().len(),
        4,
        "no synthkit run: {report:#}"
    );
    let c1 = row(&report, "c1", "compact");
    assert_eq!(c1["correct"], true, "the regex alternative");
    assert_eq!(c1["in_nodes"], true);
    assert_eq!(c1["in_prompts"], true);
    assert_eq!(c1["cite_precision"], 0.5);
    assert_eq!(c1["cite_recall"], 1.0);
    assert_eq!(c1["wall_ms"], 1500.0);
    let c2 = row(&report, "c2", "compact");
    assert_eq!(
        (c2["correct"].clone(), c2["error"].clone()),
        (json!(false), json!("timed out"))
    );
    let c3 = row(&report, "c3", "compact");
    assert_eq!(
        (c3["correct"].clone(), c3["abstained"].clone()),
        (json!(false), json!(false))
    );
    let refine = row(&report, "c1", "refine");
    // No `system`: named after its file, never after --system.
    assert_eq!(refine["system"], "answers");
    assert_eq!(refine["abstained"], true);
    assert_eq!(refine["in_prompts"], false);
    let totals = report["totals"].as_array().unwrap();
    assert_eq!(totals.len(), 2);
    let t = &totals[0];
    assert_eq!(
        (t["system"].as_str(), t["mode"].as_str()),
        (Some("other"), Some("compact"))
    );
    assert_eq!(
        (t["cases"].clone(), t["correct"].clone()),
        (json!(3), json!(1))
    );
    assert_eq!(
        (t["errors"].clone(), t["calls"].clone()),
        (json!(1), json!(3))
    );
    assert_eq!(t["cite_precision"], 0.5);
    let t = &totals[1];
    assert_eq!(
        (t["false_abstentions"].clone(), t["lost_in_packing"].clone()),
        (json!(1), json!(1))
    );
}

/// Two systems answering the same cases in the same mode are compared case by case: the
/// interval of each correct rate, and the cases only one side got right (sign test).
#[test]
fn two_systems_are_compared_on_the_same_cases() {
    let dir = tempfile::tempdir().unwrap();
    let cases = cases(dir.path());
    let lines = |system: &str, answers: [&str; 3]| -> String {
        ["c1", "c2", "c3"]
            .iter()
            .zip(answers)
            .map(|(id, a)| {
                format!(
                    "{}\n",
                    json!({"id": id, "mode": "compact", "system": system, "answer": a})
                )
            })
            .collect()
    };
    let a = write(
        dir.path(),
        "a.jsonl",
        lines("a", ["three months", "at dawn", "Blue"]),
    );
    let b = write(
        dir.path(),
        "b.jsonl",
        lines("b", ["no idea", "at dusk", "The sources do not say."]),
    );
    // Both answers files scored together, as JSON or as the table.
    let score = |json: bool| {
        let out = synthkit()
            .args(["eval", "-q"])
            .args(json.then_some("--json"))
            .arg(&cases)
            .args([
                "--answers".as_ref(),
                a.as_os_str(),
                "--answers".as_ref(),
                b.as_os_str(),
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        out
    };
    let report = json_of(&score(true));
    let paired = report["paired"].as_array().unwrap();
    assert_eq!(paired.len(), 1, "{report:#}");
    let p = &paired[0];
    assert_eq!(
        (p["a"].as_str(), p["b"].as_str()),
        (Some("a/compact"), Some("b/compact"))
    );
    assert_eq!(
        (
            p["cases"].clone(),
            p["only_a"].clone(),
            p["only_b"].clone(),
            p["both"].clone()
        ),
        (json!(3), json!(2), json!(1), json!(0))
    );
    assert_eq!(p["p_value"], 1.0);
    let interval = report["totals"][0]["correct_interval"].as_array().unwrap();
    let (low, high) = (interval[0].as_f64().unwrap(), interval[1].as_f64().unwrap());
    assert!(low < 2.0 / 3.0 && 2.0 / 3.0 < high, "{interval:?}");

    // The table says the same in words.
    let text = String::from_utf8_lossy(&score(false).stdout).into_owned();
    assert!(text.contains("95% interval"), "{text}");
    assert!(
        text.contains(
            "a/compact vs b/compact on 3 cases: only the first right in 2, only the second in 1"
        ),
        "{text}"
    );
}

#[test]
fn bad_input_is_a_usage_error_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases = cases(dir.path());
    let bad = write(
        dir.path(),
        "bad.jsonl",
        "\n{\"id\": \"a\", \"query\": \"Q\", \"nodes\": [\"t\"], \"answers\": [\"x\"]}\n{\"id\": \"b\", \"query\": \"Q\", \"nodes\": [\"t\"]}\n",
    );
    let out = synthkit().args(["eval", "-q"]).arg(&bad).output().unwrap();
    assert_usage_error(&out, "line 3: an answerable case needs");

    let dup = write(
        dir.path(),
        "dup.jsonl",
        "{\"id\": \"a\", \"query\": \"Q\", \"nodes\": [\"t\"], \"answers\": [\"x\"]}\n{\"id\": \"a\", \"query\": \"Q\", \"nodes\": [\"t\"], \"answers\": [\"x\"]}\n",
    );
    let out = synthkit().args(["eval", "-q"]).arg(&dup).output().unwrap();
    assert_usage_error(&out, "line 2: the id `a` is already used by line 1");

    let answers = write(
        dir.path(),
        "a.jsonl",
        "{\"id\": \"zz\", \"mode\": \"m\", \"answer\": \"x\"}\n",
    );
    let out = synthkit()
        .args(["eval", "-q", "--answers"])
        .arg(&answers)
        .arg(&cases)
        .output()
        .unwrap();
    assert_usage_error(&out, "names the case `zz`");

    let missing = write(
        dir.path(),
        "paths.jsonl",
        "{\"id\": \"p\", \"query\": \"Q\", \"paths\": [\"nowhere\"], \"answers\": [\"x\"]}\n",
    );
    let out = synthkit()
        .args(["eval", "-q"])
        .arg(&missing)
        .output()
        .unwrap();
    assert_usage_error(&out, "line 1: the path `nowhere` does not exist");
}

#[test]
fn paths_cases_are_read_from_the_cases_folder() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("docs")).unwrap();
    write(
        &dir.path().join("docs"),
        "mirror.md",
        format!("# Care\n\n{MIRROR}\n"),
    );
    write(
        &dir.path().join("docs"),
        "dome.md",
        "# Dome\n\nThe dome opens at dusk.\n",
    );
    let cases = write(
        dir.path(),
        "cases.jsonl",
        format!(
            "{}\n{}\n",
            json!({"id": "p1", "query": QUESTION, "paths": ["docs"], "top_k": 1,
                   "answers": ["three months"], "evidence": ["docs/mirror.md#1"]}),
            // No chunk shares a word with it: nothing is sent, and the row abstains.
            json!({"id": "p2", "query": "Where do zebras sleep?", "paths": ["docs"],
                   "top_k": 1, "answers": [], "answerable": false})
        ),
    );
    // Run from elsewhere: the paths are the cases file's.
    let out = synthkit()
        .current_dir(std::env::temp_dir())
        .args(["eval", "--json", "-q", "--cite"])
        .arg(&cases)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let report = json_of(&out);
    let p1 = row(&report, "p1", "compact");
    assert_eq!(p1["correct"], true, "{p1:#}");
    assert_eq!(p1["in_nodes"], true);
    let p2 = row(&report, "p2", "compact");
    assert_eq!(p2["abstained"], true, "{p2:#}");
    assert_eq!(p2["correct"], true, "{p2:#}");
    assert_eq!(p2["calls"], 0, "{p2:#}");
}

#[test]
fn a_second_run_resumes_without_new_model_calls() {
    let fake = FakeOpenAi::start(FakeConfig::replying("Every three months."));
    let dir = tempfile::tempdir().unwrap();
    let cases = cases(dir.path());
    let rows = dir.path().join("rows.jsonl");
    let run = |modes: &str| {
        synthkit()
            .args(["eval", "--json", "-q", "--modes", modes, "-o"])
            .arg(&rows)
            .args([
                "--llm",
                "openai",
                "--base-url",
                &fake.base,
                "--model",
                "fake-model",
            ])
            .args([
                "--context-window",
                "2048",
                "--num-output",
                "64",
                "--timeout",
                "20",
            ])
            .args(["--evidence", "off"])
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

/// A prompt can be measured before it becomes a default: `eval` takes `ask`'s template
/// files and system prompt, and the model receives them.
#[test]
fn other_prompts_are_measured_with_the_template_flags() {
    let fake = FakeOpenAi::start(FakeConfig::replying("Every three months."));
    let dir = tempfile::tempdir().unwrap();
    let cases = cases(dir.path());
    let qa = write(
        dir.path(),
        "qa.txt",
        "TRIAL-PROMPT\n{context_str}\nQ: {query_str}\nA:",
    );
    let out = synthkit()
        .args([
            "eval",
            "--json",
            "-q",
            "--modes",
            "compact",
            "--qa-template",
        ])
        .arg(&qa)
        .args(["--system-prompt", "TRIAL-SYSTEM"])
        .args(["--llm", "openai", "--base-url", &fake.base, "--model", "m"])
        .args(["--context-window", "2048", "--num-output", "64"])
        .args(["--evidence", "off"])
        .arg(&cases)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let bodies = fake.bodies();
    assert_eq!(bodies.len(), 3, "one call per case");
    for body in &bodies {
        let text = body["messages"].to_string();
        assert!(text.contains("TRIAL-PROMPT"), "{text}");
        assert!(text.contains("TRIAL-SYSTEM"), "{text}");
    }

    let bad = write(dir.path(), "bad.txt", "{context_str} {nope}");
    let out = synthkit()
        .args(["eval", "-q", "--modes", "compact", "--qa-template"])
        .arg(&bad)
        .args(["--llm", "openai", "--base-url", &fake.base, "--model", "m"])
        .arg(&cases)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("nope"), "{}", stderr(&out));
    assert_eq!(fake.requests(), 3, "no call with a bad template");
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
        synthkit()
            .args(["eval", "--json", "-q", "--modes", "compact", "-o"])
            .arg(&rows)
            .args(["--llm", "openai", "--base-url", base, "--model", "m"])
            .args(["--context-window", "2048", "--num-output", "64"])
            .args(["--retries", "1", "--timeout", "20"])
            .args(["--evidence", "off"])
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

#[test]
fn the_page_links_each_answer_to_its_report() {
    let dir = tempfile::tempdir().unwrap();
    let cases = cases(dir.path());
    let page = dir.path().join("eval.html");
    let reports = dir.path().join("reports");
    let out = synthkit()
        .args(["eval", "-q", "--modes", "compact,tree_summarize", "--html"])
        .arg(&page)
        .arg("--report-dir")
        .arg(&reports)
        .arg(&cases)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<th>synthkit · compact</th><th>synthkit · tree_summarize</th>"));
    assert!(html.contains("href=\"reports/c1.compact.html\""), "{html}");
    assert!(reports.join("c1.compact.html").is_file());
    assert!(reports.join("c3.tree_summarize.html").is_file());
    assert!(html.contains("Which bank financed the observatory&#39;s parking garage?"));
}

/// `--jobs N` keeps N runs in flight: a gated model holds every call until all three
/// cases' calls have arrived together (with one job at a time the second never would), and
/// the rows still come out in case order.
#[test]
fn jobs_run_cases_side_by_side_in_case_order() {
    let model = synthkit_testkit::gated::GatedOpenAi::start();
    let dir = tempfile::tempdir().unwrap();
    let cases = cases(dir.path());
    let rows = dir.path().join("rows.jsonl");
    let child = crate::common::spawn_synthkit()
        .args([
            "eval", "--json", "-q", "--modes", "compact", "--jobs", "3", "-o",
        ])
        .arg(&rows)
        .args(["--llm", "openai", "--base-url", &model.base])
        .args(["--model", "gated-model", "--context-window", "2048"])
        .args(["--num-output", "64", "--timeout", "60"])
        .args(["--evidence", "off"])
        .arg(&cases)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(model.wait_arrived(3, std::time::Duration::from_secs(60)));
    model.open();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(model.arrived(), 3, "one compact call per case");
    let ids: Vec<String> = std::fs::read_to_string(&rows)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["id"].to_string())
        .collect();
    assert_eq!(ids, ["\"c1\"", "\"c2\"", "\"c3\""], "rows in case order");
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
        synthkit()
            .args(["eval", "--json", "-q", "--modes", "compact", "-o"])
            .arg(&rows)
            .arg("--answers")
            .arg(answers)
            .args(["--llm", "openai", "--base-url", &fake.base, "--model", "m"])
            .args([
                "--context-window",
                "2048",
                "--num-output",
                "64",
                "--timeout",
                "20",
            ])
            .args(["--evidence", "off"])
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

/// Issue 42, item 8: answers lines without `system` are named after their file, so they
/// never take the place of synthkit's own runs; a line named as synthkit's runs in a mode
/// they run is refused.
#[test]
fn answers_without_a_system_never_replace_synthkits_runs() {
    let dir = tempfile::tempdir().unwrap();
    let cases = cases(dir.path());
    let lines: String = ["c1", "c2", "c3"]
        .iter()
        .map(|id| {
            format!(
                "{}\n",
                json!({"id": id, "mode": "compact", "answer": "Blue."})
            )
        })
        .collect();
    let reference = write(dir.path(), "ref.jsonl", &lines);
    let out = synthkit()
        .args(["eval", "--json", "-q", "--modes", "compact", "--answers"])
        .arg(&reference)
        .arg(&cases)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let report = json_of(&out);
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 6, "synthkit's runs and the file's: {report:#}");
    let ours = rows
        .iter()
        .find(|r| r["id"] == "c1" && r["system"] == "synthkit")
        .unwrap();
    assert_eq!(ours["correct"], true, "synthkit's own run: {ours:#}");
    let theirs = rows
        .iter()
        .find(|r| r["id"] == "c1" && r["system"] == "ref")
        .unwrap();
    assert_eq!(theirs["answer"], "Blue.");

    let named = write(
        dir.path(),
        "named.jsonl",
        format!(
            "{}\n",
            json!({"id": "c1", "mode": "compact", "system": "synthkit", "answer": "x"})
        ),
    );
    let out = synthkit()
        .args(["eval", "-q", "--modes", "compact", "--answers"])
        .arg(&named)
        .arg(&cases)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "named.jsonl: line 1: the answer to `c1` in mode `compact` is named `synthkit`"
        ),
        "{}",
        stderr(&out)
    );
}

/// Issue 42, item 11: a second answer for one case, mode and system is refused (naming
/// both lines), a byte-order mark is read past, counts do not wrap, and evidence that
/// names no node of its case is refused when the cases are read.
#[test]
fn eval_input_is_checked_whole() {
    let dir = tempfile::tempdir().unwrap();
    let cases = cases(dir.path());
    let twice = write(
        dir.path(),
        "twice.jsonl",
        format!(
            "{}\n{}\n",
            json!({"id": "c1", "mode": "compact", "system": "s", "answer": "three months"}),
            json!({"id": "c1", "mode": "compact", "system": "s", "answer": "no"})
        ),
    );
    let out = synthkit()
        .args(["eval", "-q", "--answers"])
        .arg(&twice)
        .arg(&cases)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("twice.jsonl: line 2: the answer to `c1` in mode `compact` for the system `s` is given twice")
            && stderr(&out).contains("line 1 has one"),
        "{}",
        stderr(&out)
    );

    // A byte-order mark before the first line of both files.
    let bom_cases = write(
        dir.path(),
        "bom-cases.jsonl",
        format!("\u{feff}{}", std::fs::read_to_string(&cases).unwrap()),
    );
    let huge = |id: &str| {
        json!({"id": id, "mode": "compact", "system": "s", "answer": "x",
               "calls": u64::MAX, "prompt_tokens": u64::MAX})
    };
    let bom_answers = write(
        dir.path(),
        "bom-answers.jsonl",
        format!("\u{feff}{}\n{}\n{}\n", huge("c1"), huge("c2"), huge("c3")),
    );
    let out = synthkit()
        .args(["eval", "-q", "--json", "--answers"])
        .arg(&bom_answers)
        .arg(&bom_cases)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let report = json_of(&out);
    let t = &report["totals"][0];
    assert_eq!(
        (t["cases"].clone(), t["calls"].clone()),
        (json!(3), json!(u64::MAX)),
        "{t:#}"
    );
    assert_eq!(t["prompt_tokens"], json!(u64::MAX));

    let unknown = write(
        dir.path(),
        "unknown.jsonl",
        format!(
            "{}\n",
            json!({"id": "e", "query": QUESTION, "nodes": [{"id": "mirror", "text": MIRROR}],
                   "answers": ["three months"], "evidence": ["mirorr"]})
        ),
    );
    let out = synthkit()
        .args(["eval", "-q"])
        .arg(&unknown)
        .output()
        .unwrap();
    assert_usage_error(
        &out,
        "line 1: `evidence[0]` is `mirorr`, which is the id of no node",
    );
}

/// Issue 42, item 11: the `report` of a row read back from ROWS is input: the page links
/// only relative file names, never `javascript:`.
#[test]
fn a_rows_report_field_never_becomes_a_script_link() {
    let dir = tempfile::tempdir().unwrap();
    let cases = cases(dir.path());
    let rows = dir.path().join("rows.jsonl");
    let first = synthkit()
        .args(["eval", "-q", "--modes", "compact", "-o"])
        .arg(&rows)
        .arg(&cases)
        .output()
        .unwrap();
    assert!(first.status.success(), "{}", stderr(&first));
    let text = std::fs::read_to_string(&rows).unwrap();
    let mut lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    lines[0]["report"] = json!("javascript:alert(document.domain)");
    lines[1]["report"] = json!("https://example.com/phish.html");
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&rows, text).unwrap();
    let page = dir.path().join("eval.html");
    let out = synthkit()
        .args(["eval", "-q", "--modes", "compact", "-o"])
        .arg(&rows)
        .arg("--html")
        .arg(&page)
        .arg(&cases)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("href=\"javascript:"), "{html}");
    assert!(!html.contains("href=\"https://example.com"), "{html}");
    assert_eq!(html.matches("report not linked").count(), 2, "{html}");
}

/// Issue 43, item 0: versions, flags and paths in an answer are matched as a reader reads
/// them, and the table names the cases answered wrong.
#[test]
fn technical_answers_are_scored_as_a_reader_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let node = |id: &str, text: &str| json!([{"id": id, "text": text}]);
    let lines = [
        json!({"id": "msrv", "query": "What is the minimum Rust version?",
               "nodes": node("r", "The MSRV is `1.65.0`."), "answers": ["1.65"], "evidence": ["r"]}),
        json!({"id": "feature", "query": "Which feature bundles SQLite?",
               "nodes": node("f", "Build with `--features=bundled` to compile SQLite in."),
               "answers": ["bundled"], "evidence": ["f"]}),
        json!({"id": "lts", "query": "Which release line is LTS?",
               "nodes": node("l", "The `1.51.x` line is supported."), "answers": ["1.51"]}),
        json!({"id": "other", "query": "Which version?",
               "nodes": node("o", "Version 1.65 is out; 1.650 is not."), "answers": ["1.65"]}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let cases = write(dir.path(), "cases.jsonl", text);
    let answers: String = [
        ("msrv", "Rust `1.65.0` or newer."),
        ("feature", "Use `--features=bundled`."),
        ("lts", "The `1.51.x` releases."),
        ("other", "Version 1.650."),
    ]
    .iter()
    .map(|(id, a)| {
        format!(
            "{}\n",
            json!({"id": id, "mode": "compact", "system": "s", "answer": a})
        )
    })
    .collect();
    let answers = write(dir.path(), "a.jsonl", answers);
    let out = synthkit()
        .args(["eval", "-q", "--answers"])
        .arg(&answers)
        .arg(&cases)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains("3 (75%)"), "{table}");
    assert!(table.contains("wrong in s/compact (1): other\n"), "{table}");
    // Its answer is in the nodes: lost in synthesis, not in retrieval.
    assert!(table.contains(" 0/0/1 "), "{table}");
}

/// Issue 42, item 9: a case's `paths` are read under the cases file's folder only (an
/// absolute path, `..` or a link out of it is refused or not followed) unless
/// `--allow-paths-outside`, and a `paths` folder is read within `batch`'s caps.
#[cfg(unix)]
#[test]
fn case_paths_stay_under_the_cases_folder() {
    let dir = tempfile::tempdir().unwrap();
    let secret = write(dir.path(), "secret.txt", "The vault code is 4711.\n");
    let root = dir.path().join("bench");
    std::fs::create_dir_all(root.join("docs")).unwrap();
    write(
        &root.join("docs"),
        "vault.md",
        "# Vault\n\nThe vault opens at noon.\n",
    );
    std::os::unix::fs::symlink(&secret, root.join("docs/leak.txt")).unwrap();
    std::os::unix::fs::symlink(&secret, root.join("leak.txt")).unwrap();
    let case = |id: &str, paths: Value| {
        json!({"id": id, "query": "What is the vault code?", "paths": paths, "top_k": 5,
               "answers": ["4711"]})
    };
    let eval = |lines: &[Value], extra: &[&str]| {
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let cases = write(&root, "cases.jsonl", text);
        synthkit()
            .current_dir(dir.path())
            .args(["eval", "--json", "-q"])
            .args(extra)
            .arg(&cases)
            .output()
            .unwrap()
    };
    for (paths, why) in [
        (
            json!(["../secret.txt"]),
            "`../secret.txt` goes up a folder (`..`)",
        ),
        (json!([secret.display().to_string()]), "is an absolute path"),
        (json!(["leak.txt"]), "`leak.txt` leads outside"),
    ] {
        let out = eval(&[case("c", paths.clone())], &[]);
        assert_eq!(out.status.code(), Some(2), "{paths}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(why) && stderr(&out).contains("--allow-paths-outside"),
            "{paths}: {}",
            stderr(&out)
        );
    }
    // A folder with a link out of it: the link is not followed (and said so).
    let out = eval(&[case("c", json!(["docs"]))], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report = json_of(&out);
    let r = row(&report, "c", "compact");
    assert_eq!(r["in_nodes"], false, "{r:#}");
    assert!(stderr(&out).contains("leak.txt"), "{}", stderr(&out));
    // Allowed: read.
    let out = eval(
        &[case("c", json!(["../secret.txt"]))],
        &["--allow-paths-outside"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(row(&json_of(&out), "c", "compact")["correct"], true);

    // A folder of more files than a line may read: the case's row says so.
    let big = root.join("big");
    std::fs::create_dir_all(&big).unwrap();
    for i in 0..=10_000 {
        std::fs::write(big.join(format!("{i}.txt")), "The vault code is 4711.").unwrap();
    }
    let out = eval(&[case("big", json!(["big"]))], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report = json_of(&out);
    let r = row(&report, "big", "compact");
    assert!(
        r["error"]
            .as_str()
            .unwrap_or_default()
            .contains("more than 10000 files"),
        "{r:#}"
    );
}
