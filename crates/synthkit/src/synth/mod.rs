//! The [`Synthesizer`]: one API over every response mode.
//!
//! ```
//! # tokio_test_block_on(async {
//! use std::sync::Arc;
//! use synthkit::{Node, ResponseMode, Synthesizer};
//! use synthkit::{model::ModelInfo, testing::ScriptedModel};
//! let model = ScriptedModel::constant(ModelInfo::new("demo"), "Blue.");
//! let synth = Synthesizer::builder(Arc::new(model)).mode(ResponseMode::Compact).build().unwrap();
//! let nodes = vec![Node::new("1", "The sky is blue."), Node::new("2", "Grass is green.")];
//! let response = synth.synthesize("What colour is the sky?", nodes).await.unwrap();
//! assert_eq!(response.text, "Blue.");
//! assert_eq!(response.usage.calls, 1);
//! # });
//! # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
//! #     tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
//! # }
//! ```
//!
//! Layout: this module is the public face (the builder in `builder`, the modes' names in
//! [`crate::mode`], the options in [`crate::options`]); the private `modes` module has one
//! file per mode; the private `engine` packs, counts, runs and corrects.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::{Map, Value};
use tracing::Instrument;

use crate::citation::{self, CitationLedger};
use crate::engine::correction::MAX_CORRECTIONS;
use crate::engine::{self, Job};
use crate::error::SynthError;
use crate::mode::ResponseMode;
use crate::model::LanguageModel;
use crate::modes;
use crate::node::Node;
use crate::prompt::PromptBudget;
use crate::response::{Response, StreamingResponse};
use crate::steps::StepRecorder;
use crate::telemetry;

mod builder;
mod declined;
pub mod escalation;
mod options;

pub(crate) use crate::grounding::gate::Gate;

pub use crate::filtering::{
    AnswerFiltering, StepEvaluator, StepVerdict, VerdictFuture, filter_schema,
};
pub use crate::observe::OnTruncation;
pub use crate::options::{
    Concurrency, DEFAULT_ACCUMULATE_SEPARATOR, DEFAULT_CONCURRENCY, DEFAULT_EMPTY_RESPONSE,
    Templates,
};
pub use builder::SynthesizerBuilder;
pub use options::SynthesisOptions;

/// What to synthesize from: the query, the nodes and optional extras.
#[derive(Debug, Clone, Default)]
pub struct SynthesisInput {
    /// The query.
    pub query: String,
    /// The retrieved nodes, in order.
    pub nodes: Vec<Node>,
    /// More nodes for the sources only (never sent to the model).
    pub additional_sources: Vec<Node>,
    /// An answer to refine further (refine and compact).
    pub previous_response: Option<String>,
    /// Extra template variables for this synthesis (added to the synthesizer's, whose
    /// values they override). A template's variables must be known when the synthesizer
    /// is built (the builder checks them): give a variable set here a
    /// default with [`crate::SynthesizerBuilder::variable`].
    pub variables: Vec<(String, String)>,
}

impl SynthesisInput {
    /// An input from a query and nodes.
    pub fn new(query: impl Into<String>, nodes: Vec<Node>) -> Self {
        Self {
            query: query.into(),
            nodes,
            ..Self::default()
        }
    }
}

/// Turns a query and nodes into an answer with a language model, in one response mode.
///
/// Cheap to clone: the settings are shared. Every model call a synthesis makes runs in a
/// task owned by that synthesis: dropping the `synthesize` future, or a
/// [`StreamingResponse`], cancels the calls still in flight.
#[derive(Clone)]
pub struct Synthesizer {
    s: Arc<engine::Settings>,
}

debug_fields!(Synthesizer {
    mode: s.mode,
    budget: s.budget,
    filtering: s.filtering,
    concurrency: s.concurrency,
    ..,
});

