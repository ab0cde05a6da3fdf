//! Language models: the [`LanguageModel`] trait, requests, completions and errors.
//!
//! A [`ModelRequest`] is provider-neutral: the rendered prompt plus options (an output
//! schema, `max_tokens`, the counted prompt tokens). What the synthesis knows about the
//! step (its kind, and the template and variables the prompt came from) rides along as
//! typed [`Extensions`], for traces and for backends that answer
//! from it (the offline extractive one). Backends live in `synthkit::backend`; test
//! doubles only in `synthkit::testing` (feature `testing`).

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::mode::StepInfo;
use crate::mode::{ResponseMode, Step};
use crate::prompt::{PromptSource, RenderedPrompt};
use crate::text::SharedTokenizer;

mod error;
mod extensions;
mod layer;
pub(crate) mod tags;

pub use error::{ModelError, TimeoutKind};
pub use extensions::Extensions;
pub use layer::ModelLayer;

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
    /// Who serves the model (`openai`, `anthropic`, ...), as spans name it
    /// (`gen_ai.provider.name`); `None` when the model does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Whether the model takes images (chat messages with image parts): as the server
    /// said (llama.cpp's `/props`, a models listing's capabilities); `None` when it did not
    /// say. A synthesis refuses images before any call for a model that says `false`
    /// ([`crate::SynthesizerBuilder::vision`] overrides it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vision: Option<bool>,
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
            provider: None,
            vision: None,
        }
    }

    setters! {
        /// Sets the context window.
        pub fn with_context_window(tokens: usize) => context_window;

        /// Sets the output reserve.
        pub fn with_num_output(tokens: usize) => num_output;

        /// Marks the model as a chat model.
        pub fn with_chat(is_chat: bool) => is_chat;

        /// Sets the system prompt.
        pub fn with_system_prompt(prompt: Option<String>) => system_prompt;

        /// Sets who serves the model (`gen_ai.provider.name` on spans).
        pub fn with_provider(provider: impl Into<String>) => Some(provider);

        /// Sets whether the model takes images (`None`: unknown).
        pub fn with_vision(vision: Option<bool>) => vision;
    }
}

/// Tokens used by one call or a whole synthesis.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Of the completion tokens, those the model spent thinking (a reasoning model's
    /// `usage.completion_tokens_details.reasoning_tokens`; for a server that does not
    /// report them, synthkit's count of the thinking text). 0 for other models.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
    /// Of the prompt tokens, those the server read from its prompt cache instead of
    /// processing them (OpenAI-compatible `usage.prompt_tokens_details.cached_tokens`,
    /// llama.cpp's `timings.cache_n`, Anthropic's `cache_read_input_tokens`). 0 when the
    /// server reused nothing or does not say.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_prompt_tokens: u64,
    /// Of the prompt tokens, those the server wrote to its prompt cache for later calls
    /// (Anthropic's `cache_creation_input_tokens`). 0 elsewhere.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// Prompt plus completion tokens (saturating: counts come from servers).
    pub fn total(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, rhs: Self) {
        // Saturating: a server's counts may be anything up to `u64::MAX`.
        self.prompt_tokens = self.prompt_tokens.saturating_add(rhs.prompt_tokens);
        self.completion_tokens = self.completion_tokens.saturating_add(rhs.completion_tokens);
        self.reasoning_tokens = self.reasoning_tokens.saturating_add(rhs.reasoning_tokens);
        self.cached_prompt_tokens = self
            .cached_prompt_tokens
            .saturating_add(rhs.cached_prompt_tokens);
        self.cache_write_tokens = self
            .cache_write_tokens
            .saturating_add(rhs.cache_write_tokens);
    }
}

/// One request to a model: a prompt (chat messages or one text) and the options of the
/// call. Provider-neutral: nothing here is about synthesis. What a synthesis knows about a
/// call (its step, the template and variables its prompt was rendered from) travels in
/// [`ModelRequest::extensions`], for traces and for backends that want it (an offline
/// backend reads [`crate::prompt::PromptSource`]); every other backend ignores them.
///
/// ```
/// use synthkit::model::ModelRequest;
/// use synthkit::prompt::RenderedPrompt;
///
/// let request = ModelRequest::new(RenderedPrompt::Text("Say hello.".into()))
///     .with_max_tokens(16);
/// assert_eq!(request.max_tokens, 16);
/// assert!(request.schema.is_none());
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct ModelRequest {
    /// The complete prompt, system prompt included.
    pub prompt: RenderedPrompt,
    /// A JSON schema the reply must follow (structured calls), if any.
    pub schema: Option<Arc<Value>>,
    /// The most tokens the reply may have.
    pub max_tokens: usize,
    /// The prompt's token count with the caller's tokenizer (what rate budgets charge).
    pub prompt_tokens: usize,
    /// Typed values the caller attaches (the synthesis's [`StepInfo`] and
    /// [`crate::prompt::PromptSource`]).
    pub extensions: Extensions,
}

