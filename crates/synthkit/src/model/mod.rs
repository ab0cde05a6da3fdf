//! Language models: the [`LanguageModel`] trait, requests, completions and errors.
//!
//! A [`ModelRequest`] carries the rendered prompt *and* what it was rendered from (the
//! template kind and variables), so every backend, offline ones included, and every trace
//! can see what a step is. Backends live in submodules; test doubles live only in
//! [`testing`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::prompt::{RenderedPrompt, TemplateKind};
use crate::text::SharedTokenizer;

pub mod cache;
pub mod extractive;
pub mod limit;
#[cfg(feature = "openai")]
pub mod openai;
pub mod retry;
pub mod testing;

/// What a model is and how much it can take.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelInfo {
    /// The model's name as the backend knows it.
    pub name: String,
    /// Tokens the model can attend to: prompt plus output.
    pub context_window: usize,
    /// Tokens reserved for the output (the request's `max_tokens`).
    pub num_output: usize,
    /// Whether the model takes chat messages (else one completion prompt).
    pub is_chat: bool,
    /// A system prompt added to every request.
    pub system_prompt: Option<String>,
}

impl ModelInfo {
    /// The reference's defaults: window 3900, output 256, completion model.
    pub const DEFAULT_CONTEXT_WINDOW: usize = 3900;
    /// The default output reserve.
    pub const DEFAULT_NUM_OUTPUT: usize = 256;

    /// A completion model with the default window and output reserve.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            context_window: Self::DEFAULT_CONTEXT_WINDOW,
            num_output: Self::DEFAULT_NUM_OUTPUT,
            is_chat: false,
            system_prompt: None,
        }
    }

    /// Sets the context window.
    pub fn with_context_window(mut self, tokens: usize) -> Self {
        self.context_window = tokens;
        self
    }

    /// Sets the output reserve.
    pub fn with_num_output(mut self, tokens: usize) -> Self {
        self.num_output = tokens;
        self
    }

    /// Marks the model as a chat model.
    pub fn with_chat(mut self, is_chat: bool) -> Self {
        self.is_chat = is_chat;
        self
    }

    /// Sets the system prompt.
    pub fn with_system_prompt(mut self, prompt: Option<String>) -> Self {
        self.system_prompt = prompt;
        self
    }
}

/// Tokens used by one call or a whole synthesis.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
}

impl Usage {
    /// Prompt plus completion tokens.
    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, rhs: Self) {
        self.prompt_tokens += rhs.prompt_tokens;
        self.completion_tokens += rhs.completion_tokens;
    }
}

/// Where a call stands in a synthesis: for traces, progress and offline backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StepInfo {
    /// The response mode (`refine`, `tree_summarize`, ...).
    pub mode: &'static str,
    /// The step (`qa`, `refine`, `summary`, `final_summary`, `answer`, `generate`).
    pub step: &'static str,
    /// The tree level (0 for modes without levels).
    pub level: u32,
    /// The call's position within its level or sequence.
    pub index: usize,
}

impl StepInfo {
    /// A step of `mode` named `step`, level 0, index 0.
    pub fn new(mode: &'static str, step: &'static str) -> Self {
        Self {
            mode,
            step,
            level: 0,
            index: 0,
        }
    }
}

/// One request to a model.
#[derive(Clone, PartialEq, Serialize)]
pub struct ModelRequest {
    /// The complete prompt, system prompt included.
    pub prompt: RenderedPrompt,
    /// The kind of template the prompt was rendered from.
    pub kind: TemplateKind,
    /// The variables the prompt was rendered from (`query_str`, `context_str`, ...).
    pub variables: Vec<(String, String)>,
    /// A JSON schema the reply must follow (structured calls), if any.
    pub schema: Option<Arc<Value>>,
    /// The most tokens the reply may have.
    pub max_tokens: usize,
    /// The prompt's token count with the synthesizer's tokenizer.
    pub prompt_tokens: usize,
    /// Where the call stands.
    pub step: StepInfo,
}

