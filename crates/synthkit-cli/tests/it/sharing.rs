//! `ask` and `batch` with `--redis-url`: one response cache and one rate budget for every
//! process given the same URL and prefix, against a real `redis-server` (skipped with a
//! message where it is not installed, a failure under `CI`) and a loopback fake model.
//!
//! The budget's check is a lower bound on a wait the shared budget imposes (a batch that
//! shares nothing answers in a fraction of a second): load can only lengthen it.

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use synthkit_testkit::redis::RedisServer;
use synthkit_testkit::{FakeConfig, FakeOpenAi};

use crate::common::{assert_stderr_has, stderr, synthkit, write};

/// The fake's two nodes, as `--nodes` and batch lines take them.
fn nodes() -> Value {
    json!([
        {"id": "m", "text": "The mirror is cleaned every six months."},
        {"id": "d", "text": "The dome opens at dusk."}
    ])
}

/// The model and sharing flags every run here uses: `--tpm 200` for every process of the
/// prefix. Each call is charged its prompt (about 55 tokens) plus its output reserve (64):
/// the first fits, the second waits about ten seconds for the budget to refill.
fn model_flags<'a>(fake: &'a FakeOpenAi, redis: &'a RedisServer) -> Vec<&'a str> {
    // A test of sharing, not of evidence: the prompts and replies as without it.
    vec![
        "--evidence",
        "off",
        "--on-unsupported",
        "warn",
        "--llm",
        "openai",
        "--base-url",
        &fake.base,
        "--model",
        "fake-model",
        "--context-window",
        "4096",
        "--num-output",
        "64",
        "--redis-url",
        &redis.url,
        "--redis-prefix",
        "cli-sharing",
        "--tpm",
        "200",
    ]
}

fn ask(fake: &FakeOpenAi, redis: &RedisServer, nodes: &Path, question: &str) -> Output {
    let out = synthkit()
        .arg("ask")
        .args(model_flags(fake, redis))
        .arg("--nodes")
        .arg(nodes)
        .arg(question)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    out
}

fn batch(fake: &FakeOpenAi, redis: &RedisServer, dir: &Path, line: &Value, name: &str) -> Value {
    let input = write(dir, &format!("{name}.jsonl"), format!("{line}\n"));
    let output = dir.join(format!("{name}-out.jsonl"));
    let out = synthkit()
        .arg("batch")
        .arg(&input)
        .arg("-o")
        .arg(&output)
        .args(model_flags(fake, redis))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&output).unwrap();
    serde_json::from_str(text.lines().next().unwrap()).unwrap()
}

#[test]
fn ask_and_batch_share_one_cache_and_one_budget_through_redis() {
    let Some(redis) = RedisServer::for_test() else {
        return;
    };
    let fake = FakeOpenAi::start(FakeConfig::replying("Every six months."));
    let dir = tempfile::tempdir().unwrap();
    let nodes_file = write(dir.path(), "nodes.json", nodes().to_string());
    let question = "How often is the mirror cleaned?";

    // The first ask calls the model; the second, another process, is answered from Redis.
    ask(&fake, &redis, &nodes_file, question);
    assert_eq!(fake.requests(), 1);
    let again = ask(&fake, &redis, &nodes_file, question);
    assert_stderr_has(&again, "1 cached, 0 new calls");
    assert_eq!(fake.requests(), 1);

    // batch, with the same request in a line, finds ask's reply in the same cache.
    let line = json!({"id": "q1", "query": question, "nodes": nodes()});
    let row = batch(&fake, &redis, dir.path(), &line, "same");
    assert_eq!(row["response"]["text"], "Every six months.");
    assert_eq!(fake.requests(), 1);

    // A new request spends from the budget ask spent (200 tokens a minute for every
    // process), so this batch waits for its turn.
    let start = Instant::now();
    let line = json!({"id": "q2", "query": "When does the dome open?", "nodes": nodes()});
    let row = batch(&fake, &redis, dir.path(), &line, "new");
    let waited = start.elapsed();
    assert_eq!(row["response"]["text"], "Every six months.");
    assert_eq!(fake.requests(), 2);
    assert!(
        waited >= Duration::from_secs(6),
        "the batch did not wait for the shared budget: {waited:?}"
    );
}