impl fmt::Debug for ModelRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelRequest")
            .field("step", &self.extensions.get::<StepInfo>())
            .field("prompt_tokens", &self.prompt_tokens)
            .field("max_tokens", &self.max_tokens)
            .field("structured", &self.schema.is_some())
            .finish_non_exhaustive()
    }
}

impl ModelRequest {
    /// The default `max_tokens` of [`ModelRequest::new`].
    pub const DEFAULT_MAX_TOKENS: usize = ModelInfo::DEFAULT_NUM_OUTPUT;

    /// A request for `prompt`: no schema, [`ModelRequest::DEFAULT_MAX_TOKENS`], no count.
    pub fn new(prompt: RenderedPrompt) -> Self {
        Self {
            prompt,
            schema: None,
            max_tokens: Self::DEFAULT_MAX_TOKENS,
            prompt_tokens: 0,
            extensions: Extensions::default(),
        }
    }

    setters! {
        /// Sets the JSON schema the reply must follow.
        pub fn with_schema(schema: Option<Arc<Value>>) => schema;

        /// Sets the most tokens the reply may have.
        pub fn with_max_tokens(tokens: usize) => max_tokens;

        /// Sets the prompt's token count.
        pub fn with_prompt_tokens(tokens: usize) => prompt_tokens;
    }

    /// Attaches a typed value (replacing one of the same type).
    pub fn with_extension<T: Any + Send + Sync>(mut self, value: T) -> Self {
        self.extensions.insert(value);
        self
    }

    /// Where the call stands in its synthesis; a default step (compact, qa, level 0,
    /// index 0) for a request made outside one.
    pub fn step(&self) -> StepInfo {
        self.extensions
            .get::<StepInfo>()
            .copied()
            .unwrap_or_else(|| StepInfo::new(ResponseMode::default(), Step::Qa))
    }

