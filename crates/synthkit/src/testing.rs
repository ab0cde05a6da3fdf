//! Test doubles for models: the only place they live.
//!
//! * [`ScriptedModel`]: answers from a function of the request, records every request,
//!   and streams its answers word by word; its finish reason can be scripted too
//!   ([`ScriptedModel::with_finish_reason`]), and its tokenizer and exact counter given
//!   ([`ScriptedModel::with_tokenizer`], [`ScriptedModel::with_counter`]).
//! * [`ReplayModel`]: the fake model of the conformance traces: the answer depends only on
//!   the kind of template a call used; structured calls answer
//!   `{"query_satisfied": <prompt contains "RELEVANT">, "answer": ...}` or garbled text
//!   when the prompt contains `GARBLED`.
//! * [`FixedModel`]: an instant model that always gives the same answer (benchmarks).
//! * [`qa_request`]: a request as synthesis sends it, for testing models and layers
//!   directly.
//! * [`doubling_schema`]: a small JSON schema whose checking doubles at every reference
//!   (the hostile schema that the schema's cost bound must refuse).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::mode::{ResponseMode, Step};
use crate::model::{
    Completion, CompletionStream, FinishReason, LanguageModel, ModelError, ModelFuture, ModelInfo,
    ModelRequest, SharedCounter, StepInfo, StreamEvent, Usage,
};
use crate::prompt::{PromptSource, RenderedPrompt, TemplateKind};
use crate::text::SharedTokenizer;

/// A compact-mode QA request for `prompt`, as synthesis sends it: counted at
/// `prompt_tokens`, allowed `max_tokens`, with `query` as its `query_str` when given.
pub fn qa_request(
    prompt: RenderedPrompt,
    prompt_tokens: usize,
    max_tokens: usize,
    query: Option<&str>,
) -> ModelRequest {
    let variables = query
        .map(|q| vec![("query_str".to_string(), q.to_string())])
        .unwrap_or_default();
    ModelRequest::new(prompt)
        .with_schema(None)
        .with_max_tokens(max_tokens)
        .with_prompt_tokens(prompt_tokens)
        .with_extension(StepInfo::new(ResponseMode::Compact, Step::Qa))
        .with_extension(PromptSource::new(TemplateKind::Qa, variables))
}

type AnswerFn = dyn Fn(&ModelRequest) -> Result<String, ModelError> + Send + Sync;
type FinishFn = dyn Fn(&ModelRequest) -> FinishReason + Send + Sync;
type LatencyFn = dyn Fn(&ModelRequest) -> Duration + Send + Sync;

/// A model whose answers come from a function, recording every request it gets.
#[derive(Clone)]
pub struct ScriptedModel {
    info: ModelInfo,
    answer: Arc<AnswerFn>,
    requests: Arc<Mutex<Vec<ModelRequest>>>,
    delay: Option<Arc<LatencyFn>>,
    finish: Option<Arc<FinishFn>>,
    /// Prompt tokens the "server" adds to ours in the usage it reports.
    prompt_overhead: u64,
    tokenizer: Option<SharedTokenizer>,
    counter: Option<SharedCounter>,
}

debug_fields!(ScriptedModel { info: info, .. });

impl ScriptedModel {
    /// A model answering with `answer(request)`.
    pub fn new(
        info: ModelInfo,
        answer: impl Fn(&ModelRequest) -> Result<String, ModelError> + Send + Sync + 'static,
    ) -> Self {
        Self {
            info,
            answer: Arc::new(answer),
            requests: Arc::default(),
            delay: None,
            finish: None,
            prompt_overhead: 0,
            tokenizer: None,
            counter: None,
        }
    }

    /// A model that always answers `text`.
    pub fn constant(info: ModelInfo, text: impl Into<String>) -> Self {
        let text = text.into();
        Self::new(info, move |_| Ok(text.clone()))
    }

    /// A model answering the listed texts in order, then the last one again.
    pub fn sequence(info: ModelInfo, answers: Vec<String>) -> Self {
        let next = Arc::new(Mutex::new(0usize));
        Self::new(info, move |_| {
            let mut i = next
                .lock()
                .map_err(|_| ModelError::Other("poisoned".into()))?;
            let a = answers
                .get(*i)
                .or(answers.last())
                .cloned()
                .unwrap_or_default();
            *i += 1;
            Ok(a)
        })
    }

    /// Waits this long (async) before every answer.
    pub fn with_delay(self, delay: Duration) -> Self {
        self.with_latency(move |_| delay)
    }

