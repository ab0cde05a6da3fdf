//! The [`Synthesizer`]: one API over every response mode.
//!
//! ```
//! # tokio_test_block_on(async {
//! use std::sync::Arc;
//! use synthkit::{Node, ResponseMode, Synthesizer};
//! use synthkit::model::{ModelInfo, testing::ScriptedModel};
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

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::call::{Caller, Observer};
use crate::error::SynthError;
use crate::model::{LanguageModel, ModelError, ModelRequest, StepInfo};
use crate::node::Node;
use crate::prompt::{PromptBudget, PromptTemplate, RenderedPrompt, TemplateKind, defaults};
use crate::response::{Response, StreamingResponse, Truncation};
use crate::text::{Chunk, ChunkCursor};

mod accumulate;
mod compact;
mod context_only;
mod generation;
mod no_text;
mod refine;
mod run;
mod simple_summarize;
pub mod structured;
mod tree_summarize;

pub use structured::{StepEvaluator, StepVerdict};

/// The reference's response modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponseMode {
    /// One call per chunk, each refining the previous answer.
    Refine,
    /// Like refine, with the chunks packed into as few prompts as fit (the default).
    #[default]
    Compact,
    /// Summarise packed chunks, then the summaries, until one answer is left.
    TreeSummarize,
    /// Truncate everything into one prompt (reports what it dropped).
    SimpleSummarize,
    /// One answer per chunk, numbered and joined.
    Accumulate,
    /// Accumulate over packed chunks.
    CompactAccumulate,
    /// No model call; the answer is empty and the nodes are the sources.
    NoText,
    /// Ignore the nodes and answer the query alone.
    Generation,
    /// No model call; the answer is the context itself.
    ContextOnly,
}

impl ResponseMode {
    /// Every mode, in the reference's order.
    pub const ALL: [ResponseMode; 9] = [
        ResponseMode::Refine,
        ResponseMode::Compact,
        ResponseMode::SimpleSummarize,
        ResponseMode::TreeSummarize,
        ResponseMode::Generation,
        ResponseMode::NoText,
        ResponseMode::ContextOnly,
        ResponseMode::Accumulate,
        ResponseMode::CompactAccumulate,
    ];

    /// The reference's name of the mode.
    pub fn as_str(self) -> &'static str {
        match self {
            ResponseMode::Refine => "refine",
            ResponseMode::Compact => "compact",
            ResponseMode::TreeSummarize => "tree_summarize",
            ResponseMode::SimpleSummarize => "simple_summarize",
            ResponseMode::Accumulate => "accumulate",
            ResponseMode::CompactAccumulate => "compact_accumulate",
            ResponseMode::NoText => "no_text",
            ResponseMode::Generation => "generation",
            ResponseMode::ContextOnly => "context_only",
        }
    }

    /// Whether the mode ever calls a model.
    pub fn calls_model(self) -> bool {
        !matches!(self, ResponseMode::NoText | ResponseMode::ContextOnly)
    }
}

impl fmt::Display for ResponseMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ResponseMode {
    type Err = SynthError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let norm = s.trim().to_ascii_lowercase().replace('-', "_");
        ResponseMode::ALL.into_iter().find(|m| m.as_str() == norm).ok_or_else(|| {
            SynthError::InvalidOption(format!(
                "unknown response mode `{s}`: use one of refine, compact, tree_summarize, simple_summarize, accumulate, compact_accumulate, no_text, generation, context_only"
            ))
        })
    }
}

/// The templates a synthesizer uses, one per kind.
#[derive(Debug, Clone)]
pub struct Templates {
    /// Question answering (`context_str`, `query_str`).
    pub qa: PromptTemplate,
    /// Refining an answer (`query_str`, `existing_answer`, `context_msg`).
    pub refine: PromptTemplate,
    /// Tree summaries (`context_str`, `query_str`).
    pub summary: PromptTemplate,
    /// Generation from the query alone (`query_str`).
    pub simple: PromptTemplate,
}

impl Templates {
    /// Our default templates, chat or completion variants.
    pub fn defaults(chat: bool) -> Self {
        Self {
            qa: defaults::for_kind(TemplateKind::Qa, chat),
            refine: defaults::for_kind(TemplateKind::Refine, chat),
            summary: defaults::for_kind(TemplateKind::Summary, chat),
            simple: defaults::for_kind(TemplateKind::Simple, chat),
        }
    }
}

