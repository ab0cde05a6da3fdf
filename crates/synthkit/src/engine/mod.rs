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
//! - `origins`: which nodes each prompt's context came from (for the call spans).
//! - `settings`: a synthesizer's settings as its jobs read them.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::citation::{self, CitationLedger, label_before, label_lines, numbers_in};
use crate::error::SynthError;
use crate::model::{ModelError, ModelRequest, StepInfo};
use crate::prompt::{
    BudgetError, ChatMessage, PromptBudget, PromptSource, PromptTemplate, RenderedPrompt,
    TemplateKind, defaults,
};
use crate::steps::StepRecorder;
use crate::text::{Chunk, ChunkCursor};

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

    fn vars<'a>(&'a self, vars: &'a [(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
        let mut all: Vec<(&str, &str)> = vars.to_vec();
        all.extend(self.variables.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        all
    }

    fn finish_prompt(
        &self,
        kind: TemplateKind,
        rendered: RenderedPrompt,
        schema: Option<&Value>,
    ) -> RenderedPrompt {
        let rendered = match schema {
            None => rendered,
            Some(schema) => {
                let suffix = defaults::json_instructions(schema);
                match rendered {
                    RenderedPrompt::Text(t) => RenderedPrompt::Text(format!("{t}\n\n{suffix}")),
                    RenderedPrompt::Chat(m) => RenderedPrompt::Chat(append_to_last(m, &suffix)),
                }
            }
        };
        // Citation instructions go on every call that shows sources (all but
        // generation's query-only prompt): at the end of a chat's last message, where
        // small chat models heed them (as a system message they were ignored), and before
        // a completion prompt, whose end is the answer's cue.
        let instructions = match self.s.citation_style {
            citation::CitationStyle::Quotes => citation::QUOTE_CITATION_INSTRUCTIONS,
            _ => defaults::CITATION_INSTRUCTIONS,
        };
        let rendered = match rendered {
            RenderedPrompt::Chat(m) if self.cites(kind) => {
                RenderedPrompt::Chat(append_to_last(m, instructions))
            }
            RenderedPrompt::Text(t) if self.cites(kind) => {
                RenderedPrompt::Text(format!("{instructions}\n\n{t}"))
            }
            other => other,
        };
        rendered.with_system_prompt(self.s.system_prompt.as_deref())
    }

    /// Whether prompts of `kind` carry citation instructions.
    fn cites(&self, kind: TemplateKind) -> bool {
        self.ledger.is_some() && kind != TemplateKind::Simple
    }

    /// Tokens of `template` before any context: empty variables, extra variables, the
    /// system prompt and the JSON instructions of a structured call.
    pub(crate) fn overhead(&self, template: &PromptTemplate, schema: Option<&Value>) -> usize {
        let vars = self.vars(&[]);
        let rendered = template.render_empty(&vars);
        self.budget()
            .count_prompt(&self.finish_prompt(template.kind(), rendered, schema))
    }

    /// The context room beside `template` (minus the reference's padding of 5), under the
    /// job's current limit.
    pub(crate) fn room(
        &self,
        template: &PromptTemplate,
        schema: Option<&Value>,
    ) -> Result<usize, SynthError> {
        let overhead = self.overhead(template, schema);
        let shrink = self.shrink();
        let kind = template.kind();
        let padding = crate::prompt::budget::DEFAULT_PADDING;
        self.budget()
            .chunk_size_for(kind, overhead + shrink, 1, padding)
            .map_err(|e| {
                // Blame what made the fixed part too large: the template only when neither
                // a carried answer nor the server's smaller room is part of it.
                let answer_tokens = template
                    .partial_value("existing_answer")
                    .map_or(0, |a| self.budget().tokenizer().count(a));
                if answer_tokens == 0 && shrink == 0 {
                    return SynthError::Budget(e);
                }
                SynthError::NoRoomForContext {
                    kind,
                    budget: self.budget().max_prompt_tokens(),
                    template_tokens: overhead.saturating_sub(answer_tokens),
                    answer_tokens,
                    server_shrink: shrink,
                }
            })
    }

    /// The prompt for `template` with `vars`, the extra variables, JSON instructions and
    /// the system prompt.
    fn render(
        &self,
        template: &PromptTemplate,
        vars: &[(&str, &str)],
        schema: Option<&Value>,
    ) -> RenderedPrompt {
        let prompt = self.finish_prompt(template.kind(), template.render(&self.vars(vars)), schema);
        match &self.images {
            Some(table) => table.attach(prompt),
            None => prompt,
        }
    }

    /// The exact count of `prompt` with the model's counter; `None` without one. A count
    /// that keeps failing stops the run ([`SynthError::Count`]): counts never switch to
    /// another tokenizer in the middle of a run.
    async fn count_exact(&self, prompt: &RenderedPrompt) -> Result<Option<usize>, SynthError> {
        let Some(counter) = &self.s.counter else {
            return Ok(None);
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            match counter.count_prompts(std::slice::from_ref(prompt)).await {
                Ok(counts) => {
                    return match counts.first() {
                        Some(&n) => Ok(Some(n)),
                        None => Err(SynthError::Count {
                            counter: counter.name().to_string(),
                            source: ModelError::Malformed("no count for the prompt".into()),
                        }),
                    };
                }
                Err(e) if e.is_transient() && attempt < MAX_COUNT_ATTEMPTS => {
                    tracing::warn!(target: "synthkit", counter = counter.name(), attempt, error = %e, "counting a prompt failed; retrying");
                    tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
                }
                Err(source) => {
                    return Err(SynthError::Count {
                        counter: counter.name().to_string(),
                        source,
                    });
                }
            }
        }
    }

    /// A request for `template` with `vars`, counted exactly.
    pub(crate) async fn request(
        &self,
        template: &PromptTemplate,
        vars: &[(&str, &str)],
        step: StepInfo,
        schema: Option<Arc<Value>>,
    ) -> Result<ModelRequest, SynthError> {
        let prompt = self.render(template, vars, schema.as_deref());
        let prompt_tokens = match self.count_exact(&prompt).await? {
            Some(n) => n,
            None => self.budget().count_prompt(&prompt),
        };
        Ok(self.request_from(prompt, prompt_tokens, template, vars, step, schema))
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
        ModelRequest::new(prompt)
            .with_schema(schema)
            .with_max_tokens(self.max_tokens())
            .with_prompt_tokens(prompt_tokens)
            .with_extension(step)
            .with_extension(PromptSource::new(template.kind(), variables))
    }

    /// The next request from `cursor`: as much of its text as fits beside `template`
    /// under the job's limit, overlapping the previous piece by the budget's ratio, or
    /// `None` when the text is used up.
    ///
    /// The prompt is counted once, as a whole. With the model's exact counter the local
    /// tokenizer finds the piece (under a limit scaled by what earlier prompts showed of
    /// the two tokenizers) and the counter confirms the whole prompt; a prompt the counter
    /// finds too long is packed again, smaller.
    pub(crate) async fn next_request(
        &self,
        cursor: &mut ChunkCursor<'_>,
        template: &PromptTemplate,
        var: &str,
        size: usize,
        step: StepInfo,
        schema: Option<Arc<Value>>,
    ) -> Result<Option<(ModelRequest, Chunk)>, SynthError> {
        let limit = self.corrections.limit();
        if self.s.counter.is_none() {
            let next = self.fit_local(cursor, template, var, size, limit, step, schema);
            if let Some((request, _)) = &next {
                self.check_images(request, template, var, limit)?;
            }
            return Ok(next);
        }
        let ratio = self.calibration();
        let mut local_limit = scale(limit, ratio);
        for _ in 0..MAX_FIT_ATTEMPTS {
            let saved = cursor.clone();
            let local_size = scale(size, local_limit as f64 / limit.max(1) as f64).max(1);
            let Some((mut request, chunk)) = self.fit_local(
                cursor,
                template,
                var,
                local_size,
                local_limit,
                step,
                schema.clone(),
            ) else {
                return Ok(None);
            };
            let local = request.prompt_tokens;
            let exact = self.count_exact(&request.prompt).await?.unwrap_or(local);
            if exact > 0 && local > 0 {
                self.learn(local as f64 / exact as f64);
            }
            request.prompt_tokens = exact;
            if exact <= limit || chunk.oversized {
                self.check_images(&request, template, var, limit)?;
                return Ok(Some((request, chunk)));
            }
            // Too long by the exact count: pack this piece again, smaller.
            *cursor = saved;
            let scaled = scale(local, limit as f64 / exact as f64);
            local_limit = scaled
                .min(local.saturating_sub(1))
                .min(local_limit.saturating_sub(1));
            if local_limit == 0 {
                break;
            }
        }
        Err(BudgetError::PromptOverBudget {
            kind: template.kind(),
            tokens: limit + 1,
            budget: limit,
        }
        .into())
    }

    /// [`Job::next_request`] with the local tokenizer only, under `limit`.
    #[allow(clippy::too_many_arguments)]
    fn fit_local(
        &self,
        cursor: &mut ChunkCursor<'_>,
        template: &PromptTemplate,
        var: &str,
        size: usize,
        limit: usize,
        step: StepInfo,
        schema: Option<Arc<Value>>,
    ) -> Option<(ModelRequest, Chunk)> {
        let overlap = self.budget().overlap_for(size);
        let text = cursor.text();
        // With citations, a piece that starts inside a source starts with its label again.
        let labels = self.ledger.is_some() && step.level == 0;
        let labeled = |piece: &'_ str| -> Option<String> {
            if !labels {
                return None;
            }
            let offset = (piece.as_ptr() as usize).checked_sub(text.as_ptr() as usize)?;
            label_before(text, offset).map(|n| format!("{}{piece}", citation::label(n)))
        };
        let mut fitted: Option<(RenderedPrompt, usize)> = None;
        let chunk = cursor.next_chunk_fitting(size, overlap, &mut |piece| {
            let full = labeled(piece);
            let shown = full.as_deref().unwrap_or(piece);
            let prompt = self.render(template, &[(var, shown)], schema.as_deref());
            let n = self.budget().count_prompt_till_limit(&prompt, limit)?;
            fitted = Some((prompt, n));
            Some(n)
        })?;
        let piece = chunk.text(text);
        let full = labeled(piece);
        let piece = full.as_deref().unwrap_or(piece);
        let (prompt, n) = match fitted {
            Some(f) if !chunk.oversized => f,
            _ => {
                let prompt = self.render(template, &[(var, piece)], schema.as_deref());
                let n = self.budget().count_prompt(&prompt);
                (prompt, n)
            }
        };
        let request = self.request_from(prompt, n, template, &[(var, piece)], step, schema);
        Some((request, chunk))
    }

    /// The source numbers `request` showed the model: label lines in a first-level
    /// context, markers in summaries and in the existing answer.
    pub(crate) fn shown_sources(&self, request: &ModelRequest) -> BTreeSet<u32> {
        let Some(ledger) = &self.ledger else {
            return BTreeSet::new();
        };
        let mut shown = BTreeSet::new();
        let variables = request.source().map(|s| s.variables.as_slice());
        for (name, value) in variables.unwrap_or_default() {
            match name.as_str() {
                "context_str" | "context_msg" if request.step().level == 0 => {
                    shown.extend(label_lines(value));
                }
                "context_str" | "context_msg" | "existing_answer" => {
                    shown.extend(numbers_in(value));
                }
                _ => {}
            }
        }
        let all = ledger.all();
        shown.retain(|n| all.contains(n));
        shown
    }

    /// An intermediate answer with the markers its prompt did not show removed.
    pub(crate) fn checked(&self, request: &ModelRequest, answer: String) -> String {
        match &self.ledger {
            Some(ledger) => ledger.check(self.shown_sources(request), &answer),
            None => answer,
        }
    }

    fn calibration(&self) -> f64 {
        *self
            .calibration
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn learn(&self, local_per_exact: f64) {
        if local_per_exact.is_finite() && local_per_exact > 0.0 {
            *self
                .calibration
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = local_per_exact;
        }
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
        let tokenizer = self.budget().tokenizer();
        let input_tokens: usize = ["context_str", "context_msg", "existing_answer"]
            .iter()
            .filter_map(|v| source.variable(v))
            .map(|text| tokenizer.count(text))
            .sum();
        let allowed = ((input_tokens as f64) * OUTPUT_GROWTH).ceil() as usize;
        let allowed = allowed.max(MIN_BOUNDED_OUTPUT);
        if allowed >= self.budget().num_output() {
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
