//! Starts (or finds) a real llama.cpp `llama-server` on 127.0.0.1 for end-to-end tests;
//! shared by every crate's test suite.
//!
//! The server: `SYNTHKIT_LLAMA_SERVER` (a base URL such as `http://127.0.0.1:8080/v1`) if
//! set; else `scripts/llama-server.sh PORT CTX` starts one (built once into
//! `~/.cache/llama-server-tiny`), stopped when the guard is dropped. [`smollm2`] and
//! [`tiny_vision`] always start their own. When llama-server cannot
//! be built here the tests print a skip message, unless `CI` is set: then they fail.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::server::free_port;

/// A llama-server to talk to; stops the server on drop if this test started it.
pub struct LlamaServer {
    /// The base URL, such as `http://127.0.0.1:8080/v1`.
    pub base: String,
    /// The server's PID when this process started it.
    pub pid: Option<u32>,
}

impl LlamaServer {
    /// Whether this process started the server (and so knows its context size).
    pub fn ours(&self) -> bool {
        self.pid.is_some()
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        if let Some(pid) = self.pid {
            let _ = Command::new("kill")
                .arg(pid.to_string())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Prints why the end-to-end test is skipped, or fails under `CI`.
pub fn cannot_run(why: &str) -> Option<LlamaServer> {
    if std::env::var_os("CI").is_some() {
        panic!("llama-server end-to-end tests cannot run ({why}) and CI is set: failing");
    }
    // Straight to stderr, past the test harness's output capture, so the skip is seen.
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED: llama-server end-to-end test ({why}); set SYNTHKIT_LLAMA_SERVER to a running server's base URL to run it"
    );
    None
}

/// The server to use, or `None` (after a skip message) when none can be had here.
pub fn server_with_ctx(ctx: usize) -> Option<LlamaServer> {
    if let Some(url) = std::env::var("SYNTHKIT_LLAMA_SERVER")
        .ok()
        .filter(|u| !u.trim().is_empty())
    {
        return Some(LlamaServer {
            base: url.trim().to_string(),
            pid: None,
        });
    }
    start(ctx, None, "")
}

/// A llama-server serving SmolLM2-135M-Instruct (a real instruction model with a ChatML
/// chat template), fetched once into the cache by `scripts/fetch-smollm2.sh`, started
/// with `-c ctx` and `args` (such as `-np 4`); `None` after a skip message when it cannot
/// be had here (a failure under `CI`).
pub fn smollm2(ctx: usize, args: &str) -> Option<LlamaServer> {
    start(ctx, Some("smollm2"), args)
}

/// A llama-server serving the tiny random-weight vision pair (the tiny model plus a
/// LLaVA-style projector, `--mmproj`; written once into the cache by
/// `scripts/make_tiny_vision_gguf.py`): it takes images in chat requests, each costing
/// [`TINY_VISION_IMAGE_TOKENS`] prompt tokens whatever its pixel size. Started with
/// `-c ctx` and `args`; `None` after a skip message when it cannot be had here (a failure
/// under `CI`). `SYNTHKIT_LLAMA_SERVER` is not used: that server may have no projector.
pub fn tiny_vision(ctx: usize, args: &str) -> Option<LlamaServer> {
    start(ctx, Some("tiny-vision"), args)
}

/// The prompt tokens one image costs on [`tiny_vision`]'s server: (64 / 16)^2 patches.
pub const TINY_VISION_IMAGE_TOKENS: u64 = 16;

fn start(ctx: usize, model: Option<&str>, args: &str) -> Option<LlamaServer> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/llama-server.sh");
    let mut last_failure = String::new();
    for _attempt in 0..3 {
        let port = free_port();
        let output = Command::new("bash")
            .arg(&script)
            .arg(port.to_string())
            .arg(ctx.to_string())
            .env("LLAMA_WATCH_PID", std::process::id().to_string())
            .env("LLAMA_MODEL", model.unwrap_or_default())
            .env("LLAMA_SERVER_ARGS", args)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output();
        let output = match output {
            Ok(o) => o,
            Err(e) => return cannot_run(&format!("cannot run {}: {e}", script.display())),
        };
        match output.status.code() {
            Some(0) => {
                let stdout = String::from_utf8_lossy(&output.stdout);
                let mut parts = stdout.split_whitespace();
                let (Some(base), Some(pid)) = (parts.next(), parts.next()) else {
                    panic!("llama-server.sh printed {stdout:?}, expected `URL PID`");
                };
                return Some(LlamaServer {
                    base: base.to_string(),
                    pid: Some(pid.parse().expect("a PID")),
                });
            }
            Some(77) => return cannot_run("llama-server.sh cannot build llama-server here"),
            // Most likely the port was taken between choosing and binding: try another.
            status => last_failure = format!("llama-server.sh failed with {status:?}"),
        }
    }
    panic!("{last_failure} three times; see the messages above");
}
