//! Spans of a synthesis, for tracing UIs: one per synthesis, one per step, one per model
//! call, made with `tracing` and named with OpenTelemetry's GenAI semantic conventions
//! ([`genai`]). With the feature `otel`, its module `otel` exports them over OTLP/HTTP (Arize
//! Phoenix, Jaeger, an OpenTelemetry Collector); without it they go to whatever `tracing`
//! subscriber the program installs (a log formatter shows them as context).
//!
//! # The tree
//!
//! - `synthkit.synthesize` (OpenInference kind `CHAIN`): the whole synthesis, with
//!   `synthkit.mode`, `synthkit.nodes`, `synthkit.node_ids` (at most [`MAX_NODE_IDS`]),
//!   and at its end `synthkit.calls` and the usage totals. Its parent is the span current
//!   where the synthesis was started (the service's request span).
//! - `synthkit.step` (`CHAIN`): one stage of the synthesis, a step kind at a tree level
//!   (`qa`, then `refine` for the refine chain; `summary` at each tree level; the
//!   accumulate fan-out), with `synthkit.step`, `synthkit.level` and `synthkit.calls`.
//! - the call span (`LLM`), named `"{operation} {model}"` as the conventions ask (the
//!   `tracing` name is `synthkit.call`): `gen_ai.operation.name`, `gen_ai.provider.name`,
//!   `gen_ai.request.model`, `gen_ai.request.max_tokens`, `gen_ai.usage.input_tokens`,
//!   `gen_ai.usage.output_tokens`, `gen_ai.usage.reasoning.output_tokens` (a call that
//!   thought), `gen_ai.usage.cache_read.input_tokens` and
//!   `gen_ai.usage.cache_creation.input_tokens` (a call whose server reused or stored a
//!   prompt prefix), `gen_ai.response.finish_reasons`, `gen_ai.output.type`, and synthkit's `synthkit.index`, `synthkit.retries`,
//!   `synthkit.truncated`, `synthkit.usage_reported`, `synthkit.counted_prompt_tokens`,
//!   and `synthkit.nodes` / `synthkit.node_ids` (at most [`MAX_NODE_IDS`]): the nodes
//!   whose text the prompt held (above a tree's first level, the nodes under the
//!   summaries it read; absent for a prompt with no nodes, such as generation's).
//!
//! A failed call or synthesis marks its span as an error (`otel.status_code = ERROR`,
//! `error.type`, the message as the status description). Retries, context corrections
//! and truncation warnings are `tracing` events inside the call's span: exported, they
//! are the span's events.
//!
//! # Content capture
//!
//! Prompts, replies and the query are user data: they are recorded
//! (`gen_ai.input.messages`, `gen_ai.output.messages` with a reply's thinking as a
//! `reasoning` part before its text, `synthkit.query`, each text at most
//! [`MAX_CONTENT_BYTES`], `synthkit.content_cut` when shortened) only when content
//! capture is on, and only on the exported OpenTelemetry span (feature `otel`), never as
//! `tracing` fields: a log formatter never prints a prompt. It is off by default and process-wide: [`set_capture_content`] turns it
//! on (the `otel` installer does when its config asks, which the CLI's `--otel-content`
//! does). A flag rather than a synthesizer option because it belongs to whoever installs
//! the exporter, not to each request: one service-wide decision, also for the service's
//! synthesizers built per request.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::SynthError;
use crate::mode::{ResponseMode, Step};
use crate::model::{FinishReason, ModelInfo, ModelRequest, StepInfo, Usage};
use crate::node::Node;
use crate::observe::UsageTotals;
use crate::prompt::RenderedPrompt;

pub mod genai;
#[cfg(feature = "otel")]
pub mod otel;

/// The most bytes of a prompt, a reply or the query a span carries with content capture
/// on (64 KiB each; a longer text is cut at a character boundary and
/// `synthkit.content_cut` is set).
pub const MAX_CONTENT_BYTES: usize = 64 * 1024;
/// The most node ids a span lists.
pub const MAX_NODE_IDS: usize = 100;

/// `tracing-opentelemetry`'s special fields: the exported name and status.
const OTEL_NAME: &str = "otel.name";
const OTEL_STATUS_CODE: &str = "otel.status_code";
const OTEL_STATUS_DESCRIPTION: &str = "otel.status_description";

static CAPTURE_CONTENT: AtomicBool = AtomicBool::new(false);

