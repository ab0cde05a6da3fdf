//! The engine behind every mode: one [`Job`] per synthesis renders and packs prompts,
//! counts them exactly, runs calls (bounded, owned by the job), corrects context overflow
//! and finishes the answer. Modes (in [`crate::modes`]) decide which steps to take; the
//! engine decides how, and never names a mode.
//!
//! - `caller`: the one door to the model (budget check, usage, spans, observer).
//! - `correction`: the one owner of the job's prompt limit (context-overflow correction).
//! - `fanout`: map steps with bounded concurrency; every task is owned by the job, so
//!   dropping a synthesis or its stream cancels its calls at once.
//! - `filter`: structured answer filtering (a step's `{query_satisfied, answer}`).
//! - `finish`: the final call, streamed or not, and the response.
//! - `grounding_guard`: a refine chain keeps a grounded answer over a reply whose facts
//!   are in no passage it was shown.
//! - `images`: images in prompts, each an indivisible unit at its node's place.
//! - `origins`: which nodes each prompt's context came from (for the call spans).
//! - `packed`: the requests of one packed level, built one at a time as they are asked
//!   for.
//! - `reading`: replies read for "the sources do not answer" and for talk about the
//!   previous answer, streamed or not.
//! - `request`: the next request of a step, rendered, counted and fitted to the budget.
//! - `settings`: a synthesizer's settings as its jobs read them.

use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::citation::CitationLedger;
use crate::error::SynthError;
use crate::model::ModelRequest;
use crate::prompt::{ChatMessage, PromptBudget, PromptTemplate, TemplateKind};
use crate::steps::StepRecorder;

pub(crate) mod caller;
pub(crate) mod correction;
pub(crate) mod fanout;
pub(crate) mod filter;
pub(crate) mod finish;
pub(crate) mod grounding_guard;
pub(crate) mod images;
pub(crate) mod origins;
pub(crate) mod packed;
mod reading;
mod request;
mod settings;

pub(crate) use caller::{Caller, SpanParent};
pub(crate) use correction::{Corrections, Verdict};
pub(crate) use finish::{Composite, FinalHow, Outcome};
pub(crate) use settings::Settings;

/// Attempts at fitting one prompt under the exact counter before giving up.
const MAX_FIT_ATTEMPTS: usize = 8;
/// Attempts at one exact count (transient failures are retried).
const MAX_COUNT_ATTEMPTS: usize = 3;

/// Marks a request whose output limit [`Job::bound_output`] lowered to its input's size:
/// a reply cut there is the bound at work, not a truncation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OutputBound {
    /// The tokens the call reads (its context and the answer it refines).
    pub(crate) input_tokens: usize,
}

/// One synthesis in progress: the synthesizer's settings, the call door, the query and the
/// job's prompt limit. Cheap to clone (its state is shared), so call tasks can own a copy.
#[derive(Clone)]
pub(crate) struct Job {
    /// The synthesizer's settings: the engine's own; modes ask the job's methods.
    pub(in crate::engine) s: Arc<Settings>,
    /// The call door: the engine's own; modes call through the job.
    pub(in crate::engine) caller: Arc<Caller>,
    pub(crate) query: String,
    pub(crate) variables: Vec<(String, String)>,
    /// The job's prompt limit and its corrections (shared with the call door).
    pub(crate) corrections: Arc<Corrections>,
    /// Local tokens per exact token, learned from verified prompts (1.0 until then).
    calibration: Arc<Mutex<f64>>,
    /// The sources' numbers and what was removed, when citations are on.
    pub(crate) ledger: Option<Arc<CitationLedger>>,
    /// The steps' recorder, when the response carries its steps.
    pub(crate) steps: Option<Arc<StepRecorder>>,
    /// The last [`origins::CallTag`] given out.
    call_tags: Arc<std::sync::atomic::AtomicU64>,
    /// The synthesis's images, when its nodes carry any.
    images: Option<Arc<images::ImageTable>>,
    /// The settings' budget; with images, its tokenizer counts each image's marker as
    /// the image's cost.
    budget: PromptBudget,
}

impl Job {
    pub(crate) fn new(
        s: Arc<Settings>,
        query: String,
        variables: Vec<(String, String)>,
        ledger: Option<Arc<CitationLedger>>,
        steps: Option<Arc<StepRecorder>>,
        spans: SpanParent,
        images: Option<images::ImageTable>,
    ) -> Self {
        let images = images.map(Arc::new);
        let budget = match &images {
            Some(table) => s
                .budget
                .clone()
                .with_model_tokenizer(table.tokenizer(s.budget.tokenizer().clone())),
            None => s.budget.clone(),
        };
        let observer = match &steps {
            Some(recorder) => Some(crate::steps::with_recorder(
                s.observer.clone(),
                Arc::clone(recorder),
            )),
            None => s.observer.clone(),
        };
        let corrections = Arc::new(Corrections::new(
            s.budget.max_prompt_tokens(),
            s.budget.num_output().saturating_add(s.thinking_reserve),
        ));
        let caller = Arc::new(
            Caller::new(
                Arc::clone(&s.model),
                Arc::clone(&corrections),
                observer,
                s.budget.tokenizer().clone(),
                s.on_truncation,
                s.counter.is_none() && s.calibrate_from_usage,
                s.spans.then_some(spans.synthesis),
                spans.node_ids,
            )
            .checking_schemas(!s.dry_run),
        );
        Self {
            s,
            caller,
            query,
            variables,
            corrections,
            calibration: Arc::new(Mutex::new(1.0)),
            ledger,
            steps,
            call_tags: Arc::default(),
            images,
            budget,
        }
    }