impl fmt::Debug for ModelRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelRequest")
            .field("kind", &self.kind)
            .field("step", &self.step)
            .field("prompt_tokens", &self.prompt_tokens)
            .field("max_tokens", &self.max_tokens)
            .field("structured", &self.schema.is_some())
            .finish_non_exhaustive()
    }
}

impl ModelRequest {
    /// The value of a variable the prompt was rendered from.
    pub fn variable(&self, name: &str) -> Option<&str> {
        self.variables
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Why a model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The model finished its answer.
    Stop,
    /// The output reached `max_tokens`.
    Length,
    /// Anything else the server said.
    Other,
}

/// A finished reply.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Completion {
    /// The reply's text.
    pub text: String,
    /// Usage the server reported, if any.
    pub usage: Option<Usage>,
    /// Why the model stopped, if known.
    pub finish_reason: Option<FinishReason>,
}

impl Completion {
    /// A reply with text only.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }
}

/// A structured reply: the parsed JSON value and the raw text.
#[derive(Debug, Clone, PartialEq)]
pub struct StructuredCompletion {
    /// The parsed value.
    pub value: Value,
    /// The reply's raw text.
    pub text: String,
    /// Usage the server reported, if any.
    pub usage: Option<Usage>,
}

/// One item of a streamed reply.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// More text.
    Delta(String),
    /// The end of the reply, with usage when the server reported it.
    Done {
        /// Usage the server reported, if any.
        usage: Option<Usage>,
        /// Why the model stopped, if known.
        finish_reason: Option<FinishReason>,
    },
}

/// A streamed reply: deltas, then exactly one [`StreamEvent::Done`]. A stream that ends
/// without `Done` was cut off and must not be taken as a complete answer.
pub type CompletionStream = BoxStream<'static, Result<StreamEvent, ModelError>>;

/// Errors from a model, split by what the caller must do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// The prompt is longer than the model's context: re-pack with a smaller budget.
    #[error(
        "the prompt is too long for the model's context{}: lower --context-window or --num-output (server said: {message})",
        fmt_excess(*.prompt_tokens, *.context_window)
    )]
    ContextTooLong {
        /// What the server said.
        message: String,
        /// The prompt's tokens as the server counted them, if it said.
        prompt_tokens: Option<u64>,
        /// The server's context size, if it said.
        context_window: Option<u64>,
    },
    /// The server refused the credentials.
    #[error("the server refused the credentials (HTTP {status}): check the API key; body: {body}")]
    Auth {
        /// HTTP status.
        status: u16,
        /// The response body (secrets redacted).
        body: String,
    },
    /// Too many requests: wait and retry.
    #[error("rate limited by the server (HTTP {status}){}: slow down or retry later; body: {body}", retry_after.map(|d| format!(", retry after {:.1}s", d.as_secs_f64())).unwrap_or_default())]
    RateLimited {
        /// HTTP status.
        status: u16,
        /// How long the server asked to wait.
        retry_after: Option<Duration>,
        /// The response body.
        body: String,
    },
    /// A server-side failure (5xx): may succeed on retry.
    #[error("server error (HTTP {status}): {body}")]
    Server {
        /// HTTP status.
        status: u16,
        /// The response body.
        body: String,
    },
    /// The server rejected the request (4xx other than the above).
    #[error("the server rejected the request (HTTP {status}): {body}")]
    BadRequest {
        /// HTTP status.
        status: u16,
        /// The response body.
        body: String,
    },
    /// No answer in time.
    #[error("no answer from the model within {0:?}: raise the timeout or check the server")]
    Timeout(Duration),
    /// The connection failed or was reset.
    #[error("connection to the model failed: {0}")]
    Connection(String),
    /// The reply could not be understood.
    #[error("the model's reply could not be understood: {0}")]
    Malformed(String),
    /// A streamed reply ended before it was complete.
    #[error("the model's streamed reply was cut off: {0}")]
    Incomplete(String),
    /// A structured reply did not match the expected JSON.
    #[error("the model's structured reply is not valid JSON for the schema: {0}")]
    Structured(String),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

fn fmt_excess(prompt: Option<u64>, window: Option<u64>) -> String {
    match (prompt, window) {
        (Some(p), Some(w)) => format!(" ({p} tokens > {w})"),
        (Some(p), None) => format!(" ({p} tokens)"),
        _ => String::new(),
    }
}