    /// What the prompt was rendered from, when a synthesis made it.
    pub fn source(&self) -> Option<&PromptSource> {
        self.extensions.get::<PromptSource>()
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
#[non_exhaustive]
pub struct Completion {
    /// The reply's text.
    pub text: String,
    /// Usage the server reported, if any.
    pub usage: Option<Usage>,
    /// Why the model stopped, if known.
    pub finish_reason: Option<FinishReason>,
    /// A reasoning model's thinking, apart from [`Completion::text`]: what the server sent
    /// apart (`reasoning_content`, Anthropic's thinking blocks) and, once the synthesis
    /// has received the reply, the inline blocks it took out of the text
    /// ([`crate::text::thinking`]). Empty for other models. It never goes into a prompt
    /// or an answer; steps, traces and spans keep it.
    pub thinking: String,
}

impl Completion {
    /// A reply with text only.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }

    setters! {
        /// The same reply with the usage the model reports (the struct is `non_exhaustive`, so
        /// backends outside this crate build it with these methods).
        ///
        /// ```
        /// use synthkit::model::{Completion, FinishReason, Usage};
        /// let c = Completion::text("Every six months.")
        ///     .with_usage(Usage { prompt_tokens: 120, completion_tokens: 4, ..Usage::default() })
        ///     .with_finish_reason(FinishReason::Stop);
        /// assert_eq!(c.usage.map(|u| u.total()), Some(124));
        /// ```
        pub fn with_usage(usage: Usage) => Some(usage);

        /// The same reply with the reason the model stopped.
        pub fn with_finish_reason(reason: FinishReason) => Some(finish_reason);

        /// The same reply with the thinking the server sent apart from the text.
        pub fn with_thinking(thinking: impl Into<String>) => thinking;
    }
}

/// A structured reply as the engine hands it on: the parsed JSON value and the raw text.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
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
    /// More of the reply's thinking, sent apart from its text (OpenAI-compatible servers'
    /// `reasoning_content` deltas, Anthropic's `thinking_delta`s): never part of the
    /// answer. A consumer that only wants the text ignores it.
    Thinking(String),
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

/// What a model's methods return: a boxed future of the result, borrowing the model and
/// the request for `'a` (`BoxFuture<'a, Result<T, ModelError>>`). Implement
/// [`LanguageModel`] with it:
///
/// ```
/// use synthkit::model::{Completion, LanguageModel, ModelFuture, ModelInfo, ModelRequest};
///
/// struct Echo;
///
/// impl LanguageModel for Echo {
///     fn info(&self) -> ModelInfo {
///         ModelInfo::new("echo")
///     }
///     fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, Completion> {
///         Box::pin(async move { Ok(Completion::text(request.prompt.to_text())) })
///     }
/// }
/// ```
pub type ModelFuture<'a, T> = BoxFuture<'a, Result<T, ModelError>>;

/// A language model. Object safe: use `Arc<dyn LanguageModel>` to choose one at run time.
///
/// Implement [`LanguageModel::complete`]; streaming has a default built on it (one delta).
/// A model that wraps another implements [`ModelLayer`] instead and writes only what it
/// changes.
/// A structured call is an ordinary call whose request carries a JSON schema
/// ([`ModelRequest::schema`]): a backend that can constrain its output sends the schema
/// (OpenAI's `response_format`), and the engine parses and checks the reply, so a JSON
/// reply cut at the output limit is a truncation like any other.
pub trait LanguageModel: Send + Sync {
    /// What the model is and how much it can take.
    fn info(&self) -> ModelInfo;

    /// Completes one request.
    fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, Completion>;

    /// Streams one request: deltas, then [`StreamEvent::Done`].
    fn stream<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, CompletionStream> {
        Box::pin(async move { Ok(one_delta_stream(self.complete(request).await?)) })
    }

    /// A local tokenizer that counts as the model does, or close to it. Packing searches
    /// with it; without a [`LanguageModel::counter`] its counts are final.
    fn tokenizer(&self) -> Option<SharedTokenizer> {
        None
    }

    /// The model's exact prompt counter, when the backend can ask its server (llama.cpp and
    /// vLLM `/tokenize`). Every prompt is then verified with it before it is sent.
    fn counter(&self) -> Option<SharedCounter> {
        None
    }
}

/// Counts whole prompts exactly as the model's server will, asynchronously.
///
/// Packing first fits a prompt with the local [`crate::text::Tokenizer`], then asks the
/// counter for the exact count of the whole rendered prompt and re-packs when it is over
/// the budget. Implementations should cache counts: the same prompt may be asked twice.
pub trait PromptCounter: Send + Sync + fmt::Debug {
    /// A short name for reports, such as `llama.cpp:/tokenize`.
    fn name(&self) -> &str;

    /// The exact token counts of `prompts`, in order.
    fn count_prompts<'a>(&'a self, prompts: &'a [RenderedPrompt]) -> ModelFuture<'a, Vec<usize>>;
}

/// A prompt counter shared between tasks.
pub type SharedCounter = Arc<dyn PromptCounter>;

/// A finished reply as a stream: its thinking (when it has any, as one
/// [`StreamEvent::Thinking`]), one delta with its text, then `Done` with its usage.
pub fn one_delta_stream(completion: Completion) -> CompletionStream {
    let thinking =
        (!completion.thinking.is_empty()).then(|| Ok(StreamEvent::Thinking(completion.thinking)));
    let events: Vec<_> = thinking
        .into_iter()
        .chain([
            Ok(StreamEvent::Delta(completion.text)),
            Ok(StreamEvent::Done {
                usage: completion.usage,
                finish_reason: completion.finish_reason,
            }),
        ])
        .collect();
    Box::pin(futures::stream::iter(events))
}

/// A shared model is the model: every call goes to it.
impl<M: LanguageModel + ?Sized> ModelLayer for Arc<M> {
    type Inner = M;

    fn inner(&self) -> &M {
        self
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

/// At most `max` characters of `text`, with `...` when cut, control characters escaped
/// ([`crate::text::printable`]; the text is a server's).
pub fn excerpt(text: &str, max: usize) -> String {
    let text = &*crate::text::printable::printable(text);
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
