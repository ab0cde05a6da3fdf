//! Runs the Python package's test suite (`bindings/python/tests`, pytest) through
//! `scripts/python-tests.sh`, so `cargo test --workspace` covers the bindings too.
//!
//! The script builds the package's wheel (`scripts/build-wheel.sh`, with its Rust target
//! directory outside the repository, `~/.cache/synthkit-wheel-target`), installs it into
//! virtual environments outside the repository (`~/.cache/synthkit-python-venv`, and one per
//! extra under `~/.cache/synthkit-python-extras`, reused) and runs the tests against it with
//! no Rust toolchain on PATH: the first run compiles synthkit in release (10-20 minutes on two
//! cores; `.ci/run` has it built in the dev profile in its own target folder, whose compiled
//! dependencies it reuses) and installs the extras; later runs take seconds plus pytest's time.
//!
//! When python3, venv or pip is not available (the script exits 77) the test prints a skip
//! message and passes, unless `CI` is set: then it fails. `SYNTHKIT_SKIP_PYTHON=1` skips it
//! on purpose (never in CI).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::process::Command;

/// The script's exit status for "cannot run here" (as automake's skip).
const SKIP: i32 = 77;

fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "0" && v != "false")
}

#[test]
fn python_package_tests_pass() {
    let ci = in_ci();
    if std::env::var_os("SYNTHKIT_SKIP_PYTHON").is_some_and(|v| v == "1") {
        assert!(!ci, "SYNTHKIT_SKIP_PYTHON=1 is not allowed in CI");
        eprintln!("skipped: SYNTHKIT_SKIP_PYTHON=1");
        return;
    }
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let script = repo.join("scripts/python-tests.sh");
    // Cargo's own variables would point maturin's cargo at this build: clear the ones that
    // change where or how it builds.
    let status = Command::new("bash")
        .arg(&script)
        .current_dir(&repo)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .status();
    let status = match status {
        Ok(s) => s,
        Err(e) if !ci => {
            eprintln!("skipped: cannot run bash {}: {e}", script.display());
            return;
        }
        Err(e) => panic!("cannot run bash {}: {e}", script.display()),
    };
    match status.code() {
        Some(0) => {}
        Some(SKIP) if !ci => eprintln!(
            "skipped: python3 with venv and pip is needed for the Python package tests (see the script's message above)"
        ),
        Some(SKIP) => panic!(
            "the Python package tests cannot run: python3 with venv and pip is required in CI"
        ),
        other => panic!(
            "the Python package tests failed (exit status {other:?}); run scripts/python-tests.sh to see why"
        ),
    }
}
