//! One synthesis request as JSON, for every front end that takes one: the HTTP service's
//! `POST /v1/synthesize` body and each line of the command line's `synthkit batch`.
//!
//! [`SynthesizeRequest`] is the request (query, nodes, mode, templates, citations, output
//! schema, ...); [`SynthesizeRequest::prepare`] turns it into a [`Synthesizer`] on a
//! model and the [`SynthesisInput`] to run. The answer is [`synthkit::Response`] serialized
//! as JSON, whose shape [`SynthesizeResponse`] documents; a failure is an
//! [`ErrorDetail`] whose `kind` is [`error_kind`]'s name for it. The types derive
//! `schemars::JsonSchema`, so a front end can publish them (the service's OpenAPI
//! document does).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use synthkit_frontend::request::{RequestDefaults, SynthesizeRequest};
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
use serde::Deserialize;
use serde_json::{Map, Value};

use synthkit::error::SynthError;
use synthkit::mode::{ResponseMode, UnknownMode};
use synthkit::model::LanguageModel;
use synthkit::node::NodeJsonError;
use synthkit::options::Concurrency;
use synthkit::prompt::{PromptTemplate, TemplateKind};
use synthkit::steps::StepRecorder;

mod response;
#[cfg(test)]
mod tests;

pub use response::{
    CitationBody, CitationsBody, ErrorDetail, QuoteBody, SourceNode, SynthesizeResponse,
    TruncationBody, UnsupportedNumberBody, UsageBody, error_kind,
};
use synthkit::synth::{SynthesisInput, SynthesisOptions, Synthesizer, SynthesizerBuilder};

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
    /// reply, capped at 16 KiB); see [`synthkit::steps`].
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
    /// spend, by step and level; see [`synthkit::plan`]) without calling the model. A batch
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
    pub on_unsupported: Option<synthkit::grounding::OnUnsupported>,
    /// Escalation ([`synthkit::synth::escalation`]): the mode over the first nodes first (`true`:
    /// the first 5; a number: the first N), then `map_reduce` over every node when that
    /// answer abstains or is found in no source. The response's `escalation` says what
    /// happened; `usage` counts both. Not with `stream` (an answer shown as it comes cannot
    /// be judged first). Default: the front end's (a batch's `--escalate`), else off;
    /// `false` turns a front end's escalation off for this request.
    #[serde(default, deserialize_with = "escalating")]
    #[schemars(with = "Value")]
    pub escalate: Option<Option<synthkit::Escalation>>,
    /// The most this request may cost, at the front end's prices (the service's
    /// `--price-input` and kin; needs them), and at most the front end's own cap (the
    /// service's `--max-cost-per-request`): a request whose plan may cost more is refused
    /// before any call, and no call goes out that could take its calls past it. The
    /// response's `usage.cost_usd` says what it cost.
    #[serde(default)]
    pub max_cost: Option<f64>,
}

/// Reads `escalate`: `false`/`null` (off), `true` (the first 5 nodes) or a number of
/// nodes (at least 1). Left out, it is `None` (the front end's default).
fn escalating<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<synthkit::Escalation>>, D::Error> {
    const MUST: &str =
        "`escalate` must be true, false or the number of nodes read first (at least 1)";
    match Value::deserialize(d)? {
        Value::Null | Value::Bool(false) => Ok(Some(None)),
        Value::Bool(true) => Ok(Some(Some(synthkit::Escalation::default()))),
        Value::Number(n) => match n.as_u64().and_then(|n| usize::try_from(n).ok()) {
            Some(n) if n >= 1 => Ok(Some(Some(synthkit::Escalation::new(n)))),
            _ => Err(serde::de::Error::custom(MUST)),
        },
        _ => Err(serde::de::Error::custom(MUST)),
    }
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

/// One node in a request (documentation of the accepted shapes; [`synthkit::node::json`]
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
    pub evidence: Option<synthkit::evidence::Evidence>,
    /// Whether a request that says nothing of `evidence` has it.
    pub evidence_by_default: bool,
    /// The policy of a request that sets no `on_unsupported`.
    pub on_unsupported: synthkit::grounding::OnUnsupported,
    /// The escalation of a request that says nothing of `escalate` (`None`: off).
    pub escalation: Option<synthkit::Escalation>,
    /// The prices a request's usage is priced at (`None`: this front end has none, and a
    /// request's `max_cost` is refused).
    pub prices: Option<synthkit::cost::Prices>,
    /// The cap of a request that sets no `max_cost`, and the most one may set (`None`: no
    /// cap unless the request sets one).
    pub max_cost: Option<f64>,
}