impl Synthesizer {
    /// Starts building a synthesizer for `model`: any [`LanguageModel`], owned or shared
    /// (`MyModel`, `Arc<MyModel>`, `Arc<dyn LanguageModel>`, a `ModelStack`'s model).
    pub fn builder(model: impl LanguageModel + 'static) -> SynthesizerBuilder {
        SynthesizerBuilder::new(Arc::new(model))
    }

    /// The response mode.
    pub fn mode(&self) -> ResponseMode {
        self.s.mode
    }

    /// The prompt budget.
    pub fn budget(&self) -> &PromptBudget {
        &self.s.budget
    }

    /// The templates.
    pub fn templates(&self) -> &Templates {
        &self.s.templates
    }

    /// The settings, as a job reads them (for [`crate::plan`]).
    pub(crate) fn settings(&self) -> &engine::Settings {
        &self.s
    }

    /// Answers `query` from `nodes`.
    pub async fn synthesize(&self, query: &str, nodes: Vec<Node>) -> Result<Response, SynthError> {
        self.synthesize_input(SynthesisInput::new(query, nodes))
            .await
    }

    /// Answers `query` from `nodes`, streaming the answer.
    pub async fn stream(
        &self,
        query: &str,
        nodes: Vec<Node>,
    ) -> Result<StreamingResponse, SynthError> {
        self.stream_input(SynthesisInput::new(query, nodes)).await
    }

    /// Answers with every option of [`SynthesisInput`]. Errors before any call: two nodes
    /// with one id ([`SynthError::DuplicateNodeId`]).
    pub async fn synthesize_input(&self, input: SynthesisInput) -> Result<Response, SynthError> {
        match self.escalation() {
            Some(e) => self.run_escalating(input, e).await,
            None => self.run_to_end(input).await,
        }
    }

    /// Streams with every option of [`SynthesisInput`]. Errors before any call: two nodes
    /// with one id ([`SynthError::DuplicateNodeId`]).
    pub async fn stream_input(
        &self,
        input: SynthesisInput,
    ) -> Result<StreamingResponse, SynthError> {
        self.run_to_end(input).await
    }

    /// Runs the mode over `input` and ends it as `E` (the answer, or the opened stream).
    /// When the end fails with a rejected prompt that can be packed smaller, the mode
    /// resumes from the request that failed (at most `2 * MAX_CORRECTIONS` ends).
    async fn run_to_end<E: Ending>(&self, input: SynthesisInput) -> Result<E, SynthError> {
        let span = match self.s.spans {
            true => telemetry::synthesis_span(self.s.mode, &input.query, &input.nodes),
            false => tracing::Span::none(),
        };
        let ended = self
            .run_in_span(input, span.clone())
            .instrument(span.clone());
        let ended = ended.await;
        if let Err(e) = &ended {
            telemetry::record_error(&span, e);
        }
        ended
    }

    /// [`Synthesizer::run_to_end`] under the synthesis's `span`.
    async fn run_in_span<E: Ending>(
        &self,
        input: SynthesisInput,
        span: tracing::Span,
    ) -> Result<E, SynthError> {
        let applied = self.evidence_of(&input).await;
        let (shown, mut report) = match applied {
            Some(a) => (a.shown, Some(a.report)),
            None => (Vec::new(), None),
        };
        let abstain = report.as_ref().is_some_and(|r| self.abstains(r));
        if let Some(r) = &mut report {
            r.abstained = abstain;
        }
        // Evidence that says nothing states the answer, when the model is asked anyway:
        // it reads the nodes whole, as without evidence.
        let (shown, kept): (&[Node], _) = match &report {
            Some(r) if r.answerable || abstain => (&shown, Some(r)),
            _ => (&input.nodes, None),
        };
        let mut ended = self
            .run_job::<E>(&input, shown, kept, abstain, span)
            .await?;
        if self.s.mode.asks_sources() && self.s.output_schema.is_none() {
            let mut gate = Gate::new(
                &input.query,
                shown,
                self.s.on_unsupported,
                self.s.not_in_sources.clone(),
            );
            if matches!(
                self.s.mode,
                ResponseMode::Accumulate | ResponseMode::CompactAccumulate
            ) {
                let (separator, empty) = (self.s.separator.clone(), self.s.empty_response.clone());
                gate = gate.with_model_text(Arc::new(move |answer: &str| {
                    modes::accumulate::model_text(answer, &separator, &empty)
                }));
            }
            ended = ended.ground(gate).await?;
        }
        if let (Some(e), Some(r), Some(response)) =
            (&self.s.evidence, report.as_mut(), ended.finished_mut())
            && self.s.output_schema.is_none()
        {
            declined::extract_when_declined(
                e,
                r,
                &input.query,
                &input.nodes,
                response,
                &self.s.not_in_sources,
            )
            .await?;
        }
        ended.response_mut().evidence = report;
        attach_sources(ended.response_mut(), input);
        Ok(ended)
    }

