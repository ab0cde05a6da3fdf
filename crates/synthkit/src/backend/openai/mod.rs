//! The OpenAI-compatible HTTP backend: OpenAI, vLLM, llama.cpp's `llama-server`, Ollama,
//! LM Studio and anything else that serves `/v1/chat/completions` or `/v1/completions`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), synthkit::model::ModelError> {
//! use synthkit::model::LanguageModel;
//! use synthkit::backend::openai::{OpenAiConfig, OpenAiModel};
//!
//! // A local llama.cpp server: no key; the context window is read from `/props` and
//! // token counts come from the server's `/tokenize`.
//! let config = OpenAiConfig::new("local")
//!     .with_base_url("http://127.0.0.1:8080/v1")
//!     .with_server_tokenizer(true);
//! let model = OpenAiModel::connect(config).await?;
//! println!("{:?}", model.info());
//! # Ok(()) }
//! ```
//!
//! What it does:
//! - **Chat** (`is_chat`, the default) sends `RenderedPrompt::Chat` messages as they are and
//!   a `RenderedPrompt::Text` as one user message; **completion** mode sends
//!   [`RenderedPrompt::to_text`](crate::prompt::RenderedPrompt::to_text) as `prompt`. The request's prompt is sent as is: the
//!   synthesizer has already added the system prompt that [`LanguageModel::info`] reports.
//! - `max_tokens` is the request's `max_tokens`; `temperature` comes from the config.
//! - **Streaming** uses SSE with `stream_options.include_usage`; see [`LanguageModel::stream`]
//!   for the guarantees (deltas, then exactly one `Done`; a cut stream is an error).
//! - **Structured** calls send `response_format: json_schema` (strict) when
//!   [`OpenAiConfig::json_schema`] is set, and always parse the reply tolerantly.
//! - **Errors** are split by what the caller must do ([`ModelError`]); bodies are cut to
//!   2 KB and the API key is redacted from everything. There are no retries here: retries
//!   are a layer around any [`LanguageModel`] driven by [`ModelError::is_transient`] and
//!   `RateLimited::retry_after`; each method below makes exactly one HTTP attempt.
//! - **Discovery** ([`OpenAiModel::discover`]) reads the context window from llama.cpp's
//!   `/props` or a `/models` listing (vLLM's `max_model_len`).
//! - **Server counter** ([`ServerCounter`]) counts prompts with the server's own vocabulary.

use std::fmt;
use std::time::Duration;

use futures::future::BoxFuture;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use secrecy::ExposeSecret;
use serde_json::Value;

use crate::model::{
    Completion, CompletionStream, LanguageModel, ModelError, ModelInfo, ModelRequest,
    SharedCounter, StreamEvent, StructuredCompletion, parse_json_reply,
};
use crate::text::SharedTokenizer;

mod config;
mod error;
mod stream;
mod tokenizer;
mod wire;

pub use config::OpenAiConfig;
pub use secrecy::SecretString;
pub use tokenizer::{ServerCounter, TokenizeDialect};

/// The most time discovery waits for one answer.
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) fn build_client(config: &OpenAiConfig) -> Result<reqwest::Client, ModelError> {
    reqwest::Client::builder()
        .user_agent(concat!("synthkit/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(config.timeout.min(Duration::from_secs(30)))
        .build()
        .map_err(|e| {
            ModelError::Other(format!(
                "cannot build the HTTP client: {}",
                error::describe(&e)
            ))
        })
}

/// An OpenAI-compatible model over HTTP. Implements [`LanguageModel`].
pub struct OpenAiModel {
    config: OpenAiConfig,
    client: reqwest::Client,
    discovered_context_window: Option<usize>,
    tokenizer: Option<SharedTokenizer>,
    counter: Option<ServerCounter>,
}

impl fmt::Debug for OpenAiModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiModel")
            .field("config", &self.config)
            .field("discovered_context_window", &self.discovered_context_window)
            .field("tokenizer", &self.tokenizer)
            .field("counter", &self.counter)
            .finish()
    }
}