impl RequestDefaults {
    /// These defaults with `checks` as a request's defaults: evidence (`checks`' selector,
    /// on unless a request turns it off when `checks` has it on) and the policy for
    /// unsupported answers; a request may still turn evidence on or off and choose its
    /// policy.
    pub fn with_checks(mut self, checks: &crate::AnswerChecks) -> Self {
        self.evidence = Some(checks.selector());
        self.evidence_by_default = checks.evidence;
        self.on_unsupported = checks.on_unsupported;
        self
    }
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
            on_unsupported: synthkit::grounding::OnUnsupported::default(),
            escalation: None,
            prices: None,
            max_cost: None,
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
    /// ([`StepRecorder::take`](synthkit::steps::StepRecorder::take)).
    pub steps: Option<Arc<StepRecorder>>,
    /// The prices the response's usage is priced at ([`PreparedRequest::price`]).
    pub prices: Option<synthkit::cost::Prices>,
    /// The request's cost cap (its `max_cost`, else the front end's), which its model
    /// calls are held to and its plan is checked against.
    pub max_cost: Option<f64>,
}

impl PreparedRequest {
    /// Sets `usage.cost_usd` at the request's prices, if there are any.
    pub fn price(&self, usage: &mut synthkit::UsageTotals) {
        if let Some(p) = &self.prices {
            p.price(usage);
        }
    }

