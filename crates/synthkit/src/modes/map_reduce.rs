//! `map_reduce` (after "LLM x MapReduce", ACL 2025; our own prompts): pack the chunks into
//! as few map prompts as fit and map each (concurrently, bounded, order kept) to a
//! structured record: the information relevant to the question, the rationale, the
//! answer the chunk gives, a confidence from 1 to 5, or "no information". Records with
//! nothing are dropped; the rest are reduced to one answer by a prompt that weighs their
//! confidence where they conflict. Records that do not fit one reduce prompt are
//! collapsed first (packed into prompts, each reduced to a record, until they fit), as
//! tree_summarize collapses its levels.
//!
//! Calls: one map call per packed prompt, the collapse calls (none when the records fit
//! one prompt) and one final reduce call; no reduce call when every record says there is
//! no information. A level that does not reduce the number of records stops with
//! [`SynthError::TreeNotConverging`], so it always terminates.
//!
//! Map replies are read leniently: a server with structured output gets the record's
//! JSON schema; a reply that is not a record is kept as information with middle
//! confidence, never an error.

use std::borrow::Cow;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::engine::fanout::{Prebuilt, Reply, RequestSource};
use crate::engine::origins::{Origin, Sourced};
use crate::engine::packed::{LevelStep, PackedLevel};
use crate::engine::{Job, Outcome};
use crate::error::SynthError;
use crate::mode::{ResponseMode, Step};
use crate::model::{ModelRequest, parse_json_reply};
use crate::modes::Tree;
use crate::observe::SynthEvent;
use crate::prompt::TemplateKind;
use crate::text::abstention::ReplyReading;

/// More levels than any real run needs (each collapse level at least halves the records).
const MAX_LEVELS: u32 = 64;

/// The confidence of a reply that is not a record (the middle of 1 to 5).
const MIDDLE_CONFIDENCE: u8 = 3;

/// The JSON schema of a record (map and collapse calls). It has no descriptions: the
/// map and reduce prompts say what each field holds, and a server without native
/// structured output gets the schema in every prompt.
pub(crate) fn record_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "information": {"type": "string"},
            "rationale": {"type": "string"},
            "answer": {"type": "string"},
            "confidence": {"type": "integer", "minimum": 1, "maximum": 5},
            "no_information": {"type": "boolean"}
        },
        "required": ["information", "rationale", "answer", "confidence", "no_information"]
    })
}

/// What one map (or collapse) call found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) information: String,
    pub(crate) rationale: String,
    pub(crate) answer: String,
    /// 1 to 5.
    pub(crate) confidence: u8,
    pub(crate) no_information: bool,
}

impl Record {
    /// The record of a reply: its JSON read field by field (a field of the wrong type is
    /// taken as text; the confidence is clamped to 1..=5, a missing one is the middle),
    /// or, for a reply that is not a JSON object, the reply as information with middle
    /// confidence.
    pub(crate) fn parse(reply: &str) -> Self {
        let as_text = || Self {
            information: reply.trim().to_string(),
            rationale: String::new(),
            answer: String::new(),
            confidence: MIDDLE_CONFIDENCE,
            no_information: false,
        };
        let Ok(Value::Object(fields)) = parse_json_reply(reply) else {
            return as_text();
        };
        let text = |name: &str| fields.get(name).map(value_text).unwrap_or_default();
        let record = Self {
            information: text("information"),
            rationale: text("rationale"),
            answer: text("answer"),
            confidence: fields
                .get("confidence")
                .and_then(confidence)
                .unwrap_or(MIDDLE_CONFIDENCE),
            no_information: fields.get("no_information").is_some_and(truthy),
        };
        let known = ["information", "rationale", "answer", "no_information"];
        if known.iter().all(|k| !fields.contains_key(*k)) {
            // JSON, but not a record: what it says is the information.
            return as_text();
        }
        record
    }

    /// A record that contradicts itself (`no_information` with an answer or information
    /// that states facts) is decided by its grounding, not by its flag: when at least one
    /// of its facts is in `shown` (what its call was shown) and none is missing from it,
    /// the flag is cleared (an answer alone becomes the information). A small model writes
    /// `"answer": "The current MSRV of Tokio is 1.85.", "no_information": true` for a
    /// chunk that says so; such a record was dropped.
    pub(crate) fn settle_by_grounding(&mut self, question: &str, shown: &str) {
        if !self.no_information {
            return;
        }
        let said = match (self.information.trim(), self.answer.trim()) {
            ("", "") => return,
            (info, "") => info.to_string(),
            ("", answer) => answer.to_string(),
            (info, answer) => format!("{info}\n{answer}"),
        };
        let g = crate::grounding::check(&said, question, &[shown]);
        if g.found > 0 && g.status == crate::grounding::GroundingStatus::Supported {
            self.no_information = false;
            if self.information.trim().is_empty() {
                self.information = std::mem::take(&mut self.answer);
            }
        }
    }