/// Turns the recording of prompts, replies and queries on spans on or off, for the whole
/// process (off by default). See the module's "Content capture".
pub fn set_capture_content(on: bool) {
    CAPTURE_CONTENT.store(on, Ordering::Relaxed);
}

/// Whether prompts, replies and queries are recorded on spans.
pub(crate) fn capture_content() -> bool {
    CAPTURE_CONTENT.load(Ordering::Relaxed)
}

/// The span of one synthesis, a child of the span current where it starts.
pub(crate) fn synthesis_span(mode: ResponseMode, query: &str, nodes: &[Node]) -> tracing::Span {
    let span = tracing::info_span!(
        target: "synthkit",
        "synthkit.synthesize",
        { OTEL_NAME } = format!("synthesize {}", mode.as_str()),
        { genai::OPENINFERENCE_SPAN_KIND } = "CHAIN",
        { genai::SYNTHKIT_MODE } = mode.as_str(),
        { genai::SYNTHKIT_NODES } = int(nodes.len()),
        { genai::SYNTHKIT_NODE_IDS } = tracing::field::Empty,
        { genai::SYNTHKIT_NODE_IDS_CUT } = tracing::field::Empty,
        { genai::SYNTHKIT_CONTENT_CUT } = tracing::field::Empty,
        { genai::SYNTHKIT_CALLS } = tracing::field::Empty,
        { genai::SYNTHKIT_INPUT_TOKENS } = tracing::field::Empty,
        { genai::SYNTHKIT_OUTPUT_TOKENS } = tracing::field::Empty,
        { genai::SYNTHKIT_TRUNCATED_CALLS } = tracing::field::Empty,
        { genai::ERROR_TYPE } = tracing::field::Empty,
        { OTEL_STATUS_CODE } = tracing::field::Empty,
        { OTEL_STATUS_DESCRIPTION } = tracing::field::Empty,
    );
    if span.is_disabled() {
        return span;
    }
    record_node_ids(&span, nodes.iter().map(|n| n.id.as_str()));
    if capture_content() {
        let (query, cut) = cap(query);
        record_content(&span, genai::SYNTHKIT_QUERY, query);
        if cut {
            span.record(genai::SYNTHKIT_CONTENT_CUT, true);
        }
    }
    span
}

/// Records on `span` how many nodes there are and the first [`MAX_NODE_IDS`] ids
/// (comma-separated; `synthkit.node_ids_cut` when there are more). None: no attribute.
fn record_node_ids<'a>(span: &tracing::Span, ids: impl ExactSizeIterator<Item = &'a str>) {
    let n = ids.len();
    if n == 0 {
        return;
    }
    span.record(genai::SYNTHKIT_NODES, int(n));
    let listed: Vec<&str> = ids.take(MAX_NODE_IDS).collect();
    span.record(genai::SYNTHKIT_NODE_IDS, listed.join(","));
    if n > MAX_NODE_IDS {
        span.record(genai::SYNTHKIT_NODE_IDS_CUT, true);
    }
}

/// Records a finished synthesis's totals on its span.
pub(crate) fn record_totals(span: &tracing::Span, totals: &UsageTotals) {
    span.record(genai::SYNTHKIT_CALLS, int(totals.calls));
    span.record(genai::SYNTHKIT_INPUT_TOKENS, int(totals.prompt_tokens));
    span.record(genai::SYNTHKIT_OUTPUT_TOKENS, int(totals.completion_tokens));
    span.record(genai::SYNTHKIT_TRUNCATED_CALLS, int(totals.truncated_calls));
}

/// Marks `span` as failed with `error`.
pub(crate) fn record_error(span: &tracing::Span, error: &SynthError) {
    span.record(OTEL_STATUS_CODE, "ERROR");
    span.record(OTEL_STATUS_DESCRIPTION, error.to_string());
    span.record(genai::ERROR_TYPE, error_type(error));
}

