//! The cases of a benchmark and the answers of a system: one JSON object per line.
//!
//! **A case** (a line of `CASES.jsonl`):
//!
//! ```json
//! {"id": "needle-07", "query": "What colour is the door?",
//!  "nodes": [{"id": "n1", "text": "..."}],
//!  "answers": ["six months", ["Alice", "Bob"], {"regex": "\\b6 months\\b"}],
//!  "evidence": ["n1"], "answerable": true, "tags": ["needle"]}
//! ```
//!
//! - `id`: a string (a number is read as its text), unique in the file;
//! - `query`: the question, not empty;
//! - `nodes`: the nodes, as synthkit reads nodes ([`crate::node::json`]); or `paths`: files
//!   and folders to read, with an optional `top_k` (the chunks kept, best first); exactly
//!   one of the two;
//! - `answers`: the accepted alternatives, each a string, a list of strings that must all
//!   appear, or `{"regex": "..."}` (case-insensitive); at least one when the case is
//!   answerable;
//! - `evidence`: the ids of the nodes that hold the answer (optional);
//! - `answerable`: `false` when the nodes cannot answer (the right reply abstains);
//!   default `true`;
//! - `tags`: free labels (optional).
//!
//! Other fields are ignored.
//!
//! **An answer line** (a line of `ANSWERS.jsonl`), what a system answered to one case:
//! `{"id", "mode", "system", "answer", "error", "abstained", "calls", "prompt_tokens",
//! "completion_tokens", "truncated_calls", "wall_ms", "prompts", "citations"}`; all but
//! `id`, `mode` and `answer` optional, and `answer` too when `error` says the run failed.
//! See [`AnswerLine`].
//!
//! Every error names the line (1-based) and what to change.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::node::{Node, json::nodes_from_json};

/// The largest compiled size of an answer regex (bytes): a larger pattern is refused.
pub const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// Why a line is not a case or not an answer line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CaseError {
    /// The line is not a valid case or answer line.
    #[error("line {line}: {message}")]
    Invalid {
        /// The line (1-based).
        line: usize,
        /// What is wrong and what to change.
        message: String,
    },
}

impl CaseError {
    fn at(line: usize, message: impl Into<String>) -> Self {
        CaseError::Invalid {
            line,
            message: message.into(),
        }
    }

    /// The line the error is on (1-based).
    pub fn line(&self) -> usize {
        match self {
            CaseError::Invalid { line, .. } => *line,
        }
    }
}

/// A regex alternative: matched case-insensitively against the raw answer.
#[derive(Debug, Clone)]
pub struct AnswerRegex {
    pattern: String,
    regex: regex::Regex,
}

impl AnswerRegex {
    /// Compiles `pattern` (case-insensitive; at most [`REGEX_SIZE_LIMIT`] compiled).
    pub fn new(pattern: &str) -> Result<Self, regex::Error> {
        let regex = regex::RegexBuilder::new(pattern)
            .case_insensitive(true)
            .size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(REGEX_SIZE_LIMIT)
            .build()?;
        Ok(Self {
            pattern: pattern.to_string(),
            regex,
        })
    }

    /// The pattern as given.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// Whether `text` matches somewhere.
    pub fn is_match(&self, text: &str) -> bool {
        self.regex.is_match(text)
    }
}

impl PartialEq for AnswerRegex {
    fn eq(&self, other: &Self) -> bool {
        self.pattern == other.pattern
    }
}

/// One accepted answer.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Alternative {
    /// Found when its words appear, in order and together, in the answer's words (after
    /// [`crate::eval::normalize()`]).
    Text(String),
    /// Found when each of its strings is found as [`Alternative::Text`] is.
    All(Vec<String>),
    /// Found when the regex matches the raw answer (case-insensitive).
    Regex(AnswerRegex),
}

/// Where a case's nodes come from.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CaseInput {
    /// The nodes themselves.
    Nodes(Vec<Node>),
    /// Files and folders to read (a front end reads them; relative paths are its choice).
    Paths(Vec<String>),
}

/// One question of a benchmark.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Case {
    /// Unique in its file.
    pub id: String,
    /// The question.
    pub query: String,
    /// The nodes, or where to read them.
    pub input: CaseInput,
    /// With paths: the chunks kept (best first); `None`: all.
    pub top_k: Option<usize>,
    /// The accepted alternatives.
    pub answers: Vec<Alternative>,
    /// The ids of the nodes that hold the answer.
    pub evidence: Vec<String>,
    /// Whether the nodes can answer.
    pub answerable: bool,
    /// Free labels.
    pub tags: Vec<String>,
}

