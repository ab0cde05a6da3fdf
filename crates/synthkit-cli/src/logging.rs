//! Log lines on standard error: the library's `tracing` events (retries, context
//! corrections, cache failures, truncation) through a `tracing-subscriber` formatter.
//!
//! The level: warnings by default, errors only with `-q`, info with `-v`, debug with
//! `-vv`; `RUST_LOG` (an env-filter directive such as `synthkit=debug`) overrides all of
//! them. Colours only when standard error is a terminal and `NO_COLOR` is not set, so a
//! log redirected to a file or read by another program holds plain text.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// Installs the subscriber once for the process.
pub fn init(verbose: u8, quiet: bool) {
    let level = match (quiet, verbose) {
        (true, 0) => "error",
        (_, 0) => "warn",
        (_, 1) => "info",
        _ => "debug",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colours())
        .with_target(false)
        .without_time()
        .try_init();
}

/// Whether log lines may carry colours: standard error is a terminal and `NO_COLOR`
/// (<https://no-color.org>) is unset or empty.
fn colours() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
