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
use super::error::{describe, redact};
use crate::model::{ModelError, PromptCounter};
use crate::prompt::RenderedPrompt;
use crate::prompt::budget::CHAT_MESSAGE_OVERHEAD;

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
        let transport = |e: reqwest::Error| {
            if e.is_timeout() {
                ModelError::Timeout(self.timeout)
            } else {
                ModelError::Connection(redact(&describe(&e), self.key.as_ref()))
            }
        };
        let resp = req.send().await.map_err(transport)?;
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = resp.bytes().await.map_err(transport)?;
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

    /// The tokens of `text` and their count.
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
        let bytes = self.post("tokenize", &body).await?;
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
/// to clone. A chat prompt is counted as its messages' roles and contents plus
/// [`CHAT_MESSAGE_OVERHEAD`] tokens per message.
#[derive(Clone)]
pub struct ServerCounter {
    inner: Arc<Inner>,
}

impl fmt::Debug for ServerCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerCounter")
            .field("dialect", &self.inner.dialect)
            .field("root", &self.inner.endpoint.root)
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
        };
        let dialect = endpoint.detect().await?;
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

    fn count_prompts<'a>(
        &'a self,
        prompts: &'a [RenderedPrompt],
    ) -> BoxFuture<'a, Result<Vec<usize>, ModelError>> {
        Box::pin(async move {
            // Every text of every prompt in one batch.
            let mut texts: Vec<&str> = Vec::new();
            for p in prompts {
                match p {
                    RenderedPrompt::Text(t) => texts.push(t),
                    RenderedPrompt::Chat(messages) => {
                        for m in messages {
                            texts.push(m.role.as_str());
                            texts.push(&m.content);
                        }
                    }
                }
            }
            let counts = self.count_texts(&texts).await?;
            let mut counts = counts.into_iter();
            let mut out = Vec::with_capacity(prompts.len());
            for p in prompts {
                let n = match p {
                    RenderedPrompt::Text(_) => counts.next().unwrap_or_default(),
                    RenderedPrompt::Chat(messages) => messages
                        .iter()
                        .map(|_| {
                            counts.next().unwrap_or_default()
                                + counts.next().unwrap_or_default()
                                + CHAT_MESSAGE_OVERHEAD
                        })
                        .sum(),
                };
                out.push(n);
            }
            Ok(out)
        })
    }
}

/// A client for side calls (discovery, tokenize); `None` if TLS cannot initialise.
pub(crate) fn http_client(config: &OpenAiConfig) -> Option<reqwest::Client> {
    super::build_client(config).ok()
}
