//! `synthkit eval` running cases: the offline extractive backend (deterministic) answering
//! each case in each mode and the answers scored, cases whose `paths` are read under the
//! cases file's folder (and not outside it), other prompts measured with `ask`'s template
//! flags against a loopback fake, and `--jobs` running cases side by side.

use serde_json::{Value, json};
use synthkit_testkit::{FakeConfig, FakeOpenAi};

use crate::common::{MIRROR, QUESTION, json_of, stderr, synthkit, write};
use crate::eval_common::{cases, row};

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
