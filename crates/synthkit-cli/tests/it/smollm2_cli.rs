//! `synthkit summarize` with default flags against a real llama-server with its default
//! layout (4 slots sharing one KV cache, here 2048 tokens) serving a real instruction model,
//! SmolLM2-135M-Instruct: long prompts sent 4 at a time exhaust the shared cache (HTTP 500
//! "Context size has been exceeded"); the command must lower its calls in flight and
//! succeed, reporting how often it did.
//!
//! The model is fetched once into the llama-server cache by `scripts/fetch-smollm2.sh`;
//! without it (or llama-server) the test prints a skip message, unless `CI` is set.

use serde_json::Value;
use synthkit_testkit::llama;

use crate::common::{heavy, json_of, synthkit, write};

/// `synthkit ARGS --base-url SERVER --json`: the report of a successful run.
fn report(server: &llama::LlamaServer, args: &[&std::ffi::OsStr]) -> Value {
    json_of(
        &synthkit()
            .args(args)
            .args(["--base-url", &server.base, "--json"])
            // A real model on a busy machine: far past the usual 180 s.
            .timeout(std::time::Duration::from_secs(900))
            .output()
            .unwrap(),
    )
}

/// The SmolLM2 server (4 slots sharing a 2048-token cache) and an empty folder; `None`
/// after a skip message when the server cannot be had here.
fn smollm2() -> Option<(llama::LlamaServer, tempfile::TempDir)> {
    Some((llama::smollm2(2048, "-t 2")?, tempfile::tempdir().unwrap()))
}

/// A folder of real-looking notes: about 6,000 tokens in 6 files.
fn write_folder(dir: &std::path::Path) {
    let sentences = [
        "The primary mirror is cleaned every six months, in March and September.",
        "Visitors may tour the control room on the first Saturday of each month.",
        "The spectrograph was upgraded in 2019 with a cooled detector.",
        "The public telescope opens at dusk on Fridays, weather permitting.",
        "The dome rotates on twelve steel wheels and turns fully in four minutes.",
        "Night staff log cloud cover every hour and archive the logs for ten years.",
    ];
    for f in 0..6 {
        let mut text = format!("# Handbook part {f}\n\n");
        for i in 0..60 {
            text.push_str(sentences[(f + i) % sentences.len()]);
            text.push(if i % 6 == 5 { '\n' } else { ' ' });
        }
        write(dir, &format!("part{f:02}.md"), text);
    }
}

#[test]
fn default_flag_summarize_succeeds_against_a_shared_kv_cache() {
    let _one_at_a_time = heavy();
    let Some((server, dir)) = smollm2() else {
        return;
    };
    write_folder(dir.path());
    let trace = dir.path().join("calls.jsonl");
    // Many calls: past the size a run starts without asking; and the parts repeat one
    // text, which a folder's copies would leave out (issue 23).
    let report = report(
        &server,
        &[
            "summarize".as_ref(),
            dir.path().as_os_str(),
            "--yes".as_ref(),
            "--keep-all".as_ref(),
            "--trace".as_ref(),
            trace.as_os_str(),
            // Default flags but one: each call's time bound (120 s from its first send) is
            // not what this test is about, and on a loaded 2-core machine SmolLM2's calls
            // plus their retries after "context size exceeded" can take longer.
            "--retry-max-secs".as_ref(),
            "600".as_ref(),
        ],
    );
    assert!(
        !report["answer"]
            .as_str()
            .unwrap_or_default()
            .trim()
            .is_empty(),
        "{report}"
    );
    let concurrency = &report["concurrency"];
    assert_eq!(concurrency["server_slots"], 4, "{report}");
    assert_eq!(concurrency["start"], 4, "{report}");
    assert!(
        concurrency["lowered"].as_u64().unwrap() >= 1,
        "the shared cache should have been exhausted at 4 calls in flight: {report}"
    );
    assert!(concurrency["peak"].as_u64().unwrap() <= 4, "{report}");
    // Through every layer the command stacks (retries, adaptive limit), each prompt counts
    // exactly what the server charged for it.
    let calls: Vec<Value> = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l.get("call").is_some())
        .collect();
    assert!(!calls.is_empty());
    for c in &calls {
        assert_eq!(c["counted_prompt_tokens"], c["prompt_tokens"], "{c}");
        assert_eq!(c["usage_reported"], true, "{c}");
    }
}