    /// Runs the mode over `input` to its end without taking the input (a dry run's:
    /// [`crate::plan`]); what `simple_summarize` cut.
    pub(crate) async fn run_borrowed(
        &self,
        input: &SynthesisInput,
    ) -> Result<Option<crate::response::Truncation>, SynthError> {
        let span = tracing::Span::none();
        let ended = match self.evidence_of(input).await {
            Some(applied) => {
                let abstain = self.abstains(&applied.report);
                let kept = Some(&applied.report);
                self.run_job::<Response>(input, &applied.shown, kept, abstain, span)
                    .await?
            }
            None => {
                self.run_job::<Response>(input, &input.nodes, None, false, span)
                    .await?
            }
        };
        Ok(ended.truncation)
    }

    /// The evidence of `input`'s nodes, when evidence is on and the mode asks the sources.
    async fn evidence_of(&self, input: &SynthesisInput) -> Option<crate::evidence::Applied> {
        match &self.s.evidence {
            Some(e) if self.s.mode.asks_sources() && !input.nodes.is_empty() => {
                Some(crate::evidence::apply(e, &input.query, &input.nodes).await)
            }
            _ => None,
        }
    }

    /// Whether a synthesis with this evidence abstains without a call.
    fn abstains(&self, report: &crate::evidence::EvidenceReport) -> bool {
        !report.answerable && self.s.evidence.as_ref().is_some_and(|e| e.abstain())
    }

    /// Prepares the job for `input` under `span` and runs it to its end; the input stays
    /// the caller's (its sources are attached by [`Synthesizer::run_in_span`]). `shown`
    /// are the nodes as the model sees them (the input's, or their evidence); with
    /// `abstain` the sources answer "not in the sources" without a call.
    async fn run_job<E: Ending>(
        &self,
        input: &SynthesisInput,
        shown: &[Node],
        evidence: Option<&crate::evidence::EvidenceReport>,
        abstain: bool,
        span: tracing::Span,
    ) -> Result<E, SynthError> {
        unique_ids(&input.nodes)?;
        let images = self.images_of(shown).await?;
        let (job, texts) = self.prepare(input, shown, evidence, span, images);
        if job.images().is_some() {
            check_image_room(&job)?;
        }
        let ended = match abstain {
            true => E::end(&job, engine::Outcome::Unanswered(job.not_in_sources())).await,
            false => {
                self.end_job::<E>(&job, shown, input.previous_response.as_deref(), &texts)
                    .await
            }
        };
        // The totals go on the synthesis's span when the job's caller is dropped (a
        // stream's final call is still to come).
        job.close_steps();
        ended
    }

