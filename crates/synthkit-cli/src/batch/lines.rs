//! Reading IN: a line at a time, each line read into a request (or why it cannot run),
//! with its id and its request hash.

use std::path::Path;

use anyhow::Result;
use serde_json::{Map, Value};
use synthkit::ResponseMode;
use synthkit::request::{ErrorDetail, SynthesizeRequest};

use crate::batch_io::{self, RawLine};
use crate::error::usage;
use crate::flags::BatchArgs;

/// An input line, read.
pub enum Parsed {
    /// A blank line: skipped.
    Blank,
    /// A line that cannot run: its id (the line number when it has none), why, and its
    /// hash (of its text; none for a line too long or not UTF-8).
    Bad(Value, ErrorDetail, Option<String>),
    /// A request, its id and its request hash ([`batch_io::request_hash`]).
    Request(Value, Box<SynthesizeRequest>, String),
}

/// What a line's request hash takes from the batch's flags: `--mode` and
/// `--max-prompt-tokens`, for the lines that set neither.
#[derive(Debug, Clone, Copy)]
pub struct HashDefaults {
    mode: ResponseMode,
    max_prompt_tokens: Option<usize>,
}

impl HashDefaults {
    /// The defaults that `args` give.
    pub fn of(args: &BatchArgs) -> Self {
        Self {
            mode: args.mode.unwrap_or(ResponseMode::Compact),
            max_prompt_tokens: args.max_prompt_tokens,
        }
    }
}

/// An `invalid_request` error naming line `number`.
fn invalid(number: usize, message: impl std::fmt::Display) -> ErrorDetail {
    ErrorDetail {
        kind: "invalid_request".into(),
        message: format!("line {number}: {message}"),
    }
}

/// Reads line `number`; the id is read first, so that a bad line's error line carries it.
pub fn parse_line(number: usize, raw: RawLine, max: usize, defaults: HashDefaults) -> Parsed {
    let text = match raw {
        RawLine::Text(t) if t.trim().is_empty() => return Parsed::Blank,
        RawLine::Text(t) => t,
        RawLine::TooLong(n) => {
            let why = format!("{n} bytes, more than --max-line-bytes {max}");
            return Parsed::Bad(Value::from(number), invalid(number, why), None);
        }
        RawLine::NotUtf8 => {
            let why = "not UTF-8 text";
            return Parsed::Bad(Value::from(number), invalid(number, why), None);
        }
    };
    let mut fields: Map<String, Value> = match serde_json::from_str(&text) {
        Ok(Value::Object(fields)) => fields,
        Ok(_) => {
            let why = "expected a JSON object (a synthesis request)";
            let hash = Some(batch_io::text_hash(&text));
            return Parsed::Bad(Value::from(number), invalid(number, why), hash);
        }
        Err(e) => {
            let why = format!("not JSON: {e}");
            let hash = Some(batch_io::text_hash(&text));
            return Parsed::Bad(Value::from(number), invalid(number, why), hash);
        }
    };
    drop(text);
    let hash = batch_io::request_hash(&fields, defaults.mode, defaults.max_prompt_tokens);
    let id = match fields.remove("id") {
        None | Some(Value::Null) => Value::from(number),
        Some(id @ (Value::String(_) | Value::Number(_))) => id,
        Some(_) => {
            let why = "`id` must be a string or a number";
            return Parsed::Bad(Value::from(number), invalid(number, why), Some(hash));
        }
    };
    match serde_json::from_value::<SynthesizeRequest>(Value::Object(fields)) {
        Ok(request) => Parsed::Request(id, Box::new(request), hash),
        Err(e) => {
            let why = format!("not a synthesis request: {e}");
            Parsed::Bad(id, invalid(number, why), Some(hash))
        }
    }
}

/// The id of a line, as [`parse_line`] names it, and its request hash; without building
/// the request (the survey of the input before a run).
pub fn line_id(
    number: usize,
    raw: RawLine,
    max: usize,
    defaults: HashDefaults,
) -> Option<(Value, Option<String>)> {
    match parse_line(number, raw, max, defaults) {
        Parsed::Blank => None,
        Parsed::Bad(id, _, hash) => Some((id, hash)),
        Parsed::Request(id, _, hash) => Some((id, Some(hash))),
    }
}

/// Opens IN (a usage error when it cannot be read).
pub fn open_input(path: &Path) -> Result<Box<dyn std::io::BufRead + Send>> {
    if path == Path::new("-") {
        return Ok(Box::new(std::io::BufReader::new(std::io::stdin())));
    }
    let file = std::fs::File::open(path)
        .map_err(|e| usage(format!("cannot read the input {}: {e}", path.display())))?;
    Ok(Box::new(std::io::BufReader::with_capacity(1 << 16, file)))
}
