//! Log lines on standard error: the library's `tracing` events (retries, context
//! corrections, cache failures, truncation) through a `tracing-subscriber` formatter, and,
//! with `--otlp-endpoint` (or the standard variables), the OpenTelemetry export of the
//! spans (`synthkit::telemetry::otel`).
//!
//! The level: warnings by default, errors only with `-q`, info with `-v`, debug with
//! `-vv`; `RUST_LOG` (an env-filter directive such as `synthkit=debug`) overrides all of
//! them. Colours only when standard error is a terminal and `NO_COLOR` is not set, so a
//! log redirected to a file or read by another program holds plain text. Log lines show
//! the call span they happen in, not the synthesis and step spans above it (those are for
//! the trace UI).

use std::io::IsTerminal;
use std::sync::OnceLock;

use synthkit::telemetry::otel::{self, OtelGuard};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{LevelFilter, filter_fn};

use crate::flags::OtelArgs;

/// Installs the subscriber once for the process; returns the guard that flushes the
/// exported spans when dropped (after the answer is out). A malformed endpoint is a
/// usage error.
pub fn init(
    verbose: u8,
    quiet: bool,
    otel: Option<&OtelArgs>,
) -> anyhow::Result<Option<OtelGuard>> {
    let level = match (quiet, verbose) {
        (true, 0) => "error",
        (_, 0) => "warn",
        (_, 1) => "info",
        _ => "debug",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    // The log lines' own level: with the export on, the subscriber as a whole takes info
    // spans too, so `LevelFilter::current()` no longer tells what the user asked for.
    let hint = filter.max_level_hint().unwrap_or(LevelFilter::TRACE);
    let _ = LOG_LEVEL.set(hint);
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(colours())
        .with_target(false)
        .without_time()
        .with_filter(filter)
        .with_filter(
            filter_fn(move |meta| {
                hint >= *meta.level()
                    && !(meta.is_span()
                        && matches!(meta.name(), "synthkit.synthesize" | "synthkit.step"))
            })
            .with_max_level_hint(hint),
        );
    match otel::install(otel.and_then(OtelArgs::config), logs) {
        Ok(guard) => Ok(guard),
        Err(e @ otel::OtelError::BadEndpoint { .. }) => Err(crate::error::usage(e.to_string())),
        Err(e) => {
            // Another subscriber already (a library embedding the CLI): keep it.
            eprintln!("warning: {e}");
            Ok(None)
        }
    }
}

/// The most detailed level the log lines show (set once by [`init`]).
static LOG_LEVEL: OnceLock<LevelFilter> = OnceLock::new();

/// Whether `-v` (or a `RUST_LOG` at info or more) asked for every step's notes.
pub fn verbose() -> bool {
    LOG_LEVEL.get().is_some_and(|l| *l >= LevelFilter::INFO)
}

/// Whether log lines may carry colours: standard error is a terminal and `NO_COLOR`
/// (<https://no-color.org>) is unset or empty.
fn colours() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