/// The default separator between accumulated answers.
pub const DEFAULT_ACCUMULATE_SEPARATOR: &str = "\n---------------------\n";
/// The default text of an empty response.
pub const DEFAULT_EMPTY_RESPONSE: &str = "Empty Response";
/// The default number of model calls in flight for tree levels and accumulate.
pub const DEFAULT_CONCURRENCY: usize = 8;

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
    /// Extra template variables for this synthesis (added to the synthesizer's).
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

/// Builds a [`Synthesizer`].
pub struct SynthesizerBuilder {
    model: Arc<dyn LanguageModel>,
    mode: ResponseMode,
    templates: Option<Templates>,
    qa: Option<PromptTemplate>,
    refine: Option<PromptTemplate>,
    summary: Option<PromptTemplate>,
    simple: Option<PromptTemplate>,
    budget: Option<PromptBudget>,
    structured_filtering: bool,
    stop_when_satisfied: bool,
    evaluator: Option<Arc<dyn StepEvaluator>>,
    output_schema: Option<Value>,
    concurrency: usize,
    variables: Vec<(String, String)>,
    empty_response: String,
    separator: String,
    observer: Option<Arc<dyn Observer>>,
    system_prompt: Option<Option<String>>,
}

impl SynthesizerBuilder {
    /// The response mode (default `compact`).
    pub fn mode(mut self, mode: ResponseMode) -> Self {
        self.mode = mode;
        self
    }
    /// All four templates at once.
    pub fn templates(mut self, templates: Templates) -> Self {
        self.templates = Some(templates);
        self
    }
    /// The question-answering template.
    pub fn qa_template(mut self, t: PromptTemplate) -> Self {
        self.qa = Some(t.with_kind(TemplateKind::Qa));
        self
    }
    /// The refine template.
    pub fn refine_template(mut self, t: PromptTemplate) -> Self {
        self.refine = Some(t.with_kind(TemplateKind::Refine));
        self
    }
    /// The tree summary template.
    pub fn summary_template(mut self, t: PromptTemplate) -> Self {
        self.summary = Some(t.with_kind(TemplateKind::Summary));
        self
    }
    /// The generation template.
    pub fn simple_template(mut self, t: PromptTemplate) -> Self {
        self.simple = Some(t.with_kind(TemplateKind::Simple));
        self
    }
    /// The prompt budget (default: from the model's window and output reserve).
    pub fn budget(mut self, budget: PromptBudget) -> Self {
        self.budget = Some(budget);
        self
    }
    /// Structured answer filtering (refine and compact): each step says whether it could
    /// answer; unsatisfied steps leave the answer unchanged.
    pub fn structured_answer_filtering(mut self, on: bool) -> Self {
        self.structured_filtering = on;
        self
    }
    /// With filtering: stop at the first satisfied step (saves the remaining calls).
    pub fn stop_when_satisfied(mut self, on: bool) -> Self {
        self.stop_when_satisfied = on;
        self
    }
    /// With filtering: a custom evaluator for each step (the reference's program factory).
    pub fn step_evaluator(mut self, evaluator: Arc<dyn StepEvaluator>) -> Self {
        self.evaluator = Some(evaluator);
        self
    }
    /// A JSON schema the final answer must follow; see [`SynthesizerBuilder::output_type`].
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }
    /// The final answer is a `T`, described to the model by `T`'s JSON schema.
    pub fn output_type<T: schemars::JsonSchema>(self) -> Self {
        let schema = serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null);
        self.output_schema(schema)
    }
    /// Calls in flight at once for tree levels and accumulate (0 = no limit; default 8).
    pub fn concurrency(mut self, limit: usize) -> Self {
        self.concurrency = limit;
        self
    }
    /// An extra template variable passed to every call.
    pub fn variable(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.variables.push((name.into(), value.into()));
        self
    }
    /// The text of an empty response (default `Empty Response`).
    pub fn empty_response(mut self, text: impl Into<String>) -> Self {
        self.empty_response = text.into();
        self
    }
    /// The separator between accumulated answers.
    pub fn accumulate_separator(mut self, sep: impl Into<String>) -> Self {
        self.separator = sep.into();
        self
    }
    /// Progress and call reports.
    pub fn observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = Some(observer);
        self
    }
    /// A system prompt (default: the model's).
    pub fn system_prompt(mut self, prompt: Option<String>) -> Self {
        self.system_prompt = Some(prompt);
        self
    }

    /// Checks the options and builds the synthesizer.
    pub fn build(self) -> Result<Synthesizer, SynthError> {
        let info = self.model.info();
        if self.evaluator.is_some() && !self.structured_filtering {
            return Err(SynthError::InvalidOption(
                "a step evaluator needs structured answer filtering: turn filtering on or drop the evaluator".into(),
            ));
        }
        if self.stop_when_satisfied && !self.structured_filtering {
            return Err(SynthError::InvalidOption(
                "stop-when-satisfied needs structured answer filtering: turn filtering on".into(),
            ));
        }
        if self.structured_filtering && self.output_schema.is_some() {
            return Err(SynthError::InvalidOption(
                "structured answer filtering and an output schema cannot be combined: pick one"
                    .into(),
            ));
        }
        let budget = match self.budget {
            Some(b) => b,
            None => {
                let b = PromptBudget::new(info.context_window, info.num_output)?;
                match self.model.tokenizer() {
                    Some(t) => b.with_tokenizer(t),
                    None => b,
                }
            }
        };
        let mut templates = self
            .templates
            .unwrap_or_else(|| Templates::defaults(info.is_chat));
        if let Some(t) = self.qa {
            templates.qa = t;
        }
        if let Some(t) = self.refine {
            templates.refine = t;
        }
        if let Some(t) = self.summary {
            templates.summary = t;
        }
        if let Some(t) = self.simple {
            templates.simple = t;
        }
        // The templates this mode uses must have the variables it fills.
        match self.mode {
            ResponseMode::Refine | ResponseMode::Compact => {
                templates.qa.validate()?;
                templates.refine.validate()?;
            }
            ResponseMode::TreeSummarize => templates.summary.validate()?,
            ResponseMode::SimpleSummarize
            | ResponseMode::Accumulate
            | ResponseMode::CompactAccumulate => templates.qa.validate()?,
            ResponseMode::Generation => templates.simple.validate()?,
            ResponseMode::NoText | ResponseMode::ContextOnly => {}
        }
        let system_prompt = self.system_prompt.unwrap_or(info.system_prompt.clone());
        Ok(Synthesizer {
            s: Arc::new(Settings {
                model: self.model,
                mode: self.mode,
                templates,
                budget,
                structured_filtering: self.structured_filtering,
                stop_when_satisfied: self.stop_when_satisfied,
                evaluator: self.evaluator,
                output_schema: self.output_schema.map(Arc::new),
                concurrency: self.concurrency,
                variables: self.variables,
                empty_response: self.empty_response,
                separator: self.separator,
                observer: self.observer,
                system_prompt,
            }),
        })
    }
}