impl OpenAiModel {
    /// A model with `config`; makes no request. Fails only if the HTTP client cannot be
    /// built (TLS initialisation).
    pub fn new(config: OpenAiConfig) -> Result<Self, ModelError> {
        Ok(Self {
            client: build_client(&config)?,
            config,
            discovered_context_window: None,
            tokenizer: None,
            counter: None,
        })
    }

    /// A model with `config`, then [`OpenAiModel::discover`] (unless the config sets the
    /// context window) and, when [`OpenAiConfig::server_tokenizer`] is set,
    /// [`OpenAiModel::use_server_counter`]. Neither failing is an error.
    pub async fn connect(config: OpenAiConfig) -> Result<Self, ModelError> {
        let mut model = Self::new(config)?;
        if model.config.context_window.is_none() {
            model.discover().await;
        }
        if model.config.server_tokenizer && !model.use_server_counter().await {
            tracing::warn!(
                root = %model.config.root_url(),
                "the server has no usable /tokenize; counting with the built-in tokenizer"
            );
        }
        Ok(model)
    }

    /// The config.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// The context window the server reported, if discovery found one.
    pub fn discovered_context_window(&self) -> Option<usize> {
        self.discovered_context_window
    }

    /// Asks the server for its context window and remembers it: llama.cpp's
    /// `GET {root}/props` (`default_generation_settings.n_ctx`, the per-slot context, else
    /// a top-level `n_ctx`), else `GET {base}/models` (vLLM's `max_model_len`, llama.cpp's
    /// `meta.n_ctx`, `context_length`). Returns what it found; `None` leaves the config's
    /// window or [`ModelInfo::DEFAULT_CONTEXT_WINDOW`] in force. Never fails.
    pub async fn discover(&mut self) -> Option<usize> {
        let found = self.fetch_context_window().await;
        if found.is_some() {
            self.discovered_context_window = found;
        }
        found
    }

    async fn fetch_context_window(&self) -> Option<usize> {
        let props = self
            .get_json(&format!("{}/props", self.config.root_url()))
            .await;
        if let Some(n) = props.as_ref().and_then(props_context_window) {
            return Some(n);
        }
        let models = self
            .get_json(&format!("{}/models", self.config.base()))
            .await;
        models
            .as_ref()
            .and_then(|m| models_context_window(m, &self.config.model))
    }

