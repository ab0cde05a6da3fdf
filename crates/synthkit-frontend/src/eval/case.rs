//! The cases of a benchmark: one JSON object per line.
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
//! - `nodes`: the nodes, as synthkit reads nodes ([`synthkit::node::json`]); or `paths`: files
//!   and folders to read, with an optional `top_k` (the chunks kept, best first); exactly
//!   one of the two;
//! - `answers`: the accepted alternatives, each a string, a list of parts that must all
//!   appear (each a string or a regex), or `{"regex": "..."}` (case-insensitive); at
//!   least one when the case is answerable. The regexes of a file together take at most
//!   [`MAX_REGEX_BYTES`] compiled ([`parse_case_within`]);
//! - `evidence`: the ids of the nodes that hold the answer (optional); with `nodes`, each
//!   must be the id of one of them;
//! - `answerable`: `false` when the nodes cannot answer (the right reply abstains);
//!   default `true`;
//! - `tags`: free labels (optional).
//!
//! Other fields are ignored.
//!
//! An answer line, what a system answered to a case, is [`super::answers`]'s.
//!
//! A UTF-8 byte-order mark before a line is ignored. Every error names the line (1-based)
//! and what to change.

use serde_json::{Map, Value};

use synthkit::node::{Node, json::nodes_from_json};

pub use super::answers::{AnswerLine, GuardCounts, parse_answer_line};
pub use super::line::CaseError;
use super::line::{id_text, object, strings, without_bom};
pub use super::regex::{AnswerRegex, MAX_REGEX_BYTES, REGEX_SIZE_LIMIT, RegexBudget, RegexError};

/// One accepted answer.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Alternative {
    /// Found when its words appear, in order and together, in the answer's words (after
    /// [`crate::eval::normalize()`]).
    Text(String),
    /// Found when each of its parts is found: each an [`Alternative::Text`] or an
    /// [`Alternative::Regex`] (never a list).
    All(Vec<Alternative>),
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
    /// The SHA-256 (lowercase hex) of the case's canonical JSON (keys sorted, no spaces)
    /// without its `id` and the fields it does not read: a row scored on this case keeps
    /// it, so that a resumed evaluation knows a row of an edited case is stale. With
    /// `paths`, the files' contents are not in it.
    pub sha256: String,
}

/// What an alternative (or a part of one) may be, for the error messages.
const SHAPE: &str =
    "must be a string, a list of strings or regexes that must all appear, or {\"regex\": \"...\"}";

/// Reads a string or `{"regex": "..."}` at `what` (an alternative or a part of a list).
fn text_or_regex(
    value: Value,
    line: usize,
    what: &str,
    budget: &mut RegexBudget,
) -> Result<Alternative, CaseError> {
    match value {
        Value::String(s) if s.trim().is_empty() => Err(CaseError::at(
            line,
            format!("`{what}` is empty: give the text of an accepted answer"),
        )),
        Value::String(s) => Ok(Alternative::Text(s)),
        Value::Object(mut o) if o.len() == 1 => match o.remove("regex") {
            Some(Value::String(p)) => AnswerRegex::within(&p, budget)
                .map(Alternative::Regex)
                .map_err(|e| CaseError::at(line, format!("`{what}` is {e}"))),
            _ => Err(CaseError::at(line, format!("`{what}` {SHAPE}"))),
        },
        _ => Err(CaseError::at(line, format!("`{what}` {SHAPE}"))),
    }
}

/// Reads one alternative of `answers`.
fn alternative(
    value: Value,
    line: usize,
    i: usize,
    budget: &mut RegexBudget,
) -> Result<Alternative, CaseError> {
    match value {
        Value::Array(items) if !items.is_empty() => {
            let parts = items
                .into_iter()
                .enumerate()
                .map(|(j, v)| match v {
                    Value::Array(_) => Err(CaseError::at(
                        line,
                        format!(
                            "`answers[{i}][{j}]` is a list: a list's parts are strings or regexes"
                        ),
                    )),
                    v => text_or_regex(v, line, &format!("answers[{i}][{j}]"), budget),
                })
                .collect::<Result<_, _>>()?;
            Ok(Alternative::All(parts))
        }
        Value::Array(_) => Err(CaseError::at(
            line,
            format!("`answers[{i}]` is an empty list: {SHAPE}"),
        )),
        v => text_or_regex(v, line, &format!("answers[{i}]"), budget),
    }
}

/// The fields of a case its hash covers (every field it reads but `id`).
const HASHED_CASE_FIELDS: [&str; 8] = [
    "query",
    "nodes",
    "paths",
    "top_k",
    "answers",
    "evidence",
    "answerable",
    "tags",
];