/// An id: a string, or a number read as its text.
fn id_text(value: Option<Value>, line: usize, what: &str) -> Result<String, CaseError> {
    match value {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(Value::Number(n)) => Ok(n.to_string()),
        Some(Value::String(_)) => Err(CaseError::at(line, format!("`{what}` is empty"))),
        None | Some(Value::Null) => Err(CaseError::at(line, format!("`{what}` is missing"))),
        Some(_) => Err(CaseError::at(
            line,
            format!("`{what}` must be a string or a number"),
        )),
    }
}

fn strings(value: Option<Value>, line: usize, field: &str) -> Result<Vec<String>, CaseError> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .into_iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(s) => Ok(s),
                _ => Err(CaseError::at(
                    line,
                    format!("`{field}[{i}]` must be a string"),
                )),
            })
            .collect(),
        Some(_) => Err(CaseError::at(
            line,
            format!("`{field}` must be a list of strings"),
        )),
    }
}

fn object(text: &str, line: usize, what: &str) -> Result<Map<String, Value>, CaseError> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(fields)) => Ok(fields),
        Ok(_) => Err(CaseError::at(
            line,
            format!("expected a JSON object ({what})"),
        )),
        Err(e) => Err(CaseError::at(line, format!("not JSON: {e}"))),
    }
}

/// Reads one alternative of `answers`.
fn alternative(value: Value, line: usize, i: usize) -> Result<Alternative, CaseError> {
    let shape = "must be a string, a list of strings that must all appear, or {\"regex\": \"...\"}";
    match value {
        Value::String(s) if s.trim().is_empty() => Err(CaseError::at(
            line,
            format!("`answers[{i}]` is empty: give the text of an accepted answer"),
        )),
        Value::String(s) => Ok(Alternative::Text(s)),
        Value::Array(items) if !items.is_empty() => {
            let parts = items
                .into_iter()
                .map(|v| match v {
                    Value::String(s) if !s.trim().is_empty() => Ok(s),
                    _ => Err(CaseError::at(
                        line,
                        format!("`answers[{i}]` {shape} (a list of non-empty strings)"),
                    )),
                })
                .collect::<Result<_, _>>()?;
            Ok(Alternative::All(parts))
        }
        Value::Object(mut o) if o.len() == 1 => match o.remove("regex") {
            Some(Value::String(p)) => AnswerRegex::new(&p).map(Alternative::Regex).map_err(|e| {
                CaseError::at(line, format!("`answers[{i}]` is not a valid regex: {e}"))
            }),
            _ => Err(CaseError::at(line, format!("`answers[{i}]` {shape}"))),
        },
        _ => Err(CaseError::at(line, format!("`answers[{i}]` {shape}"))),
    }
}

/// Reads line `line` of a cases file: `None` for a blank line.
pub fn parse_case(text: &str, line: usize) -> Result<Option<Case>, CaseError> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    let mut f = object(text, line, "a case")?;
    let id = id_text(f.remove("id"), line, "id")?;
    let query = match f.remove("query") {
        Some(Value::String(q)) if !q.trim().is_empty() => q,
        Some(Value::String(_)) => return Err(CaseError::at(line, "`query` is empty")),
        None | Some(Value::Null) => return Err(CaseError::at(line, "`query` is missing")),
        Some(_) => return Err(CaseError::at(line, "`query` must be a string")),
    };
    let nodes = f.remove("nodes").filter(|v| !v.is_null());
    let paths = f.remove("paths").filter(|v| !v.is_null());
    let input = match (nodes, paths) {
        (Some(Value::Array(values)), None) => {
            let nodes = nodes_from_json(values)
                .map_err(|e| CaseError::at(line, format!("`nodes`: {e}")))?;
            if nodes.is_empty() {
                return Err(CaseError::at(line, "`nodes` is empty"));
            }
            CaseInput::Nodes(nodes)
        }
        (Some(_), None) => return Err(CaseError::at(line, "`nodes` must be a list of nodes")),
        (None, Some(p)) => {
            let paths = strings(Some(p), line, "paths")?;
            if paths.is_empty() || paths.iter().any(|p| p.is_empty()) {
                return Err(CaseError::at(
                    line,
                    "`paths` must name at least one file or folder (no empty path)",
                ));
            }
            CaseInput::Paths(paths)
        }
        (Some(_), Some(_)) => {
            return Err(CaseError::at(line, "give `nodes` or `paths`, not both"));
        }
        (None, None) => {
            return Err(CaseError::at(
                line,
                "give the case's `nodes` (a list) or `paths` (files and folders to read)",
            ));
        }
    };
    let top_k = match f.remove("top_k") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64().and_then(|n| usize::try_from(n).ok()) {
            Some(k) if k >= 1 => Some(k),
            _ => return Err(CaseError::at(line, "`top_k` must be a number of 1 or more")),
        },
    };
    let answers = match f.remove("answers") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .into_iter()
            .enumerate()
            .map(|(i, v)| alternative(v, line, i))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(CaseError::at(line, "`answers` must be a list")),
    };
    let answerable = match f.remove("answerable") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => b,
        Some(_) => return Err(CaseError::at(line, "`answerable` must be true or false")),
    };
    if answerable && answers.is_empty() {
        return Err(CaseError::at(
            line,
            "an answerable case needs at least one accepted answer in `answers` (or set \"answerable\": false)",
        ));
    }
    Ok(Some(Case {
        id,
        query,
        input,
        top_k,
        answers,
        evidence: strings(f.remove("evidence"), line, "evidence")?,
        answerable,
        tags: strings(f.remove("tags"), line, "tags")?,
    }))
}

