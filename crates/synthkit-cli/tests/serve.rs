//! `synthkit serve`: refuses a public address without keys, answers on loopback, and
//! stops cleanly on SIGTERM.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn a_public_address_needs_keys() {
    let out = Command::new(env!("CARGO_BIN_EXE_synthkit"))
        .args(["serve", "--bind", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--api-keys"), "{stderr}");
    assert!(
        stderr.contains("--allow-unauthenticated-public"),
        "{stderr}"
    );
}

/// `--memory-cache-bytes` sizes the memory cache: it needs `--memory-cache` and a
/// positive number.
#[test]
fn the_memory_cache_size_needs_the_memory_cache_and_a_positive_number() {
    for args in [
        &["--memory-cache-bytes", "1000"][..],
        &["--memory-cache", "--memory-cache-bytes", "0"],
        &["--memory-cache", "--memory-cache-bytes", "lots"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_synthkit"))
            .args(["serve", "--bind", "0.0.0.0:0"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("--memory-cache"), "{args:?}: {stderr}");
    }
    let help = Command::new(env!("CARGO_BIN_EXE_synthkit"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--memory-cache-bytes <BYTES>"), "{help}");
    assert!(help.contains("[default: 67108864]"), "{help}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_on_loopback_and_stops_on_sigterm() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.txt");
    std::fs::write(&keys, "# test\nk-1\n").unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_synthkit"))
        .args([
            "serve",
            "--bind",
            &format!("127.0.0.1:{port}"),
            "--api-keys",
        ])
        .arg(&keys)
        .env_remove("SYNTHKIT_BASE_URL")
        .env_remove("OPENAI_BASE_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while client.get(format!("{base}/healthz")).send().await.is_err() {
        assert!(Instant::now() < deadline, "the service did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let r = client
        .post(format!("{base}/v1/synthesize"))
        .bearer_auth("k-1")
        .body(r#"{"query": "How often is the mirror cleaned?", "nodes": ["The mirror is cleaned every six months."]}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: serde_json::Value = r.json().await.unwrap();
    assert!(
        body["text"].as_str().unwrap().contains("six months"),
        "{body}"
    );

    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the service did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `serve` takes `ask`'s model flags, checked the same way.
#[test]
fn model_flags_are_asks_and_checked_the_same_way() {
    let run = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_synthkit"))
            .args(["serve", "--bind", "127.0.0.1:0"])
            .args(extra)
            .env_remove("SYNTHKIT_BASE_URL")
            .env_remove("OPENAI_BASE_URL")
            .output()
            .unwrap()
    };
    let out = run(&["--extra-body", "[1]"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("JSON object"));
    let out = run(&["--top-p", "2"]);
    assert_eq!(out.status.code(), Some(2));
    let out = run(&["--tokenizer", "o200k_base"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tokenizer is for ask"));
    let out = run(&["--base-url", "localhost:1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("must start with http://"));
}