/// The hash of a case ([`Case::sha256`]): the SHA-256 of the canonical JSON
/// ([`crate::batch::fields_sha256`]) of the fields it reads but `id` (null fields left
/// out, `answerable` written out).
fn case_hash(fields: &Map<String, Value>) -> String {
    let answerable = Value::Bool(true);
    let given = HASHED_CASE_FIELDS.iter().filter_map(|&k| {
        let v = fields.get(k).filter(|v| !v.is_null())?;
        Some((k, v))
    });
    let default = fields
        .get("answerable")
        .is_none_or(Value::is_null)
        .then_some(("answerable", &answerable));
    crate::batch::fields_sha256(given.chain(default))
}

/// The most node ids an error about `evidence` lists.
const LISTED_IDS: usize = 5;

/// Refuses evidence ids that name no node of `nodes`.
fn check_evidence(evidence: &[String], nodes: &[Node], line: usize) -> Result<(), CaseError> {
    let ids: std::collections::HashSet<&str> = nodes.iter().map(|n| n.id.as_str()).collect();
    let Some((i, unknown)) = evidence
        .iter()
        .enumerate()
        .find(|(_, e)| !ids.contains(e.as_str()))
    else {
        return Ok(());
    };
    let mut listed: Vec<String> = nodes
        .iter()
        .take(LISTED_IDS)
        .map(|n| format!("`{}`", n.id))
        .collect();
    if nodes.len() > LISTED_IDS {
        listed.push(format!("and {} more", nodes.len() - LISTED_IDS));
    }
    Err(CaseError::at(
        line,
        format!(
            "`evidence[{i}]` is `{unknown}`, which is the id of no node of this case (its \
             nodes are {}; a node without an `id` is named by its place, from 1): name the \
             nodes that hold the answer",
            listed.join(", ")
        ),
    ))
}

/// Reads line `line` of a cases file: `None` for a blank line. Its regexes have a
/// budget of their own ([`MAX_REGEX_BYTES`]); [`parse_case_within`] shares one across a
/// file.
pub fn parse_case(text: &str, line: usize) -> Result<Option<Case>, CaseError> {
    parse_case_within(text, line, &mut RegexBudget::default())
}