impl ModelError {
    /// Whether the same request may succeed if sent again later.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ModelError::RateLimited { .. }
                | ModelError::Server { .. }
                | ModelError::Timeout(_)
                | ModelError::Connection(_)
                | ModelError::Incomplete(_)
        )
    }
}

/// A language model. Object safe: use `Arc<dyn LanguageModel>` to choose one at run time.
///
/// Implement [`LanguageModel::complete`]; streaming and structured calls have defaults
/// built on it (one delta; JSON parsed from the reply, first `{` to last `}`).
pub trait LanguageModel: Send + Sync {
    /// What the model is and how much it can take.
    fn info(&self) -> ModelInfo;

    /// Completes one request.
    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<Completion, ModelError>>;

    /// Streams one request: deltas, then [`StreamEvent::Done`].
    fn stream<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<CompletionStream, ModelError>> {
        Box::pin(async move {
            let c = self.complete(request).await?;
            let events = vec![
                Ok(StreamEvent::Delta(c.text)),
                Ok(StreamEvent::Done {
                    usage: c.usage,
                    finish_reason: c.finish_reason,
                }),
            ];
            let s: CompletionStream = Box::pin(futures::stream::iter(events));
            Ok(s)
        })
    }

    /// A structured call: the request carries a JSON schema; the reply is parsed as JSON.
    fn structured<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<StructuredCompletion, ModelError>> {
        Box::pin(async move {
            let c = self.complete(request).await?;
            let value = parse_json_reply(&c.text)?;
            Ok(StructuredCompletion {
                value,
                text: c.text,
                usage: c.usage,
            })
        })
    }

    /// The model's own tokenizer, when the backend can count exactly as the model does.
    fn tokenizer(&self) -> Option<SharedTokenizer> {
        None
    }
}

impl<M: LanguageModel + ?Sized> LanguageModel for Arc<M> {
    fn info(&self) -> ModelInfo {
        (**self).info()
    }
    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<Completion, ModelError>> {
        (**self).complete(request)
    }
    fn stream<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<CompletionStream, ModelError>> {
        (**self).stream(request)
    }
    fn structured<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<StructuredCompletion, ModelError>> {
        (**self).structured(request)
    }
    fn tokenizer(&self) -> Option<SharedTokenizer> {
        (**self).tokenizer()
    }
}

/// Parses a model's JSON reply tolerantly: the whole text, else the text from the first
/// `{` to the last `}`.
pub fn parse_json_reply(text: &str) -> Result<Value, ModelError> {
    if let Ok(v) = serde_json::from_str::<Value>(text.trim()) {
        return Ok(v);
    }
    let (Some(start), Some(end)) = (text.find('{'), text.rfind('}')) else {
        return Err(ModelError::Structured(format!(
            "no JSON object in the reply: {}",
            excerpt(text, 120)
        )));
    };
    text.get(start..=end)
        .and_then(|s| serde_json::from_str::<Value>(s).ok())
        .ok_or_else(|| {
            ModelError::Structured(format!(
                "the reply's JSON does not parse: {}",
                excerpt(text, 120)
            ))
        })
}

/// At most `max` characters of `text`, with `...` when cut.
pub fn excerpt(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut s: String = text.chars().take(max.saturating_sub(3)).collect();
    s.push_str("...");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerant_json() {
        assert!(parse_json_reply("{\"a\":1}").is_ok());
        assert_eq!(
            parse_json_reply("Sure! {\"a\": {\"b\": 2}} done").ok(),
            Some(serde_json::json!({"a": {"b": 2}}))
        );
        assert!(matches!(
            parse_json_reply("GARBLED OUTPUT no json here"),
            Err(ModelError::Structured(_))
        ));
        assert!(parse_json_reply("} {").is_err());
    }

    #[test]
    fn transient() {
        assert!(
            ModelError::Server {
                status: 503,
                body: String::new()
            }
            .is_transient()
        );
        assert!(
            !ModelError::Auth {
                status: 401,
                body: String::new()
            }
            .is_transient()
        );
    }
}
