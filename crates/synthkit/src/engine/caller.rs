//! The one door to a model. Every mode's call goes through [`Caller`], which checks the
//! budget before sending, counts usage, emits a `tracing` span per call and reports
//! progress to the [`Observer`].

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use tracing::Instrument;

use super::origins::PromptNodes;
use super::{Corrections, request_kind};
use crate::error::SynthError;
use crate::model::{
    Completion, CompletionStream, FinishReason, LanguageModel, ModelError, ModelRequest,
    StreamEvent, StructuredCompletion, Usage, parse_json_reply,
};
use crate::observe::{
    CallReport, Observer, OnTruncation, SynthEvent, UsageSource, UsageTotals, counting_retries,
};
use crate::prompt::BudgetError;
use crate::telemetry::{self, CallEnd, CallModel, StepSpans};
use crate::text::thinking::{MAX_THINKING_BYTES, ThinkingSplitter, push_capped, split_thinking};

/// Takes a reply's inline thinking out of its text into [`Completion::thinking`] (after
/// what the server sent apart); returns whether the reply thought and said nothing.
fn take_thinking(c: &mut Completion) -> bool {
    let split = split_thinking(&c.text);
    let thought = split.thought();
    if thought {
        c.text = split.answer;
        if !c.thinking.is_empty() && !split.thinking.is_empty() {
            push_capped(&mut c.thinking, "\n\n", MAX_THINKING_BYTES);
        }
        push_capped(&mut c.thinking, &split.thinking, MAX_THINKING_BYTES);
    }
    c.text.trim().is_empty() && (thought || !c.thinking.is_empty())
}

/// A finished call's reply, as [`Caller::finish`] records it.
struct Reply<'a> {
    /// The answer: the reply's text without its thinking.
    text: &'a str,
    /// The reply's thinking (sent apart, or taken out of the text).
    thinking: &'a str,
    /// The server's usage, if it reported one.
    usage: Option<Usage>,
    finish_reason: Option<FinishReason>,
    /// Attempts the retry layer made beyond the first.
    retries: u32,
}

/// Makes every model call of one synthesis.
pub(crate) struct Caller {
    model: Arc<dyn LanguageModel>,
    /// The job's prompt limit, lowered by context corrections.
    limit: Arc<Corrections>,
    observer: Option<Arc<dyn Observer>>,
    usage: Mutex<UsageTotals>,
    planned: AtomicUsize,
    /// Counts completions when the server reports no usage.
    tokenizer: crate::text::SharedTokenizer,
    /// What a reply cut at the output limit does.
    on_truncation: OnTruncation,
    /// Whether to learn the server's counting from its reported usage (when the model has
    /// no exact counter).
    calibrate: bool,
    /// Set once the first call of the synthesis has ended (answered or failed).
    first_done: std::sync::atomic::AtomicBool,
    /// Wakes whoever waits for the first call to end.
    first_done_notify: tokio::sync::Notify,
    /// Set once a reply longer than its call's cap was warned about.
    over_cap_warned: std::sync::atomic::AtomicBool,
    /// Compiled schemas of structured calls.
    schemas: crate::schema::SchemaCache,
    /// Off in a plan's dry run ([`Caller::checking_schemas`]).
    check_schemas: bool,
    /// The synthesis's span and the step spans under it (see [`crate::telemetry`]).
    synthesis_span: tracing::Span,
    step_spans: StepSpans,
    /// The model as call spans name it.
    call_model: CallModel,
    /// Whether calls make spans (off for dry runs).
    spans: bool,
    /// The ids of the synthesis's nodes, by position (call spans and call reports name
    /// the nodes their prompt held; empty without spans or an observer).
    node_ids: Arc<[String]>,
}

/// Where a job's call spans go: under the synthesis's span, naming the synthesis's nodes
/// (as its call reports do).
pub(crate) struct SpanParent {
    pub(crate) synthesis: tracing::Span,
    /// The ids of the synthesis's nodes, by position (empty when neither a span nor an
    /// observer would name them).
    pub(crate) node_ids: Arc<[String]>,
}

impl Caller {
    /// What the model is.
    pub(crate) fn model_info(&self) -> crate::model::ModelInfo {
        self.model.info()
    }

