//! `synthkit eval --answers`: answers produced elsewhere, read from a file, scored by the
//! same code as synthkit's own runs; two systems compared case by case; answers without a
//! `system` kept apart from synthkit's runs; technical answers matched as a reader reads
//! them; and bad cases or answers lines refused with exit 2, naming the line.

use std::path::Path;
use std::process::Output;

use serde_json::json;

use crate::common::{MIRROR, QUESTION, assert_usage_error, json_of, stderr, synthkit, write};
use crate::eval_common::{cases, row};

/// `synthkit eval -q CASES`.
fn eval(cases: &Path) -> Output {
    synthkit().args(["eval", "-q"]).arg(cases).output().unwrap()
}

/// `synthkit eval -q --answers ANSWERS CASES`: answers produced elsewhere, scored.
fn scored(answers: &Path, cases: &Path) -> Output {
    synthkit()
        .args(["eval", "-q", "--answers"])
        .arg(answers)
        .arg(cases)
        .output()
        .unwrap()
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
    let out = scored(&answers, &cases);
    assert!(out.status.success(), "{}", stderr(&out));
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains("3 (75%)"), "{table}");
    assert!(table.contains("wrong in s/compact (1): other\n"), "{table}");
    // Its answer is in the nodes: lost in synthesis, not in retrieval.
    assert!(table.contains(" 0/0/1 "), "{table}");
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
    let out = eval(&bad);
    assert_usage_error(&out, "line 3: an answerable case needs");

    let dup = write(
        dir.path(),
        "dup.jsonl",
        "{\"id\": \"a\", \"query\": \"Q\", \"nodes\": [\"t\"], \"answers\": [\"x\"]}\n{\"id\": \"a\", \"query\": \"Q\", \"nodes\": [\"t\"], \"answers\": [\"x\"]}\n",
    );
    let out = eval(&dup);
    assert_usage_error(&out, "line 2: the id `a` is already used by line 1");

    let answers = write(
        dir.path(),
        "a.jsonl",
        "{\"id\": \"zz\", \"mode\": \"m\", \"answer\": \"x\"}\n",
    );
    let out = scored(&answers, &cases);
    assert_usage_error(&out, "names the case `zz`");

    let missing = write(
        dir.path(),
        "paths.jsonl",
        "{\"id\": \"p\", \"query\": \"Q\", \"paths\": [\"nowhere\"], \"answers\": [\"x\"]}\n",
    );
    let out = eval(&missing);
    assert_usage_error(&out, "line 1: the path `nowhere` does not exist");
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
    let out = scored(&twice, &cases);
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
    let out = eval(&unknown);
    assert_usage_error(
        &out,
        "line 1: `evidence[0]` is `mirorr`, which is the id of no node",
    );
}