/// Turns a query and nodes into an answer with a language model, in one response mode.
///
/// Cheap to clone: the settings are shared.
#[derive(Clone)]
pub struct Synthesizer {
    s: Arc<Settings>,
}

/// A synthesizer's settings, shared by its jobs.
pub(crate) struct Settings {
    model: Arc<dyn LanguageModel>,
    mode: ResponseMode,
    templates: Templates,
    budget: PromptBudget,
    structured_filtering: bool,
    stop_when_satisfied: bool,
    evaluator: Option<Arc<dyn StepEvaluator>>,
    output_schema: Option<Arc<Value>>,
    concurrency: usize,
    variables: Vec<(String, String)>,
    empty_response: String,
    separator: String,
    observer: Option<Arc<dyn Observer>>,
    system_prompt: Option<String>,
}

impl fmt::Debug for Synthesizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Synthesizer")
            .field("mode", &self.s.mode)
            .field("budget", &self.s.budget)
            .field("structured_filtering", &self.s.structured_filtering)
            .field("concurrency", &self.s.concurrency)
            .finish_non_exhaustive()
    }
}

impl Synthesizer {
    /// Starts building a synthesizer for `model`.
    pub fn builder(model: Arc<dyn LanguageModel>) -> SynthesizerBuilder {
        SynthesizerBuilder {
            model,
            mode: ResponseMode::default(),
            templates: None,
            qa: None,
            refine: None,
            summary: None,
            simple: None,
            budget: None,
            structured_filtering: false,
            stop_when_satisfied: false,
            evaluator: None,
            output_schema: None,
            concurrency: DEFAULT_CONCURRENCY,
            variables: Vec::new(),
            empty_response: DEFAULT_EMPTY_RESPONSE.to_string(),
            separator: DEFAULT_ACCUMULATE_SEPARATOR.to_string(),
            observer: None,
            system_prompt: None,
        }
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

    /// Answers with every option of [`SynthesisInput`].
    pub async fn synthesize_input(&self, input: SynthesisInput) -> Result<Response, SynthError> {
        let (job, texts) = self.prepare(&input);
        let mut outcome = run::run_mode(&job, &input, &texts).await?;
        let mut attempts = 0;
        loop {
            let resume = run::Resume::of(&outcome, self.s.mode);
            attempts += 1;
            let mut response = Response::default();
            match job.finish(outcome, &mut response).await {
                Ok(()) => {
                    drop(texts);
                    response.usage = job.caller.totals();
                    attach_sources(&mut response, input);
                    return Ok(response);
                }
                Err(e) => match resume {
                    Some(r)
                        if attempts <= 2 * MAX_CORRECTIONS
                            && job.correct_overflow(&e, &r.request) =>
                    {
                        outcome = run::resume(&job, &input, &texts, r).await?;
                    }
                    _ => return Err(e),
                },
            }
        }
    }

    /// Streams with every option of [`SynthesisInput`].
    pub async fn stream_input(
        &self,
        input: SynthesisInput,
    ) -> Result<StreamingResponse, SynthError> {
        let (job, texts) = self.prepare(&input);
        let mut outcome = run::run_mode(&job, &input, &texts).await?;
        let mut attempts = 0;
        loop {
            let resume = run::Resume::of(&outcome, self.s.mode);
            attempts += 1;
            match job.open_stream(outcome, Response::default()).await {
                Ok(mut s) => {
                    drop(texts);
                    attach_sources(&mut s.response, input);
                    return Ok(s);
                }
                Err(e) => match resume {
                    Some(r)
                        if attempts <= 2 * MAX_CORRECTIONS
                            && job.correct_overflow(&e, &r.request) =>
                    {
                        outcome = run::resume(&job, &input, &texts, r).await?;
                    }
                    _ => return Err(e),
                },
            }
        }
    }

    /// The job and the model-visible text of every node (borrowed where it is the node's
    /// own text).
    fn prepare<'i>(&self, input: &'i SynthesisInput) -> (Job, Vec<Cow<'i, str>>) {
        let texts: Vec<Cow<'i, str>> = input.nodes.iter().map(Node::llm_text).collect();
        let caller = Arc::new(Caller::new(
            Arc::clone(&self.s.model),
            self.s.budget.max_prompt_tokens(),
            self.s.observer.clone(),
            self.s.budget.tokenizer().clone(),
        ));
        let mut variables = self.s.variables.clone();
        variables.extend(input.variables.iter().cloned());
        let job = Job {
            s: Arc::clone(&self.s),
            caller,
            query: input.query.clone(),
            variables,
            shrink: Arc::default(),
            corrections: Arc::default(),
        };
        (job, texts)
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

/// How the final answer is produced once a mode has done its intermediate work.
pub(crate) enum Outcome {
    /// The answer is known (no call needed).
    Text(String),
    /// One last call; `fallback` is the answer if the call's answer is empty or unusable;
    /// `truncation` is what simple_summarize dropped.
    Final {
        request: ModelRequest,
        fallback: Option<String>,
        how: FinalHow,
        truncation: Option<Truncation>,
    },
    /// Accumulate: numbered answers, one per piece of each chunk, joined.
    Numbered {
        /// The mode (`accumulate` or `compact_accumulate`).
        mode: &'static str,
        /// The texts, each split on its own.
        chunks: Vec<String>,
    },
}

/// How the final call's reply is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FinalHow {
    /// Plain text.
    Plain,
    /// JSON following the output schema.
    Schema,
    /// A filtering step: `{query_satisfied, answer}`.
    Filter,
}

impl FinalHow {
    /// Plain text, or JSON when there is an output schema.
    pub(crate) fn for_schema(schema: Option<&Value>) -> Self {
        if schema.is_some() {
            FinalHow::Schema
        } else {
            FinalHow::Plain
        }
    }
}

/// One synthesis in progress: the synthesizer's settings, the call door and the query.
#[derive(Clone)]
pub(crate) struct Job {
    pub(crate) s: Arc<Settings>,
    pub(crate) caller: Arc<Caller>,
    pub(crate) query: String,
    pub(crate) variables: Vec<(String, String)>,
    /// Tokens taken off the budget after the server said a prompt was too long.
    shrink: Arc<AtomicUsize>,
    /// How many times the budget was shrunk.
    corrections: Arc<AtomicUsize>,
}

/// The most times one synthesis shrinks its budget after context-too-long errors.
const MAX_CORRECTIONS: usize = 4;

impl Job {
    pub(crate) fn budget(&self) -> &PromptBudget {
        &self.s.budget
    }