    async fn get_json(&self, url: &str) -> Option<Value> {
        let mut req = self
            .client
            .get(url)
            .timeout(self.config.timeout.min(DISCOVERY_TIMEOUT));
        if let Some(auth) = self.auth_header().ok().flatten() {
            req = req.header(AUTHORIZATION, auth);
        }
        let resp = match req.send().await {
            Ok(r) if r.status().is_success() => r,
            Ok(r) => {
                tracing::debug!(status = r.status().as_u16(), "discovery: no answer");
                return None;
            }
            Err(e) => {
                tracing::debug!(error = %self.redact(&error::describe(&e)), "discovery failed");
                return None;
            }
        };
        let bytes = resp.bytes().await.ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Uses `tokenizer` as the model's tokenizer ([`LanguageModel::tokenizer`]).
    pub fn with_tokenizer(mut self, tokenizer: SharedTokenizer) -> Self {
        self.tokenizer = Some(tokenizer);
        self
    }

    /// Probes the server's `/tokenize` and, if it works, uses it as the model's exact
    /// prompt counter ([`LanguageModel::counter`]). Returns whether it does.
    pub async fn use_server_counter(&mut self) -> bool {
        match ServerCounter::probe(&self.config).await {
            Some(c) => {
                self.counter = Some(c);
                true
            }
            None => false,
        }
    }

    /// The server's counter, when [`OpenAiModel::use_server_counter`] found one.
    pub fn server_counter(&self) -> Option<&ServerCounter> {
        self.counter.as_ref()
    }

    fn redact(&self, text: &str) -> String {
        error::redact(text, self.config.api_key.as_ref())
    }

    fn auth_header(&self) -> Result<Option<HeaderValue>, ModelError> {
        let Some(key) = &self.config.api_key else {
            return Ok(None);
        };
        let mut v =
            HeaderValue::from_str(&format!("Bearer {}", key.expose_secret())).map_err(|_| {
                ModelError::Other(
                    "the API key contains characters not allowed in an HTTP header".into(),
                )
            })?;
        v.set_sensitive(true);
        Ok(Some(v))
    }

    fn body(&self, request: &ModelRequest, stream: bool, structured: bool) -> Value {
        let schema = if structured && self.config.json_schema {
            request.schema.as_deref()
        } else {
            None
        };
        wire::request_body(
            request,
            &wire::BodyOptions {
                model: &self.config.model,
                chat: self.config.is_chat,
                temperature: self.config.temperature,
                stream,
                stream_usage: self.config.stream_usage,
                schema,
                extra: &self.config.extra_body,
            },
        )
    }

    /// Sends one request, once: the seam where a retry layer would sit. Returns the
    /// response when its status is a success, else the mapped error.
    async fn send(&self, body: &Value, stream: bool) -> Result<reqwest::Response, ModelError> {
        let timeout = self.config.timeout;
        let key = self.config.api_key.as_ref();
        let payload = serde_json::to_vec(body)
            .map_err(|e| ModelError::Other(format!("cannot encode the request: {e}")))?;
        let mut req = self
            .client
            .post(self.config.endpoint())
            .header(CONTENT_TYPE, "application/json")
            .body(payload);
        if let Some(auth) = self.auth_header()? {
            req = req.header(AUTHORIZATION, auth);
        }
        let response = if stream {
            req = req.header(ACCEPT, "text/event-stream");
            tokio::time::timeout(timeout, req.send())
                .await
                .map_err(|_| ModelError::Timeout(timeout))?
        } else {
            req.timeout(timeout).send().await
        }
        .map_err(|e| error::from_reqwest(&e, timeout, key))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let headers = response.headers().clone();
        let bytes = tokio::time::timeout(timeout, response.bytes())
            .await
            .map_err(|_| ModelError::Timeout(timeout))?
            .map_err(|e| error::from_reqwest(&e, timeout, key))?;
        Err(error::from_status(status.as_u16(), &headers, &bytes, key))
    }

    /// Reads a non-streamed reply.
    async fn read_completion(&self, response: reqwest::Response) -> Result<Completion, ModelError> {
        let timeout = self.config.timeout;
        let key = self.config.api_key.as_ref();
        let bytes = tokio::time::timeout(timeout, response.bytes())
            .await
            .map_err(|_| ModelError::Timeout(timeout))?
            .map_err(|e| error::from_reqwest(&e, timeout, key))?;
        parse_completion(&bytes, key)
    }

    async fn complete_with(
        &self,
        request: &ModelRequest,
        structured: bool,
    ) -> Result<Completion, ModelError> {
        let body = self.body(request, false, structured);
        let response = self.send(&body, false).await?;
        let completion = self.read_completion(response).await?;
        let usage = completion.usage.unwrap_or_default();
        tracing::debug!(
            model = %self.config.model,
            step = request.step.step.as_str(),
            prompt_tokens = usage.prompt_tokens,
            completion_tokens = usage.completion_tokens,
            finish_reason = ?completion.finish_reason,
            "openai call finished"
        );
        Ok(completion)
    }
}

/// Parses a non-streamed reply body.
fn parse_completion(
    bytes: &[u8],
    key: Option<&secrecy::SecretString>,
) -> Result<Completion, ModelError> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| ModelError::Malformed(format!("the reply is not valid UTF-8: {e}")))?;
    let reply: wire::Response = serde_json::from_str(text).map_err(|e| {
        ModelError::Malformed(format!(
            "the reply is not the expected JSON ({e}): {}",
            error::clip(text, key)
        ))
    })?;
    if let Some(err) = reply.error.as_ref().filter(|e| !e.is_null()) {
        return Err(error::from_error_object(err, key));
    }
    let choice = reply
        .choices
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|c| c.is_first())
        .ok_or_else(|| {
            ModelError::Malformed(format!(
                "the reply has no choices: {}",
                error::clip(text, key)
            ))
        })?;
    Ok(Completion {
        text: choice.content().unwrap_or_default().to_string(),
        usage: reply.usage.map(Into::into),
        finish_reason: choice.finish_reason.as_deref().map(wire::finish_reason),
    })
}

