//! [`SynthesizerBuilder`] and the option types it takes.

use std::sync::Arc;

use serde_json::Value;

use super::Synthesizer;
use crate::citation::CitationStyle;
use crate::engine::Settings;
use crate::error::SynthError;
use crate::filtering::AnswerFiltering;
use crate::mode::ResponseMode;
use crate::model::LanguageModel;
use crate::node::Node;
use crate::observe::{Observer, OnTruncation};
use crate::options::{
    Concurrency, DEFAULT_ACCUMULATE_SEPARATOR, DEFAULT_EMPTY_RESPONSE, Templates,
};
use crate::prompt::{PromptBudget, PromptTemplate, TemplateKind};
use crate::text::abstention::DEFAULT_NOT_IN_SOURCES_ANSWER;

/// Where the system prompt comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
enum SystemPrompt {
    /// The model's ([`crate::model::ModelInfo::system_prompt`]).
    #[default]
    FromModel,
    /// This text.
    Custom(String),
    /// None at all, even if the model has one.
    Without,
}

impl Synthesizer {
    /// A builder holding this synthesizer's settings and model (templates, budget,
    /// system prompt, schema, observer, ...), to build a variant: what the builder is
    /// then told replaces the setting, the rest stays.
    pub fn to_builder(&self) -> SynthesizerBuilder {
        let s = &self.s;
        SynthesizerBuilder {
            model: Arc::clone(&s.model),
            mode: s.mode,
            templates: Some(s.templates.clone()),
            overrides: Vec::new(),
            // The budget before the thinking reserve came off it (build takes it off again).
            budget: Some(s.base_budget.clone()),
            // The budget carries the prompt limit.
            max_prompt_tokens: None,
            filtering: s.filtering.clone(),
            output_schema: s.output_schema.as_deref().cloned(),
            concurrency: s.concurrency,
            variables: s.variables.clone(),
            empty_response: s.empty_response.clone(),
            not_in_sources: s.not_in_sources.clone(),
            separator: s.separator.clone(),
            observer: s.observer.clone(),
            system_prompt: match &s.system_prompt {
                Some(p) => SystemPrompt::Custom(p.clone()),
                None => SystemPrompt::Without,
            },
            on_truncation: s.on_truncation,
            calibrate_from_usage: s.calibrate_from_usage,
            citations: s.citations,
            citation_markers: s.citation_markers,
            citation_style: s.citation_style,
            return_steps: s.return_steps,
            spans: s.spans,
            dry_run: s.dry_run,
            thinking_reserve: s.thinking_reserve,
            vision: s.vision,
            image_cost: s.image_cost,
            evidence: s.evidence.clone(),
            on_unsupported: s.on_unsupported,
            escalation: s.escalation,
        }
    }
}

/// Builds a [`Synthesizer`].
pub struct SynthesizerBuilder {
    model: Arc<dyn LanguageModel>,
    mode: ResponseMode,
    templates: Option<Templates>,
    overrides: Vec<PromptTemplate>,
    budget: Option<PromptBudget>,
    max_prompt_tokens: Option<usize>,
    filtering: AnswerFiltering,
    output_schema: Option<Value>,
    concurrency: Concurrency,
    variables: Vec<(String, String)>,
    empty_response: String,
    not_in_sources: String,
    separator: String,
    observer: Option<Arc<dyn Observer>>,
    system_prompt: SystemPrompt,
    on_truncation: OnTruncation,
    calibrate_from_usage: bool,
    citations: bool,
    citation_markers: bool,
    citation_style: CitationStyle,
    return_steps: bool,
    spans: bool,
    /// A plan's dry run: replies are filler, so no structured reply is checked.
    dry_run: bool,
    thinking_reserve: usize,
    vision: Option<bool>,
    image_cost: Option<crate::node::ImageCost>,
    evidence: Option<crate::evidence::Evidence>,
    on_unsupported: crate::grounding::OnUnsupported,
    escalation: Option<super::escalation::Escalation>,
}

impl SynthesizerBuilder {
    pub(super) fn new(model: Arc<dyn LanguageModel>) -> Self {
        Self {
            model,
            mode: ResponseMode::default(),
            templates: None,
            overrides: Vec::new(),
            budget: None,
            max_prompt_tokens: None,
            filtering: AnswerFiltering::Off,
            output_schema: None,
            concurrency: Concurrency::default(),
            variables: Vec::new(),
            empty_response: DEFAULT_EMPTY_RESPONSE.to_string(),
            not_in_sources: DEFAULT_NOT_IN_SOURCES_ANSWER.to_string(),
            separator: DEFAULT_ACCUMULATE_SEPARATOR.to_string(),
            observer: None,
            system_prompt: SystemPrompt::FromModel,
            on_truncation: OnTruncation::Warn,
            calibrate_from_usage: true,
            citations: false,
            citation_markers: true,
            citation_style: CitationStyle::Markers,
            return_steps: false,
            spans: true,
            dry_run: false,
            thinking_reserve: 0,
            vision: None,
            image_cost: None,
            evidence: None,
            on_unsupported: crate::grounding::OnUnsupported::default(),
            escalation: None,
        }
    }

