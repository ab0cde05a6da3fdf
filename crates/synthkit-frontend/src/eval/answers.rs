//! An answer line (a line of `ANSWERS.jsonl`), what a system answered to one case:
//! `{"id", "mode", "system", "answer", "error", "abstained", "calls", "prompt_tokens",
//! "completion_tokens", "truncated_calls", "wall_ms", "prompts", "citations"}`; all but
//! `id`, `mode` and `answer` optional, and `answer` too when `error` says the run failed.
//! See [`AnswerLine`]. synthkit's own runs are written as answer lines too
//! ([`super::run::answer_line`]), so every system is scored by the same code.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::line::{CaseError, id_text, object, without_bom};

/// How often the engine's answer guards acted in one synthesis
/// ([`synthkit::text::abstention`], [`synthkit::options::OUTPUT_GROWTH`]): for the benchmark's
/// account of what they do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct GuardCounts {
    /// Replies not used as answers (they said the sources do not answer, or talked about
    /// the previous answer).
    pub set_aside: u64,
    /// Of those, the ones whose step kept its previous answer.
    pub kept_previous: u64,
    /// Intermediate replies cut at the size of their input.
    pub bounded: u64,
}

impl GuardCounts {
    /// Whether no guard acted.
    pub fn is_zero(&self) -> bool {
        *self == Self::default()
    }

    /// These counts plus `other`'s.
    pub fn plus(self, other: GuardCounts) -> Self {
        // Counts read from files: never wrapped.
        GuardCounts {
            set_aside: self.set_aside.saturating_add(other.set_aside),
            kept_previous: self.kept_previous.saturating_add(other.kept_previous),
            bounded: self.bounded.saturating_add(other.bounded),
        }
    }
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
    /// Of the prompt tokens, those the server read from its prompt cache (absent when
    /// none was, or the server does not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_prompt_tokens: Option<u64>,
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
    pub quotes: Option<synthkit::citation::QuoteCounts>,
    /// How often the engine's answer guards acted (synthkit's runs; absent when none did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guards: Option<GuardCounts>,
    /// The grounding check's verdict of the answer (`supported`, `partly`,
    /// `unsupported`; `None`: not checked, or not synthkit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grounding: Option<synthkit::grounding::GroundingStatus>,
    /// The SHA-256 (lowercase hex) of the line's canonical JSON, when it was read from an
    /// answers file ([`parse_answer_line`]); `None` for a run made here. Not a field of
    /// the line.
    #[serde(skip)]
    pub sha256: Option<String>,
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
    let text = without_bom(text);
    if text.trim().is_empty() {
        return Ok(None);
    }
    let mut f = object(text, line, "an answer line")?;
    let sha256 = crate::batch::fields_sha256(f.iter().map(|(k, v)| (k.as_str(), v)));
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
    let mut answer: AnswerLine = serde_json::from_value(Value::Object(f))
        .map_err(|e| CaseError::at(line, format!("not an answer line: {e}")))?;
    answer.sha256 = Some(sha256);
    Ok(Some(answer))
}