    /// Whether the record holds something for the reduce step.
    pub(crate) fn kept(&self) -> bool {
        !self.no_information && !self.information.trim().is_empty()
    }

    /// The record as the reduce prompt shows it.
    pub(crate) fn render(&self) -> String {
        let mut out = format!(
            "Confidence: {}/5\nInformation: {}",
            self.confidence,
            self.information.trim()
        );
        for (label, value) in [("Rationale", &self.rationale), ("Answer", &self.answer)] {
            // A field repeating the information (a best-effort filler's) is shown once.
            if !value.trim().is_empty() && value.trim() != self.information.trim() {
                out.push_str(&format!("\n{label}: {}", value.trim()));
            }
        }
        out
    }
}

/// A JSON value as text: a string as it is, a list's items one per line, anything else
/// as JSON.
fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.trim().to_string(),
        Value::Null => String::new(),
        Value::Array(items) => items
            .iter()
            .map(value_text)
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

/// A confidence of 1 to 5 from a number or a numeric string (clamped, rounded).
fn confidence(v: &Value) -> Option<u8> {
    let n = match v {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => s.trim().split('/').next()?.trim().parse::<f64>().ok()?,
        _ => return None,
    };
    n.is_finite().then(|| n.round().clamp(1.0, 5.0) as u8)
}

/// Whether a `no_information` value says yes (`true`, `"true"`, `"yes"`).
fn truthy(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::String(s) => matches!(s.trim().to_ascii_lowercase().as_str(), "true" | "yes"),
        _ => false,
    }
}

/// One map or collapse call: the reply read as a record, its citation markers checked
/// against what its prompt showed.
fn record_call<'a>(
    job: &'a Job,
    request: &'a ModelRequest,
) -> BoxFuture<'a, Result<Record, SynthError>> {
    Box::pin(async move {
        let reply = job.call_reply(request).await?;
        let mut record = Record::parse(&reply);
        for field in [
            &mut record.information,
            &mut record.rationale,
            &mut record.answer,
        ] {
            *field = job.checked(request, std::mem::take(field));
        }
        record.settle_by_grounding(&job.query, &request.prompt.to_text());
        Ok(record)
    })
}

/// map_reduce's `step` at `level`.
fn at(step: Step, level: u32) -> LevelStep {
    LevelStep {
        mode: ResponseMode::MapReduce,
        step,
        level,
    }
}

/// The records kept, rendered, each with its origin; `None` when none is kept. A record
/// with no information is said in its step.
fn kept(job: &Job, records: Vec<Reply<Record>>) -> Option<Vec<(String, Origin)>> {
    let kept: Vec<(String, Origin)> = records
        .into_iter()
        .filter(|reply| {
            let keep = reply.text.kept();
            if !keep {
                job.not_used(reply.step, ReplyReading::NotInSources, false);
            }
            keep
        })
        .map(|reply| (reply.text.render(), reply.origin))
        .collect();
    (!kept.is_empty()).then_some(kept)
}