    /// Waits `latency(request)` (async) before each answer: uneven latencies, as real
    /// models have (short and long answers).
    pub fn with_latency(
        mut self,
        latency: impl Fn(&ModelRequest) -> Duration + Send + Sync + 'static,
    ) -> Self {
        self.delay = Some(Arc::new(latency));
        self
    }

    /// Reports `finish(request)` as every reply's finish reason, in plain and streamed
    /// calls (default [`FinishReason::Stop`]): [`FinishReason::Length`] scripts a reply cut
    /// at the output limit.
    pub fn with_finish_reason(
        mut self,
        finish: impl Fn(&ModelRequest) -> FinishReason + Send + Sync + 'static,
    ) -> Self {
        self.finish = Some(Arc::new(finish));
        self
    }

    fn finish_reason(&self, request: &ModelRequest) -> FinishReason {
        self.finish
            .as_ref()
            .map_or(FinishReason::Stop, |f| f(request))
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Waits the scripted latency, records the request and answers it.
    async fn answer(&self, request: &ModelRequest) -> Result<String, ModelError> {
        if let Some(d) = &self.delay {
            tokio::time::sleep(d(request)).await;
        }
        if let Ok(mut r) = self.requests.lock() {
            r.push(request.clone());
        }
        (self.answer)(request)
    }

    fn usage(&self, request: &ModelRequest, text: &str) -> Usage {
        Usage {
            prompt_tokens: request.prompt_tokens as u64 + self.prompt_overhead,
            completion_tokens: text.split_whitespace().count() as u64,
            ..Default::default()
        }
    }

    setters! {
        /// Reports `tokens` more prompt tokens than the request's count in every usage, as a
        /// server whose chat template adds tokens does.
        pub fn with_prompt_overhead(tokens: u64) => prompt_overhead;

        /// Says that `tokenizer` counts as the model does ([`LanguageModel::tokenizer`]).
        pub fn with_tokenizer(tokenizer: SharedTokenizer) => Some(tokenizer);

        /// Gives the model an exact prompt counter ([`LanguageModel::counter`]).
        pub fn with_counter(counter: SharedCounter) => Some(counter);
    }
}

impl LanguageModel for ScriptedModel {
    fn info(&self) -> ModelInfo {
        self.info.clone()
    }

    fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, Completion> {
        Box::pin(async move {
            let text = self.answer(request).await?;
            let usage = Some(self.usage(request, &text));
            Ok(Completion {
                text,
                usage,
                finish_reason: Some(self.finish_reason(request)),
                thinking: String::new(),
            })
        })
    }

    fn stream<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, CompletionStream> {
        Box::pin(async move {
            let text = self.answer(request).await?;
            let usage = self.usage(request, &text);
            // Word by word, keeping every character.
            let mut events: Vec<Result<StreamEvent, ModelError>> = Vec::new();
            let mut piece = String::new();
            for ch in text.chars() {
                if ch.is_whitespace() && !piece.trim().is_empty() {
                    events.push(Ok(StreamEvent::Delta(std::mem::take(&mut piece))));
                }
                piece.push(ch);
            }
            if !piece.is_empty() {
                events.push(Ok(StreamEvent::Delta(piece)));
            }
            events.push(Ok(StreamEvent::Done {
                usage: Some(usage),
                finish_reason: Some(self.finish_reason(request)),
            }));
            let s: CompletionStream = Box::pin(futures::stream::iter(events));
            Ok(s)
        })
    }

    fn tokenizer(&self) -> Option<SharedTokenizer> {
        self.tokenizer.clone()
    }

    fn counter(&self) -> Option<SharedCounter> {
        self.counter.clone()
    }
}

/// The conformance traces' fake model: answers depend only on the template kind.
#[derive(Debug, Clone)]
pub struct ReplayModel {
    info: ModelInfo,
    answers: BTreeMap<TemplateKind, String>,
}

impl ReplayModel {
    /// A replay model answering `answers[kind]` (an empty answer for a missing kind).
    pub fn new(info: ModelInfo, answers: BTreeMap<TemplateKind, String>) -> Self {
        Self { info, answers }
    }

    /// The answer for a request.
    pub fn answer_for(&self, request: &ModelRequest) -> String {
        let kind = match request.source().map_or(TemplateKind::Custom, |s| s.kind) {
            TemplateKind::Custom => TemplateKind::Simple,
            k => k,
        };
        let answer = self.answers.get(&kind).cloned().unwrap_or_default();
        if request.schema.is_none() {
            return answer;
        }
        let prompt = request.prompt.to_text();
        if prompt.contains("GARBLED") {
            return "GARBLED OUTPUT no json here".to_string();
        }
        serde_json::json!({ "query_satisfied": prompt.contains("RELEVANT"), "answer": answer })
            .to_string()
    }
}

impl LanguageModel for ReplayModel {
    fn info(&self) -> ModelInfo {
        self.info.clone()
    }

    fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, Completion> {
        Box::pin(async move { Ok(Completion::text(self.answer_for(request))) })
    }
}

/// An instant model that always answers the same text and reports usage without
/// counting (for benchmarks: the model costs nothing, so what is measured is synthkit).
#[derive(Debug, Clone)]
pub struct FixedModel {
    info: ModelInfo,
    answer: Arc<str>,
    answer_tokens: u64,
    delay: Option<Duration>,
}

impl FixedModel {
    /// A model answering `answer`, which counts `answer_tokens` tokens.
    pub fn new(info: ModelInfo, answer: impl Into<Arc<str>>, answer_tokens: u64) -> Self {
        Self {
            info,
            answer: answer.into(),
            answer_tokens,
            delay: None,
        }
    }

    setters! {
        /// Sleeps (async) this long in every call, like a remote model's latency.
        pub fn with_latency(delay: Duration) => Some(delay);
    }
}

impl LanguageModel for FixedModel {
    fn info(&self) -> ModelInfo {
        self.info.clone()
    }

    fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, Completion> {
        Box::pin(async move {
            if let Some(d) = self.delay {
                tokio::time::sleep(d).await;
            }
            let text = if request.schema.is_some() {
                serde_json::json!({"query_satisfied": true, "answer": &*self.answer}).to_string()
            } else {
                self.answer.to_string()
            };
            Ok(Completion {
                text,
                usage: Some(Usage {
                    prompt_tokens: request.prompt_tokens as u64,
                    completion_tokens: self.answer_tokens,
                    ..Default::default()
                }),
                finish_reason: Some(FinishReason::Stop),
                thinking: String::new(),
            })
        })
    }
}

/// A tokenizer whose tokens are whitespace-separated words (the reference tests' mock
/// tokenizer): counts are easy to reason about in tests.
#[derive(Debug, Clone, Copy, Default)]
pub struct WordTokenizer;

impl crate::text::Tokenizer for WordTokenizer {
    fn name(&self) -> &str {
        "words"
    }
    fn count(&self, text: &str) -> usize {
        text.split_whitespace().count()
    }
    fn encode(&self, text: &str) -> Vec<u32> {
        text.split_whitespace().map(|_| 0).collect()
    }
    fn decode(&self, _tokens: &[u32]) -> Option<String> {
        None
    }
}

/// A deliberately non-additive tokenizer: a token per 3 bytes of each word, plus one per
/// run of whitespace, plus one when the text starts with a letter. Joining two pieces can
/// count more than their sum, which exercises packers that must check whole texts.
#[derive(Debug, Clone, Copy, Default)]
pub struct LumpyTokenizer;

impl crate::text::Tokenizer for LumpyTokenizer {
    fn name(&self) -> &str {
        "lumpy"
    }
    fn count(&self, text: &str) -> usize {
        let words: usize = text.split_whitespace().map(|w| w.len().div_ceil(3)).sum();
        let mut runs = 0;
        let mut in_ws = false;
        for c in text.chars() {
            if c.is_whitespace() && !in_ws {
                runs += 1;
            }
            in_ws = c.is_whitespace();
        }
        let lead = usize::from(text.starts_with(char::is_alphabetic));
        words + runs + lead
    }
    fn encode(&self, text: &str) -> Vec<u32> {
        vec![0; self.count(text)]
    }
    fn decode(&self, _tokens: &[u32]) -> Option<String> {
        None
    }
}

/// A JSON schema of `depth + 1` definitions, `l0 .. l{depth}`: each `l{i}` is
/// `anyOf[$ref l{i+1}, $ref l{i+1}]` and the last an integer, so checking a value that is
/// not an integer tries 2^depth paths, from a schema of a few hundred bytes.
pub fn doubling_schema(depth: usize) -> serde_json::Value {
    let mut defs = serde_json::Map::new();
    for i in 0..depth {
        let next = format!("#/$defs/l{}", i + 1);
        defs.insert(
            format!("l{i}"),
            serde_json::json!({"anyOf": [{"$ref": next}, {"$ref": next}]}),
        );
    }
    defs.insert(format!("l{depth}"), serde_json::json!({"type": "integer"}));
    serde_json::json!({"$defs": defs, "$ref": "#/$defs/l0"})
}
