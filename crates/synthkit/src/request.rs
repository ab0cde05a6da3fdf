//! One synthesis request as JSON, for every front end that takes one: the HTTP service's
//! `POST /v1/synthesize` body and each line of the command line's `synthkit batch`.
//!
//! [`SynthesizeRequest`] is the request (query, nodes, mode, templates, citations, output
//! schema, ...); [`SynthesizeRequest::prepare`] turns it into a [`Synthesizer`] on a
//! model and the [`SynthesisInput`] to run. The answer is [`crate::Response`] serialized
//! as JSON, whose shape [`SynthesizeResponse`] documents; a failure is an
//! [`ErrorDetail`] whose `kind` is [`error_kind`]'s name for it. The types derive
//! `schemars::JsonSchema`, so a front end can publish them (the service's OpenAPI
//! document does).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use synthkit::request::{RequestDefaults, SynthesizeRequest};
//! use synthkit::{model::ModelInfo, testing::ScriptedModel};
//!
//! let model = Arc::new(ScriptedModel::constant(ModelInfo::new("m"), "At dusk."));
//! let request: SynthesizeRequest = serde_json::from_str(
//!     r#"{"query": "When does the dome open?", "nodes": ["The dome opens at dusk."], "mode": "refine"}"#,
//! )?;
//! let run = request.prepare(model, RequestDefaults::default(), |b| b)?;
//! let response = run.synthesizer.synthesize_input(run.input).await?;
//! assert_eq!(response.text, "At dusk.");
//! let json = serde_json::to_value(&response)?; // what the service answers
//! assert_eq!(json["source_nodes"][0]["id"], "1");
//! # Ok(()) }
//! ```

use std::str::FromStr;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::SynthError;
use crate::mode::{ResponseMode, UnknownMode};
use crate::model::{LanguageModel, ModelError};
use crate::node::NodeJsonError;
use crate::options::Concurrency;
use crate::prompt::{PromptTemplate, TemplateKind};
use crate::steps::StepRecorder;
use crate::synth::{SynthesisInput, SynthesisOptions, Synthesizer, SynthesizerBuilder};