/// `ask --cite` against the real model: whatever the small model writes, every marker
/// left in the answer names a listed, cited source, numbered in order of first use, and
/// the cited sources come first.
#[test]
fn cited_answers_only_name_sources_the_model_was_shown() {
    let _one_at_a_time = heavy();
    let Some((server, dir)) = smollm2() else {
        return;
    };
    write(
        dir.path(),
        "mirror.md",
        "# Mirror\n\nThe primary mirror is cleaned every six months, in March and September.\n",
    );
    write(
        dir.path(),
        "tours.md",
        "# Tours\n\nVisitors may tour the control room on the first Saturday of each month.\n",
    );
    let q = "How often is the primary mirror cleaned?";
    let report = report(
        &server,
        &[
            "ask".as_ref(),
            q.as_ref(),
            dir.path().as_os_str(),
            "--cite".as_ref(),
        ],
    );
    let answer = report["answer"].as_str().unwrap();
    let citations = report["citations"].as_array().unwrap();
    let sources = report["sources"].as_array().unwrap();
    for (i, c) in citations.iter().enumerate() {
        assert_eq!(c["marker"], i + 1, "{report}");
        assert!(answer.contains(&format!("{}]", i + 1)), "{report}");
        let id = &c["node_ids"][0];
        assert!(sources.iter().any(|s| &s["id"] == id && s["cited"] == true));
    }
    // Cited sources first.
    let first_uncited = sources.iter().position(|s| s["cited"] == false);
    if let Some(p) = first_uncited {
        assert!(sources[p..].iter().all(|s| s["cited"] == false), "{report}");
    }
    // No marker names a number beyond the citations.
    for n in citations.len() + 1..=sources.len() + 5 {
        assert!(!answer.contains(&format!("[{n}]")), "{report}");
    }
    println!(
        "SmolLM2 --cite: {answer:?} ({} citations, removed {})",
        citations.len(),
        report["citations_removed"]
    );
}

/// `synthkit eval` against the real model (mechanics only: no score is asserted, a
/// 135M model's answers are not the point): every case runs in every mode, each row has
/// its calls, the server's token counts and the prompts it was sent, the scores are
/// computed, and a resumed run makes no new call.
#[test]
fn eval_runs_every_case_in_every_mode() {
    let _one_at_a_time = heavy();
    let Some((server, dir)) = smollm2() else {
        return;
    };
    let nodes = serde_json::json!([
        {"id": "mirror", "text": "The primary mirror is cleaned every six months, in March and September."},
        {"id": "tours", "text": "Visitors may tour the control room on the first Saturday of each month."},
        {"id": "dome", "text": "The dome rotates on twelve steel wheels and turns fully in four minutes."}
    ]);
    let cases: String = [
        serde_json::json!({"id": "mirror", "query": "How often is the primary mirror cleaned?",
            "nodes": nodes, "answers": ["six months"], "evidence": ["mirror"]}),
        serde_json::json!({"id": "wheels", "query": "How many wheels does the dome rotate on?",
            "nodes": nodes, "answers": [{"regex": "\\b(12|twelve)\\b"}], "evidence": ["dome"]}),
        serde_json::json!({"id": "bank", "query": "Which bank financed the parking garage?",
            "nodes": nodes, "answers": [], "answerable": false}),
    ]
    .iter()
    .map(|c| format!("{c}\n"))
    .collect();
    let cases = write(dir.path(), "cases.jsonl", cases);
    let rows = dir.path().join("rows.jsonl");
    let page = dir.path().join("eval.html");
    let run = || {
        synthkit()
            .args([
                "eval",
                "--modes",
                "compact,refine,tree_summarize",
                "--cite",
                "-q",
            ])
            .arg(&cases)
            .arg("-o")
            .arg(&rows)
            .arg("--html")
            .arg(&page)
            .args(["--base-url", &server.base, "--json", "--evidence", "off"])
            .timeout(std::time::Duration::from_secs(900))
            .output()
            .unwrap()
    };
    let report = json_of(&run());
    let all = report["rows"].as_array().unwrap();
    assert_eq!(all.len(), 9, "{report:#}");
    for r in all {
        assert!(r["error"].is_null(), "{r:#}");
        assert!(r["calls"].as_u64().unwrap() >= 1, "{r:#}");
        assert!(r["prompt_tokens"].as_u64().unwrap() > 0, "{r:#}");
        if r["answerable"] == true {
            // The answer was in the nodes, and the prompts sent were kept and searched.
            assert_eq!(r["in_nodes"], true, "{r:#}");
            assert!(r["in_prompts"].is_boolean(), "{r:#}");
        }
        assert!(r["f1"].as_f64().is_some(), "{r:#}");
    }
    let totals = report["totals"].as_array().unwrap();
    assert_eq!(totals.len(), 3);
    for t in totals {
        assert_eq!(t["cases"], 3, "{t:#}");
        assert_eq!(t["errors"], 0, "{t:#}");
    }
    assert_eq!(report["paired"].as_array().unwrap().len(), 3);
    assert!(
        std::fs::read_to_string(&page)
            .unwrap()
            .contains("synthkit eval")
    );
    println!(
        "SmolLM2 eval: {}",
        totals
            .iter()
            .map(|t| format!("{} {}/{}", t["mode"], t["correct"], t["cases"]))
            .collect::<Vec<_>>()
            .join(", ")
    );
    // Resumed: the same results, no new row.
    let again = json_of(&run());
    assert_eq!(again["rows"], report["rows"]);
    assert_eq!(std::fs::read_to_string(&rows).unwrap().lines().count(), 9);
}
