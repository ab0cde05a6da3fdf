//! The one behaviour of a batch of requests in JSON lines, shared by `synthkit batch` and
//! the Python package's batch files (its Ray recipe): each input line read into a
//! request ([`parse_line`]: its `id`, else its line number; its request hash), no two
//! lines with one id ([`SeenIds`]), the output's results read back for a resume
//! ([`open_output`], [`Existing::verdict`]: answered and permanent error lines kept,
//! transient error lines and changed requests run again), results appended a whole line
//! at a time ([`append_line`]) and the output compacted to one line per id at the end
//! ([`compact`]).

mod files;
mod lines;

pub use files::{
    Compacted, Entry, Existing, Held, LineReader, RawLine, Verdict, append_line, compact,
    compact_path, count_lines, fields_sha256, id_key, open_output, request_hash, text_hash,
};
pub use lines::{
    DuplicateId, HashDefaults, LineRequest, Parsed, SeenIds, line_id, parse_line, take_paths,
};

use synthkit::SynthError;
use synthkit::model::ModelError;

/// Why sending the same request again may succeed, if it may: the model's connection
/// failed or its reply was cut (`transport`), it timed out (`timeout`), it was rate
/// limited or overloaded (`rate_limited`: 429, 529, a rate budget's deadline) or failed
/// on its side (`server_error`: 5xx), or the run's cost cap refused it before it was sent
/// (`cost_cap`: a later run has its own cap). An error line's `error.transient`.
pub fn transient_cause(e: &SynthError) -> Option<&'static str> {
    let (SynthError::Model { source, .. } | SynthError::Count { source, .. }) = e else {
        return None;
    };
    match source {
        ModelError::Connection(_) | ModelError::Incomplete(_) => Some("transport"),
        ModelError::Timeout { .. } => Some("timeout"),
        ModelError::RateLimited { .. } => Some("rate_limited"),
        ModelError::Server { .. } => Some("server_error"),
        ModelError::Layer { layer, .. } if *layer == "redis budget" => Some("transport"),
        ModelError::Layer { layer, .. } if *layer == "cost cap" => Some("cost_cap"),
        ModelError::Layer { .. } => synthkit::layer::limit::limit_error(source)
            .filter(|l| matches!(l, synthkit::layer::limit::LimitError::Deadline { .. }))
            .map(|_| "rate_limited"),
        _ => None,
    }
}
