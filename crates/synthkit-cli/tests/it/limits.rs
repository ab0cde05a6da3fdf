//! `--retries`, `--rpm` and `--tpm` as a provider sees them: a loopback server that
//! answers every call with 429 counts the sends it gets. `--retries N` means at most N
//! sends of one call (the adaptive layer never sends again on its own), with or without
//! a rate budget, and the `--json` report counts the same sends.

use synthkit_testkit::{FakeConfig, FakeOpenAi};

use crate::common::{stderr, synthkit};

#[test]
fn retries_count_sends_429s_included() {
    for (flags, sends) in [
        (&["--retries", "1"][..], 1),
        (&[], 4),
        (&["--retries", "3", "--rpm", "600", "--tpm", "1000000"], 3),
    ] {
        // Every chat answered 429 with `Retry-After: 0`.
        let server = FakeOpenAi::start(FakeConfig::failing(429, Some(0)));
        let out = synthkit()
            .args(["ask", "What is it?", "-", "-q", "--base-url", &server.base])
            .args(["--model", "m", "--context-window", "4096"])
            .arg("--no-server-tokenizer")
            .args(flags)
            .write_stdin("A short document.")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{flags:?}");
        let stderr = stderr(&out);
        assert!(stderr.contains("429"), "{stderr}");
        assert_eq!(server.requests(), sends, "{flags:?}: {stderr}");
    }
}
