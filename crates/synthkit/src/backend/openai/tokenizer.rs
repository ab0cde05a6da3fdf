//! [`ServerCounter`]: the model's exact prompt counter, through llama.cpp's or vLLM's
//! `POST /tokenize`.
//!
//! It is asynchronous: packing awaits its counts (see [`PromptCounter`]); nothing blocks a
//! thread. Texts are counted in batches (the distinct uncounted texts of a call's prompts
//! are sent concurrently, a few at a time), and counts are cached by text (bounded), since
//! the same template parts are counted again and again. A count that fails is an error,
//! never a silent switch to another tokenizer.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::AUTHORIZATION;
use serde::Deserialize;
use serde_json::{Value, json};

use super::OpenAiConfig;
use crate::backend::http::count::input_tokens_reply;
use crate::backend::http::count_cache::CountCache;
use crate::backend::http::{Link, Transport, key_headers};
use crate::model::{ModelError, ModelFuture, PromptCounter};
use crate::prompt::RenderedPrompt;

/// Which `/tokenize` dialect a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenizeDialect {
    /// llama.cpp: `{"content": text}` → `{"tokens": [...]}`; `/detokenize` answers
    /// `{"content": text}`.
    LlamaCpp,
    /// vLLM: `{"model": m, "prompt": text}` → `{"count": n, "tokens": [...]}`;
    /// `/detokenize` answers `{"prompt": text}`.
    Vllm,
}

impl TokenizeDialect {
    fn name(self) -> &'static str {
        match self {
            TokenizeDialect::LlamaCpp => "llama.cpp:/tokenize",
            TokenizeDialect::Vllm => "vllm:/tokenize",
        }
    }
}

