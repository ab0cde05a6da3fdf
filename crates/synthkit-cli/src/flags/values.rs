//! The flags' value types and parsers: sizes, `--top-k`, modes, tokenizers, sampling
//! numbers, JSON bodies and seconds; and the usage error of a value the command cannot
//! take.

use std::fmt;
use std::time::Duration;

use anyhow::Result;
use synthkit::ResponseMode;
use synthkit::text::BpeTokenizer;

/// A usage error: the command line asks for something impossible. Exits with 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// A usage error as an [`anyhow::Error`].
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(message.into()))
}

/// The default `--max-file-size`: the library's limit, 64 MiB.
pub const DEFAULT_MAX_FILE_SIZE: &str = "64M";

/// `--top-k`: a number of chunks, or all of them.
pub use synthkit_frontend::retrieval::TopK;

/// `--max-file-size`: a limit in bytes, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileSize(pub Option<u64>);

pub fn parse_top_k(s: &str) -> Result<TopK, String> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("all") {
        return Ok(TopK::All);
    }
    match s.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(TopK::Best(n)),
        _ => Err(format!(
            "expected a number of 1 or more, or `all`, got `{s}`"
        )),
    }
}

/// `65536`, `64K`, `64M`, `1G` (powers of 1024, an optional `B`/`iB`), or `none`.
pub fn parse_size(s: &str) -> Result<FileSize, String> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("none") {
        return Ok(FileSize(None));
    }
    let lower = t.to_ascii_lowercase();
    let lower = lower
        .strip_suffix("ib")
        .or_else(|| lower.strip_suffix('b'))
        .unwrap_or(&lower);
    let (digits, unit) = match lower.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (lower.get(..i).unwrap_or(""), Some(c)),
        _ => (lower, None),
    };
    let shift = match unit {
        None => 0,
        Some('k') => 10,
        Some('m') => 20,
        Some('g') => 30,
        Some(_) => {
            return Err(format!(
                "expected bytes, or a size such as 64M or 1G, got `{s}`"
            ));
        }
    };
    digits
        .trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1u64 << shift))
        .filter(|&n| n > 0)
        .map(|n| FileSize(Some(n)))
        .ok_or_else(|| format!("expected bytes, or a size such as 64M or 1G, got `{s}`"))
}

pub fn parse_question(s: &str) -> Result<String, String> {
    if s.trim().is_empty() {
        return Err(
            "the question is empty: ask something, such as \"How often is the mirror cleaned?\""
                .into(),
        );
    }
    Ok(s.to_string())
}

pub fn parse_tokenizer(s: &str) -> Result<BpeTokenizer, String> {
    BpeTokenizer::by_name(s).map_err(|e| e.to_string())
}

pub fn parse_temperature(s: &str) -> Result<f32, String> {
    match s.trim().parse::<f32>() {
        Ok(t) if t.is_finite() && t >= 0.0 => Ok(t),
        _ => Err(format!("expected a number of 0 or more, got `{s}`")),
    }
}

pub fn parse_top_p(s: &str) -> Result<f32, String> {
    match s.trim().parse::<f32>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err(format!("expected a number from 0 to 1, got `{s}`")),
    }
}

pub fn parse_extra_body(s: &str) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    match serde_json::from_str::<serde_json::Value>(s) {
        Ok(serde_json::Value::Object(fields)) => {
            synthkit::backend::http::check_extra_body(&fields)?;
            Ok(fields)
        }
        Ok(other) => Err(format!(
            "expected a JSON object such as '{{\"top_k\": 40}}', got {}",
            json_kind(&other)
        )),
        Err(e) => Err(format!("not valid JSON ({e})")),
    }
}

/// `an array`, `a string`, ... for messages.
fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

pub fn parse_mode(s: &str) -> Result<ResponseMode, String> {
    s.parse::<ResponseMode>().map_err(|e| e.to_string())
}

/// A positive number of seconds given to `flag`, as a duration (`None` when not given).
pub fn seconds(flag: &str, secs: Option<f64>) -> Result<Option<Duration>> {
    secs.map(|s| positive_seconds(flag, s)).transpose()
}

/// A positive number of seconds given to `flag`, as a duration.
pub fn positive_seconds(flag: &str, secs: f64) -> Result<Duration> {
    Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            usage(format!(
                "{flag} must be a positive number of seconds, got {secs}"
            ))
        })
}