    /// What the request's plan may cost at most at its prices, with its cap: `Some((may
    /// cost, cap))` when the request is capped.
    pub fn plan_cost(&self, plan: &synthkit::Plan) -> Option<(f64, f64)> {
        let (prices, cap) = (self.prices?, self.max_cost?);
        Some((
            prices.bound(plan.prompt_tokens, plan.max_completion_tokens),
            cap,
        ))
    }
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
        Value::String(s) => match s.parse::<synthkit::CitationStyle>() {
            Ok(synthkit::CitationStyle::Quotes) => Ok(Citing::Quotes),
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
    /// `escalate` with `stream`.
    #[error(
        "`escalate` judges a whole answer before it is shown: leave out `stream` or `escalate`"
    )]
    EscalateStream,
    /// A node is not a node (the message names its index in `nodes`).
    #[error("nodes[{index}]: {0}", index = .0.position().saturating_sub(1))]
    Nodes(#[from] NodeJsonError),
    /// `max_cost` where the front end has no prices.
    #[error(
        "`max_cost` needs prices, and this front end has none (start the service with --price-input and --price-output): leave it out"
    )]
    CostWithoutPrices,
    /// `max_cost` is not a number at or above 0, or above the front end's cap.
    #[error("`max_cost` {given} {why}")]
    Cost {
        /// What the request gave.
        given: f64,
        /// What is wrong with it.
        why: String,
    },
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
    ///
    /// With a cost cap (the request's `max_cost`, else `defaults.max_cost`), the model is
    /// held to it ([`synthkit::layer::cost`]): one ledger for this request.
    pub fn prepare(
        self,
        model: Arc<dyn LanguageModel>,
        defaults: RequestDefaults,
        customize: impl FnOnce(SynthesizerBuilder) -> SynthesizerBuilder,
    ) -> Result<PreparedRequest, RequestError> {
        let cap = cost_cap(self.max_cost, &defaults)?;
        let model: Arc<dyn LanguageModel> = match (defaults.prices, cap) {
            (Some(prices), Some(cap)) => {
                let ledger = synthkit::layer::cost::CostLedger::new(prices, cap).map_err(|e| {
                    RequestError::Cost {
                        given: cap,
                        why: e.to_string(),
                    }
                })?;
                Arc::new(synthkit::layer::cost::CostCapped::new(model, ledger))
            }
            _ => model,
        };
        self.prepare_on(customize(Synthesizer::builder(model)), defaults)
    }

    /// Like [`SynthesizeRequest::prepare`], on `base`'s settings and model
    /// ([`Synthesizer::to_builder`]): what the request leaves out stays `base`'s
    /// (templates, system prompt, budget, output schema), but for `citations`, which is
    /// the request's (false when left out), and the mode and the concurrency, which come
    /// from `defaults` as for [`SynthesizeRequest::prepare`].
    /// A cost cap is not available here (the base's model is its own): `max_cost` is
    /// refused.
    pub fn prepare_from(
        self,
        base: &Synthesizer,
        defaults: RequestDefaults,
    ) -> Result<PreparedRequest, RequestError> {
        if self.max_cost.is_some() {
            return Err(RequestError::CostWithoutPrices);
        }
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
        let (prices, max_cost) = (defaults.prices, cost_cap(self.max_cost, &defaults)?);
        // Left out: the front end's default, if it has one; else the base's (prepare_from).
        let escalation = self.escalate.or(defaults.escalation.map(Some));
        if self.stream && matches!(escalation, Some(Some(_))) {
            return Err(RequestError::EscalateStream);
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
        // SynthesisOptions is non-exhaustive: set field by field.
        let mut options = SynthesisOptions::default();
        options.mode = Some(mode);
        options.concurrency = Some(concurrency);
        options.citations = Some(self.citations != Citing::Off);
        options.citation_markers = self.citation_markers;
        options.citation_style = match self.citations {
            Citing::Quotes => Some(synthkit::CitationStyle::Quotes),
            Citing::Markers => Some(synthkit::CitationStyle::Markers),
            Citing::Off => None,
        };
        // Left out, the base's setting stays.
        options.return_steps = self.return_steps.then_some(true);
        options.output_schema = self.output_schema;
        options.system_prompt = self.system_prompt;
        options.max_prompt_tokens = self.max_prompt_tokens.or(defaults.max_prompt_tokens);
        options.empty_response = Some(crate::answer::nothing_to_answer_from(
            self.not_in_sources_answer.as_deref(),
        ));
        options.not_in_sources_answer = self.not_in_sources_answer;
        options.thinking_reserve = self.thinking_reserve;
        options.evidence = Some(evidence);
        options.on_unsupported = Some(self.on_unsupported.unwrap_or(defaults.on_unsupported));
        options.escalation = escalation;
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
        let nodes = synthkit::node::nodes_from_json(self.nodes)?;
        let steps = self.report.then(|| Arc::new(builder.step_recorder(&nodes)));
        if let Some(recorder) = &steps {
            builder = builder.also_recording(Arc::clone(recorder));
        }
        let synthesizer = builder.build()?;
        Ok(PreparedRequest {
            prices,
            max_cost,
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

/// The cost cap of a request: its `max_cost` (checked: a number at or above 0, at most the
/// front end's cap, and only where there are prices), else the front end's.
fn cost_cap(given: Option<f64>, defaults: &RequestDefaults) -> Result<Option<f64>, RequestError> {
    let Some(given) = given else {
        return Ok(defaults.max_cost.filter(|_| defaults.prices.is_some()));
    };
    if defaults.prices.is_none() {
        return Err(RequestError::CostWithoutPrices);
    }
    if !(given.is_finite() && given >= 0.0) {
        return Err(RequestError::Cost {
            given,
            why: "must be a number of at least 0".into(),
        });
    }
    match defaults.max_cost {
        Some(cap) if given > cap => Err(RequestError::Cost {
            given,
            why: format!("is above this front end's cap of {cap}: ask for at most that"),
        }),
        _ => Ok(Some(given)),
    }
}