/// How long one tokenize call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Where and how to reach the server.
struct Endpoint {
    link: Link,
    /// The config's transport, its timeout capped at [`CALL_TIMEOUT`].
    transport: Transport,
    root: String,
    model: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct TokenizeReply {
    tokens: Option<Vec<u32>>,
    count: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct DetokenizeReply {
    content: Option<String>,
    prompt: Option<String>,
}

impl Endpoint {
    /// Posts `body` to `path` and reads the reply. A count changes nothing on the server,
    /// so a connection failure is tried once more on a new connection: a kept-alive
    /// connection the server closed as it was being reused (llama.cpp closes idle ones
    /// after 5 s) fails a request the server never read.
    async fn post(&self, path: &str, body: &Value) -> Result<Vec<u8>, ModelError> {
        match self.post_once(path, body).await {
            Err(ModelError::Connection(first)) => {
                tracing::debug!(path, error = %first, "a count's connection failed; trying once more");
                self.post_once(path, body).await
            }
            other => other,
        }
    }

    async fn post_once(&self, path: &str, body: &Value) -> Result<Vec<u8>, ModelError> {
        let url = self.transport.root_join(&format!("/{path}"));
        let key = self.transport.api_key.as_ref();
        let headers = key_headers(AUTHORIZATION, "Bearer ", key)?;
        let post = self.link.post(&self.transport, &url, headers);
        post.fetch(body, &self.transport.clock()).await
    }

    /// The tokens of `text` and their count, as plain text (no special tokens added or
    /// parsed).
    async fn tokenize(
        &self,
        dialect: TokenizeDialect,
        text: &str,
    ) -> Result<(Vec<u32>, usize), ModelError> {
        let body = match dialect {
            TokenizeDialect::LlamaCpp => json!({"content": text, "add_special": false}),
            TokenizeDialect::Vllm => {
                json!({"model": self.model, "prompt": text, "add_special_tokens": false})
            }
        };
        self.tokenize_body(&body).await
    }

    async fn tokenize_body(&self, body: &Value) -> Result<(Vec<u32>, usize), ModelError> {
        let bytes = self.post("tokenize", body).await?;
        let reply: TokenizeReply = serde_json::from_slice(&bytes).map_err(|e| {
            ModelError::Malformed(format!("/tokenize answered unparsable JSON: {e}"))
        })?;
        match (reply.tokens, reply.count) {
            (Some(tokens), count) => {
                let n = count.unwrap_or(tokens.len());
                Ok((tokens, n))
            }
            (None, Some(n)) => Ok((Vec::new(), n)),
            (None, None) => Err(ModelError::Malformed(
                "/tokenize answered without tokens".to_string(),
            )),
        }
    }

    /// The count of a whole prompt exactly as the server charges it: a completion prompt
    /// tokenized with the model's special tokens (BOS) and special-token text parsed; a
    /// chat prompt rendered with the model's chat template (llama.cpp `/apply-template`,
    /// vLLM `/tokenize` with `messages`) including the reply's opening.
    async fn count_whole(
        &self,
        dialect: TokenizeDialect,
        prompt: &RenderedPrompt,
    ) -> Result<usize, ModelError> {
        let body = match (dialect, prompt) {
            (TokenizeDialect::LlamaCpp, RenderedPrompt::Text(t)) => {
                json!({"content": t, "add_special": true, "parse_special": true})
            }
            (TokenizeDialect::LlamaCpp, RenderedPrompt::Chat(messages)) if prompt.has_images() => {
                // `/tokenize` and `/apply-template` cannot count images; the chat
                // endpoint's own counter counts the request as it will be charged.
                return self.input_tokens(messages).await;
            }
            (TokenizeDialect::LlamaCpp, RenderedPrompt::Chat(messages)) => {
                let bytes = self
                    .post(
                        "apply-template",
                        &json!({ "messages": wire_messages(messages) }),
                    )
                    .await?;
                let reply: Value = serde_json::from_slice(&bytes).map_err(|e| {
                    ModelError::Malformed(format!("/apply-template answered unparsable JSON: {e}"))
                })?;
                let Some(templated) = reply.get("prompt").and_then(Value::as_str) else {
                    return Err(ModelError::Malformed(
                        "/apply-template answered without a prompt".into(),
                    ));
                };
                json!({"content": templated, "add_special": true, "parse_special": true})
            }
            (TokenizeDialect::Vllm, RenderedPrompt::Text(t)) => {
                json!({"model": self.model, "prompt": t, "add_special_tokens": true})
            }
            (TokenizeDialect::Vllm, RenderedPrompt::Chat(messages)) => json!({
                "model": self.model,
                "messages": wire_messages(messages),
                "add_generation_prompt": true,
            }),
        };
        Ok(self.tokenize_body(&body).await?.1)
    }

    /// The count of a chat request with images: llama.cpp's
    /// `POST /v1/chat/completions/input_tokens` (`{"input_tokens": n}`).
    async fn input_tokens(
        &self,
        messages: &[crate::prompt::ChatMessage],
    ) -> Result<usize, ModelError> {
        let bytes = self
            .post(
                "v1/chat/completions/input_tokens",
                &json!({"model": self.model, "messages": wire_messages(messages)}),
            )
            .await?;
        input_tokens_reply(&bytes, "/v1/chat/completions/input_tokens")
    }

    async fn detokenize(&self, tokens: &[u32]) -> Result<String, ModelError> {
        let bytes = self
            .post(
                "detokenize",
                &json!({"model": self.model, "tokens": tokens}),
            )
            .await?;
        let reply: DetokenizeReply = serde_json::from_slice(&bytes).map_err(|e| {
            ModelError::Malformed(format!("/detokenize answered unparsable JSON: {e}"))
        })?;
        reply
            .content
            .or(reply.prompt)
            .ok_or_else(|| ModelError::Malformed("/detokenize answered without text".to_string()))
    }

    /// Which dialect works, if any: a non-empty token list for a non-empty text.
    async fn detect(&self) -> Option<TokenizeDialect> {
        for dialect in [TokenizeDialect::LlamaCpp, TokenizeDialect::Vllm] {
            match self.tokenize(dialect, "hello world").await {
                Ok((_, n)) if n > 0 => return Some(dialect),
                Ok(_) => {}
                Err(e) => tracing::debug!(?dialect, error = %e, "no /tokenize in this dialect"),
            }
        }
        None
    }
}

struct Inner {
    dialect: TokenizeDialect,
    name: String,
    endpoint: Endpoint,
    cache: CountCache,
}

/// The model's exact prompt counter: counts with the server's vocabulary (llama.cpp or
/// vLLM `POST /tokenize`).
///
/// Build it with [`ServerCounter::probe`], which checks that the endpoint answers. Cheap
/// to clone. Prompts are counted whole, exactly as the server will charge them: a
/// completion prompt with the model's special tokens, a chat prompt rendered with the
/// model's own chat template (llama.cpp's `/apply-template`, vLLM's `/tokenize` with
/// `messages`), so the template's hidden tokens (a default system prompt, role markers,
/// the reply's opening) are in the count.
#[derive(Clone)]
pub struct ServerCounter {
    inner: Arc<Inner>,
}

impl fmt::Debug for ServerCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerCounter")
            .field("dialect", &self.inner.dialect)
            .field(
                "root",
                &crate::secret::redact_url(&self.inner.endpoint.root),
            )
            .field("cached", &self.cached())
            .finish_non_exhaustive()
    }
}