/// A synthesis request: the query, the retrieved nodes and how to answer.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SynthesizeRequest {
    /// The question (or instruction) to answer.
    pub query: String,
    /// The retrieved nodes, best first: plain strings (document texts), synthkit nodes
    /// `{id?, text, metadata?, excluded_llm_metadata_keys?, score?}`, LlamaIndex
    /// `TextNode` objects (`id_`) or `NodeWithScore` objects (`{node, score}`), mixed
    /// freely. A node's id is its `id`, else `id_`, else `node_id`, else its 1-based
    /// position; ids must be unique, and a node's id fields must agree.
    #[serde(default)]
    #[schemars(with = "Vec<NodeInput>")]
    pub nodes: Vec<Value>,
    /// The response mode: refine, compact (default), tree_summarize, simple_summarize,
    /// accumulate, compact_accumulate, generation, no_text, context_only, map_reduce.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub mode: Option<String>,
    /// Answer as server-sent events (`delta` events, then one `response` or `error`
    /// event) instead of one JSON object. The service only; a batch answers whole.
    #[serde(default)]
    pub stream: bool,
    /// Numbered sources and `[n]` citations: the answer's markers are checked and mapped
    /// to node ids in the response's `citations`. Text answers only (not with
    /// `output_schema`). `true` or `"markers"`: `[n]` markers; `"quotes"`: quoted
    /// citations, `[n] "exact words"`, each quote checked against its node (the
    /// response's `citations.quotes`: status and character offsets) and numbers of cited
    /// sentences checked (`citations.unsupported_numbers`).
    #[serde(default, deserialize_with = "citing")]
    #[schemars(with = "Value")]
    pub citations: Citing,
    /// With `citations`, whether the answer keeps its `[n]` markers (default true; false
    /// removes them from the text and keeps `citations`).
    #[serde(default)]
    pub citation_markers: Option<bool>,
    /// A JSON schema the answer must follow; the parsed answer is then the response's
    /// `structured` field.
    #[serde(default)]
    pub output_schema: Option<Value>,
    /// Model calls of this request in flight at once (tree levels, accumulate); capped by
    /// the service's `--max-request-concurrency` (a batch's `--concurrency`).
    #[serde(default)]
    pub concurrency: Option<usize>,
    /// Templates in place of the defaults (completion templates with `{name}` variables).
    #[serde(default)]
    pub templates: Option<TemplatesInput>,
    /// A system prompt in place of the model's.
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// The most tokens one prompt may have, below the model's window (LangChain's
    /// `token_max`): smaller prompts, more calls. Unset: a prompt may fill the window.
    #[serde(default)]
    pub max_prompt_tokens: Option<usize>,
    /// Return the synthesis's steps in the response's `steps`: one per model call (step,
    /// level, index, node ids, tokens, time, retries, corrections, truncation and the
    /// reply, capped at 16 KiB); see [`crate::steps`].
    #[serde(default)]
    pub return_steps: bool,
    /// The service only: keep an HTML report of this synthesis (the answer, every call, the
    /// budget, the sources) and give its address in the response's `report_url`
    /// (`GET /v1/report/{id}`, kept for a bounded time); a synthesis that fails gets its
    /// page too (the calls made before the failure), named in the error's `report_url`.
    /// Not with `stream`. A batch writes its reports with `--report-dir` instead (which
    /// sets this for every line).
    #[serde(default)]
    pub report: bool,
    /// The service only: answer the request's plan (the calls and prompt tokens it would
    /// spend, by step and level; see [`crate::plan`]) without calling the model. A batch
    /// is planned with `--plan` instead.
    #[serde(default)]
    pub plan: bool,
    /// The answer when the model says the sources do not answer (the response then says
    /// `"answerable": false`); default "The sources do not answer this question."
    #[serde(default)]
    pub not_in_sources_answer: Option<String>,
    /// Reasoning models: extra output tokens for thinking on every call, taken off the
    /// prompt room (default 0); thinking never reaches a prompt or the answer.
    #[serde(default)]
    pub thinking_reserve: Option<usize>,
    /// Evidence first: each node shown as its sentences that bear on the question, nodes
    /// without any left out, and a question nothing bears on answered "not in the sources"
    /// without a model call; the response's `evidence` says what was kept; `false` shows
    /// the model whole nodes. Default: the front end's, on for a model and off for the
    /// extractive backend unless the service's (or a batch's) `--evidence` says otherwise.
    /// Modes that ask the sources nothing ignore it.
    #[serde(default)]
    pub evidence: Option<bool>,
    /// With `evidence`, the most tokens of kept sentences, all nodes together (default
    /// 512).
    #[serde(default)]
    pub evidence_tokens: Option<usize>,
    /// What an answer whose facts are in no source it was shown does: `warn` (kept,
    /// flagged in `grounding`), `abstain` ("not in the sources", `answerable: false`, the
    /// model's answer in `grounding.withheld`) or `error` (502 `unsupported_answer`).
    /// Default: the front end's, `abstain` for a model and `warn` for the extractive backend
    /// unless the service's (or a batch's) `--on-unsupported` says otherwise.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub on_unsupported: Option<crate::grounding::OnUnsupported>,
}

/// Custom templates, each optional.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TemplatesInput {
    /// Question answering: `{context_str}`, `{query_str}`.
    #[serde(default)]
    pub qa: Option<String>,
    /// Refining: `{query_str}`, `{existing_answer}`, `{context_msg}`.
    #[serde(default)]
    pub refine: Option<String>,
    /// Tree summaries: `{context_str}`, `{query_str}`.
    #[serde(default)]
    pub summary: Option<String>,
    /// Generation from the query alone: `{query_str}`.
    #[serde(default)]
    pub simple: Option<String>,
}