/// The class of `error` for `error.type`: its variant, in snake case.
fn error_type(error: &SynthError) -> String {
    let debug = format!("{error:?}");
    let variant = debug
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .next()
        .unwrap_or("error");
    let mut out = String::with_capacity(variant.len() + 4);
    for (i, c) in variant.chars().enumerate() {
        if c.is_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The step spans of one synthesis: the stage now running (a step kind at a level)
/// stays open while its calls run; a call of another stage closes it and opens the next.
/// Holds one span at a time.
pub(crate) struct StepSpans {
    parent: tracing::Span,
    open: Mutex<Option<OpenStep>>,
}

struct OpenStep {
    step: Step,
    level: u32,
    calls: usize,
    span: tracing::Span,
}

impl StepSpans {
    /// Step spans under `parent` (the synthesis span).
    pub(crate) fn new(parent: tracing::Span) -> Self {
        Self {
            parent,
            open: Mutex::new(None),
        }
    }

    /// The span of the stage of `info`, opened when it is a new stage.
    pub(crate) fn for_call(&self, info: StepInfo) -> tracing::Span {
        if self.parent.is_disabled() {
            return tracing::Span::none();
        }
        let Ok(mut open) = self.open.lock() else {
            return tracing::Span::none();
        };
        match open.as_mut() {
            Some(o) if o.step == info.step && o.level == info.level => {
                o.calls += 1;
                o.span.record(genai::SYNTHKIT_CALLS, int(o.calls));
                o.span.clone()
            }
            _ => {
                let span = under(&self.parent, || {
                    tracing::info_span!(
                        target: "synthkit",
                        parent: &self.parent,
                        "synthkit.step",
                        { OTEL_NAME } = format!("{} level {}", info.step.as_str(), info.level),
                        { genai::OPENINFERENCE_SPAN_KIND } = "CHAIN",
                        { genai::SYNTHKIT_MODE } = info.mode.as_str(),
                        { genai::SYNTHKIT_STEP } = info.step.as_str(),
                        { genai::SYNTHKIT_LEVEL } = i64::from(info.level),
                        { genai::SYNTHKIT_CALLS } = 1_i64,
                    )
                });
                *open = Some(OpenStep {
                    step: info.step,
                    level: info.level,
                    calls: 1,
                    span: span.clone(),
                });
                span
            }
        }
    }

    /// Closes the open stage (its span ends once its calls have ended).
    pub(crate) fn close(&self) {
        if let Ok(mut open) = self.open.lock() {
            open.take();
        }
    }
}

/// Runs `make` (which makes a child of `parent`) with `parent`'s own subscriber as the
/// default. A synthesis's calls run on whatever thread the runtime picks, whose default
/// subscriber may not be the one that made the synthesis's span (a thread-local default
/// beside a global one): a child made there would name a parent its subscriber has never
/// seen (`tracing-subscriber`'s registry panics on that).
fn under<T>(parent: &tracing::Span, make: impl FnOnce() -> T) -> T {
    match parent.with_subscriber(|(_, dispatch)| dispatch.clone()) {
        Some(dispatch) => tracing::dispatcher::with_default(&dispatch, make),
        None => make(),
    }
}

/// The model facts a call span names.
#[derive(Debug, Clone)]
pub(crate) struct CallModel {
    name: String,
    provider: Option<String>,
}

impl CallModel {
    /// From the model's info.
    pub(crate) fn new(info: &ModelInfo) -> Self {
        Self {
            name: info.name.clone(),
            provider: info.provider.clone(),
        }
    }
}

/// The span of one model call under `parent` (its step span). Keeps the fields the
/// `synthkit.call` span always had (`mode`, `step`, `level`, `index`, `kind`,
/// `prompt_tokens`, `completion_tokens`, `duration_ms`) for log readers.
pub(crate) fn call_span<'a>(
    parent: &tracing::Span,
    request: &ModelRequest,
    kind: &'static str,
    model: &CallModel,
    node_ids: impl ExactSizeIterator<Item = &'a str>,
) -> tracing::Span {
    let step = request.step();
    let operation = match request.prompt {
        RenderedPrompt::Chat(_) => genai::OPERATION_CHAT,
        RenderedPrompt::Text(_) => genai::OPERATION_TEXT_COMPLETION,
    };
    let span = under(parent, || {
        tracing::info_span!(
            target: "synthkit",
            parent: parent,
            "synthkit.call",
            mode = step.mode.as_str(),
            step = step.step.as_str(),
            level = step.level,
            index = step.index,
            kind,
            prompt_tokens = request.prompt_tokens,
            completion_tokens = tracing::field::Empty,
            duration_ms = tracing::field::Empty,
            { OTEL_NAME } = tracing::field::Empty,
            { genai::OPENINFERENCE_SPAN_KIND } = "LLM",
            { genai::OPERATION_NAME } = operation,
            { genai::PROVIDER_NAME } = tracing::field::Empty,
            { genai::REQUEST_MODEL } = model.name.as_str(),
            { genai::REQUEST_MAX_TOKENS } = int(request.max_tokens),
            { genai::OUTPUT_TYPE } = if request.schema.is_some() { "json" } else { "text" },
            { genai::USAGE_INPUT_TOKENS } = tracing::field::Empty,
            { genai::USAGE_OUTPUT_TOKENS } = tracing::field::Empty,
            { genai::USAGE_REASONING_OUTPUT_TOKENS } = tracing::field::Empty,
            { genai::USAGE_CACHE_READ_INPUT_TOKENS } = tracing::field::Empty,
            { genai::USAGE_CACHE_CREATION_INPUT_TOKENS } = tracing::field::Empty,
            { genai::RESPONSE_FINISH_REASONS } = tracing::field::Empty,
            { genai::SYNTHKIT_MODE } = step.mode.as_str(),
            { genai::SYNTHKIT_STEP } = step.step.as_str(),
            { genai::SYNTHKIT_LEVEL } = i64::from(step.level),
            { genai::SYNTHKIT_INDEX } = int(step.index),
            { genai::SYNTHKIT_COUNTED_PROMPT_TOKENS } = int(request.prompt_tokens),
            { genai::SYNTHKIT_NODES } = tracing::field::Empty,
            { genai::SYNTHKIT_NODE_IDS } = tracing::field::Empty,
            { genai::SYNTHKIT_NODE_IDS_CUT } = tracing::field::Empty,
            { genai::SYNTHKIT_USAGE_REPORTED } = tracing::field::Empty,
            { genai::SYNTHKIT_RETRIES } = tracing::field::Empty,
            { genai::SYNTHKIT_TRUNCATED } = tracing::field::Empty,
            { genai::SYNTHKIT_CONTENT_CUT } = tracing::field::Empty,
            { genai::ERROR_TYPE } = tracing::field::Empty,
            { OTEL_STATUS_CODE } = tracing::field::Empty,
            { OTEL_STATUS_DESCRIPTION } = tracing::field::Empty,
        )
    });
    if span.is_disabled() {
        return span;
    }
    span.record(OTEL_NAME, format!("{operation} {}", model.name));
    record_node_ids(&span, node_ids);
    if let Some(p) = &model.provider {
        span.record(genai::PROVIDER_NAME, p.as_str());
    }
    if capture_content() {
        let (messages, cut) = input_messages(&request.prompt);
        record_content(&span, genai::INPUT_MESSAGES, &messages);
        if cut {
            span.record(genai::SYNTHKIT_CONTENT_CUT, true);
        }
    }
    span
}

/// What a finished call records on its span.
pub(crate) struct CallEnd<'a> {
    pub(crate) text: &'a str,
    /// The reply's thinking (empty when it did not think).
    pub(crate) thinking: &'a str,
    pub(crate) usage: Usage,
    pub(crate) usage_reported: bool,
    pub(crate) finish_reason: Option<FinishReason>,
    pub(crate) retries: u32,
}