    // One private constructor with one caller (`engine::Job`), which names each part.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        model: Arc<dyn LanguageModel>,
        limit: Arc<Corrections>,
        observer: Option<Arc<dyn Observer>>,
        tokenizer: crate::text::SharedTokenizer,
        on_truncation: OnTruncation,
        calibrate: bool,
        synthesis_span: Option<tracing::Span>,
        node_ids: Arc<[String]>,
    ) -> Self {
        // No synthesis span: a dry run, whose calls make no spans either.
        let (spans, synthesis_span) = match synthesis_span {
            Some(span) => (true, span),
            None => (false, tracing::Span::none()),
        };
        let call_model = CallModel::new(&model.info());
        Self {
            step_spans: StepSpans::new(synthesis_span.clone()),
            synthesis_span,
            call_model,
            spans,
            node_ids,
            model,
            limit,
            observer,
            usage: Mutex::new(UsageTotals::default()),
            planned: AtomicUsize::new(0),
            tokenizer,
            on_truncation,
            calibrate,
            first_done: std::sync::atomic::AtomicBool::new(false),
            first_done_notify: tokio::sync::Notify::new(),
            over_cap_warned: std::sync::atomic::AtomicBool::new(false),
            schemas: crate::schema::SchemaCache::default(),
            check_schemas: true,
        }
    }

    /// Whether structured replies are checked against their schema (not in a plan's dry
    /// run, whose replies are filler).
    pub(crate) fn checking_schemas(mut self, on: bool) -> Self {
        self.check_schemas = on;
        self
    }

    pub(crate) fn totals(&self) -> UsageTotals {
        self.usage.lock().map(|u| *u).unwrap_or_default()
    }

    /// Announces `n` more calls.
    pub(crate) fn plan(&self, n: usize) {
        let total = self.planned.fetch_add(n, Ordering::Relaxed) + n;
        if let Some(o) = &self.observer {
            o.calls_planned(total);
        }
    }

    pub(crate) fn event(&self, event: SynthEvent) {
        tracing::info!(target: "synthkit", ?event, "synthesis event");
        if let Some(o) = &self.observer {
            o.event(&event);
        }
    }

    /// Refuses a prompt over the job's current (possibly corrected) limit.
    fn check(&self, request: &ModelRequest) -> Result<(), SynthError> {
        let limit = self.limit.limit();
        if request.prompt_tokens > limit {
            return Err(BudgetError::PromptOverBudget {
                kind: request_kind(request),
                tokens: request.prompt_tokens,
                budget: limit,
            }
            .into());
        }
        Ok(())
    }

    /// Ends the synthesis's last step span (it closes once its calls have ended).
    pub(crate) fn close_steps(&self) {
        self.step_spans.close();
    }

    /// The span of one call, under its step's span.
    fn span(&self, request: &ModelRequest) -> tracing::Span {
        if !self.spans {
            return tracing::Span::none();
        }
        let step = self.step_spans.for_call(request.step());
        let nodes = PromptNodes::of(request);
        let positions = match self.node_ids.is_empty() {
            true => &[][..],
            false => nodes.positions(),
        };
        let ids = positions
            .iter()
            .map(|&i| self.node_ids.get(i as usize).map_or("", String::as_str));
        telemetry::call_span(
            &step,
            request,
            request_kind(request).as_str(),
            &self.call_model,
            ids,
        )
    }

    /// Warns (once per synthesis) when the server reports a reply longer than the call's
    /// `max_tokens`: the server or model ignores the cap, so replies (and the prompts of
    /// later steps that carry them, such as refine's existing answer) grow past what the
    /// budget planned; the server is at fault, not the template.
    fn warn_over_cap(&self, request: &ModelRequest, completion_tokens: u64, reported: bool) {
        let cap = u64::try_from(request.max_tokens).unwrap_or(u64::MAX);
        if !reported || cap == 0 || completion_tokens <= cap {
            return;
        }
        if self.over_cap_warned.swap(true, Ordering::Relaxed) {
            return;
        }
        tracing::warn!(
            target: "synthkit",
            completion_tokens,
            max_tokens = cap,
            "the server reports a reply of {completion_tokens} tokens for a call capped at {cap} (max_tokens): the server or model ignores the output cap, so later prompts that carry replies may not fit; check the server's settings (for llama.cpp, its n_predict), not the template"
        );
    }

    /// Records a finished call and returns its usage.
    fn finish(
        &self,
        request: &ModelRequest,
        reply: Reply<'_>,
        elapsed: Duration,
        span: &tracing::Span,
    ) -> Usage {
        let Reply {
            text,
            thinking,
            usage: reported,
            finish_reason,
            retries,
        } = reply;
        let thought = || self.tokenizer.count(thinking) as u64;
        let mut usage = reported.unwrap_or_else(|| Usage {
            prompt_tokens: request.prompt_tokens as u64,
            completion_tokens: (self.tokenizer.count(text) as u64).saturating_add(thought()),
            ..Usage::default()
        });
        if usage.reasoning_tokens == 0 && !thinking.is_empty() {
            // The server did not say how many tokens the thinking took: our count.
            usage.reasoning_tokens = thought().min(usage.completion_tokens);
        }
        span.record("completion_tokens", usage.completion_tokens);
        self.warn_over_cap(request, usage.completion_tokens, reported.is_some());
        span.record("duration_ms", elapsed.as_secs_f64() * 1000.0);
        telemetry::record_call_end(
            span,
            &CallEnd {
                text,
                thinking,
                usage,
                usage_reported: reported.is_some(),
                finish_reason,
                retries,
            },
        );
        if let Ok(mut u) = self.usage.lock() {
            u.add_call(&usage);
        }
        // Calibration learns from the first reply only, so that every run of the same
        // job packs the same prompts (a resumed run finds them in its cache).
        let first = !self.first_done.load(Ordering::SeqCst);
        if self.calibrate
            && first
            && let Some(reported) = reported
            && let Some(c) = self
                .limit
                .calibrate(request.prompt_tokens, reported.prompt_tokens)
        {
            tracing::info!(
                target: "synthkit",
                offset = c.offset,
                margin = c.margin,
                limit = c.limit,
                "the server counts more prompt tokens than ours: lowering the prompt limit"
            );
            self.event(SynthEvent::Calibrated {
                step: request.step(),
                ours: request.prompt_tokens,
                server: reported.prompt_tokens,
                offset: c.offset,
                margin: c.margin,
                limit: c.limit,
            });
        }
        if let Some(o) = &self.observer {
            o.call_finished(&CallReport {
                request,
                response: text,
                thinking,
                usage,
                usage_reported: reported.is_some(),
                elapsed,
                retries,
                truncated: finish_reason == Some(FinishReason::Length),
                all_node_ids: &self.node_ids,
            });
        }
        self.end_first();
        usage
    }

    /// Marks the first call as ended and wakes [`Caller::calibrated`] waiters.
    fn end_first(&self) {
        if !self.first_done.swap(true, Ordering::SeqCst) {
            self.first_done_notify.notify_waiters();
        }
    }

    /// Whether packing must wait for the first reply before fanning out: the prompt limit
    /// may still be calibrated from it (a server without an exact counter).
    pub(crate) fn calibrating(&self) -> bool {
        self.calibrate && !self.first_done.load(Ordering::SeqCst)
    }

    /// Waits until the first call has ended (at once when not calibrating).
    pub(crate) async fn calibrated(&self) {
        loop {
            let notified = self.first_done_notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if !self.calibrating() {
                return;
            }
            notified.await;
        }
    }

    /// Surfaces a reply cut at the output limit: counts it, reports it to the observer and
    /// warns, or fails with [`SynthError::Truncated`] under [`OnTruncation::Error`].
    fn check_reply(
        &self,
        request: &ModelRequest,
        finish_reason: Option<FinishReason>,
        usage: Usage,
    ) -> Result<(), SynthError> {
        if finish_reason != Some(FinishReason::Length) {
            return Ok(());
        }
        // Cut at the bound: the reply filled the bounded limit (a shorter reply cut for
        // another reason is a truncation like any other).
        let at_bound =
            usize::try_from(usage.completion_tokens).is_ok_and(|n| n >= request.max_tokens);
        if let Some(bound) = request
            .extensions
            .get::<super::OutputBound>()
            .filter(|_| at_bound)
        {
            // The engine's own bound on an intermediate reply (it may not outgrow its
            // input), not the output reserve: reported, not a truncation.
            tracing::info!(
                target: "synthkit",
                step = request.step().step.as_str(),
                max_tokens = request.max_tokens,
                input_tokens = bound.input_tokens,
                "an intermediate reply reached the size of its input and was cut there"
            );
            self.event(SynthEvent::OutputBounded {
                step: request.step(),
                max_tokens: request.max_tokens,
                input_tokens: bound.input_tokens,
            });
            return Ok(());
        }
        if let Ok(mut u) = self.usage.lock() {
            u.truncated_calls += 1;
        }
        let step = request.step();
        if self.on_truncation == OnTruncation::Warn {
            tracing::warn!(
                target: "synthkit",
                mode = step.mode.as_str(),
                step = step.step.as_str(),
                level = step.level,
                index = step.index,
                completion_tokens = usage.completion_tokens,
                max_tokens = request.max_tokens,
                "a model reply was cut at the output limit of {} tokens (finish_reason: length), so this step's answer may be incomplete; raise the output reserve (num_output)",
                request.max_tokens
            );
        }
        self.event(SynthEvent::ReplyTruncated {
            step,
            completion_tokens: usage.completion_tokens,
            max_tokens: request.max_tokens,
        });
        match self.on_truncation {
            OnTruncation::Error => Err(SynthError::Truncated {
                step,
                completion_tokens: usage.completion_tokens,
                max_tokens: request.max_tokens,
            }),
            OnTruncation::Warn => Ok(()),
        }
    }

    /// The error of a reply that thought and said nothing: never an answer.
    fn only_thought(request: &ModelRequest, finish_reason: Option<FinishReason>) -> SynthError {
        let what = match finish_reason {
            Some(FinishReason::Length) => format!(
                "reasoning (thinking): the reply was cut at the output limit of {} tokens while the model was still thinking, before any answer; raise the thinking reserve (SynthesizerBuilder::thinking_reserve) or the output reserve (num_output)",
                request.max_tokens
            ),
            _ => "reasoning (thinking): the model thought and wrote no answer".to_string(),
        };
        Self::model_error(request, ModelError::NoText { what })
    }

    fn model_error(request: &ModelRequest, source: ModelError) -> SynthError {
        SynthError::Model {
            mode: request.step().mode,
            step: request.step().step,
            source,
        }
    }

    /// A plain call.
    pub(crate) async fn complete(&self, request: &ModelRequest) -> Result<Completion, SynthError> {
        self.check(request)?;
        let span = self.span(request);
        let start = Instant::now();
        let call = self.model.complete(request).instrument(span.clone());
        let (out, retries) = counting_retries(call).await;
        let mut c = out.map_err(|e| {
            self.end_first();
            let e = Self::model_error(request, e);
            telemetry::record_error(&span, &e);
            e
        })?;
        let only_thought = take_thinking(&mut c);
        let reply = Reply {
            text: &c.text,
            thinking: &c.thinking,
            usage: c.usage,
            finish_reason: c.finish_reason,
            retries,
        };
        let usage = self.finish(request, reply, start.elapsed(), &span);
        let checked = self.check_reply(request, c.finish_reason, usage);
        if only_thought {
            let e = Self::only_thought(request, c.finish_reason);
            telemetry::record_error(&span, &e);
            return Err(e);
        }
        checked.inspect_err(|e| telemetry::record_error(&span, e))?;
        Ok(c)
    }

    /// A structured call: an ordinary call whose request carries the schema. The reply
    /// is parsed as JSON and checked against the schema. A reply cut at the output limit
    /// is a truncation like any other (counted, reported, and an error under
    /// [`OnTruncation::Error`]); one that was cut and does not parse fails with
    /// [`SynthError::Truncated`], which names the output reserve to raise.
    pub(crate) async fn structured(
        &self,
        request: &ModelRequest,
    ) -> Result<StructuredCompletion, SynthError> {
        let c = self.complete(request).await?;
        let value = match parse_json_reply(&c.text) {
            Ok(v) => v,
            Err(_) if c.finish_reason == Some(FinishReason::Length) => {
                return Err(SynthError::Truncated {
                    step: request.step(),
                    completion_tokens: c.usage.map_or_else(
                        || self.tokenizer.count(&c.text) as u64,
                        |u| u.completion_tokens,
                    ),
                    max_tokens: request.max_tokens,
                });
            }
            Err(e) => return Err(Self::model_error(request, e)),
        };
        let value = match &request.schema {
            Some(schema) if self.check_schemas => {
                let compiled = self
                    .schemas
                    .get(schema)
                    .map_err(|e| Self::model_error(request, e))?;
                crate::schema::check_off_thread(compiled, value)
                    .await
                    .map_err(|e| Self::model_error(request, e))?
            }
            _ => value,
        };
        Ok(StructuredCompletion {
            value,
            text: c.text,
            usage: c.usage,
        })
    }

    /// A streamed call: deltas as they come; usage is recorded when the stream ends.
    /// A stream that ends without its `Done` event yields an error, never a silent end;
    /// under [`OnTruncation::Error`] so does a reply cut at the output limit.
    pub(crate) async fn stream(
        self: &Arc<Self>,
        request: ModelRequest,
    ) -> Result<futures::stream::BoxStream<'static, Result<String, SynthError>>, SynthError> {
        self.check(&request)?;
        let span = self.span(&request);
        let start = Instant::now();
        let opened = counting_retries(self.model.stream(&request).instrument(span.clone()));
        let (opened, retries) = opened.await;
        let inner: CompletionStream = opened.map_err(|e| {
            self.end_first();
            let e = Self::model_error(&request, e);
            telemetry::record_error(&span, &e);
            e
        })?;
        let caller = Arc::clone(self);
        let state = Streaming {
            inner,
            text: String::new(),
            apart: String::new(),
            done: false,
            request,
            span,
            start,
            caller,
            splitter: ThinkingSplitter::default(),
        };
        let s = futures::stream::unfold(state, move |mut st| async move {
            if st.done {
                return None;
            }
            let items = match st.inner.next().await {
                Some(Ok(StreamEvent::Delta(d))) => {
                    let d = st.splitter.feed(&d);
                    st.text.push_str(&d);
                    vec![Ok(d)]
                }
                Some(Ok(StreamEvent::Thinking(t))) => {
                    push_capped(&mut st.apart, &t, MAX_THINKING_BYTES);
                    Vec::new()
                }
                Some(Ok(StreamEvent::Done {
                    usage,
                    finish_reason,
                })) => {
                    st.done = true;
                    st.ended(usage, finish_reason, retries)
                }
                Some(Err(e)) => {
                    st.done = true;
                    st.caller.end_first();
                    let err = Caller::model_error(&st.request, e);
                    telemetry::record_error(&st.span, &err);
                    vec![Err(err)]
                }
                None => {
                    st.done = true;
                    st.caller.end_first();
                    let err = Caller::model_error(
                        &st.request,
                        ModelError::Incomplete("the stream ended before the model finished".into()),
                    );
                    telemetry::record_error(&st.span, &err);
                    vec![Err(err)]
                }
            };
            Some((items, st))
        })
        .flat_map(futures::stream::iter)
        .filter(|item| futures::future::ready(!matches!(item, Ok(d) if d.is_empty())));
        Ok(Box::pin(s))
    }
}