/// One node in a request (documentation of the accepted shapes; [`crate::node::json`]
/// reads them).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum NodeInput {
    /// A document text; its id is its 1-based position (`"1"`, `"2"`, ...).
    Text(String),
    /// A node.
    Node(NodeObject),
    /// LlamaIndex `NodeWithScore`.
    WithScore {
        /// The node.
        node: NodeObject,
        /// The retriever's score (default: the node's own `score`).
        #[serde(default)]
        score: Option<f64>,
    },
}

/// A node object: synthkit's fields, or LlamaIndex `TextNode`'s (`id_`; its other fields
/// are ignored). The id is `id`, else `id_`, else `node_id`, else the node's 1-based
/// position; two of them that differ are an error, and so are two nodes with one id.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct NodeObject {
    /// The id (default: `id_`, else `node_id`, else the position, `"1"`, `"2"`, ...).
    #[serde(default)]
    pub id: Option<String>,
    /// LlamaIndex's name for the id.
    #[serde(default)]
    pub id_: Option<String>,
    /// Another name for the id (LlamaIndex's `node_id` property).
    #[serde(default)]
    pub node_id: Option<String>,
    /// The text.
    pub text: String,
    /// Metadata, shown to the model as `key: value` lines.
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// Metadata keys the model does not see.
    #[serde(default)]
    pub excluded_llm_metadata_keys: Vec<String>,
    /// The retriever's score.
    #[serde(default)]
    pub score: Option<f64>,
}

/// What a front end applies to every request.
#[derive(Debug, Clone)]
pub struct RequestDefaults {
    /// The mode of a request that names none.
    pub mode: ResponseMode,
    /// The calls in flight of a request that asks for no number, and the most one may ask
    /// for.
    pub concurrency: Concurrency,
    /// The prompt limit of a request that sets no `max_prompt_tokens` (`None`: the window).
    pub max_prompt_tokens: Option<usize>,
    /// The evidence a request turns on (its selector and budget; `None`: this front end
    /// has no selector, and a request asking for evidence is refused).
    pub evidence: Option<crate::evidence::Evidence>,
    /// Whether a request that says nothing of `evidence` has it.
    pub evidence_by_default: bool,
    /// The policy of a request that sets no `on_unsupported`.
    pub on_unsupported: crate::grounding::OnUnsupported,
}

impl Default for RequestDefaults {
    /// `compact`, at most the library's default concurrency.
    fn default() -> Self {
        Self {
            mode: ResponseMode::Compact,
            concurrency: Concurrency::default(),
            max_prompt_tokens: None,
            evidence: None,
            evidence_by_default: false,
            on_unsupported: crate::grounding::OnUnsupported::default(),
        }
    }
}

/// A checked request, ready to run: `synthesizer.synthesize_input(input)` (or `stream`).
#[derive(Debug)]
#[non_exhaustive]
pub struct PreparedRequest {
    /// The request's synthesizer.
    pub synthesizer: Synthesizer,
    /// The query and the nodes.
    pub input: SynthesisInput,
    /// Whether the answer was asked for as a stream.
    pub stream: bool,
    /// Whether the response carries its steps (asked with `return_steps`).
    pub return_steps: bool,
    /// Whether an HTML report was asked for (`report`).
    pub report: bool,
    /// Whether only the plan was asked for (`plan`).
    pub plan: bool,
    /// With `report`: the recorder of the synthesis's calls (an observer beside the
    /// builder's own), which the report draws. It holds the calls made before a failure
    /// too, so a failed synthesis still gets its page
    /// ([`StepRecorder::take`](crate::steps::StepRecorder::take)).
    pub steps: Option<Arc<StepRecorder>>,
}

/// A request's `citations`: off, `[n]` markers, or quoted citations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Citing {
    /// No citations (`false`, or left out).
    #[default]
    Off,
    /// `[n]` markers (`true` or `"markers"`).
    Markers,
    /// Quoted citations (`"quotes"`).
    Quotes,
}

