//! An input line read into a request (or why it cannot run), with its id and its
//! request hash; the check that no two lines share an id.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::files::{self as batch_io, RawLine};
use crate::request::{ErrorDetail, SynthesizeRequest};
use synthkit::ResponseMode;

/// An input line, read.
#[derive(Debug)]
pub enum Parsed {
    /// A blank line: skipped.
    Blank,
    /// A line that cannot run: its id (the line number when it has none), why, and its
    /// hash (of its text; none for a line too long or not UTF-8).
    Bad(Value, ErrorDetail, Option<String>),
    /// A request, its id and its request hash ([`batch_io::request_hash`]).
    Request(Value, Box<LineRequest>, String),
}

/// A line's request, and the files it asks to read instead of giving `nodes`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LineRequest {
    /// The request (its `nodes` empty when `paths` is given).
    pub request: SynthesizeRequest,
    /// `paths`: files and folders to read into the nodes (the caller reads them; relative
    /// paths are its choice).
    pub paths: Option<Vec<String>>,
    /// `top_k`: the chunks of `paths` kept, best first.
    pub top_k: Option<usize>,
}

/// What a line's request hash takes from the batch's flags: `--mode` and
/// `--max-prompt-tokens`, for the lines that set neither.
#[derive(Debug, Clone, Copy)]
pub struct HashDefaults {
    /// The mode of a line that names none.
    pub mode: ResponseMode,
    /// The prompt limit of a line that sets none.
    pub max_prompt_tokens: Option<usize>,
}

impl HashDefaults {
    /// `mode` (else compact) and `max_prompt_tokens` for the lines that set neither.
    pub fn new(mode: Option<ResponseMode>, max_prompt_tokens: Option<usize>) -> Self {
        Self {
            mode: mode.unwrap_or(ResponseMode::Compact),
            max_prompt_tokens,
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
    let has_nodes = !matches!(fields.get("nodes"), None | Some(Value::Null));
    let (paths, top_k) = match take_paths(&mut fields, has_nodes) {
        Ok(files) => files,
        Err(why) => return Parsed::Bad(id, invalid(number, why), Some(hash)),
    };
    match serde_json::from_value::<SynthesizeRequest>(Value::Object(fields)) {
        Ok(request) => Parsed::Request(
            id,
            Box::new(LineRequest {
                request,
                paths,
                top_k,
            }),
            hash,
        ),
        Err(e) => {
            let why = format!("not a synthesis request: {e}");
            Parsed::Bad(id, invalid(number, why), Some(hash))
        }
    }
}

/// Takes a request's `paths` and `top_k` out of its fields: a list of non-empty strings,
/// never with `nodes` (`has_nodes`: the request gives them); `top_k` a number of 1 or
/// more, only with `paths`. The rules of a `batch` line, for every front end that reads
/// a request's `paths`.
pub fn take_paths(
    fields: &mut Map<String, Value>,
    has_nodes: bool,
) -> Result<(Option<Vec<String>>, Option<usize>), &'static str> {
    let paths = match fields.remove("paths") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => {
            let paths: Option<Vec<String>> = items
                .into_iter()
                .map(|p| match p {
                    Value::String(s) if !s.is_empty() => Some(s),
                    _ => None,
                })
                .collect();
            match paths {
                Some(p) if !p.is_empty() => Some(p),
                _ => return Err("`paths` must name at least one file or folder (no empty path)"),
            }
        }
        Some(_) => return Err("`paths` must be a list of files and folders"),
    };
    let top_k = match fields.remove("top_k") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64().and_then(|k| usize::try_from(k).ok()) {
            Some(k) if k > 0 => Some(k),
            _ => return Err("`top_k` must be a number of 1 or more"),
        },
    };
    match (&paths, top_k) {
        (Some(_), _) if has_nodes => {
            Err("give `nodes` or `paths` (files and folders to read), not both")
        }
        (None, Some(_)) => Err("`top_k` keeps the best chunks of `paths`: give `paths` too"),
        _ => Ok((paths, top_k)),
    }
}

/// Two lines with the same id: the id (its JSON text) and both line numbers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "lines {first} and {second} of the input have the same id {id}: give each line its own \
     `id` (a line without one is named by its line number; 1 and \"1\" are different ids)"
)]
#[non_exhaustive]
pub struct DuplicateId {
    /// The id, as JSON.
    pub id: String,
    /// The first line with it.
    pub first: usize,
    /// The second.
    pub second: usize,
}

/// The ids of the input met so far, with their line numbers: a second line with an id
/// is refused, naming both lines. Holds each id's key (its JSON text).
#[derive(Debug, Default)]
pub struct SeenIds(HashMap<String, usize>);

impl SeenIds {
    /// Records `id` at line `number`. Errors: an earlier line has the same id.
    pub fn check(&mut self, id: &Value, number: usize) -> Result<(), DuplicateId> {
        match self.0.insert(batch_io::id_key(id), number) {
            None => Ok(()),
            Some(first) => Err(DuplicateId {
                id: id.to_string(),
                first,
                second: number,
            }),
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    fn parse(number: usize, text: &str) -> Parsed {
        let defaults = HashDefaults::new(None, None);
        parse_line(number, RawLine::Text(text.into()), 1 << 20, defaults)
    }

    fn bad(number: usize, text: &str) -> (Value, String) {
        match parse(number, text) {
            Parsed::Bad(id, e, _) => (id, e.message),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn ids_are_the_line_number_unless_given() {
        let Parsed::Request(id, _, _) = parse(7, r#"{"query": "q", "nodes": ["n"]}"#) else {
            panic!()
        };
        assert_eq!(id, Value::from(7));
        let Parsed::Request(id, _, _) = parse(7, r#"{"id": "a", "query": "q"}"#) else {
            panic!()
        };
        assert_eq!(id, Value::from("a"));
        assert!(matches!(parse(3, "  "), Parsed::Blank));
        assert_eq!(bad(4, "not json").0, Value::from(4));
    }

    #[test]
    fn paths_and_top_k_are_read_and_checked() {
        let Parsed::Request(_, line, _) = parse(
            1,
            r#"{"query": "q", "paths": ["docs", "a.md"], "top_k": 3}"#,
        ) else {
            panic!()
        };
        assert_eq!(
            line.paths,
            Some(vec!["docs".to_string(), "a.md".to_string()])
        );
        assert_eq!(line.top_k, Some(3));
        assert!(line.request.nodes.is_empty());
        let (id, why) = bad(
            2,
            r#"{"id": "x", "query": "q", "nodes": ["n"], "paths": ["d"]}"#,
        );
        assert_eq!(id, Value::from("x"));
        assert!(why.starts_with("line 2: give `nodes` or `paths`"), "{why}");
        assert!(
            bad(3, r#"{"query": "q", "paths": []}"#)
                .1
                .contains("at least one")
        );
        assert!(
            bad(4, r#"{"query": "q", "paths": ["d"], "top_k": 0}"#)
                .1
                .contains("`top_k`")
        );
        assert!(
            bad(5, r#"{"query": "q", "nodes": ["n"], "top_k": 2}"#)
                .1
                .contains("give `paths`")
        );
    }

    #[test]
    fn a_second_line_with_an_id_is_refused_naming_both() {
        let mut seen = SeenIds::default();
        seen.check(&Value::from(1), 1).unwrap();
        seen.check(&Value::from("1"), 2).unwrap();
        let e = seen.check(&Value::from(1), 5).unwrap_err();
        assert_eq!((e.first, e.second), (1, 5));
        assert!(
            e.to_string()
                .starts_with("lines 1 and 5 of the input have the same id 1")
        );
    }
}
