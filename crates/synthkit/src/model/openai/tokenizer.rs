//! A [`Tokenizer`] that counts with the server's own vocabulary through llama.cpp's or
//! vLLM's `POST /tokenize`.
//!
//! The [`Tokenizer`] trait is synchronous and is called from inside async tasks, so the
//! HTTP calls run on a dedicated thread that owns a small current-thread tokio runtime and
//! its own HTTP client; callers hand it jobs over a channel and wait for the reply (never
//! `reqwest::blocking` inside a runtime). Counts are cached by text (bounded), since the
//! same texts are counted again and again while packing. A count that fails at run time
//! falls back to the built-in `cl100k_base` count with a warning; it never panics.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::{Value, json};

use super::OpenAiConfig;
use super::error::{describe, redact};
use crate::text::{BpeTokenizer, Tokenizer};

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
    async fn post(&self, path: &str, body: &Value) -> Result<Vec<u8>, String> {
        let mut req = self
            .client
            .post(format!("{}/{path}", self.root))
            .header(CONTENT_TYPE, "application/json")
            .timeout(self.timeout)
            .body(body.to_string());
        if let Some(key) = &self.key {
            let mut v = HeaderValue::from_str(&format!("Bearer {}", key.expose_secret()))
                .map_err(|_| "the API key is not a valid header value".to_string())?;
            v.set_sensitive(true);
            req = req.header(AUTHORIZATION, v);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| redact(&describe(&e), self.key.as_ref()))?;
        let status = resp.status();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| redact(&describe(&e), self.key.as_ref()))?;
        if !status.is_success() {
            return Err(format!("/{path} answered HTTP {}", status.as_u16()));
        }
        Ok(bytes.to_vec())
    }

    /// The tokens of `text` and their count.
    async fn tokenize(
        &self,
        dialect: TokenizeDialect,
        text: &str,
    ) -> Result<(Vec<u32>, usize), String> {
        let body = match dialect {
            TokenizeDialect::LlamaCpp => json!({"content": text, "add_special": false}),
            TokenizeDialect::Vllm => {
                json!({"model": self.model, "prompt": text, "add_special_tokens": false})
            }
        };
        let bytes = self.post("tokenize", &body).await?;
        let reply: TokenizeReply = serde_json::from_slice(&bytes)
            .map_err(|e| format!("/tokenize answered unparsable JSON: {e}"))?;
        match (reply.tokens, reply.count) {
            (Some(tokens), count) => {
                let n = count.unwrap_or(tokens.len());
                Ok((tokens, n))
            }
            (None, Some(n)) => Ok((Vec::new(), n)),
            (None, None) => Err("/tokenize answered without tokens".to_string()),
        }
    }

    async fn detokenize(&self, tokens: &[u32]) -> Result<String, String> {
        let bytes = self
            .post(
                "detokenize",
                &json!({"model": self.model, "tokens": tokens}),
            )
            .await?;
        let reply: DetokenizeReply = serde_json::from_slice(&bytes)
            .map_err(|e| format!("/detokenize answered unparsable JSON: {e}"))?;
        reply
            .content
            .or(reply.prompt)
            .ok_or_else(|| "/detokenize answered without text".to_string())
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

enum Op {
    Tokenize(String),
    Detokenize(Vec<u32>),
}

enum Reply {
    Tokens(Vec<u32>, usize),
    Text(String),
}

struct Job {
    op: Op,
    reply: std::sync::mpsc::SyncSender<Result<Reply, String>>,
}

#[derive(Default)]
struct CountCache {
    counts: HashMap<String, usize>,
    bytes: usize,
}

struct Inner {
    dialect: TokenizeDialect,
    root: String,
    jobs: tokio::sync::mpsc::UnboundedSender<Job>,
    cache: Mutex<CountCache>,
    fallback: BpeTokenizer,
    failures: AtomicU64,
    wait: Duration,
}

/// A tokenizer that counts with the server's vocabulary (llama.cpp or vLLM `/tokenize`).
///
/// Build it with [`ServerTokenizer::probe`] (or [`super::probe_tokenizer`]), which checks
/// that the endpoint answers. Cheap to clone; the worker thread stops when the last clone
/// is dropped.
///
/// An uncached count blocks the calling thread for one HTTP round trip (about a millisecond
/// on loopback); the request itself runs on the tokenizer's own thread and runtime, so this
/// works from inside any tokio runtime. A count that fails (server gone, timeout after the
/// config's timeout, at most 30 s) returns the `cl100k_base` count and is not cached;
/// [`ServerTokenizer::failures`] tells how often that happened.
#[derive(Clone)]
pub struct ServerTokenizer {
    inner: Arc<Inner>,
}

impl fmt::Debug for ServerTokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerTokenizer")
            .field("dialect", &self.inner.dialect)
            .field("root", &self.inner.root)
            .field("cached", &self.cached())
            .finish_non_exhaustive()
    }
}

