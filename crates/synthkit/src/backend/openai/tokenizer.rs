//! [`ServerCounter`]: the model's exact prompt counter, through llama.cpp's or vLLM's
//! `POST /tokenize`.
//!
//! It is asynchronous: packing awaits its counts (see [`PromptCounter`]); nothing blocks a
//! thread. Texts are counted in batches (the distinct uncounted texts of a call's prompts
//! are sent concurrently, a few at a time), and counts are cached by text (bounded), since
//! the same template parts are counted again and again. A count that fails is an error,
//! never a silent switch to another tokenizer.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::{Value, json};

use super::OpenAiConfig;
use super::body::{MAX_ERROR_BODY_BYTES, read_capped, read_prefix};
use super::error::{describe, redact};
use crate::model::{ModelError, PromptCounter, TimeoutKind};
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

/// The most texts kept in the count cache before it is cleared.
const CACHE_ENTRIES: usize = 16_384;
/// The most text bytes kept in the count cache before it is cleared.
const CACHE_BYTES: usize = 32 << 20;
/// How long one tokenize call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Tokenize requests in flight at once for one batch.
const BATCH_CONCURRENCY: usize = 8;

/// Where and how to reach the server.
struct Endpoint {
    client: reqwest::Client,
    root: String,
    model: String,
    key: Option<SecretString>,
    timeout: Duration,
    connect_timeout: Duration,
    /// The most bytes read of one answer.
    max_reply_bytes: usize,
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
    async fn post(&self, path: &str, body: &Value) -> Result<Vec<u8>, ModelError> {
        let mut req = self
            .client
            .post(format!("{}/{path}", self.root))
            .header(CONTENT_TYPE, "application/json")
            .timeout(self.timeout)
            .body(body.to_string());
        if let Some(key) = &self.key {
            let mut v = HeaderValue::from_str(&format!("Bearer {}", key.expose_secret())).map_err(
                |_| ModelError::Other("the API key is not a valid header value".to_string()),
            )?;
            v.set_sensitive(true);
            req = req.header(AUTHORIZATION, v);
        }
        let start = tokio::time::Instant::now();
        let transport = |e: &reqwest::Error| {
            if e.is_timeout() {
                let (kind, limit) = if e.is_connect() {
                    (TimeoutKind::Connect, self.connect_timeout)
                } else {
                    (TimeoutKind::Request, self.timeout)
                };
                ModelError::Timeout {
                    kind,
                    waited: start.elapsed(),
                    limit,
                }
            } else {
                ModelError::Connection(redact(&describe(e), self.key.as_ref()))
            }
        };
        let resp = req.send().await.map_err(|e| transport(&e))?;
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = if status.is_success() {
            read_capped(resp, self.max_reply_bytes)
                .await
                .map_err(|e| e.into_model_error(transport))?
        } else {
            let limit = self.max_reply_bytes.min(MAX_ERROR_BODY_BYTES);
            read_prefix(resp, limit).await.map_err(|e| transport(&e))?
        };
        if !status.is_success() {
            return Err(super::error::from_status(
                status.as_u16(),
                &headers,
                &bytes,
                self.key.as_ref(),
            ));
        }
        Ok(bytes.to_vec())
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

#[derive(Default)]
struct CountCache {
    counts: HashMap<String, usize>,
    bytes: usize,
}

impl CountCache {
    fn insert(&mut self, text: &str, n: usize) {
        if self.counts.len() >= CACHE_ENTRIES || self.bytes + text.len() > CACHE_BYTES {
            self.counts.clear();
            self.bytes = 0;
        }
        if text.len() <= CACHE_BYTES && self.counts.insert(text.to_string(), n).is_none() {
            self.bytes += text.len();
        }
    }
}

struct Inner {
    dialect: TokenizeDialect,
    name: String,
    endpoint: Endpoint,
    cache: Mutex<CountCache>,
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
            client: http_client(config)?,
            root: config.root_url().to_string(),
            model: config.model.clone(),
            key: config.api_key.clone(),
            timeout: config.timeout.min(CALL_TIMEOUT),
            connect_timeout: config.connect_timeout,
            max_reply_bytes: config.max_reply_bytes,
        };
        let dialect = endpoint.detect().await?;
        if config.is_chat && dialect == TokenizeDialect::LlamaCpp {
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
                cache: Mutex::new(CountCache::default()),
            }),
        })
    }

    /// The dialect the server speaks.
    pub fn dialect(&self) -> TokenizeDialect {
        self.inner.dialect
    }

    /// How many texts have their count cached.
    pub fn cached(&self) -> usize {
        self.lock_cache().counts.len()
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, CountCache> {
        self.inner
            .cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The server's count of one text.
    pub async fn count(&self, text: &str) -> Result<usize, ModelError> {
        let counts = self.count_texts(&[text]).await?;
        Ok(counts.first().copied().unwrap_or_default())
    }

    /// The server's counts of `texts`, in order: cached ones from the cache, the rest
    /// asked for concurrently (a few at a time).
    pub async fn count_texts(&self, texts: &[&str]) -> Result<Vec<usize>, ModelError> {
        // Counts known now, and the texts to ask for.
        let mut found: HashMap<String, usize> = HashMap::new();
        let mut missing: Vec<String> = Vec::new();
        {
            let cache = self.lock_cache();
            for t in texts.iter().filter(|t| !t.is_empty()) {
                match cache.counts.get(*t) {
                    Some(&n) => {
                        found.insert((*t).to_string(), n);
                    }
                    None => missing.push((*t).to_string()),
                }
            }
        }
        missing.sort_unstable();
        missing.dedup();
        let mut fetched = futures::stream::iter(missing.into_iter().map(|t| {
            let inner = Arc::clone(&self.inner);
            async move {
                let n = inner.endpoint.tokenize(inner.dialect, &t).await?.1;
                Ok::<_, ModelError>((t, n))
            }
        }))
        .buffer_unordered(BATCH_CONCURRENCY);
        while let Some(result) = fetched.next().await {
            let (t, n) = result?;
            self.lock_cache().insert(&t, n);
            found.insert(t, n);
        }
        Ok(texts
            .iter()
            .map(|t| found.get(*t).copied().unwrap_or_default())
            .collect())
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
    fn count_prompts<'a>(
        &'a self,
        prompts: &'a [RenderedPrompt],
    ) -> BoxFuture<'a, Result<Vec<usize>, ModelError>> {
        Box::pin(async move {
            let keys: Vec<String> = prompts.iter().map(cache_key).collect();
            let mut known: HashMap<&str, usize> = HashMap::new();
            {
                let cache = self.lock_cache();
                for k in &keys {
                    if let Some(&n) = cache.counts.get(k) {
                        known.insert(k, n);
                    }
                }
            }
            let missing: Vec<(usize, RenderedPrompt)> = prompts
                .iter()
                .enumerate()
                .filter(|(i, _)| {
                    keys.get(*i)
                        .is_some_and(|k| !known.contains_key(k.as_str()))
                })
                .map(|(i, p)| (i, p.clone()))
                .collect();
            let mut fetched = futures::stream::iter(missing.into_iter().map(|(i, p)| {
                let inner = Arc::clone(&self.inner);
                async move {
                    let n = inner.endpoint.count_whole(inner.dialect, &p).await?;
                    Ok::<_, ModelError>((i, n))
                }
            }))
            .buffer_unordered(BATCH_CONCURRENCY);
            let mut counts: Vec<Option<usize>> = keys
                .iter()
                .map(|k| known.get(k.as_str()).copied())
                .collect();
            while let Some(result) = fetched.next().await {
                let (i, n) = result?;
                if let Some(k) = keys.get(i) {
                    self.lock_cache().insert(k, n);
                }
                if let Some(slot) = counts.get_mut(i) {
                    *slot = Some(n);
                }
            }
            Ok(counts.into_iter().map(Option::unwrap_or_default).collect())
        })
    }
}

/// The cache key of a whole prompt (kept apart from plain-text keys).
fn cache_key(prompt: &RenderedPrompt) -> String {
    match prompt {
        RenderedPrompt::Text(t) => format!("prompt\u{0}{t}"),
        RenderedPrompt::Chat(messages) => {
            format!("chat\u{0}{}", Value::Array(wire_messages(messages)))
        }
    }
}

/// Chat messages as the OpenAI wire format has them.
fn wire_messages(messages: &[crate::prompt::ChatMessage]) -> Vec<Value> {
    messages
        .iter()
        .map(|m| json!({"role": m.role.as_str(), "content": m.content}))
        .collect()
}

/// A client for side calls (discovery, tokenize); `None` if TLS cannot initialise.
pub(crate) fn http_client(config: &OpenAiConfig) -> Option<reqwest::Client> {
    super::build_client(config).ok()
}
