//! Issue 45: `--reuse-hints` says what calls tell the server so that it reuses their
//! shared prefix: by default llama.cpp's `id_slot` to a server that reports its slots
//! (and no `prompt_cache_key` to one that is not OpenAI's), `all` adds
//! `prompt_cache_key`, `none` sends neither.

use synthkit_testkit::slots::{SlotCall, SlotConfig, SlotServer};

use crate::common::{QUESTION, docs, stderr, synthkit};

fn ask(hints: Option<&str>) -> Vec<SlotCall> {
    let server = SlotServer::start(SlotConfig {
        slots: Some(2),
        ..SlotConfig::default()
    });
    let dir = docs();
    let mut cmd = synthkit();
    cmd.args(["ask", QUESTION, "--json", "-q"])
        .args([
            "--base-url",
            server.base(),
            "--model",
            "m",
            "--context-window",
            "4096",
        ])
        .args(["--evidence", "off", "--on-unsupported", "warn"]);
    if let Some(h) = hints {
        cmd.args(["--reuse-hints", h]);
    }
    let out = cmd
        .arg(dir.path())
        .env("OPENAI_API_KEY", "")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    server.calls()
}

/// Whether every call carried `id_slot`, and whether every call carried a
/// `prompt_cache_key` (`None`: some did and some did not).
fn carried(calls: &[SlotCall]) -> (Option<bool>, Option<bool>) {
    assert!(!calls.is_empty());
    let all = |has: &dyn Fn(&SlotCall) -> bool| {
        let n = calls.iter().filter(|c| has(c)).count();
        (n == 0 || n == calls.len()).then_some(n > 0)
    };
    (
        all(&|c| c.id_slot.is_some()),
        all(&|c| c.body["prompt_cache_key"].is_string()),
    )
}

#[test]
fn reuse_hints_choose_what_calls_carry() {
    assert_eq!(carried(&ask(None)), (Some(true), Some(false)));
    assert_eq!(carried(&ask(Some("all"))), (Some(true), Some(true)));
    assert_eq!(carried(&ask(Some("none"))), (Some(false), Some(false)));
}