/// Reads `citations`: a boolean, `"markers"` or `"quotes"`.
fn citing<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Citing, D::Error> {
    match Value::deserialize(d)? {
        Value::Null | Value::Bool(false) => Ok(Citing::Off),
        Value::Bool(true) => Ok(Citing::Markers),
        Value::String(s) => match s.parse::<crate::CitationStyle>() {
            Ok(crate::CitationStyle::Quotes) => Ok(Citing::Quotes),
            Ok(_) => Ok(Citing::Markers),
            Err(e) => Err(serde::de::Error::custom(format!("`citations`: {e}"))),
        },
        _ => Err(serde::de::Error::custom(
            "`citations` must be true, false, \"markers\" or \"quotes\"",
        )),
    }
}

/// Why a request cannot run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// `mode` names no mode.
    #[error("{0}")]
    Mode(#[from] UnknownMode),
    /// `concurrency` is 0.
    #[error("`concurrency` must be at least 1")]
    ZeroConcurrency,
    /// `query` is empty or only whitespace.
    #[error("`query` is empty: ask something, such as \"How often is the mirror cleaned?\"")]
    EmptyQuery,
    /// `evidence` was asked for where there is no selector.
    #[error(
        "`evidence` is not available here (this front end has no evidence selector): leave it out"
    )]
    NoEvidence,
    /// A node is not a node (the message names its index in `nodes`).
    #[error("nodes[{index}]: {0}", index = .0.position().saturating_sub(1))]
    Nodes(#[from] NodeJsonError),
    /// The synthesizer refused an option (a template, the output schema, citations with
    /// a schema, ...).
    #[error(transparent)]
    Options(#[from] SynthError),
}

impl RequestError {
    /// A stable machine-readable name: `invalid_request` for the request's shape, else
    /// [`error_kind`] of the synthesizer's refusal (`invalid_option`).
    pub fn kind(&self) -> &'static str {
        match self {
            RequestError::Options(e) => error_kind(e),
            _ => "invalid_request",
        }
    }
}

impl SynthesizeRequest {
    /// Builds the request's synthesizer on `model` and its input. `customize` gets the
    /// builder first (an observer, a budget); the request's own options are set after it.
    /// The request's `concurrency` is capped at `defaults.concurrency`.
    pub fn prepare(
        self,
        model: Arc<dyn LanguageModel>,
        defaults: RequestDefaults,
        customize: impl FnOnce(SynthesizerBuilder) -> SynthesizerBuilder,
    ) -> Result<PreparedRequest, RequestError> {
        self.prepare_on(customize(Synthesizer::builder(model)), defaults)
    }

    /// Like [`SynthesizeRequest::prepare`], on `base`'s settings and model
    /// ([`Synthesizer::to_builder`]): what the request leaves out stays `base`'s
    /// (templates, system prompt, budget, output schema), but for `citations`, which is
    /// the request's (false when left out), and the mode and the concurrency, which come
    /// from `defaults` as for [`SynthesizeRequest::prepare`].
    pub fn prepare_from(
        self,
        base: &Synthesizer,
        defaults: RequestDefaults,
    ) -> Result<PreparedRequest, RequestError> {
        self.prepare_on(base.to_builder(), defaults)
    }