impl ServerTokenizer {
    /// Asks the server at `config`'s base URL (without its trailing `/v1`) whether
    /// `POST /tokenize` works, in llama.cpp's dialect and then vLLM's; `None` when neither
    /// does (OpenAI, Ollama) or the worker thread cannot start.
    pub async fn probe(config: &OpenAiConfig) -> Option<Self> {
        let endpoint = Endpoint {
            client: http_client(config)?,
            root: config.root_url().to_string(),
            model: config.model.clone(),
            key: config.api_key.clone(),
            timeout: config.timeout.min(CALL_TIMEOUT),
        };
        let dialect = endpoint.detect().await?;
        // The worker gets its own client: connections belong to the runtime that made them.
        let endpoint = Endpoint {
            client: http_client(config)?,
            ..endpoint
        };
        match Self::start(endpoint, dialect) {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!(error = %e, "could not start the server tokenizer thread");
                None
            }
        }
    }

    fn start(endpoint: Endpoint, dialect: TokenizeDialect) -> Result<Self, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let (jobs, mut rx) = tokio::sync::mpsc::unbounded_channel::<Job>();
        let root = endpoint.root.clone();
        let wait = endpoint.timeout + Duration::from_secs(1);
        let endpoint = Arc::new(endpoint);
        std::thread::Builder::new()
            .name("synthkit-tokenize".into())
            .spawn(move || {
                runtime.block_on(async move {
                    while let Some(job) = rx.recv().await {
                        let endpoint = Arc::clone(&endpoint);
                        tokio::spawn(async move {
                            let result = match job.op {
                                Op::Tokenize(text) => endpoint
                                    .tokenize(dialect, &text)
                                    .await
                                    .map(|(t, n)| Reply::Tokens(t, n)),
                                Op::Detokenize(tokens) => {
                                    endpoint.detokenize(&tokens).await.map(Reply::Text)
                                }
                            };
                            // The caller may have given up waiting.
                            let _ = job.reply.try_send(result);
                        });
                    }
                });
            })
            .map_err(|e| e.to_string())?;
        Ok(Self {
            inner: Arc::new(Inner {
                dialect,
                root,
                jobs,
                cache: Mutex::new(CountCache::default()),
                fallback: BpeTokenizer::cl100k_base(),
                failures: AtomicU64::new(0),
                wait,
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

    /// How many server calls failed and fell back to `cl100k_base`.
    pub fn failures(&self) -> u64 {
        self.inner.failures.load(Ordering::Relaxed)
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, CountCache> {
        self.inner
            .cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn call(&self, op: Op) -> Result<Reply, String> {
        let (reply, rx) = std::sync::mpsc::sync_channel(1);
        self.inner
            .jobs
            .send(Job { op, reply })
            .map_err(|_| "the tokenizer thread has stopped".to_string())?;
        rx.recv_timeout(self.inner.wait)
            .map_err(|e| format!("no answer from /tokenize: {e}"))?
    }

    fn failed(&self, what: &str, error: &str) {
        let n = self.inner.failures.fetch_add(1, Ordering::Relaxed) + 1;
        // Warn on the first failure and then ever more rarely (1, 2, 4, 8, ...).
        if n.is_power_of_two() {
            tracing::warn!(
                root = %self.inner.root,
                failures = n,
                error = %error,
                "server {what} failed; falling back to cl100k_base"
            );
        }
    }
}

impl Tokenizer for ServerTokenizer {
    fn name(&self) -> &str {
        self.inner.dialect.name()
    }

    fn count(&self, text: &str) -> usize {
        if text.is_empty() {
            return 0;
        }
        if let Some(&n) = self.lock_cache().counts.get(text) {
            return n;
        }
        match self.call(Op::Tokenize(text.to_string())) {
            Ok(Reply::Tokens(_, n)) => {
                let mut cache = self.lock_cache();
                if cache.counts.len() >= CACHE_ENTRIES || cache.bytes + text.len() > CACHE_BYTES {
                    cache.counts.clear();
                    cache.bytes = 0;
                }
                if text.len() <= CACHE_BYTES && cache.counts.insert(text.to_string(), n).is_none() {
                    cache.bytes += text.len();
                }
                n
            }
            Ok(Reply::Text(_)) => self.inner.fallback.count(text),
            Err(e) => {
                self.failed("token count", &e);
                self.inner.fallback.count(text)
            }
        }
    }

    fn encode(&self, text: &str) -> Vec<u32> {
        if text.is_empty() {
            return Vec::new();
        }
        match self.call(Op::Tokenize(text.to_string())) {
            Ok(Reply::Tokens(tokens, _)) => tokens,
            Ok(Reply::Text(_)) => self.inner.fallback.encode(text),
            Err(e) => {
                self.failed("tokenize", &e);
                self.inner.fallback.encode(text)
            }
        }
    }

    fn decode(&self, tokens: &[u32]) -> Option<String> {
        if tokens.is_empty() {
            return Some(String::new());
        }
        match self.call(Op::Detokenize(tokens.to_vec())) {
            Ok(Reply::Text(text)) => Some(text),
            Ok(Reply::Tokens(..)) => None,
            Err(e) => {
                self.failed("detokenize", &e);
                None
            }
        }
    }
}

/// A client for side calls (discovery, tokenize); `None` if TLS cannot initialise.
pub(crate) fn http_client(config: &OpenAiConfig) -> Option<reqwest::Client> {
    super::build_client(config).ok()
}