    pub(crate) fn budget(&self) -> &PromptBudget {
        &self.budget
    }

    /// The synthesis's images, when its nodes carry any.
    pub(crate) fn images(&self) -> Option<&images::ImageTable> {
        self.images.as_deref()
    }

    /// Refuses a request that holds an image and is over the job's limit: an image is
    /// never cut, so such a prompt could only be sent over the window.
    fn check_images(
        &self,
        request: &ModelRequest,
        template: &PromptTemplate,
        var: &str,
        limit: usize,
    ) -> Result<(), SynthError> {
        let Some(table) = &self.images else {
            return Ok(());
        };
        if request.prompt_tokens <= limit || !request.prompt.has_images() {
            return Ok(());
        }
        let context = request
            .source()
            .and_then(|s| s.variable(var))
            .unwrap_or_default();
        let Some(entry) = table.in_text(context).max_by_key(|e| e.tokens) else {
            return Ok(());
        };
        Err(SynthError::ImageTooLarge {
            node: entry.id.clone(),
            image_tokens: entry.tokens,
            rule: table.rule.name(),
            kind: template.kind(),
            room: limit.saturating_sub(self.overhead(template, request.schema.as_deref())),
            budget: limit,
        })
    }

    /// Every call's output limit: the output reserve, plus the thinking reserve.
    pub(crate) fn max_tokens(&self) -> usize {
        self.budget()
            .num_output()
            .saturating_add(self.s.thinking_reserve)
    }

    /// Tokens taken off the budget by context corrections so far.
    pub(crate) fn shrink(&self) -> usize {
        self.corrections.shrink()
    }

    /// Calls in flight at once for map steps.
    pub(crate) fn concurrency(&self) -> usize {
        self.s.concurrency.get()
    }

    /// The template for `kind` with the query filled in.
    pub(crate) fn template(&self, kind: TemplateKind) -> PromptTemplate {
        self.s
            .templates
            .for_kind(kind)
            .partial("query_str", &self.query)
    }

    /// The schema of a structured-answer-filtering step's verdict.
    pub(crate) fn filter_schema() -> Arc<Value> {
        Arc::new(crate::filtering::filter_schema())
    }

    /// Makes an intermediate call whose answer is text (JSON text with an output schema).
    /// A plain-text call's output limit is bounded by its input ([`Job::bound_output`]).
    pub(crate) async fn call_text(&self, request: &ModelRequest) -> Result<String, SynthError> {
        if request.schema.is_some() {
            let c = self.caller.structured(request).await?;
            Ok(c.value.to_string())
        } else {
            let bounded = self.bound_output(request);
            let text = self
                .caller
                .complete(bounded.as_ref().unwrap_or(request))
                .await?
                .text;
            Ok(self.checked(request, text))
        }
    }

    /// `request` with its output limit lowered to what its input allows
    /// ([`crate::options::OUTPUT_GROWTH`] times the tokens of its context and of the
    /// answer it refines, at least [`crate::options::MIN_BOUNDED_OUTPUT`]), marked with
    /// [`OutputBound`]; `None` when the output reserve is already within that.
    fn bound_output(&self, request: &ModelRequest) -> Option<ModelRequest> {
        // Once a server has rejected a prompt as too long, calls keep the whole reserve:
        // its correction of the limit assumed it (a calibration from usage does not stop
        // the bound).
        if self.corrections.server_corrected() {
            return None;
        }
        use crate::options::{MIN_BOUNDED_OUTPUT, OUTPUT_GROWTH};
        let source = request.source()?;
        let num_output = self.budget().num_output();
        if MIN_BOUNDED_OUTPUT >= num_output {
            return None;
        }
        // Inputs of `cap` tokens or more allow the whole reserve: counting stops there.
        let cap = (num_output as f64 / OUTPUT_GROWTH).ceil() as usize;
        let tokenizer = self.budget().tokenizer();
        let mut input_tokens = 0usize;
        for text in ["context_str", "context_msg", "existing_answer"]
            .iter()
            .filter_map(|v| source.variable(v))
        {
            let room = cap.checked_sub(input_tokens)?;
            input_tokens += tokenizer.count_till_limit(text, room)?;
        }
        let allowed = ((input_tokens as f64) * OUTPUT_GROWTH).ceil() as usize;
        let allowed = allowed.max(MIN_BOUNDED_OUTPUT);
        if allowed >= num_output {
            return None;
        }
        let mut bounded = request.clone();
        bounded.max_tokens = allowed.saturating_add(self.s.thinking_reserve);
        Some(bounded.with_extension(OutputBound { input_tokens }))
    }