    /// The request's options set on `builder`.
    fn prepare_on(
        self,
        builder: SynthesizerBuilder,
        defaults: RequestDefaults,
    ) -> Result<PreparedRequest, RequestError> {
        if self.query.trim().is_empty() {
            return Err(RequestError::EmptyQuery);
        }
        let mode = match self.mode.as_deref() {
            None => defaults.mode,
            Some(m) => ResponseMode::from_str(m)?,
        };
        let concurrency = match (self.concurrency, defaults.concurrency) {
            (Some(0), _) => return Err(RequestError::ZeroConcurrency),
            (Some(n), Concurrency::Unlimited) => Concurrency::limit(n),
            (Some(n), max) => Concurrency::limit(n.min(max.get())),
            (None, max) => max,
        };
        let evidence = match (
            self.evidence.unwrap_or(defaults.evidence_by_default),
            defaults.evidence,
        ) {
            (false, _) => None,
            (true, None) if self.evidence == Some(true) => return Err(RequestError::NoEvidence),
            (true, None) => None,
            (true, Some(e)) => Some(match self.evidence_tokens {
                Some(tokens) => e.with_max_tokens(tokens),
                None => e,
            }),
        };
        let mut options = SynthesisOptions {
            mode: Some(mode),
            concurrency: Some(concurrency),
            citations: Some(self.citations != Citing::Off),
            citation_markers: self.citation_markers,
            citation_style: match self.citations {
                Citing::Quotes => Some(crate::CitationStyle::Quotes),
                Citing::Markers => Some(crate::CitationStyle::Markers),
                Citing::Off => None,
            },
            // Left out, the base's setting stays.
            return_steps: self.return_steps.then_some(true),
            output_schema: self.output_schema,
            system_prompt: self.system_prompt,
            max_prompt_tokens: self.max_prompt_tokens.or(defaults.max_prompt_tokens),
            not_in_sources_answer: self.not_in_sources_answer,
            thinking_reserve: self.thinking_reserve,
            evidence: Some(evidence),
            on_unsupported: Some(self.on_unsupported.unwrap_or(defaults.on_unsupported)),
            ..SynthesisOptions::default()
        };
        if let Some(t) = self.templates {
            let pairs = [
                (t.qa, TemplateKind::Qa),
                (t.refine, TemplateKind::Refine),
                (t.summary, TemplateKind::Summary),
                (t.simple, TemplateKind::Simple),
            ];
            options.templates = pairs
                .into_iter()
                .filter_map(|(text, kind)| Some(PromptTemplate::completion(kind, text?)))
                .collect();
        }
        let mut builder = options.apply(builder);
        let nodes = crate::node::nodes_from_json(self.nodes)?;
        let steps = self.report.then(|| Arc::new(builder.step_recorder(&nodes)));
        if let Some(recorder) = &steps {
            builder = builder.also_recording(Arc::clone(recorder));
        }
        let synthesizer = builder.build()?;
        Ok(PreparedRequest {
            synthesizer,
            input: SynthesisInput::new(self.query, nodes),
            stream: self.stream,
            return_steps: self.return_steps,
            report: self.report,
            plan: self.plan,
            steps,
        })
    }
}

/// A stable machine-readable name for a failed synthesis: `invalid_option` (the caller's
/// options, a template, the budget), `truncated`, `model_timeout`, `model_rate_limited`,
/// `schema_mismatch`, `model_refused` (a refusal or a reply without text), `model_error`
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

/// The response: [`crate::Response`] as JSON. This type documents its shape (the
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
}

