//! The plan against the run (issue 29): `--plan`, the size guard of `--max-calls` /
//! `--max-total-prompt-tokens` and the run count prompts with one counter (the server's
//! `/tokenize` through its chat template), and a run whose replies vary in length never
//! spends more calls or prompt tokens than its plan. The server is
//! [`ScriptedLlama`]: its tokenizer is not cl100k and its chat template adds a system
//! message, so a local count is low.

use std::path::Path;

use serde_json::Value;
use synthkit_testkit::scripted::ScriptedLlama;

use crate::common::{json_of, stderr, synthkit};

/// Two files of a few thousand words: a tree of three levels at a 1,024-token window.
fn docs(dir: &Path) {
    let sentences = [
        "The observatory's primary mirror is cleaned with carbon dioxide snow every three months.",
        "Maintenance crews log each cleaning, the reflectivity before and after, and the weather.",
        "The dome's motors were replaced in the refurbishment, which also renewed the cabling.",
        "Budgets for consumables are set each spring by the facility's operations committee.",
        "Instrument scientists schedule calibration nights around the cleaning cycle.",
    ];
    for f in 0..2 {
        let text: String = (0..160)
            .map(|i| sentences[(i * (f + 2)) % sentences.len()])
            .collect::<Vec<_>>()
            .join(" ");
        std::fs::write(dir.join(format!("doc{f}.txt")), text).unwrap();
    }
}

/// `summarize` of `dir` in `mode` against `server`, with `extra` flags.
fn summarize(
    server: &ScriptedLlama,
    dir: &Path,
    mode: &str,
    extra: &[&str],
) -> std::process::Output {
    synthkit()
        .arg("summarize")
        .arg(dir)
        .args(["--base-url", &server.base, "--model", "scripted", "-q"])
        .args([
            "--mode",
            mode,
            "--num-output",
            "128",
            "--context-window",
            "1024",
        ])
        .args(extra)
        .output()
        .unwrap()
}

/// The plan's total calls, prompt tokens and exactness (`--plan --json`).
fn planned(server: &ScriptedLlama, dir: &Path, mode: &str) -> (usize, usize, bool) {
    let out = summarize(server, dir, mode, &["--plan", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let plan: Value = json_of(&out);
    let total = &plan["total"];
    (
        total["calls"].as_u64().unwrap() as usize,
        total["prompt_tokens"].as_u64().unwrap() as usize,
        total["exact"].as_bool().unwrap(),
    )
}

/// The guard refuses a run whose plan is one token over the cap, naming the plan's own
/// count; at the plan's count it runs, and spends no more than planned. (The guard
/// counted with the local tokenizer before: 10% low here, so the run started.)
#[test]
fn the_guard_counts_as_the_plan_does() {
    let dir = tempfile::tempdir().unwrap();
    docs(dir.path());
    // Three bytes a token: more than cl100k counts, and a chat template on top.
    let server = ScriptedLlama::start(1024, 3, ScriptedLlama::varied_replies());
    let (calls, tokens, exact) = planned(&server, dir.path(), "tree_summarize");
    assert!(calls > 3 && !exact, "{calls} {tokens}");
    assert_eq!(server.calls(), 0, "a plan calls no model");

    let cap = (tokens - 1).to_string();
    let max_calls = calls.to_string();
    let flags = ["--max-total-prompt-tokens", &cap, "--max-calls", &max_calls];
    let out = summarize(&server, dir.path(), "tree_summarize", &flags);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    let over = format!("at most {tokens} prompt tokens (--max-total-prompt-tokens {cap})");
    assert!(err.contains(&over), "{err}");
    assert_eq!(server.calls(), 0, "refused before any call");

    let cap = tokens.to_string();
    let flags = ["--max-total-prompt-tokens", &cap, "--max-calls", &max_calls];
    let out = summarize(&server, dir.path(), "tree_summarize", &flags);
    assert!(out.status.success(), "{}", stderr(&out));
    let spent: usize = server.prompt_tokens().iter().sum();
    assert!(
        server.calls() <= calls,
        "{} calls > {calls} planned",
        server.calls()
    );
    assert!(spent <= tokens, "{spent} prompt tokens > {tokens} planned");
}

/// In every mode whose later steps depend on the replies, replies of varied length (the
/// longest cut at the output limit, some a word) never make the run exceed its plan.
#[test]
fn runs_with_varied_replies_stay_within_their_plans() {
    let dir = tempfile::tempdir().unwrap();
    docs(dir.path());
    let modes = ["tree_summarize", "refine", "compact", "accumulate"];
    // A model tokenizer that counts more than the local one, and one that counts fewer.
    for (mode, per) in modes.iter().flat_map(|m| [(*m, 3), (*m, 6)]) {
        let server = ScriptedLlama::start(1024, per, ScriptedLlama::varied_replies());
        let (calls, tokens, _) = planned(&server, dir.path(), mode);
        let out = summarize(&server, dir.path(), mode, &["--yes"]);
        assert!(out.status.success(), "{mode} {per}: {}", stderr(&out));
        let spent: usize = server.prompt_tokens().iter().sum();
        let made = server.calls();
        assert!(
            made <= calls,
            "{mode} {per}: {made} calls > {calls} planned"
        );
        assert!(
            spent <= tokens,
            "{mode} {per}: {spent} tokens > {tokens} planned"
        );
    }
}