    /// Makes an intermediate call and returns its reply's text as it came (without its
    /// thinking), for a mode that reads it itself: a structured request's schema goes to
    /// the server (native structured output where it has it), and the reply is neither
    /// parsed nor checked here.
    pub(crate) async fn call_reply(&self, request: &ModelRequest) -> Result<String, SynthError> {
        Ok(self.caller.complete(request).await?.text)
    }

    /// What to do after `request` failed with `error`: [`Verdict::Repack`] when the step
    /// should be packed again under the job's (possibly just lowered) limit.
    pub(crate) fn absorb(&self, error: &SynthError, request: &ModelRequest) -> Verdict {
        let (verdict, shrunk) = self.corrections.absorb(error, request);
        if let Some(s) = shrunk {
            tracing::warn!(
                target: "synthkit",
                step = %request.step().step,
                limit = s.limit,
                "the server found a prompt too long; lowering the prompt limit and re-packing"
            );
            self.caller.event(s.event(request));
        }
        verdict
    }

    /// Splits a map-step request's context under the current (shrunk) limit.
    pub(crate) async fn resplit(
        &self,
        request: &ModelRequest,
    ) -> Result<Vec<ModelRequest>, SynthError> {
        let template = self.template(request_kind(request));
        let size = self.room(&template, request.schema.as_deref())?;
        let context = request
            .source()
            .and_then(|s| s.variable("context_str"))
            .unwrap_or_default();
        let mut cursor = self.budget().cursor(context);
        let mut parts = Vec::new();
        while let Some((part, _)) = self
            .next_request(
                &mut cursor,
                &template,
                "context_str",
                size,
                request.step(),
                request.schema.clone(),
            )
            .await?
        {
            // A part holds some of the nodes (and replies) the rejected prompt held.
            let mut part = part.with_extension(origins::PromptNodes::of(request));
            let inputs = origins::PromptInputs::of(request);
            if !inputs.tags().is_empty() {
                part = part.with_extension(inputs);
            }
            parts.push(part);
        }
        Ok(parts)
    }

    /// A new [`origins::CallTag`] number: 1, 2, ... in the order asked for.
    pub(crate) fn next_call_tag(&self) -> u64 {
        self.call_tags
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .saturating_add(1)
    }

    /// The text of an answer with nothing to say.
    pub(crate) fn empty(&self) -> String {
        self.s.empty_response.clone()
    }

    /// The answer when the sources do not answer.
    pub(crate) fn not_in_sources(&self) -> String {
        self.s.not_in_sources.clone()
    }

    /// The mode the synthesis runs.
    pub(crate) fn mode(&self) -> crate::mode::ResponseMode {
        self.s.mode
    }

    /// The answer's output schema, when it is structured.
    pub(crate) fn output_schema(&self) -> Option<Arc<Value>> {
        self.s.output_schema.clone()
    }

    /// How the answers of the steps are filtered.
    pub(crate) fn filtering(&self) -> &crate::filtering::AnswerFiltering {
        &self.s.filtering
    }

    /// What joins accumulated answers.
    pub(crate) fn separator(&self) -> &str {
        &self.s.separator
    }

    /// Announces `n` more calls to the observers (progress).
    pub(crate) fn plan_calls(&self, n: usize) {
        self.caller.plan(n);
    }

    /// Closes the steps' span totals (when the job's last call has ended).
    pub(crate) fn close_steps(&self) {
        self.caller.close_steps();
    }

    /// The usage of every call so far.
    pub(crate) fn totals(&self) -> crate::observe::UsageTotals {
        self.caller.totals()
    }

    /// Reports `event` to the observers.
    pub(crate) fn event(&self, event: crate::observe::SynthEvent) {
        self.caller.event(event);
    }

    /// Waits until the local counts are calibrated against the server's (the first
    /// verified prompt), so that packing after it is exact.
    pub(crate) async fn calibrated(&self) {
        self.caller.calibrated().await;
    }

    /// One streamed call through the call door (see [`Caller::stream`]).
    pub(crate) async fn stream(
        &self,
        request: ModelRequest,
    ) -> Result<futures::stream::BoxStream<'static, Result<String, SynthError>>, SynthError> {
        self.caller.stream(request).await
    }
}

/// The kind of template `request` was rendered from (a custom one for a request made
/// outside a synthesis).
pub(crate) fn request_kind(request: &ModelRequest) -> TemplateKind {
    request.source().map_or(TemplateKind::Custom, |s| s.kind)
}

/// `messages` with `text` added to the last one, after a blank line.
fn append_to_last(mut messages: Vec<ChatMessage>, text: &str) -> Vec<ChatMessage> {
    if let Some(last) = messages.last_mut() {
        last.content.push_str("\n\n");
        last.content.push_str(text);
    }
    messages
}

/// `n * factor`, rounded down.
fn scale(n: usize, factor: f64) -> usize {
    (n as f64 * factor).floor().max(0.0) as usize
}
