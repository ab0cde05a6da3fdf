//! The answer of a request as JSON: the shape of [`synthkit::Response`] as the service
//! answers it and a batch writes it ([`SynthesizeResponse`], documentation of the JSON
//! `Response` serializes to), and a failure's [`ErrorDetail`] with its [`error_kind`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use synthkit::error::SynthError;
use synthkit::mode::ResponseMode;
use synthkit::model::ModelError;

/// A stable machine-readable name for a failed synthesis: `invalid_option` (the caller's
/// options, a template, the budget), `truncated`, `model_timeout`, `model_rate_limited`,
/// `schema_mismatch`, `model_refused` (a refusal or a reply without text), `cost_cap` (a
/// call refused before it was sent: it could have passed the cost cap), `model_error`
/// (anything else the model did), `synthesis_failed`.
pub fn error_kind(e: &SynthError) -> &'static str {
    match e {
        SynthError::Budget(_)
        | SynthError::Template(_)
        | SynthError::Split(_)
        | SynthError::Tokenizer(_)
        | SynthError::UnknownMode(_)
        | SynthError::Schema(_)
        | SynthError::InvalidOption(_)
        | SynthError::DuplicateNodeId { .. } => "invalid_option",
        SynthError::Truncated { .. } => "truncated",
        SynthError::Unsupported { .. } => "unsupported_answer",
        // A model reply too long to carry, or a server with less room than it said; a
        // map_reduce whose records (the model's replies) are too long to combine.
        SynthError::NoRoomForContext { .. }
        | SynthError::TreeNotConverging {
            mode: ResponseMode::MapReduce,
            ..
        } => "model_error",
        SynthError::Model { source, .. } | SynthError::Count { source, .. } => match source {
            ModelError::Timeout { .. } => "model_timeout",
            ModelError::RateLimited { .. } => "model_rate_limited",
            ModelError::SchemaMismatch { .. } => "schema_mismatch",
            ModelError::Refused { .. } | ModelError::NoText { .. } => "model_refused",
            ModelError::Layer { layer, .. } if *layer == "cost cap" => "cost_cap",
            _ => "model_error",
        },
        _ => "synthesis_failed",
    }
}

/// What went wrong, as a front end reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorDetail {
    /// A stable machine-readable name (`invalid_request`, `model_error`, ...; the
    /// service adds its own, such as `unauthorized` or `too_many_nodes`).
    pub kind: String,
    /// What to change.
    pub message: String,
}

/// The response: [`synthkit::Response`] as JSON. This type documents its shape (the
/// service's OpenAPI document derives its schema from it).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SynthesizeResponse {
    /// The answer's text (for a structured answer, its JSON).
    pub text: String,
    /// `false` when the sources do not answer (no nodes, the model said so: then `text`
    /// is the `not_in_sources_answer`, or no step found anything).
    pub answerable: bool,
    /// The structured answer, when an output schema was given.
    pub structured: Option<Value>,
    /// The nodes given, in order.
    pub source_nodes: Vec<SourceNode>,
    /// Node id to its full metadata.
    pub metadata: Map<String, Value>,
    /// Calls and tokens.
    pub usage: UsageBody,
    /// What `simple_summarize` dropped to fit one prompt.
    pub truncation: Option<TruncationBody>,
    /// The answer's citations, when they were asked for.
    pub citations: Option<CitationsBody>,
    /// One object per model call, when `return_steps` was given: `call`, `mode`, `step`,
    /// `level`, `index`, `node_ids`, `input_calls`, `prompt_tokens`,
    /// `counted_prompt_tokens`, `max_tokens`, `completion_tokens`, `usage_reported`, `ms`,
    /// `retries`, `corrections`, `truncated`, `reply` (at most 16 KiB), `reply_bytes`,
    /// `reply_cut` (see `synthkit::steps::SynthStep`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps: Option<Vec<Map<String, Value>>>,
    /// With `evidence`: what the evidence stage kept (`kept`: `node_id` and `sentences`,
    /// each with `text`, `start`, `end` in characters) and left out (`dropped`,
    /// `dropped_count`), `answerable`, `coverage` and whether it `abstained` without a
    /// call (see `synthkit::evidence::EvidenceReport`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Map<String, Value>>,
    /// The grounding check of a text answer: `status` (`supported`, `partly`,
    /// `unsupported`), `unsupported` (the answer's facts found in no source it was shown),
    /// `derived`, `checked`, `found`, `source_ids` (the nodes holding its facts, found by
    /// the engine), `withheld` (the model's answer, when `on_unsupported: abstain`
    /// replaced it) (see `synthkit::grounding::Grounding`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grounding: Option<Map<String, Value>>,
    /// The service only, when `report` was given: the path of the HTML report
    /// (`/v1/report/{id}`), behind the same key as the synthesis.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report_url: Option<String>,
}

