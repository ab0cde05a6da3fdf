//! `ask` and `batch` with `--redis-url`: one response cache and one rate budget for every
//! process given the same URL and prefix, against a real `redis-server` (skipped with a
//! message where it is not installed, a failure under `CI`) and a loopback fake model.
//!
//! The budget's check is a lower bound on a wait the shared budget imposes, timed from
//! before the call that spent the budget (a batch that shares nothing answers in a
//! fraction of a second): load can only lengthen it. The budget is sized from the calls'
//! planned tokens so that the wait is about [`WAIT`], not the half minute a fixed budget
//! made it.

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

/// The wait the shared budget is sized to impose on the second call.
const WAIT: Duration = Duration::from_secs(10);

/// The model and sharing flags every run here uses: `--tpm TPM` for every process of the
/// prefix. Each call is charged its prompt plus its output reserve (64).
fn model_flags<'a>(fake: &'a FakeOpenAi, redis: &'a RedisServer, tpm: &'a str) -> Vec<&'a str> {
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
        tpm,
    ]
}

/// The tokens the budget charges `question`'s one call over `nodes`: its planned prompt
/// plus its output reserve (`ask --plan`, which calls nothing).
fn planned_tokens(fake: &FakeOpenAi, redis: &RedisServer, nodes: &Path, question: &str) -> u64 {
    let out = synthkit()
        .arg("ask")
        .args(model_flags(fake, redis, "1000000"))
        .arg("--nodes")
        .arg(nodes)
        .arg(question)
        .args(["--plan", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["total"]["calls"], 1, "{plan}");
    assert_eq!(plan["total"]["exact"], true, "{plan}");
    let tokens = &plan["total"];
    tokens["prompt_tokens"].as_u64().unwrap() + tokens["max_completion_tokens"].as_u64().unwrap()
}

fn ask(fake: &FakeOpenAi, redis: &RedisServer, tpm: &str, nodes: &Path, question: &str) -> Output {
    let out = synthkit()
        .arg("ask")
        .args(model_flags(fake, redis, tpm))
        .arg("--nodes")
        .arg(nodes)
        .arg(question)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    out
}

fn batch(
    fake: &FakeOpenAi,
    redis: &RedisServer,
    tpm: &str,
    dir: &Path,
    line: &Value,
    name: &str,
) -> Value {
    let input = write(dir, &format!("{name}.jsonl"), format!("{line}\n"));
    let output = dir.join(format!("{name}-out.jsonl"));
    let out = synthkit()
        .arg("batch")
        .arg(&input)
        .arg("-o")
        .arg(&output)
        .args(model_flags(fake, redis, tpm))
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
    let other = "When does the dome open?";

    // GCRA with a minute's burst: the first call (c1 tokens) goes at once and moves the
    // bucket c1 minutes/tpm ahead; the second (c2) may go once (c1 + c2) minutes/tpm less
    // a minute have passed since the first. A tpm of (c1 + c2) * 60 s / (60 s + WAIT),
    // rounded down, makes that at least WAIT.
    let (c1, c2) = (
        planned_tokens(&fake, &redis, &nodes_file, question),
        planned_tokens(&fake, &redis, &nodes_file, other),
    );
    let minute = Duration::from_secs(60);
    let tpm = (c1 + c2) * minute.as_millis() as u64 / (minute + WAIT).as_millis() as u64;
    assert!(c1.max(c2) <= tpm, "{c1} and {c2} tokens, tpm {tpm}");
    let tpm = &tpm.to_string();

    // The first ask calls the model; the second, another process, is answered from Redis.
    let first = Instant::now();
    ask(&fake, &redis, tpm, &nodes_file, question);
    assert_eq!(fake.requests(), 1);
    let again = ask(&fake, &redis, tpm, &nodes_file, question);
    assert_stderr_has(&again, "1 cached, 0 new calls");
    assert_eq!(fake.requests(), 1);

    // batch, with the same request in a line, finds ask's reply in the same cache.
    let line = json!({"id": "q1", "query": question, "nodes": nodes()});
    let row = batch(&fake, &redis, tpm, dir.path(), &line, "same");
    assert_eq!(row["response"]["text"], "Every six months.");
    assert_eq!(fake.requests(), 1);

    // A new request spends from the budget ask spent (for every process), so this batch
    // waits for its turn: it ends no sooner than WAIT after the first ask started (which
    // was before that ask spent; a second less for rounding of the planned tokens).
    let line = json!({"id": "q2", "query": other, "nodes": nodes()});
    let row = batch(&fake, &redis, tpm, dir.path(), &line, "new");
    let since_first = first.elapsed();
    assert_eq!(row["response"]["text"], "Every six months.");
    assert_eq!(fake.requests(), 2);
    assert!(
        since_first >= WAIT - Duration::from_secs(1),
        "the batch did not wait for the shared budget: it ended {since_first:?} after the first ask (tpm {tpm}: {c1} + {c2} tokens)"
    );
}
