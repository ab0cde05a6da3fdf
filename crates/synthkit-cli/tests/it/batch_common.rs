//! What the `batch` suites share: the command against a loopback fake model (with or
//! without its notes), a run bounded in time, request lines written and result lines read
//! back as JSON, and a fake that answers slowly.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use synthkit_testkit::{FakeConfig, FakeOpenAi};

/// How long one run of the binary may go on before the test calls it hung (the
/// 10,000-line run is only called hung when it stops making progress): a safety net no
/// healthy run comes near, not a bound on its speed.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// `synthkit batch IN -o OUT --quiet` against `fake`, with no model settings from the
/// environment.
pub fn batch(fake: &FakeOpenAi, input: &Path, output: &Path) -> Command {
    let mut cmd = batch_with_notes(fake, input, output);
    cmd.arg("--quiet");
    cmd
}

/// [`batch`] without `--quiet`: with its notes (the resume's) on standard error.
pub fn batch_with_notes(fake: &FakeOpenAi, input: &Path, output: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_synthkit"));
    cmd.env_remove("SYNTHKIT_BASE_URL")
        .env_remove("SYNTHKIT_MODEL")
        .env_remove("SYNTHKIT_API")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env("SYNTHKIT_INDEX_DIR", crate::common::test_index_dir())
        .arg("batch")
        .arg(input)
        .arg("-o")
        .arg(output)
        .args(["--llm", "openai", "--base-url", &fake.base])
        .args(["--model", "fake-model", "--context-window", "2048"])
        .args(["--num-output", "64", "--timeout", "20"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Runs `cmd` to its end, at most `limit` (killed past it).
pub fn finish(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd.spawn().unwrap();
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "synthkit batch did not finish within {limit:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

/// Runs `cmd` to its end, at most [`RUN_TIMEOUT`].
pub fn run(cmd: &mut Command) -> Output {
    finish(cmd, RUN_TIMEOUT)
}

/// The output's lines as JSON.
pub fn results(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The results' ids, in order.
pub fn ids(results: &[Value]) -> Vec<Value> {
    results.iter().map(|r| r["id"].clone()).collect()
}

/// A request asking `query` of one short node.
pub fn line(id: Option<Value>, query: &str) -> String {
    let mut request = json!({"query": query, "nodes": [format!("A fact about {query}.")]});
    if let Some(id) = id {
        request["id"] = id;
    }
    request.to_string()
}

/// Writes `lines` to `dir/name`, one a line.
pub fn write_lines(dir: &Path, name: &str, lines: &[String]) -> PathBuf {
    let path = dir.join(name);
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(&path, text).unwrap();
    path
}

/// A fake answering every call after `ms` milliseconds.
pub fn slow_fake(ms: u64) -> FakeOpenAi {
    FakeOpenAi::start(FakeConfig {
        delay: Duration::from_millis(ms),
        ..FakeConfig::default()
    })
}

/// `n` one-call requests with ids `q0`, `q1`, ...
pub fn numbered(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| line(Some(json!(format!("q{i}"))), &format!("question {i}")))
        .collect()
}