    /// Tokens taken off the budget by context corrections so far.
    pub(crate) fn shrink(&self) -> usize {
        self.shrink.load(Ordering::Relaxed)
    }

    /// Calls in flight at once for map steps (a very large number for "no limit").
    pub(crate) fn concurrency(&self) -> usize {
        if self.s.concurrency == 0 {
            usize::MAX >> 8
        } else {
            self.s.concurrency
        }
    }

    /// The template for `kind` with the query filled in.
    pub(crate) fn template(&self, kind: TemplateKind) -> PromptTemplate {
        let t = match kind {
            TemplateKind::Qa => &self.s.templates.qa,
            TemplateKind::Refine => &self.s.templates.refine,
            TemplateKind::Summary => &self.s.templates.summary,
            TemplateKind::Simple | TemplateKind::Custom => &self.s.templates.simple,
        };
        t.partial("query_str", &self.query)
    }

    /// The schema of a structured-answer-filtering step's verdict.
    pub(crate) fn filter_schema() -> Arc<Value> {
        Arc::new(structured::filter_schema())
    }

    fn vars<'a>(&'a self, vars: &'a [(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
        let mut all: Vec<(&str, &str)> = vars.to_vec();
        all.extend(self.variables.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        all
    }

    fn finish_prompt(&self, rendered: RenderedPrompt, schema: Option<&Value>) -> RenderedPrompt {
        let rendered = match schema {
            None => rendered,
            Some(schema) => {
                let suffix = defaults::json_instructions(schema);
                match rendered {
                    RenderedPrompt::Text(t) => RenderedPrompt::Text(format!("{t}\n\n{suffix}")),
                    RenderedPrompt::Chat(mut m) => {
                        if let Some(last) = m.last_mut() {
                            last.content.push_str("\n\n");
                            last.content.push_str(&suffix);
                        }
                        RenderedPrompt::Chat(m)
                    }
                }
            }
        };
        rendered.with_system_prompt(self.s.system_prompt.as_deref())
    }