/// The context window in a llama.cpp `/props` answer.
fn props_context_window(props: &Value) -> Option<usize> {
    let positive = |v: Option<&Value>| {
        v.and_then(Value::as_u64)
            .filter(|&n| n > 0)
            .and_then(|n| usize::try_from(n).ok())
    };
    positive(
        props
            .get("default_generation_settings")
            .and_then(|s| s.get("n_ctx")),
    )
    .or_else(|| positive(props.get("n_ctx")))
}

/// The context window in a `/models` listing: the entry named `model` (else the first
/// one that says), from `max_model_len` (vLLM), `meta.n_ctx` (llama.cpp),
/// `context_length` or `max_context_length` (others).
fn models_context_window(models: &Value, model: &str) -> Option<usize> {
    let data = models.get("data")?.as_array()?;
    let window = |entry: &Value| {
        ["max_model_len", "context_length", "max_context_length"]
            .iter()
            .find_map(|k| entry.get(*k).and_then(Value::as_u64))
            .or_else(|| {
                entry
                    .get("meta")
                    .and_then(|m| m.get("n_ctx"))
                    .and_then(Value::as_u64)
            })
            .filter(|&n| n > 0)
            .and_then(|n| usize::try_from(n).ok())
    };
    data.iter()
        .find(|e| e.get("id").and_then(Value::as_str) == Some(model))
        .and_then(window)
        .or_else(|| data.iter().find_map(window))
}

impl LanguageModel for OpenAiModel {
    fn info(&self) -> ModelInfo {
        ModelInfo::new(self.config.model.clone())
            .with_context_window(
                self.config
                    .context_window
                    .or(self.discovered_context_window)
                    .unwrap_or(ModelInfo::DEFAULT_CONTEXT_WINDOW),
            )
            .with_num_output(self.config.num_output)
            .with_chat(self.config.is_chat)
            .with_system_prompt(self.config.system_prompt.clone())
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<Completion, ModelError>> {
        Box::pin(self.complete_with(request, false))
    }

    /// Streams with SSE: text deltas, then exactly one [`StreamEvent::Done`] with the usage
    /// the server reported. A stream that ends before `[DONE]` (or a finish reason) yields
    /// [`ModelError::Incomplete`]; a stall longer than the timeout yields
    /// [`ModelError::Timeout`]. A server that ignores `stream: true` and answers JSON is
    /// handled too.
    fn stream<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<CompletionStream, ModelError>> {
        Box::pin(async move {
            let body = self.body(request, true, false);
            let response = self.send(&body, true).await?;
            let is_json = response
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("application/json"));
            if is_json {
                let c = self.read_completion(response).await?;
                let events = vec![
                    Ok(StreamEvent::Delta(c.text)),
                    Ok(StreamEvent::Done {
                        usage: c.usage,
                        finish_reason: c.finish_reason,
                    }),
                ];
                let s: CompletionStream = Box::pin(futures::stream::iter(events));
                return Ok(s);
            }
            Ok(stream::sse_stream(
                response,
                self.config.timeout,
                self.config.api_key.clone(),
            ))
        })
    }

    /// Sends the request's schema as `response_format` (strict `json_schema`) when
    /// [`OpenAiConfig::json_schema`] is set, and parses the reply tolerantly (the whole
    /// text, else the first `{` to the last `}`).
    fn structured<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<StructuredCompletion, ModelError>> {
        Box::pin(async move {
            let c = self.complete_with(request, true).await?;
            let value = parse_json_reply(&c.text)?;
            Ok(StructuredCompletion {
                value,
                text: c.text,
                usage: c.usage,
            })
        })
    }

    fn tokenizer(&self) -> Option<SharedTokenizer> {
        self.tokenizer.clone()
    }

    fn counter(&self) -> Option<SharedCounter> {
        self.counter
            .clone()
            .map(|c| std::sync::Arc::new(c) as SharedCounter)
    }
}

#[cfg(test)]
mod tests;