/// The error of a stream whose thinking was let out before its lone closing tag.
const LATE_CLOSE: &str = "the streamed reply holds a lone `</think>` (the chat template opened the thinking block in the prompt, as DeepSeek-R1's and Qwen3's do), so the text streamed before it was the model's thinking, already let out as answer; have the server take the thinking apart (llama.cpp `--reasoning-format deepseek`, vLLM `--reasoning-parser`) or ask without streaming";

/// A streamed call in flight, as [`Caller::stream`] unfolds it.
struct Streaming {
    inner: CompletionStream,
    /// The answer let out so far.
    text: String,
    /// The thinking the server sent apart ([`StreamEvent::Thinking`]), bounded.
    apart: String,
    done: bool,
    request: ModelRequest,
    span: tracing::Span,
    start: Instant,
    caller: Arc<Caller>,
    /// Inline thinking is taken out delta by delta: none of it is let out.
    splitter: ThinkingSplitter,
}

impl Streaming {
    /// The stream's `Done`: records the call; returns what the splitter held back, then
    /// nothing more (an empty delta is filtered out), or the error as the last item: a
    /// truncation, or a reply that only thought.
    fn ended(
        &mut self,
        usage: Option<Usage>,
        finish_reason: Option<FinishReason>,
        retries: u32,
    ) -> Vec<Result<String, SynthError>> {
        let tail = self.splitter.finish();
        self.text.push_str(&tail);
        let mut thinking = self.apart.trim().to_string();
        let inline = self.splitter.thinking().trim();
        if !thinking.is_empty() && !inline.is_empty() {
            push_capped(&mut thinking, "\n\n", MAX_THINKING_BYTES);
        }
        push_capped(&mut thinking, inline, MAX_THINKING_BYTES);
        let only_thought =
            (self.splitter.thought() || !thinking.is_empty()) && self.text.trim().is_empty();
        let reply = Reply {
            text: &self.text,
            thinking: &thinking,
            usage,
            finish_reason,
            retries,
        };
        let usage = self
            .caller
            .finish(&self.request, reply, self.start.elapsed(), &self.span);
        let checked = self.caller.check_reply(&self.request, finish_reason, usage);
        let last = if only_thought {
            Err(Caller::only_thought(&self.request, finish_reason))
        } else if self.splitter.late_close() {
            Err(Caller::model_error(
                &self.request,
                ModelError::Malformed(LATE_CLOSE.into()),
            ))
        } else {
            checked
        };
        let last = last
            .inspect_err(|e| telemetry::record_error(&self.span, e))
            .map(|()| String::new());
        vec![Ok(tail), last]
    }
}

impl Drop for Caller {
    /// The synthesis's totals go on its span when the last call is done: after the answer,
    /// or after a streamed answer's stream (which owns the caller) is dropped.
    fn drop(&mut self) {
        if self.spans {
            telemetry::record_totals(&self.synthesis_span, &self.totals());
        }
    }
}

impl UsageSource for Caller {
    fn totals(&self) -> UsageTotals {
        Caller::totals(self)
    }
}