    /// Runs `job` over `nodes` (model-visible `texts`) to its end.
    async fn end_job<E: Ending>(
        &self,
        job: &Job,
        nodes: &[Node],
        previous: Option<&str>,
        texts: &[Cow<'_, str>],
    ) -> Result<E, SynthError> {
        let mut outcome = modes::run(job, nodes, previous, texts).await?;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let resume = modes::Resume::of(&outcome, self.s.mode);
            match E::end(job, outcome).await {
                Ok(ended) => return Ok(ended),
                Err(e) => match resume {
                    Some(r)
                        if attempts <= 2 * MAX_CORRECTIONS
                            && job.absorb(&e, &r.request) == engine::Verdict::Repack =>
                    {
                        outcome = modes::resume(job, nodes, previous, texts, r).await?;
                    }
                    _ => return Err(e),
                },
            }
        }
    }

    /// The job and the model-visible text of every node (borrowed where it is the node's
    /// own text).
    ///
    /// With citations on, each node with text is shown after its label line `[n]` (`n`
    /// its position among the nodes, from 1).
    fn prepare<'i>(
        &self,
        input: &SynthesisInput,
        shown: &'i [Node],
        evidence: Option<&crate::evidence::EvidenceReport>,
        span: tracing::Span,
        images: Option<engine::images::ImageTable>,
    ) -> (Job, Vec<Cow<'i, str>>) {
        let texts = model_texts(shown, self.s.citations, images.is_some());
        let ledger = self.s.citations.then(|| {
            let ids = input.nodes.iter().map(|n| n.id.clone()).collect();
            if self.s.citation_style != citation::CitationStyle::Quotes {
                return CitationLedger::with_texts(ids, None);
            }
            // Quote mode checks quotes against the nodes' texts at the end; with
            // evidence, a bare marker is quoted from its source's kept sentences.
            let texts = input.nodes.iter().map(|n| n.text.clone()).collect();
            match evidence {
                Some(report) => {
                    let spans = kept_spans(&input.nodes, report);
                    CitationLedger::with_evidence(ids, texts, spans)
                }
                None => CitationLedger::with_texts(ids, Some(texts)),
            }
        });
        // This synthesis's variables first: a name's first value is the one rendered, so
        // they override the synthesizer's (which give their defaults).
        let mut variables = input.variables.clone();
        variables.extend(self.s.variables.iter().cloned());
        let steps = self
            .s
            .return_steps
            .then(|| Arc::new(recorder_of(shown, &texts)));
        let job = Job::new(
            Arc::clone(&self.s),
            input.query.clone(),
            variables,
            ledger,
            steps,
            engine::SpanParent {
                // Only a span that is recorded, or an observer's call reports, name
                // nodes.
                node_ids: if span.is_disabled() && self.s.observer.is_none() {
                    Arc::from([])
                } else {
                    input.nodes.iter().map(|n| n.id.clone()).collect()
                },
                synthesis: span,
            },
            images,
        );
        (job, texts)
    }

    /// The images of `nodes` for this synthesis, each costed; `None` when no node has
    /// one or the mode sends no node to the model. Refuses, before any call, images the
    /// model or the templates cannot take ([`SynthError::ImagesUnsupported`]).
    async fn images_of(
        &self,
        nodes: &[Node],
    ) -> Result<Option<engine::images::ImageTable>, SynthError> {
        let Some(node) = nodes.iter().find(|n| n.image.is_some()) else {
            return Ok(None);
        };
        let templates = &self.s.templates;
        let used = match self.s.mode {
            // These send no node to the model (context_only answers with the texts).
            ResponseMode::Generation | ResponseMode::NoText | ResponseMode::ContextOnly => {
                return Ok(None);
            }
            ResponseMode::Refine | ResponseMode::Compact => {
                vec![
                    (&templates.qa, "context_str"),
                    (&templates.refine, "context_msg"),
                ]
            }
            ResponseMode::TreeSummarize => vec![(&templates.summary, "context_str")],
            _ => vec![(&templates.qa, "context_str")],
        };
        let refuse = |why: String| SynthError::ImagesUnsupported {
            node: node.id.clone(),
            why,
        };
        let info = self.s.model.info();
        if self.s.vision.or(info.vision) == Some(false) {
            return Err(refuse(format!(
                "the model `{}` does not take images (its server says so: llama.cpp's /props without `modalities.vision`, or a models listing without `multimodal`): serve a vision model (llama.cpp: --mmproj), leave the images out, or, if the server is wrong, say the model takes images (`vision(true)`)",
                info.name
            )));
        }
        if !info.is_chat {
            return Err(refuse(format!(
                "the model `{}` takes completion prompts, which cannot carry images: use a chat endpoint",
                info.name
            )));
        }
        for (template, var) in used {
            if let Some(role) = template.role_of(var)
                && role != crate::prompt::Role::User
            {
                return Err(refuse(format!(
                    "the {} template puts `{{{var}}}` in a {} message, and images go in user messages: move `{{{var}}}` into a user message",
                    template.kind(),
                    role.as_str()
                )));
            }
        }
        let rule = self
            .s
            .image_cost
            .unwrap_or(match (&self.s.counter, info.provider.as_deref()) {
                (Some(_), _) => crate::node::ImageCost::ServerCount,
                (None, Some("anthropic")) => crate::node::ImageCost::AnthropicSize,
                (None, _) => crate::node::ImageCost::OpenAiTiles,
            });
        engine::images::ImageTable::build(nodes, rule, self.s.counter.as_ref()).await
    }
}