/// The citations of an answer.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CitationsBody {
    /// The answer's markers in order of first use (marker 1 first).
    pub markers: Vec<CitationBody>,
    /// Markers removed because they named no source shown to the model, as written: the
    /// first 64 (`synthkit::citation::MAX_REMOVED_LISTED`).
    pub removed: Vec<String>,
    /// How many markers were removed in all.
    pub removed_count: usize,
    /// With `"citations": "quotes"`: uses of markers the check did not read (past 1024
    /// markers or 256 quotes); they support no citation (absent when 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unchecked_markers: Option<usize>,
    /// With `"citations": "quotes"`: every `[n] "quote"` of the answer, checked (absent
    /// when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub quotes: Vec<QuoteBody>,
    /// With `"citations": "quotes"`: numbers of cited sentences that none of their cited
    /// sources contains (absent when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unsupported_numbers: Vec<UnsupportedNumberBody>,
}

/// One checked quote of the answer (see `synthkit::citation::Quote`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct QuoteBody {
    /// The marker written before the quote, as numbered in the answer.
    pub marker: u32,
    /// The node the quote was found in (re-pointed when misattributed), or the node the
    /// marker names when not found.
    pub node_id: String,
    /// The node the marker names.
    pub marked_node_id: String,
    /// The quote as written, without its quote marks.
    pub quote: String,
    /// `verified` (in the marked node), `misattributed` (in another source shown: the
    /// citation is re-pointed), `not_found` (left out of the citations), `unchecked`
    /// (not looked for, see `reason`; left out of the citations too).
    pub status: String,
    /// With `unchecked` only: `too_short` (under 2 words and 8 letters), `too_long` (no
    /// closing mark within 1000 characters) or `unclosed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Where the quote starts in `node_id`'s text, in characters (null when not found).
    pub start: Option<usize>,
    /// Where it ends (exclusive), in characters.
    pub end: Option<usize>,
}

/// A number of a cited sentence that none of its cited sources contains.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct UnsupportedNumberBody {
    /// The number as written.
    pub number: String,
    /// The sentence's markers.
    pub markers: Vec<u32>,
    /// The sentence, without its markers.
    pub sentence: String,
}

/// One marker of the answer.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CitationBody {
    /// The number written in the answer (`[1]` is 1).
    pub marker: u32,
    /// The nodes it cites.
    pub node_ids: Vec<String>,
}

/// A source node as the response gives it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SourceNode {
    /// The id (given, or the node's position).
    pub id: String,
    /// The text.
    pub text: String,
    /// Metadata.
    pub metadata: Map<String, Value>,
    /// Metadata keys the model did not see.
    pub excluded_llm_metadata_keys: Vec<String>,
    /// The retriever's score, when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
}

/// Calls and tokens of one synthesis.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct UsageBody {
    /// Model calls made (cached replies included).
    pub calls: u64,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Replies cut at the output limit.
    pub truncated_calls: u64,
    /// Of the completion tokens, those reasoning models spent thinking (absent when 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// Of the prompt tokens, those the servers read from their prompt caches (absent
    /// when 0: nothing reused, or the server does not say).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_prompt_tokens: Option<u64>,
    /// Of the prompt tokens, those the servers wrote to their prompt caches (Anthropic;
    /// absent when 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
}

/// What truncation dropped.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TruncationBody {
    /// Tokens of context not sent.
    pub dropped_tokens: usize,
    /// Nodes whose text was cut.
    pub dropped_node_ids: Vec<String>,
}
