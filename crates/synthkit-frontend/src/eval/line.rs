//! Reading one line of a cases or answers file: the errors that name the line, and the
//! fields both formats read the same way (ids, lists of strings, the JSON object, a
//! byte-order mark).

use serde_json::{Map, Value};

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
    pub(crate) fn at(line: usize, message: impl Into<String>) -> Self {
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

/// An id: a string, or a number read as its text.
pub(super) fn id_text(value: Option<Value>, line: usize, what: &str) -> Result<String, CaseError> {
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

pub(super) fn strings(
    value: Option<Value>,
    line: usize,
    field: &str,
) -> Result<Vec<String>, CaseError> {
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

pub(super) fn object(text: &str, line: usize, what: &str) -> Result<Map<String, Value>, CaseError> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(fields)) => Ok(fields),
        Ok(_) => Err(CaseError::at(
            line,
            format!("expected a JSON object ({what})"),
        )),
        Err(e) => Err(CaseError::at(line, format!("not JSON: {e}"))),
    }
}

/// A line's text without a byte-order mark before it (an editor's UTF-8 BOM on a first
/// line).
pub(super) fn without_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}