    /// Tokens of `template` before any context: empty variables, extra variables, the
    /// system prompt and the JSON instructions of a structured call.
    pub(crate) fn overhead(&self, template: &PromptTemplate, schema: Option<&Value>) -> usize {
        let vars = self.vars(&[]);
        let rendered = template.render_empty(&vars);
        self.budget()
            .count_prompt(&self.finish_prompt(rendered, schema))
    }

    /// The context room beside `template` (minus the reference's padding of 5).
    pub(crate) fn room(
        &self,
        template: &PromptTemplate,
        schema: Option<&Value>,
    ) -> Result<usize, SynthError> {
        let p = self.overhead(template, schema) + self.shrink.load(Ordering::Relaxed);
        Ok(self.budget().chunk_size_for(
            template.kind(),
            p,
            1,
            crate::prompt::budget::DEFAULT_PADDING,
        )?)
    }

    /// Renders a request, counting its tokens exactly.
    pub(crate) fn request(
        &self,
        template: &PromptTemplate,
        vars: &[(&str, &str)],
        step: StepInfo,
        schema: Option<Arc<Value>>,
    ) -> ModelRequest {
        let prompt = self.render(template, vars, schema.as_deref());
        let prompt_tokens = self.budget().count_prompt(&prompt);
        self.request_from(prompt, prompt_tokens, template, vars, step, schema)
    }