/// Reads line `line` of a cases file (`None` for a blank line), its answer regexes
/// charged to `budget`: give every line of a file the same budget, so that the file's
/// regexes together are bounded.
pub fn parse_case_within(
    text: &str,
    line: usize,
    budget: &mut RegexBudget,
) -> Result<Option<Case>, CaseError> {
    let text = without_bom(text);
    if text.trim().is_empty() {
        return Ok(None);
    }
    let mut f = object(text, line, "a case")?;
    let sha256 = case_hash(&f);
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
            .map(|(i, v)| alternative(v, line, i, budget))
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
    let evidence = strings(f.remove("evidence"), line, "evidence")?;
    if let CaseInput::Nodes(nodes) = &input {
        check_evidence(&evidence, nodes, line)?;
    }
    Ok(Some(Case {
        id,
        query,
        input,
        top_k,
        answers,
        evidence,
        answerable,
        tags: strings(f.remove("tags"), line, "tags")?,
        sha256,
    }))
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
        let e = AnswerRegex::new(r"\w{1000}\w{1000}\w{1000}").unwrap_err();
        assert_eq!(
            e,
            RegexError::TooLarge {
                limit: REGEX_SIZE_LIMIT
            }
        );
        assert!(e.to_string().contains("make it simpler"), "{e}");
        assert!(matches!(AnswerRegex::new("("), Err(RegexError::Invalid(_))));
    }

    #[test]
    fn the_regexes_of_a_file_are_bounded_together() {
        // One small pattern that compiles large: alone it is fine.
        let heavy =
            r#"{"id": "ID", "query": "Q", "nodes": ["t"], "answers": [{"regex": "\\w{10}"}]}"#;
        let one = AnswerRegex::new(r"\w{10}").unwrap();
        let mut budget = RegexBudget::default();
        let mut read = 0usize;
        let mut refused = None;
        // 2,000 such lines (40 KB): the budget ends them long before.
        for n in 1..=2000 {
            match parse_case_within(&heavy.replace("ID", &n.to_string()), n, &mut budget) {
                Ok(_) => read += 1,
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
        }
        let e = refused.expect("the budget refuses a line");
        assert!(budget.used() <= MAX_REGEX_BYTES, "{}", budget.used());
        assert!(read > 10 && read < 2000, "{read}");
        let message = e.to_string();
        assert!(
            message.starts_with(&format!("line {}: `answers[0]` is", read + 1))
                && message.contains("over the budget of a file's answer regexes"),
            "{message}"
        );
        assert!(one.is_match(&"x".repeat(10)) && !one.is_match("short"));
        // Another file starts again.
        assert!(parse_case(&heavy.replace("ID", "1"), 1).is_ok());
    }

    #[test]
    fn regexes_stand_where_strings_do_in_lists_too() {
        let c = case(
            r#"{"id": "r", "query": "Q", "nodes": ["t"],
                "answers": [[{"regex": "a"}, {"regex": "b"}], ["x", {"regex": "\\by\\b"}]]}"#,
        )
        .unwrap();
        let Alternative::All(parts) = &c.answers[0] else {
            panic!("not a list")
        };
        assert!(matches!(
            parts.as_slice(),
            [Alternative::Regex(_), Alternative::Regex(_)]
        ));
        let Alternative::All(parts) = &c.answers[1] else {
            panic!("not a list")
        };
        assert!(matches!(
            parts.as_slice(),
            [Alternative::Text(_), Alternative::Regex(_)]
        ));
        for (bad, want) in [
            (r#"[["a", ["b"]]]"#, "`answers[0][1]` is a list"),
            (
                r#"[["a", {"regex": "("}]]"#,
                "`answers[0][1]` is not a valid regex",
            ),
            (r#"[["a", " "]]"#, "`answers[0][1]` is empty"),
            (r#"[["a", 3]]"#, "`answers[0][1]` must be"),
        ] {
            let text = format!(r#"{{"id": "r", "query": "Q", "nodes": ["t"], "answers": {bad}}}"#);
            let e = case(&text).unwrap_err().to_string();
            assert!(e.contains(want), "{bad}: {e}");
        }
    }

    #[test]
    fn a_byte_order_mark_is_not_part_of_the_line() {
        let c = parse_case(
            "\u{feff}{\"id\": \"b\", \"query\": \"Q\", \"nodes\": [\"t\"], \"answers\": [\"a\"]}",
            1,
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.id, "b");
        let a = parse_answer_line(
            "\u{feff}{\"id\": \"b\", \"mode\": \"m\", \"answer\": \"x\"}",
            1,
        )
        .unwrap()
        .unwrap();
        assert_eq!(a.answer, "x");
    }

    #[test]
    fn evidence_must_name_a_node_of_the_case() {
        let e = case(
            r#"{"id": "e", "query": "Q", "nodes": [{"id": "n1", "text": "t"}, "u"],
                "answers": ["a"], "evidence": ["n1", "n9"]}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("line 7: `evidence[1]` is `n9`, which is the id of no node")
                && e.contains("`n1`, `2`"),
            "{e}"
        );
        // With `paths`, the nodes are known only once read: not checked here.
        assert!(
            case(r#"{"id": "p", "query": "Q", "paths": ["d"], "answers": ["a"], "evidence": ["d#1"]}"#)
                .is_ok()
        );
    }

    #[test]
    fn a_case_hash_covers_what_the_case_reads_but_its_id() {
        let hash = |text: &str| case(text).unwrap().sha256;
        let a = hash(r#"{"id": "a", "query": "Q", "nodes": ["t"], "answers": ["x"]}"#);
        assert_eq!(a.len(), 64);
        // Another id, key order, an ignored field, `answerable` written out: the same.
        assert_eq!(
            a,
            hash(
                r#"{"answers": ["x"], "answerable": true, "nodes": ["t"], "query": "Q", "id": 9, "note": 1}"#
            )
        );
        for other in [
            r#"{"id": "a", "query": "Q2", "nodes": ["t"], "answers": ["x"]}"#,
            r#"{"id": "a", "query": "Q", "nodes": ["t2"], "answers": ["x"]}"#,
            r#"{"id": "a", "query": "Q", "nodes": ["t"], "answers": ["y"]}"#,
            r#"{"id": "a", "query": "Q", "nodes": ["t"], "answers": ["x"], "tags": ["n"]}"#,
        ] {
            assert_ne!(a, hash(other), "{other}");
        }
        // An answers line's hash is that of the whole line.
        let line = |text: &str| parse_answer_line(text, 1).unwrap().unwrap().sha256.unwrap();
        let l = line(r#"{"id": "a", "mode": "m", "answer": "x"}"#);
        assert_eq!(l, line(r#"{"mode": "m", "answer": "x", "id": "a"}"#));
        assert_ne!(l, line(r#"{"id": "a", "mode": "m", "answer": "y"}"#));
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