/// What a system answered to one case in one mode (a line of `ANSWERS.jsonl`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AnswerLine {
    /// The case's id.
    pub id: String,
    /// The mode or strategy.
    pub mode: String,
    /// Who answered (a column of the results); `None`: the scorer's default.
    #[serde(default)]
    pub system: Option<String>,
    /// The final text.
    #[serde(default)]
    pub answer: String,
    /// Why the run failed (the answer then counts as wrong).
    #[serde(default)]
    pub error: Option<String>,
    /// Whether the system itself said the sources do not answer.
    #[serde(default)]
    pub abstained: Option<bool>,
    /// Model calls.
    #[serde(default)]
    pub calls: Option<u64>,
    /// Prompt tokens, all calls.
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    /// Completion tokens, all calls.
    #[serde(default)]
    pub completion_tokens: Option<u64>,
    /// Calls whose reply was cut at the output limit.
    #[serde(default)]
    pub truncated_calls: Option<u64>,
    /// Wall time of the run (milliseconds).
    #[serde(default)]
    pub wall_ms: Option<f64>,
    /// The text of each prompt sent, in order (for "was the answer in the prompts").
    #[serde(default)]
    pub prompts: Option<Vec<String>>,
    /// The ids of the nodes the answer cites.
    #[serde(default)]
    pub citations: Option<Vec<String>>,
    /// Quote mode: how many of the answer's quotes were verified, misattributed or not
    /// found (`None`: no quote checked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quotes: Option<crate::citation::QuoteCounts>,
    /// How often the engine's answer guards acted (synthkit's runs; absent when none did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guards: Option<super::run::GuardCounts>,
}

impl AnswerLine {
    /// An answer line with `answer` and nothing else known.
    pub fn new(id: impl Into<String>, mode: impl Into<String>, answer: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            mode: mode.into(),
            answer: answer.into(),
            ..Self::default()
        }
    }
}