    /// The prompt for `template` with `vars`, the extra variables, JSON instructions and
    /// the system prompt.
    fn render(
        &self,
        template: &PromptTemplate,
        vars: &[(&str, &str)],
        schema: Option<&Value>,
    ) -> RenderedPrompt {
        self.finish_prompt(template.render(&self.vars(vars)), schema)
    }

    /// A request from a prompt already rendered and counted.
    fn request_from(
        &self,
        prompt: RenderedPrompt,
        prompt_tokens: usize,
        template: &PromptTemplate,
        vars: &[(&str, &str)],
        step: StepInfo,
        schema: Option<Arc<Value>>,
    ) -> ModelRequest {
        let all = self.vars(vars);
        let mut variables: Vec<(String, String)> = Vec::with_capacity(all.len() + 2);
        if let Some(q) = template.partial_value("query_str") {
            variables.push(("query_str".to_string(), q.to_string()));
        }
        for (k, v) in all {
            if !variables.iter().any(|(n, _)| n == k) {
                variables.push((k.to_string(), v.to_string()));
            }
        }
        if let Some(a) = template.partial_value("existing_answer") {
            variables.push(("existing_answer".to_string(), a.to_string()));
        }
        ModelRequest {
            prompt,
            kind: template.kind(),
            variables,
            schema,
            max_tokens: self.budget().num_output(),
            prompt_tokens,
            step,
        }
    }

    /// The next request from `cursor`: as much of its text as fits beside `template` in
    /// the budget, overlapping the previous piece by the budget's ratio. The prompt is
    /// counted once, as a whole, so it is exact and as full as it may be. `None` when the
    /// text is used up.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn next_request(
        &self,
        cursor: &mut ChunkCursor<'_>,
        template: &PromptTemplate,
        var: &str,
        size: usize,
        step: StepInfo,
        schema: Option<Arc<Value>>,
    ) -> Option<(ModelRequest, Chunk)> {
        let limit = self
            .budget()
            .max_prompt_tokens()
            .saturating_sub(self.shrink());
        let overlap = self.budget().overlap_for(size);
        let text = cursor.text();
        let mut fitted: Option<(RenderedPrompt, usize)> = None;
        let chunk = cursor.next_chunk_fitting(size, overlap, &mut |piece| {
            let prompt = self.render(template, &[(var, piece)], schema.as_deref());
            let n = self.budget().count_prompt_till_limit(&prompt, limit)?;
            fitted = Some((prompt, n));
            Some(n)
        })?;
        let piece = chunk.text(text);
        let request = match fitted {
            Some((prompt, n)) if !chunk.oversized => {
                self.request_from(prompt, n, template, &[(var, piece)], step, schema)
            }
            _ => self.request(template, &[(var, piece)], step, schema),
        };
        Some((request, chunk))
    }

    /// Makes an intermediate call whose answer is text (JSON text with an output schema).
    pub(crate) async fn call_text(&self, request: &ModelRequest) -> Result<String, SynthError> {
        if request.schema.is_some() {
            let c = self.caller.structured(request).await?;
            Ok(c.value.to_string())
        } else {
            Ok(self.caller.complete(request).await?.text)
        }
    }