    setters! {
        /// The response mode (default `compact`).
        pub fn mode(mode: ResponseMode) => mode;

        /// Every template at once.
        pub fn templates(templates: Templates) => Some(templates);
    }
    /// The question-answering template.
    pub fn qa_template(self, t: PromptTemplate) -> Self {
        self.with_template(t.with_kind(TemplateKind::Qa))
    }
    /// The refine template.
    pub fn refine_template(self, t: PromptTemplate) -> Self {
        self.with_template(t.with_kind(TemplateKind::Refine))
    }
    /// The tree summary template.
    pub fn summary_template(self, t: PromptTemplate) -> Self {
        self.with_template(t.with_kind(TemplateKind::Summary))
    }
    /// The generation template.
    pub fn simple_template(self, t: PromptTemplate) -> Self {
        self.with_template(t.with_kind(TemplateKind::Simple))
    }
    /// map_reduce's map template (`context_str`, `query_str`; the record's JSON schema
    /// follows it).
    pub fn map_template(self, t: PromptTemplate) -> Self {
        self.with_template(t.with_kind(TemplateKind::Map))
    }
    /// map_reduce's reduce template (`context_str`, `query_str`).
    pub fn reduce_template(self, t: PromptTemplate) -> Self {
        self.with_template(t.with_kind(TemplateKind::Reduce))
    }
    /// The template of `t`'s own kind ([`PromptTemplate::kind`]): the one way from a
    /// template a user gave to the builder, for the front ends that read them.
    pub fn template(self, t: PromptTemplate) -> Self {
        self.with_template(t)
    }
    fn with_template(mut self, t: PromptTemplate) -> Self {
        self.overrides.push(t);
        self
    }
    setters! {
        /// The prompt budget (default: from the model's window and output reserve). A budget
        /// whose tokenizer was not set explicitly counts with the model's tokenizer.
        pub fn budget(budget: PromptBudget) => Some(budget);

        /// Caps every prompt at `limit` tokens, below the window (LangChain's `token_max`): the
        /// modes pack less into each call and make more calls. Applies to the budget given to
        /// [`SynthesizerBuilder::budget`] too; see [`PromptBudget::with_max_prompt_tokens`].
        /// `build` fails on 0.
        ///
        /// ```
        /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), synthkit::SynthError> {
        /// use std::sync::Arc;
        /// use synthkit::{Node, Synthesizer, model::ModelInfo, testing::ScriptedModel};
        /// let info = ModelInfo::new("m").with_context_window(8192).with_num_output(256);
        /// let nodes: Vec<Node> = (0..4).map(|i| Node::new(format!("n{i}"), "word ".repeat(300))).collect();
        /// // The whole window: the four chunks fit one prompt.
        /// let model = Arc::new(ScriptedModel::constant(info.clone(), "ok"));
        /// Synthesizer::builder(model.clone()).build()?.synthesize("q", nodes.clone()).await?;
        /// assert_eq!(model.requests().len(), 1);
        /// // At most 800 tokens a prompt: several smaller calls.
        /// let model = Arc::new(ScriptedModel::constant(info, "ok"));
        /// let synth = Synthesizer::builder(model.clone()).max_prompt_tokens(800).build()?;
        /// assert_eq!(synth.budget().max_prompt_tokens(), 800);
        /// synth.synthesize("q", nodes).await?;
        /// assert!(model.requests().len() > 1);
        /// # Ok(()) }
        /// ```
        pub fn max_prompt_tokens(limit: usize) => Some(max_prompt_tokens);

        /// Structured answer filtering (refine and compact; default off).
        pub fn answer_filtering(filtering: AnswerFiltering) => filtering;

        /// A JSON schema the final answer must follow; see [`SynthesizerBuilder::output_type`].
        pub fn output_schema(schema: Value) => Some(output_schema);
    }
    /// The final answer is a `T`, described to the model by `T`'s JSON schema.
    pub fn output_type<T: schemars::JsonSchema>(self) -> Self {
        let schema = serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null);
        self.output_schema(schema)
    }
    setters! {
        /// Calls in flight at once for tree levels and accumulate (default 8).
        pub fn concurrency(concurrency: Concurrency) => concurrency;
    }
    /// An extra template variable passed to every call.
    pub fn variable(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.variables.push((name.into(), value.into()));
        self
    }
    setters! {
        /// The text of an empty response (default `Empty Response`).
        pub fn empty_response(text: impl Into<String>) => empty_response;

        /// The answer given when the model says the sources do not answer (the default
        /// prompts ask it to reply `Not in the sources`); the response then says
        /// `answerable: false`. Default: "The sources do not answer this question."
        /// See [`crate::text::abstention`].
        pub fn not_in_sources_answer(text: impl Into<String>) => not_in_sources;

        /// The separator between accumulated answers.
        pub fn accumulate_separator(sep: impl Into<String>) => separator;
    }
    /// A [`StepRecorder`](crate::steps::StepRecorder) for a synthesis of `nodes` by the
    /// synthesizer this builder makes (set [`SynthesizerBuilder::citations`] first: it
    /// changes what the model sees). Install it as (part of) the observer: it keeps the
    /// steps of the calls that were made even when the synthesis fails, where
    /// [`crate::Response::steps`] has none to give.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use synthkit::model::{ModelError, ModelInfo};
    /// use synthkit::{Node, ResponseMode, Synthesizer, testing::ScriptedModel};
    /// let calls = AtomicUsize::new(0);
    /// let model = ScriptedModel::new(ModelInfo::new("demo"), move |_| {
    ///     match calls.fetch_add(1, Ordering::Relaxed) {
    ///         0 => Ok("A first answer.".to_string()),
    ///         _ => Err(ModelError::Other("the server went away".into())),
    ///     }
    /// });
    /// let nodes = vec![Node::new("a", "One."), Node::new("b", "Two.")];
    /// let builder = Synthesizer::builder(Arc::new(model)).mode(ResponseMode::Refine);
    /// let recorder = Arc::new(builder.step_recorder(&nodes));
    /// let synth = builder.observer(recorder.clone()).build().unwrap();
    /// // The second call fails, and so does the synthesis...
    /// assert!(synth.synthesize("How many?", nodes).await.is_err());
    /// // ...and the recorder still holds the first call.
    /// let steps = recorder.take();
    /// assert_eq!(steps[0].node_ids, ["a"]);
    /// # }
    /// ```
    pub fn step_recorder(&self, nodes: &[Node]) -> crate::steps::StepRecorder {
        super::recorder_of(nodes, &super::model_texts(nodes, self.citations, false))
    }

    /// Tells `recorder` of everything too, beside the observer set so far.
    pub fn also_recording(mut self, recorder: Arc<crate::steps::StepRecorder>) -> Self {
        self.observer = Some(crate::steps::with_recorder(self.observer.take(), recorder));
        self
    }

    /// The observer set so far, replaced by what `wrap` makes of it (`None`: none set), so
    /// a front end hears the calls beside its caller's own observer (the benchmark
    /// harness of `synthkit-frontend` does).
    pub fn wrap_observer(
        mut self,
        wrap: impl FnOnce(Option<Arc<dyn Observer>>) -> Arc<dyn Observer>,
    ) -> Self {
        self.observer = Some(wrap(self.observer.take()));
        self
    }

    setters! {
        /// Progress and call reports.
        pub fn observer(observer: Arc<dyn Observer>) => Some(observer);
    }
    /// A system prompt in place of the model's.
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = SystemPrompt::Custom(prompt.into());
        self
    }
    /// No system prompt, even if the model has one.
    pub fn without_system_prompt(mut self) -> Self {
        self.system_prompt = SystemPrompt::Without;
        self
    }
    setters! {
        /// Whether to learn the server's prompt counting from the first reply's usage when the
        /// model has no exact counter (default on). The first call of a synthesis then goes
        /// alone: the prompt limit is lowered by what the server counted beyond ours (a chat
        /// template's tokens) plus a margin, before anything else is packed, so every run of
        /// the same job packs the same prompts. Turn it off when your local counts are known
        /// to be exact and the first call's latency matters.
        pub fn calibrate_from_usage(on: bool) => calibrate_from_usage;

        /// Numbered sources and `[n]` citations (default off): each node's text reaches the
        /// model after a label line `[n]`, the model is asked to cite what it uses, and the
        /// answer's markers are checked, renumbered and mapped to node ids in
        /// [`crate::Response::citations`]. See [`crate::citation`]. Text answers only: it
        /// cannot be combined with an output schema.
        pub fn citations(on: bool) => citations;

        /// Whether the final answer keeps its `[n]` markers (default true). With `false` and
        /// citations on, markers are checked and then removed from the answer, and
        /// [`crate::Response::citations`] still says which nodes the answer used: for
        /// listing the sources an answer drew on without showing markers.
        pub fn citation_markers(show: bool) => citation_markers;

        /// How the model is asked to cite, with citations on (default
        /// [`CitationStyle::Markers`]). [`CitationStyle::Quotes`] asks for
        /// `[n] "exact words from source n"`: each quote of the final answer is checked
        /// against the text of the node it cites ([`crate::Citations::quotes`]: verified
        /// with character offsets, misattributed and re-pointed, or not found and left out
        /// of the citations), and numbers of cited sentences that none of their sources
        /// contains are flagged ([`crate::Citations::unsupported_numbers`]). The quotes stay
        /// in the answer as written. See [`crate::citation`].
        pub fn citation_style(style: CitationStyle) => citation_style;

        /// Whether the response carries the synthesis's steps (default off): one
        /// [`crate::steps::SynthStep`] per model call in [`crate::Response::steps`], with its
        /// step, level, index, node ids, tokens, time and reply (each reply capped at
        /// [`crate::steps::MAX_STEP_REPLY_BYTES`]). See [`crate::steps`].
        pub fn return_steps(on: bool) => return_steps;

        /// Whether the synthesis makes its `tracing` spans ([`crate::telemetry`]; default on).
        /// A dry run against a model that answers at once (the CLI's `--plan` and its
        /// progress estimate) turns them off, so no trace shows calls that were never made.
        pub fn spans(on: bool) => spans;

        /// What to do with a reply cut at the output limit (default [`OnTruncation::Warn`]).
        pub fn on_truncation(policy: OnTruncation) => on_truncation;

        /// Extra output tokens for a reasoning model's thinking (default 0): every call's
        /// `max_tokens` is the output reserve (num_output) plus these, and they come off
        /// the room for prompts, so a model that thinks before it answers is not cut
        /// while thinking. The answers carried into later prompts (refine's existing
        /// answer, a tree level's summaries) are still planned at num_output: thinking
        /// never goes on ([`crate::text::thinking`]). `build` fails when the reserve
        /// leaves no room for prompts.
        pub fn thinking_reserve(tokens: usize) => thinking_reserve;

        /// Whether the model takes images, overriding what its server said
        /// ([`crate::model::ModelInfo::vision`]): `false` refuses nodes with images before
        /// any call; `true` sends them to a server that does not say.
        pub fn vision(on: bool) => Some(vision);

        /// How the prompt tokens of an image are counted (default: the server's count
        /// when the model has an exact counter, else Anthropic's size rule for the
        /// Messages API and OpenAI's tile rule for the others).
        pub fn image_cost(rule: crate::node::ImageCost) => Some(image_cost);

        /// Evidence first ([`crate::evidence`]; default off): before packing, each node is
        /// shown as its sentences that bear on the question, nodes without any are left
        /// out, and a question nothing bears on is answered "not in the sources" without
        /// a call. Modes that ask no question of the sources (`generation`, `no_text`,
        /// `context_only`) ignore it.
        pub fn evidence(evidence: crate::evidence::Evidence) => Some(evidence);

        /// What to do with an answer whose facts are in no source the model was shown
        /// ([`crate::grounding`]; default [`OnUnsupported::Warn`](crate::grounding::OnUnsupported::Warn)):
        /// every answer of a mode that asks the sources is checked, and carries its
        /// [`crate::Response::grounding`].
        pub fn on_unsupported(policy: crate::grounding::OnUnsupported) => on_unsupported;
    }
    /// Escalation ([`crate::synth::escalation`]): this mode over the first
    /// [`Escalation::first_nodes`](crate::Escalation::first_nodes) nodes, then
    /// [`Escalation::then`](crate::Escalation::then) over all of them when that answer
    /// abstains or is found in no source. Streams are not escalated.
    pub fn escalate(mut self, escalation: super::escalation::Escalation) -> Self {
        self.escalation = Some(escalation);
        self
    }

    /// Turns escalation off.
    pub fn without_escalation(mut self) -> Self {
        self.escalation = None;
        self
    }

    /// Turns evidence off (after [`Synthesizer::to_builder`], say).
    pub fn without_evidence(mut self) -> Self {
        self.evidence = None;
        self
    }

    /// The same settings for a dry run ([`crate::plan`]): over `model` (the stand-in),
    /// reporting to `observer` only, without spans or steps.
    pub(crate) fn dry_run(
        mut self,
        model: Arc<dyn LanguageModel>,
        observer: Option<Arc<dyn Observer>>,
    ) -> Self {
        self.model = model;
        self.observer = observer;
        self.spans = false;
        self.return_steps = false;
        self.dry_run = true;
        self
    }

    /// Checks the options and builds the synthesizer.
    pub fn build(self) -> Result<Synthesizer, SynthError> {
        let info = self.model.info();
        if self.filtering.is_on() && self.output_schema.is_some() {
            return Err(SynthError::InvalidOption(
                "structured answer filtering and an output schema cannot be combined: pick one"
                    .into(),
            ));
        }
        if self.citations && self.output_schema.is_some() {
            return Err(SynthError::InvalidOption(
                "citations mark text answers; an output schema asks for JSON: turn one of them off (put a `sources` field in the schema to have the model name its sources)"
                    .into(),
            ));
        }
        if let Some(schema) = &self.output_schema {
            crate::schema::CompiledSchema::new(schema.clone())?;
        }
        let mut budget = match self.budget {
            Some(b) => b,
            None => PromptBudget::new(info.context_window, info.num_output)?,
        };
        if self.max_prompt_tokens.is_some() {
            budget = budget.with_max_prompt_tokens(self.max_prompt_tokens)?;
        }
        let base_budget = budget.clone();
        if self.thinking_reserve > 0 {
            let room = budget.max_prompt_tokens();
            let limit = room.checked_sub(self.thinking_reserve).filter(|l| *l > 0);
            let Some(limit) = limit else {
                return Err(SynthError::InvalidOption(format!(
                    "the thinking reserve ({} tokens) leaves no room for prompts of at most {room} tokens: lower the thinking reserve or num_output, or raise the context window",
                    self.thinking_reserve
                )));
            };
            budget = budget.with_max_prompt_tokens(Some(limit))?;
        }
        if !budget.has_explicit_tokenizer()
            && let Some(t) = self.model.tokenizer()
        {
            budget = budget.with_model_tokenizer(t);
        }
        let mut templates = self
            .templates
            .unwrap_or_else(|| Templates::defaults(info.is_chat));
        for t in self.overrides {
            match t.kind() {
                TemplateKind::Qa => templates.qa = t,
                TemplateKind::Refine => templates.refine = t,
                TemplateKind::Summary => templates.summary = t,
                TemplateKind::Map => templates.map = t,
                TemplateKind::Reduce => templates.reduce = t,
                TemplateKind::Simple | TemplateKind::Custom => templates.simple = t,
            }
        }
        // The templates this mode uses must have the variables it fills, and no
        // variable without a value.
        let used: &[&PromptTemplate] = match self.mode {
            ResponseMode::Refine | ResponseMode::Compact => &[&templates.qa, &templates.refine],
            ResponseMode::TreeSummarize => &[&templates.summary],
            ResponseMode::SimpleSummarize
            | ResponseMode::Accumulate
            | ResponseMode::CompactAccumulate => &[&templates.qa],
            ResponseMode::Generation => &[&templates.simple],
            ResponseMode::NoText | ResponseMode::ContextOnly => &[],
            ResponseMode::MapReduce => &[&templates.map, &templates.reduce],
        };
        let extra: Vec<&str> = self.variables.iter().map(|(n, _)| n.as_str()).collect();
        for t in used {
            t.validate()?;
            t.check_known(&extra)?;
        }
        let system_prompt = match self.system_prompt {
            SystemPrompt::FromModel => info.system_prompt.clone(),
            SystemPrompt::Custom(p) => Some(p),
            SystemPrompt::Without => None,
        };
        let counter = self.model.counter();
        Ok(Synthesizer {
            s: Arc::new(Settings {
                model: self.model,
                counter,
                mode: self.mode,
                templates,
                budget,
                base_budget,
                thinking_reserve: self.thinking_reserve,
                filtering: self.filtering,
                output_schema: self.output_schema.map(Arc::new),
                concurrency: self.concurrency,
                variables: self.variables,
                empty_response: self.empty_response,
                not_in_sources: self.not_in_sources,
                separator: self.separator,
                observer: self.observer,
                system_prompt,
                on_truncation: self.on_truncation,
                calibrate_from_usage: self.calibrate_from_usage,
                citations: self.citations,
                citation_markers: self.citation_markers,
                citation_style: self.citation_style,
                return_steps: self.return_steps,
                spans: self.spans,
                dry_run: self.dry_run,
                vision: self.vision,
                image_cost: self.image_cost,
                evidence: self.evidence,
                on_unsupported: self.on_unsupported,
                escalation: self.escalation,
            }),
        })
    }
}