/// Reads line `line` of an answers file: `None` for a blank line.
pub fn parse_answer_line(text: &str, line: usize) -> Result<Option<AnswerLine>, CaseError> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    let mut f = object(text, line, "an answer line")?;
    let id = id_text(f.remove("id"), line, "id")?;
    let mode = id_text(f.remove("mode"), line, "mode")?;
    let failed = f.get("error").is_some_and(|e| !e.is_null());
    match f.get("answer") {
        Some(Value::String(_)) => {}
        None | Some(Value::Null) if failed => {
            f.insert("answer".into(), Value::String(String::new()));
        }
        None | Some(Value::Null) => {
            return Err(CaseError::at(
                line,
                "`answer` is missing: give the answer's text (\"\" for none), or `error` when the run failed",
            ));
        }
        Some(_) => return Err(CaseError::at(line, "`answer` must be a string")),
    }
    f.insert("id".into(), Value::String(id));
    f.insert("mode".into(), Value::String(mode));
    serde_json::from_value(Value::Object(f))
        .map(Some)
        .map_err(|e| CaseError::at(line, format!("not an answer line: {e}")))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn case(text: &str) -> Result<Case, CaseError> {
        parse_case(text, 7).map(|c| c.unwrap())
    }

    #[test]
    fn reads_every_kind_of_alternative() {
        let c = case(
            r#"{"id": 12, "query": "Who?", "nodes": ["Alice met Bob.", {"id": "x", "text": "t"}],
                "answers": ["Alice", ["Alice", "Bob"], {"regex": "\\bal"}],
                "evidence": ["1"], "tags": ["a"], "extra": 1}"#,
        )
        .unwrap();
        assert_eq!(c.id, "12");
        assert!(c.answerable);
        assert_eq!(c.answers.len(), 3);
        assert!(matches!(&c.answers[1], Alternative::All(v) if v.len() == 2));
        let Alternative::Regex(r) = &c.answers[2] else {
            panic!("not a regex")
        };
        assert!(r.is_match("ALICE"));
        let CaseInput::Nodes(nodes) = &c.input else {
            panic!("not nodes")
        };
        assert_eq!(nodes[0].id, "1");
        assert_eq!(nodes[1].id, "x");
        assert_eq!(c.evidence, ["1"]);
    }

    #[test]
    fn paths_and_unanswerable_cases() {
        let c = case(
            r#"{"id": "p", "query": "Q", "paths": ["docs"], "top_k": 3, "answerable": false}"#,
        )
        .unwrap();
        assert_eq!(c.input, CaseInput::Paths(vec!["docs".into()]));
        assert_eq!(c.top_k, Some(3));
        assert!(!c.answerable && c.answers.is_empty());
    }

    #[test]
    fn errors_name_the_line_and_the_field() {
        let cases = [
            ("not json", "not JSON"),
            ("[1]", "expected a JSON object"),
            (
                r#"{"query": "Q", "nodes": ["t"], "answers": ["a"]}"#,
                "`id` is missing",
            ),
            (
                r#"{"id": "a", "query": " ", "nodes": ["t"], "answers": ["a"]}"#,
                "`query` is empty",
            ),
            (r#"{"id": "a", "query": "Q", "answers": ["a"]}"#, "`nodes`"),
            (
                r#"{"id": "a", "query": "Q", "nodes": ["t"], "paths": ["p"], "answers": ["a"]}"#,
                "not both",
            ),
            (
                r#"{"id": "a", "query": "Q", "nodes": [], "answers": ["a"]}"#,
                "`nodes` is empty",
            ),
            (
                r#"{"id": "a", "query": "Q", "nodes": [3], "answers": ["a"]}"#,
                "`nodes`: node 1",
            ),
            (
                r#"{"id": "a", "query": "Q", "nodes": ["t"]}"#,
                "at least one accepted answer",
            ),
            (
                r#"{"id": "a", "query": "Q", "nodes": ["t"], "answers": [3]}"#,
                "`answers[0]`",
            ),
            (
                r#"{"id": "a", "query": "Q", "nodes": ["t"], "answers": [[]]}"#,
                "`answers[0]`",
            ),
            (
                r#"{"id": "a", "query": "Q", "nodes": ["t"], "answers": [{"regex": "("}]}"#,
                "not a valid regex",
            ),
            (
                r#"{"id": "a", "query": "Q", "nodes": ["t"], "answers": ["a"], "top_k": 0}"#,
                "`top_k`",
            ),
            (
                r#"{"id": "a", "query": "Q", "nodes": ["t"], "answers": ["a"], "evidence": [1]}"#,
                "`evidence[0]`",
            ),
            (
                r#"{"id": "a", "query": "Q", "paths": [], "answerable": false}"#,
                "`paths`",
            ),
        ];
        for (text, want) in cases {
            let e = case(text).unwrap_err();
            assert_eq!(e.line(), 7);
            let msg = e.to_string();
            assert!(
                msg.starts_with("line 7: ") && msg.contains(want),
                "{text}: {msg}"
            );
        }
        assert_eq!(parse_case("   ", 1), Ok(None));
    }

    #[test]
    fn huge_regexes_are_refused() {
        assert!(AnswerRegex::new(r"\w{1000}\w{1000}\w{1000}").is_err());
    }

    #[test]
    fn answer_lines() {
        let a = parse_answer_line(
            r#"{"id": "q1", "mode": "compact", "system": "li", "answer": "Blue.", "calls": 3,
                "wall_ms": 12.5, "prompts": ["p"], "citations": ["n1"], "abstained": null}"#,
            2,
        )
        .unwrap()
        .unwrap();
        assert_eq!(a.system.as_deref(), Some("li"));
        assert_eq!((a.calls, a.wall_ms), (Some(3), Some(12.5)));
        assert_eq!(a.citations, Some(vec!["n1".to_string()]));
        let failed = parse_answer_line(r#"{"id": 4, "mode": "refine", "error": "boom"}"#, 3)
            .unwrap()
            .unwrap();
        assert_eq!((failed.id.as_str(), failed.answer.as_str()), ("4", ""));
        let e = parse_answer_line(r#"{"id": "q", "mode": "compact"}"#, 9).unwrap_err();
        assert!(
            e.to_string().starts_with("line 9: `answer` is missing"),
            "{e}"
        );
        let e = parse_answer_line(
            r#"{"id": "q", "mode": "m", "answer": "a", "calls": "x"}"#,
            5,
        )
        .unwrap_err();
        assert!(
            e.to_string().starts_with("line 5: not an answer line"),
            "{e}"
        );
    }
}