    /// Runs `requests` with bounded concurrency; answers keep the requests' order. A
    /// request the server rejects as too long is re-split under a shrunk budget and its
    /// parts' answers take its place.
    pub(crate) async fn call_all(
        &self,
        requests: impl Iterator<Item = ModelRequest> + Send,
    ) -> Result<Vec<String>, SynthError> {
        use futures::StreamExt;
        // Requests are built as calls free up, so building overlaps the calls in flight.
        let limit = self.concurrency();
        // Each call starts in its own task as soon as its request is built (dropping this
        // future aborts the calls still running).
        let calls = requests.map(|r| {
            self.caller.plan(1);
            let job = self.clone();
            AbortOnDrop(tokio::spawn(async move {
                let answer = job.call_text(&r).await;
                (r, answer)
            }))
        });
        let mut results = futures::stream::iter(calls).buffered(limit);
        // An answer, or a request the server found too long, to re-split.
        let mut answers: Vec<Result<String, ModelRequest>> = Vec::new();
        while let Some(joined) = results.next().await {
            let (request, result) = joined.map_err(|e| SynthError::Model {
                mode: "synthesis",
                step: "call",
                source: ModelError::Other(format!("a model call task failed: {e}")),
            })?;
            match result {
                Ok(a) => answers.push(Ok(a)),
                Err(e) if self.correct_overflow(&e, &request) => answers.push(Err(request)),
                Err(e) => return Err(e),
            }
        }
        drop(results);
        let mut out = Vec::with_capacity(answers.len());
        for answer in answers {
            match answer {
                Ok(a) => out.push(a),
                Err(request) => {
                    let parts = self.resplit(&request)?;
                    out.extend(Box::pin(self.call_all(parts.into_iter())).await?);
                }
            }
        }
        Ok(out)
    }

    /// When `error` says the server found `request` too long: shrinks the budget (unless
    /// the request was built before an earlier shrink), reports it, and returns true so the
    /// caller re-packs the step. False for any other error or after too many corrections.
    pub(crate) fn correct_overflow(&self, error: &SynthError, request: &ModelRequest) -> bool {
        let SynthError::Model {
            source:
                ModelError::ContextTooLong {
                    prompt_tokens,
                    context_window,
                    ..
                },
            ..
        } = error
        else {
            return false;
        };
        let shrink = self.shrink.load(Ordering::Relaxed);
        let budget = self.budget().max_prompt_tokens().saturating_sub(shrink);
        if request.prompt_tokens > budget {
            // Built under a larger budget: re-packing under the current one is enough.
            return true;
        }
        if self.corrections.fetch_add(1, Ordering::Relaxed) >= MAX_CORRECTIONS {
            return false;
        }
        // The server's room for a prompt, converted to our tokens by this prompt's ratio of
        // our count to the server's (their tokenizers differ), less a margin; a tenth off
        // the budget when the server did not say.
        let num_output = self.budget().num_output() as f64;
        let target = match (prompt_tokens, context_window) {
            (Some(p), Some(w)) if *p > 0 => {
                let ours_per_theirs = request.prompt_tokens as f64 / *p as f64;
                let room = ((*w as f64 - num_output).max(0.0) * ours_per_theirs) as usize;
                room.saturating_sub((room / 50).max(16))
            }
            _ => budget.saturating_sub((budget / 10).max(16)),
        };
        let new_budget = target.min(budget.saturating_sub(1));
        let new_shrink = self.budget().max_prompt_tokens().saturating_sub(new_budget);
        self.shrink.store(new_shrink, Ordering::Relaxed);
        self.caller
            .event(crate::call::SynthEvent::ContextCorrected {
                step: request.step,
                server_prompt_tokens: *prompt_tokens,
                server_context_window: *context_window,
                budget: self.budget().max_prompt_tokens().saturating_sub(new_shrink),
            });
        true
    }

    /// Splits a map-step request's context under the current (shrunk) budget.
    pub(crate) fn resplit(&self, request: &ModelRequest) -> Result<Vec<ModelRequest>, SynthError> {
        let template = self.template(request.kind);
        let size = self.room(&template, request.schema.as_deref())?;
        let context = request.variable("context_str").unwrap_or_default();
        let mut cursor = self.budget().cursor(context);
        let mut parts = Vec::new();
        while let Some((part, _)) = self.next_request(
            &mut cursor,
            &template,
            "context_str",
            size,
            request.step,
            request.schema.clone(),
        ) {
            parts.push(part);
        }
        Ok(parts)
    }

    pub(crate) fn empty(&self) -> String {
        self.s.empty_response.clone()
    }

    fn numbered(&self, answers: &[String]) -> String {
        let mut out = String::new();
        for (i, a) in answers.iter().enumerate() {
            if i > 0 {
                out.push_str(&self.s.separator);
            }
            out.push_str(&format!("Response {}: ", i + 1));
            out.push_str(if a.is_empty() {
                &self.s.empty_response
            } else {
                a
            });
        }
        out
    }

