//! `ask` against model servers that misbehave (issue 29): exit codes and messages, never a
//! panic.

use serde_json::json;
use synthkit_testkit::hostile::{HostilePeer, json_with_headers};

use crate::common::{QUESTION, docs, stderr, synthkit};

fn ask(base: &str, extra: &[&str]) -> std::process::Output {
    let dir = docs();
    synthkit()
        .args(["ask", QUESTION, "--base-url", base, "--model", "m"])
        .args(["--context-window", "4096"])
        .args(extra)
        .arg(dir.path())
        .output()
        .unwrap()
}

#[test]
fn a_huge_retry_after_is_an_error_not_a_panic() {
    let peer = HostilePeer::start(|_, _| {
        json_with_headers(
            429,
            &[("retry-after", "1e20")],
            &json!({"error": {"message": "slow down"}}),
        )
    });
    for extra in [&[][..], &["--stream"][..]] {
        let out = ask(&peer.base, extra);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{extra:?}: {err}");
        assert!(err.contains("rate limited"), "{extra:?}: {err}");
        assert!(!err.contains("panicked"), "{extra:?}: {err}");
    }
}

#[test]
fn a_refusal_exits_1_with_what_happened() {
    let peer = HostilePeer::start(|_, _| {
        json_with_headers(
            200,
            &[],
            &json!({"choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": null, "refusal": "I can't help with that."}}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 2}}),
        )
    });
    let out = ask(&peer.base, &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("refused to answer") && err.contains("I can't help"),
        "{err}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("Empty Response"));
}

#[test]
fn extra_body_fields_that_set_the_output_cap_are_usage_errors() {
    for body in [r#"{"max_tokens": 100000}"#, r#"{"n": 3}"#] {
        let out = ask("http://127.0.0.1:9/v1", &["--extra-body", body]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{body}: {err}");
    }
    let out = ask(
        "http://127.0.0.1:9/v1",
        &["--extra-body", r#"{"max_tokens": 100000}"#],
    );
    assert!(stderr(&out).contains("--num-output"), "{}", stderr(&out));
}