/// Records a finished call on its span.
pub(crate) fn record_call_end(span: &tracing::Span, end: &CallEnd<'_>) {
    if span.is_disabled() {
        return;
    }
    span.record(genai::USAGE_INPUT_TOKENS, int(end.usage.prompt_tokens));
    span.record(genai::USAGE_OUTPUT_TOKENS, int(end.usage.completion_tokens));
    if end.usage.reasoning_tokens > 0 {
        span.record(
            genai::USAGE_REASONING_OUTPUT_TOKENS,
            int(end.usage.reasoning_tokens),
        );
    }
    if end.usage.cached_prompt_tokens > 0 {
        span.record(
            genai::USAGE_CACHE_READ_INPUT_TOKENS,
            int(end.usage.cached_prompt_tokens),
        );
    }
    if end.usage.cache_write_tokens > 0 {
        span.record(
            genai::USAGE_CACHE_CREATION_INPUT_TOKENS,
            int(end.usage.cache_write_tokens),
        );
    }
    span.record(genai::SYNTHKIT_USAGE_REPORTED, end.usage_reported);
    span.record(genai::SYNTHKIT_RETRIES, i64::from(end.retries));
    let truncated = end.finish_reason == Some(FinishReason::Length);
    span.record(genai::SYNTHKIT_TRUNCATED, truncated);
    let reason = end.finish_reason.map(finish_reason_name);
    if let Some(reason) = reason {
        span.record(genai::RESPONSE_FINISH_REASONS, reason);
    }
    if capture_content() {
        let (messages, cut) = output_messages(end.thinking, end.text, reason);
        record_content(span, genai::OUTPUT_MESSAGES, &messages);
        if cut {
            span.record(genai::SYNTHKIT_CONTENT_CUT, true);
        }
    }
}