impl ServerCounter {
    /// Asks the server at `config`'s base URL (without its trailing `/v1`) whether
    /// `POST /tokenize` works, in llama.cpp's dialect and then vLLM's; `None` when neither
    /// does (OpenAI, Ollama).
    pub async fn probe(config: &OpenAiConfig) -> Option<Self> {
        let endpoint = Endpoint {
            link: Link::new(&config.transport).ok()?,
            transport: config.transport.capped(CALL_TIMEOUT),
            root: config.root_url().to_string(),
            model: config.model.clone(),
        };
        let dialect = endpoint.detect().await?;
        if config.api.is_chat && dialect == TokenizeDialect::LlamaCpp {
            // Chat prompts are counted through the server's chat template: without
            // /apply-template (llama.cpp before mid-2024) the counter could not be exact.
            let probe = RenderedPrompt::Chat(vec![crate::prompt::ChatMessage::new(
                crate::prompt::Role::User,
                "hello",
            )]);
            if let Err(e) = endpoint.count_whole(dialect, &probe).await {
                tracing::warn!(
                    error = %e,
                    "the server has /tokenize but no /apply-template: chat prompts cannot be counted exactly, so the built-in tokenizer counts them"
                );
                return None;
            }
        }
        Some(Self {
            inner: Arc::new(Inner {
                dialect,
                name: dialect.name().to_string(),
                endpoint,
                cache: CountCache::default(),
            }),
        })
    }

    /// The dialect the server speaks.
    pub fn dialect(&self) -> TokenizeDialect {
        self.inner.dialect
    }

    /// How many texts (and prompts) have their count cached.
    pub fn cached(&self) -> usize {
        self.inner.cache.len()
    }

    /// The server's count of one text.
    pub async fn count(&self, text: &str) -> Result<usize, ModelError> {
        let counts = self.count_texts(&[text]).await?;
        Ok(counts.first().copied().unwrap_or_default())
    }

    /// The server's counts of `texts`, in order: cached ones from the cache, the rest
    /// asked for concurrently (a few at a time); an empty text counts 0 unasked.
    pub async fn count_texts(&self, texts: &[&str]) -> Result<Vec<usize>, ModelError> {
        let keys: Vec<String> = texts.iter().map(|t| (*t).to_string()).collect();
        let inner = &self.inner;
        inner
            .cache
            .counts(&keys, |i| {
                let text = texts.get(i).copied().unwrap_or_default();
                async move {
                    if text.is_empty() {
                        return Ok(0);
                    }
                    Ok(inner.endpoint.tokenize(inner.dialect, text).await?.1)
                }
            })
            .await
    }

    /// The server's tokens of `text`.
    pub async fn encode(&self, text: &str) -> Result<Vec<u32>, ModelError> {
        if text.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self
            .inner
            .endpoint
            .tokenize(self.inner.dialect, text)
            .await?
            .0)
    }

    /// The text of `tokens`, through the server's `/detokenize`.
    pub async fn decode(&self, tokens: &[u32]) -> Result<String, ModelError> {
        if tokens.is_empty() {
            return Ok(String::new());
        }
        self.inner.endpoint.detokenize(tokens).await
    }
}

impl PromptCounter for ServerCounter {
    fn name(&self) -> &str {
        &self.inner.name
    }

    /// Counts each prompt whole, as the server will charge it (see [`ServerCounter`]);
    /// prompts not in the cache are counted concurrently, a few at a time.
    fn count_prompts<'a>(&'a self, prompts: &'a [RenderedPrompt]) -> ModelFuture<'a, Vec<usize>> {
        Box::pin(async move {
            let keys: Vec<String> = prompts.iter().map(cache_key).collect();
            let inner = &self.inner;
            inner
                .cache
                .counts(&keys, |i| async move {
                    match prompts.get(i) {
                        Some(p) => inner.endpoint.count_whole(inner.dialect, p).await,
                        None => Ok(0),
                    }
                })
                .await
        })
    }
}

/// The cache key of a whole prompt (kept apart from plain-text keys).
fn cache_key(prompt: &RenderedPrompt) -> String {
    match prompt.without_images() {
        RenderedPrompt::Text(t) => format!("prompt\u{0}{t}"),
        RenderedPrompt::Chat(messages) => format!(
            "chat\u{0}{}{}",
            Value::Array(wire_messages(&messages)),
            prompt.image_key()
        ),
    }
}

/// Chat messages as the OpenAI wire format has them.
fn wire_messages(messages: &[crate::prompt::ChatMessage]) -> Vec<Value> {
    messages.iter().map(super::wire::chat_message).collect()
}
