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
//!
//! One style for every line on standard error: the library's events are written as the
//! command's own lines are (`warning: ...`, `note: ...`, `error: ...`, `debug: ...`), the
//! message first, then its fields and the span it happened in, so a reader or a `grep`
//! meets one shape.

use std::fmt;
use std::io::IsTerminal;
use std::sync::OnceLock;

use synthkit::telemetry::otel::{self, OtelGuard};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{LevelFilter, filter_fn};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

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
        .event_format(Lines)
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

/// The log line format: the level as the command's own lines name it, the message and
/// fields, then the spans it happened in: `warning: retrying after HTTP 502 attempt=1 (in
/// call{model="m"})`.
struct Lines;

impl<S, N> FormatEvent<S, N> for Lines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let (word, colour) = match *event.metadata().level() {
            Level::ERROR => ("error", "31"),
            Level::WARN => ("warning", "33"),
            Level::INFO => ("note", "32"),
            Level::DEBUG => ("debug", "34"),
            Level::TRACE => ("trace", "35"),
        };
        if writer.has_ansi_escapes() {
            write!(writer, "\x1b[1;{colour}m{word}\x1b[0m: ")?;
        } else {
            write!(writer, "{word}: ")?;
        }
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        if let Some(scope) = ctx.event_scope() {
            let mut open = false;
            for span in scope.from_root() {
                write!(
                    writer,
                    "{}{}",
                    if open { ", " } else { " (in " },
                    span.name()
                )?;
                open = true;
                let extensions = span.extensions();
                if let Some(fields) = extensions.get::<FormattedFields<N>>()
                    && !fields.is_empty()
                {
                    write!(writer, "{{{fields}}}")?;
                }
            }
            if open {
                write!(writer, ")")?;
            }
        }
        writeln!(writer)
    }
}