/// Refuses, before any call, an image that cannot fit in a first-level prompt even
/// alone ([`SynthError::ImageTooLarge`]).
fn check_image_room(job: &Job) -> Result<(), SynthError> {
    let Some(table) = job.images() else {
        return Ok(());
    };
    let kind = match job.mode() {
        ResponseMode::TreeSummarize => crate::prompt::TemplateKind::Summary,
        _ => crate::prompt::TemplateKind::Qa,
    };
    let template = job.template(kind);
    let schema = match job.filtering().is_on() {
        true => Some(Job::filter_schema()),
        false => job.output_schema(),
    };
    let room = job.room(&template, schema.as_deref())?;
    match table
        .entries
        .iter()
        .filter(|e| e.tokens > room)
        .max_by_key(|e| e.tokens)
    {
        Some(e) => Err(SynthError::ImageTooLarge {
            node: e.id.clone(),
            image_tokens: e.tokens,
            rule: table.rule.name(),
            kind,
            room,
            budget: job.budget().max_prompt_tokens(),
        }),
        None => Ok(()),
    }
}

/// The model-visible text of every node: with citations on, each node with text comes
/// after its label line `[n]` (`n` its position among the nodes, from 1). With `images`,
/// an image node's image stands after its text (a blank line between) as its marker
/// ([`engine::images`]).
pub(crate) fn model_texts(nodes: &[Node], citations: bool, images: bool) -> Vec<Cow<'_, str>> {
    let mut k = 0;
    let mut texts: Vec<Cow<'_, str>> = nodes
        .iter()
        .map(|n| {
            let text = engine::images::sanitize(n.llm_text());
            let marker = match (&n.image, images) {
                (Some(_), true) => engine::images::marker(k),
                _ => None,
            };
            k += usize::from(marker.is_some());
            match marker {
                Some(m) if text.trim().is_empty() => Cow::Owned(m.to_string()),
                Some(m) => Cow::Owned(format!("{text}\n\n{m}")),
                None => text,
            }
        })
        .collect();
    if citations {
        for (i, text) in texts.iter_mut().enumerate() {
            if !text.trim().is_empty() {
                *text = Cow::Owned(format!("{}{text}", citation::label(i as u32 + 1)));
            }
        }
    }
    texts
}