/// The map level over the nodes' texts, then the reduce levels.
pub(crate) async fn run(job: &Job, texts: &[Cow<'_, str>]) -> Result<Outcome, SynthError> {
    let joined = Sourced::of_nodes(texts, false);
    if joined.is_empty() {
        return Ok(Outcome::Text(job.empty()));
    }
    let template = job.template(TemplateKind::Map);
    let schema = Arc::new(record_schema());
    let size = job.room(&template, Some(&schema))?;
    // The map requests are built as calls free up, so packing overlaps the calls.
    let requests = PackedLevel::new(
        job,
        &template,
        Some(schema),
        size,
        &joined,
        at(Step::Map, 0),
    );
    let records = job.call_all_with(requests, record_call).await?;
    let Some(current) = kept(job, records) else {
        // Every map record said no information.
        return Ok(Outcome::Unanswered(job.not_in_sources()));
    };
    job.event(SynthEvent::TreeLevel {
        level: 1,
        chunks: current.len(),
    });
    reduce(job, current, 1).await
}

/// The reduce levels over `current` (rendered records, each with where it came from),
/// starting at `level`: collapse while they do not fit one reduce prompt, then the final
/// reduce call.
pub(crate) async fn reduce(
    job: &Job,
    mut current: Vec<(String, Origin)>,
    mut level: u32,
) -> Result<Outcome, SynthError> {
    let Some(Tree {
        template,
        schema: output,
        how,
    }) = Tree::start(job, &mut current, TemplateKind::Reduce)
    else {
        return Ok(Outcome::Text(job.empty()));
    };
    let record = Arc::new(record_schema());
    loop {
        let joined = Tree::join(&current);
        // The final call, when the records fit one prompt (re-measured each level, as a
        // context correction may have lowered the limit).
        let size = job.room(&template, output.as_deref())?;
        let mut last = PackedLevel::new(
            job,
            &template,
            output.clone(),
            size,
            &joined,
            at(Step::Reduce, level),
        );
        let first = last.next_request().await?;
        let fits = first.is_some() && last.next_request().await?.is_none();
        drop(last);
        if let (true, Some(request)) = (fits, first) {
            return Ok(Outcome::final_call(request, how));
        }
        // A collapse level: packed whole first, so that a level that does not reduce
        // stops before any of its calls.
        let size = job.room(&template, Some(&record))?;
        let mut collapse = PackedLevel::new(
            job,
            &template,
            Some(Arc::clone(&record)),
            size,
            &joined,
            at(Step::Reduce, level),
        );
        let mut all = Vec::new();
        while let Some(r) = collapse.next_request().await? {
            all.push(r);
        }
        // One text too long for a prompt (a final prompt taken back after the server
        // rejected it) may take more prompts than texts.
        if (current.len() > 1 && all.len() >= current.len()) || level >= MAX_LEVELS {
            return Err(SynthError::TreeNotConverging {
                mode: ResponseMode::MapReduce,
                level,
                summaries: current.len(),
                chunks: all.len(),
                chunk_size: size,
            });
        }
        let records = job
            .call_all_with(Prebuilt(all.into_iter()), record_call)
            .await?;
        let Some(next) = kept(job, records) else {
            // Every record said no information.
            return Ok(Outcome::Unanswered(job.not_in_sources()));
        };
        current = next;
        level += 1;
        job.event(SynthEvent::TreeLevel {
            level,
            chunks: current.len(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_parse_from_json_and_fenced_json() {
        let r = Record::parse(
            "```json\n{\"information\": \"Dome opens at dusk [2]\", \"rationale\": \"stated\", \"answer\": \"dusk\", \"confidence\": 9, \"no_information\": false}\n```",
        );
        assert_eq!(r.information, "Dome opens at dusk [2]");
        assert_eq!((r.confidence, r.no_information), (5, false));
        assert!(r.kept());
        let rendered = r.render();
        assert!(rendered.starts_with("Confidence: 5/5\nInformation: Dome opens at dusk [2]"));
        assert!(rendered.contains("Answer: dusk"));
    }

    #[test]
    fn lenient_fields() {
        let r = Record::parse(
            r#"{"information": ["a", "b"], "confidence": "2/5", "no_information": "yes"}"#,
        );
        assert_eq!(r.information, "a\nb");
        assert_eq!(r.confidence, 2);
        assert!(r.no_information && !r.kept());
        let r = Record::parse(r#"{"information": "x", "confidence": 0}"#);
        assert_eq!(r.confidence, 1);
        let r = Record::parse(r#"{"information": "x", "confidence": null}"#);
        assert_eq!(r.confidence, MIDDLE_CONFIDENCE);
        let r = Record::parse(r#"{"information": "  ", "no_information": false}"#);
        assert!(!r.kept(), "empty information is dropped");
    }

    #[test]
    fn a_reply_that_is_not_a_record_is_middle_confidence_information() {
        for reply in [
            "The dome opens at dusk.",
            "{broken json",
            r#"{"other": 1}"#,
            "[1, 2]",
        ] {
            let r = Record::parse(reply);
            assert_eq!(r.information, reply.trim(), "{reply}");
            assert_eq!(r.confidence, MIDDLE_CONFIDENCE);
            assert!(r.kept());
        }
        assert!(!Record::parse("   ").kept());
    }

    #[test]
    fn a_contradictory_record_is_decided_by_its_grounding() {
        let shown = "Context:\nTokio's MSRV is 1.85, raised in the 1.44 release.\nQuestion: What is the MSRV of Tokio?";
        let question = "What is the MSRV of Tokio?";
        let reply = r#"{"answer": "The current MSRV of Tokio is 1.85.", "confidence": 5, "no_information": true}"#;
        let mut r = Record::parse(reply);
        assert!(!r.kept());
        r.settle_by_grounding(question, shown);
        assert!(r.kept(), "a grounded answer is kept: {r:?}");
        assert_eq!(r.information, "The current MSRV of Tokio is 1.85.");
        // Its facts in no source: the flag stands.
        let mut r = Record::parse(
            r#"{"information": "Tokio needs Rust 1.99.", "answer": "1.99", "no_information": true}"#,
        );
        r.settle_by_grounding(question, shown);
        assert!(!r.kept());
        // No facts to check: the flag stands.
        let mut r = Record::parse(r#"{"answer": "It is a runtime.", "no_information": true}"#);
        r.settle_by_grounding(question, shown);
        assert!(!r.kept());
    }
}