    /// Makes the final call (if any) and fills `response`.
    async fn finish(&self, outcome: Outcome, response: &mut Response) -> Result<(), SynthError> {
        match outcome {
            Outcome::Text(t) => response.text = t,
            Outcome::Final {
                request,
                fallback,
                how,
                truncation,
            } => {
                self.caller.plan(1);
                let (text, structured) = self.final_call(&request, how).await?;
                response.structured = structured;
                response.truncation = truncation;
                response.text = match text {
                    Some(t) if !t.is_empty() => t,
                    _ => fallback.unwrap_or_else(|| self.empty()),
                };
            }
            Outcome::Numbered { mode, chunks } => {
                let requests = accumulate::NumberedRequests::new(self, mode, &chunks)?;
                let answers = self.call_all(requests).await?;
                response.text = self.numbered(&answers);
            }
        }
        Ok(())
    }

    /// The final call: (text or None when unusable, structured value).
    async fn final_call(
        &self,
        request: &ModelRequest,
        how: FinalHow,
    ) -> Result<(Option<String>, Option<Value>), SynthError> {
        match how {
            FinalHow::Plain => Ok((Some(self.caller.complete(request).await?.text), None)),
            FinalHow::Schema => {
                let c = self.caller.structured(request).await?;
                Ok((Some(c.value.to_string()), Some(c.value)))
            }
            FinalHow::Filter => Ok((structured::filter_step(self, request).await?, None)),
        }
    }

    /// Turns the outcome into a stream: the final call streamed; everything else as one
    /// delta. The streamed text always equals the non-streamed text.
    async fn open_stream(
        &self,
        outcome: Outcome,
        base: Response,
    ) -> Result<StreamingResponse, SynthError> {
        use futures::StreamExt;
        let caller = Arc::clone(&self.caller);
        match outcome {
            Outcome::Final {
                request,
                fallback,
                how: FinalHow::Plain,
                truncation,
            } => {
                self.caller.plan(1);
                let inner = self.caller.stream(request).await?;
                let fallback = fallback.unwrap_or_else(|| self.empty());
                let mut base = base;
                base.truncation = truncation;
                Ok(StreamingResponse::new(
                    with_fallback(inner, fallback),
                    base,
                    Some(caller),
                ))
            }
            Outcome::Numbered { mode, chunks } if self.s.output_schema.is_none() => {
                let s = accumulate::stream_numbered(self.clone(), mode, chunks);
                Ok(StreamingResponse::new(s, base, Some(caller)))
            }
            other => {
                let mut response = base;
                self.finish(other, &mut response).await?;
                // Known in full: one delta (none for an empty answer).
                let text = std::mem::take(&mut response.text);
                let s = futures::stream::iter((!text.is_empty()).then_some(Ok(text))).boxed();
                Ok(StreamingResponse::new(s, response, Some(caller)))
            }
        }
    }
}

/// A spawned task that is aborted when its handle is dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<T> std::future::Future for AbortOnDrop<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx)
    }
}

/// Passes deltas through; if the stream ends having given no text, gives `fallback`.
fn with_fallback(
    inner: futures::stream::BoxStream<'static, Result<String, SynthError>>,
    fallback: String,
) -> futures::stream::BoxStream<'static, Result<String, SynthError>> {
    use futures::StreamExt;
    let state = (inner, false, Some(fallback), false);
    Box::pin(futures::stream::unfold(
        state,
        |(mut inner, mut any, mut fallback, done)| async move {
            if done {
                return None;
            }
            match inner.next().await {
                Some(Ok(d)) => {
                    any |= !d.is_empty();
                    Some((Ok(d), (inner, any, fallback, false)))
                }
                Some(Err(e)) => Some((Err(e), (inner, true, None, true))),
                None => match fallback.take() {
                    Some(f) if !any => Some((Ok(f), (inner, true, None, true))),
                    _ => None,
                },
            }
        },
    ))
}

/// A boxed future returning a step verdict (for [`StepEvaluator`]).
pub type VerdictFuture<'a> = BoxFuture<'a, Result<StepVerdict, ModelError>>;