/// Puts captured content on the exported OpenTelemetry span only, never on the `tracing`
/// fields, so that log formatters never print prompts or replies.
#[cfg(feature = "otel")]
fn record_content(span: &tracing::Span, key: &'static str, value: &str) {
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    span.set_attribute(key, value.to_string());
}

/// Without the `otel` feature there is no exported span to carry content.
#[cfg(not(feature = "otel"))]
fn record_content(_span: &tracing::Span, _key: &'static str, _value: &str) {}

/// A count as a signed integer: OpenTelemetry's integers are `i64` (an unsigned field
/// would be exported as a string).
fn int<N: TryInto<i64>>(n: N) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

fn finish_reason_name(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::Other => "other",
    }
}

/// `text` cut to [`MAX_CONTENT_BYTES`] at a character boundary, and whether it was cut.
fn cap(text: &str) -> (&str, bool) {
    if text.len() <= MAX_CONTENT_BYTES {
        return (text, false);
    }
    let mut end = MAX_CONTENT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (text.get(..end).unwrap_or_default(), true)
}

/// The prompt as GenAI input messages (JSON), each text capped, and whether any was cut.
fn input_messages(prompt: &RenderedPrompt) -> (String, bool) {
    let mut cut_any = false;
    let mut part = |role: &str, text: &str| {
        let (text, cut) = cap(text);
        cut_any |= cut;
        serde_json::json!({"role": role, "parts": [{"type": "text", "content": text}]})
    };
    let messages: Vec<serde_json::Value> = match prompt {
        RenderedPrompt::Text(t) => vec![part("user", t)],
        RenderedPrompt::Chat(m) => m
            .iter()
            .map(|m| part(m.role.as_str(), &m.content))
            .collect(),
    };
    (serde_json::Value::Array(messages).to_string(), cut_any)
}

/// The reply as GenAI output messages (JSON): its thinking, if any, as a `reasoning`
/// part before its text; each capped, and whether either was cut.
fn output_messages(thinking: &str, text: &str, finish_reason: Option<&str>) -> (String, bool) {
    let (text, cut) = cap(text);
    let (thinking, thinking_cut) = cap(thinking);
    let mut parts = Vec::with_capacity(2);
    if !thinking.is_empty() {
        parts.push(serde_json::json!({"type": "reasoning", "content": thinking}));
    }
    parts.push(serde_json::json!({"type": "text", "content": text}));
    let message = serde_json::json!([{
        "role": "assistant",
        "parts": parts,
        "finish_reason": finish_reason.unwrap_or("other"),
    }]);
    (message.to_string(), cut || thinking_cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_is_capped_at_a_character_boundary() {
        let long = "é".repeat(MAX_CONTENT_BYTES);
        let (text, cut) = cap(&long);
        assert!(cut);
        assert!(text.len() <= MAX_CONTENT_BYTES);
        assert_eq!(cap("short"), ("short", false));
    }

    #[test]
    fn error_types_are_snake_case_variants() {
        let e = SynthError::DuplicateNodeId {
            id: "a".into(),
            first: 1,
            second: 2,
        };
        assert_eq!(error_type(&e), "duplicate_node_id");
    }

    #[test]
    fn output_messages_carry_the_finish_reason() {
        let (json, cut) = output_messages("", "Yes.", Some("stop"));
        assert!(!cut);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap_or_default();
        assert_eq!(v[0]["finish_reason"], "stop");
        assert_eq!(v[0]["parts"][0]["content"], "Yes.");
        assert_eq!(v[0]["parts"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn output_messages_carry_the_thinking_as_a_reasoning_part_capped() {
        let long = "é".repeat(MAX_CONTENT_BYTES);
        let (json, cut) = output_messages(&long, "Yes.", Some("stop"));
        assert!(cut);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap_or_default();
        assert_eq!(v[0]["parts"][0]["type"], "reasoning");
        let thinking = v[0]["parts"][0]["content"].as_str().unwrap_or_default();
        assert!(thinking.len() <= MAX_CONTENT_BYTES && thinking.starts_with('é'));
        assert_eq!(v[0]["parts"][1]["type"], "text");
        assert_eq!(v[0]["parts"][1]["content"], "Yes.");
    }
}