/// What truncation dropped.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TruncationBody {
    /// Tokens of context not sent.
    pub dropped_tokens: usize,
    /// Nodes whose text was cut.
    pub dropped_node_ids: Vec<String>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::model::ModelInfo;
    use crate::testing::ScriptedModel;
    use serde_json::json;

    fn model() -> Arc<dyn LanguageModel> {
        Arc::new(ScriptedModel::constant(ModelInfo::new("m"), "ok"))
    }

    fn request(v: Value) -> SynthesizeRequest {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn defaults_and_caps() {
        let defaults = RequestDefaults {
            mode: ResponseMode::Refine,
            concurrency: Concurrency::limit(4),
            max_prompt_tokens: Some(500),
            ..RequestDefaults::default()
        };
        let run = request(json!({"query": "q", "nodes": ["a"], "concurrency": 99}))
            .prepare(model(), defaults.clone(), |b| b)
            .unwrap();
        assert_eq!(run.synthesizer.mode(), ResponseMode::Refine);
        assert_eq!(run.synthesizer.budget().max_prompt_tokens(), 500);
        assert!(!run.stream);
        let e = request(json!({"query": "q", "concurrency": 0}))
            .prepare(model(), defaults.clone(), |b| b)
            .unwrap_err();
        assert_eq!(
            (e.kind(), e.to_string().as_str()),
            ("invalid_request", "`concurrency` must be at least 1")
        );
    }

    #[test]
    fn prepare_from_keeps_the_base_settings_the_request_leaves_out() {
        let base = Synthesizer::builder(model())
            .mode(ResponseMode::Refine)
            .system_prompt("Be terse.")
            .qa_template(PromptTemplate::completion(
                TemplateKind::Qa,
                "CTX {context_str} Q {query_str}",
            ))
            .citations(true)
            .build()
            .unwrap();
        let defaults = RequestDefaults {
            mode: base.mode(),
            concurrency: Concurrency::limit(2),
            ..RequestDefaults::default()
        };
        let run = request(json!({"query": "q", "nodes": ["a"], "citations": true}))
            .prepare_from(&base, defaults.clone())
            .unwrap();
        let copy = run.synthesizer.to_builder();
        assert_eq!(run.synthesizer.mode(), ResponseMode::Refine);
        assert_eq!(
            run.synthesizer.templates().qa.texts(),
            ["CTX {context_str} Q {query_str}"]
        );
        let built = copy.build().unwrap();
        assert_eq!(
            built.templates().qa.texts(),
            ["CTX {context_str} Q {query_str}"]
        );
        // The request's own options win.
        let run = request(json!({"query": "q", "mode": "compact",
            "templates": {"qa": "OTHER {context_str} {query_str}"}}))
        .prepare_from(&base, defaults.clone())
        .unwrap();
        assert_eq!(run.synthesizer.mode(), ResponseMode::Compact);
        assert_eq!(
            run.synthesizer.templates().qa.texts(),
            ["OTHER {context_str} {query_str}"]
        );
    }

    #[test]
    fn errors_name_what_to_change() {
        let d = RequestDefaults::default();
        let e = request(json!({"query": "q", "mode": "nope"}))
            .prepare(model(), d.clone(), |b| b)
            .unwrap_err();
        assert_eq!(e.kind(), "invalid_request");
        assert!(e.to_string().contains("nope"), "{e}");
        for blank in ["", "  \n\t"] {
            let e = request(json!({"query": blank, "nodes": ["a"]}))
                .prepare(model(), RequestDefaults::default(), |b| b)
                .unwrap_err();
            assert!(matches!(e, RequestError::EmptyQuery), "{e}");
            assert_eq!(e.kind(), "invalid_request");
            assert!(e.to_string().contains("`query` is empty"), "{e}");
        }
        let e = request(json!({"query": "q", "nodes": ["ok", 3]}))
            .prepare(model(), d.clone(), |b| b)
            .unwrap_err();
        assert!(e.to_string().starts_with("nodes[1]: node 2: "), "{e}");
        let e = request(json!({"query": "q", "templates": {"qa": "no variables"}}))
            .prepare(model(), d.clone(), |b| b)
            .unwrap_err();
        assert_eq!(e.kind(), "invalid_option", "{e}");
        assert!(
            serde_json::from_value::<SynthesizeRequest>(json!({"query": "q", "extra": 1})).is_err()
        );
        let e = request(json!({"query": "q", "max_prompt_tokens": 0}))
            .prepare(model(), d.clone(), |b| b)
            .unwrap_err();
        assert_eq!(e.kind(), "invalid_option", "{e}");
        assert!(e.to_string().contains("max_prompt_tokens"), "{e}");
    }

    #[test]
    fn max_prompt_tokens_caps_the_budget() {
        let run = request(json!({"query": "q", "max_prompt_tokens": 300}))
            .prepare(model(), RequestDefaults::default(), |b| b)
            .unwrap();
        assert_eq!(run.synthesizer.budget().max_prompt_tokens(), 300);
    }
}