/// A recorder over `nodes` shown to the model as `texts`.
pub(crate) fn recorder_of(nodes: &[Node], texts: &[Cow<'_, str>]) -> StepRecorder {
    let nodes = nodes.iter().zip(texts);
    let shown = |t: &Cow<'_, str>| engine::images::strip(t).into_owned();
    StepRecorder::new(nodes.map(|(n, t)| (n.id.clone(), shown(t))).collect())
}

/// How a synthesis ends: with the whole answer, or with its stream opened.
trait Ending: Sized {
    /// Ends the job's `outcome`.
    async fn end(job: &Job, outcome: engine::Outcome) -> Result<Self, SynthError>;
    /// Checks the answer's grounding through `gate` (a stream: once it has ended).
    async fn ground(self, gate: Gate) -> Result<Self, SynthError>;
    /// The response the sources go into.
    fn response_mut(&mut self) -> &mut Response;
    /// The answer, when it is whole already (not a stream, whose text is still to come).
    fn finished_mut(&mut self) -> Option<&mut Response>;
}

impl Ending for Response {
    async fn end(job: &Job, outcome: engine::Outcome) -> Result<Self, SynthError> {
        let mut response = Response::default();
        job.finish(outcome, &mut response).await?;
        response.usage = job.totals();
        response.steps = job.steps.as_ref().map(|r| r.take());
        Ok(response)
    }

    async fn ground(mut self, gate: Gate) -> Result<Self, SynthError> {
        gate.apply(&mut self).await?;
        Ok(self)
    }

    fn response_mut(&mut self) -> &mut Response {
        self
    }

    fn finished_mut(&mut self) -> Option<&mut Response> {
        Some(self)
    }
}

impl Ending for StreamingResponse {
    async fn end(job: &Job, outcome: engine::Outcome) -> Result<Self, SynthError> {
        let stream = job.open_stream(outcome, Response::default()).await?;
        Ok(match &job.steps {
            Some(recorder) => stream.with_steps(Arc::clone(recorder)),
            None => stream,
        })
    }

    async fn ground(self, gate: Gate) -> Result<Self, SynthError> {
        Ok(self.with_gate(gate))
    }

    fn response_mut(&mut self) -> &mut Response {
        &mut self.response
    }

    fn finished_mut(&mut self) -> Option<&mut Response> {
        None
    }
}

/// Moves the nodes and additional sources into the response, with their metadata.
fn attach_sources(response: &mut Response, input: SynthesisInput) {
    let mut sources = input.nodes;
    sources.extend(input.additional_sources);
    let mut metadata = Map::new();
    for n in &sources {
        metadata.insert(n.id.clone(), Value::Object(n.metadata.clone()));
    }
    response.source_nodes = sources;
    response.metadata = metadata;
}

/// Refuses two nodes with one id: sources and citations name nodes by id.
fn unique_ids(nodes: &[Node]) -> Result<(), SynthError> {
    let mut first: std::collections::HashMap<&str, usize> =
        std::collections::HashMap::with_capacity(nodes.len());
    for (i, node) in nodes.iter().enumerate() {
        if let Some(&f) = first.get(node.id.as_str()) {
            return Err(SynthError::DuplicateNodeId {
                id: node.id.clone(),
                first: f + 1,
                second: i + 1,
            });
        }
        first.insert(&node.id, i);
    }
    Ok(())
}

/// The sentences each of `nodes` was shown as, by the evidence `report` (none for a node
/// left out or shown whole), in node order.
fn kept_spans(
    nodes: &[Node],
    report: &crate::evidence::EvidenceReport,
) -> Vec<Vec<crate::evidence::EvidenceSpan>> {
    let mut by_id: std::collections::HashMap<&str, &[crate::evidence::EvidenceSpan]> =
        std::collections::HashMap::with_capacity(report.kept.len());
    for kept in &report.kept {
        by_id.insert(kept.node_id.as_str(), &kept.sentences);
    }
    nodes
        .iter()
        .map(|n| {
            by_id
                .get(n.id.as_str())
                .map(|s| s.to_vec())
                .unwrap_or_default()
        })
        .collect()
}
