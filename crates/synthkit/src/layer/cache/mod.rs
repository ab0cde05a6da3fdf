//! Response caching: a layer around any [`LanguageModel`] that answers repeated requests
//! from a store instead of the model.
//!
//! [`CachedModel`] looks every call up in a [`ResponseCache`] by a key that covers
//! everything the reply depends on (see [`CachedModel::key`]); on a hit it replays the
//! stored reply, on a miss it asks the model and stores the reply once it is complete.
//! Two stores come with the crate:
//!
//! - [`MemoryCache`]: replies in memory for one process (tests, notebooks, a server that
//!   sees the same prompts again), within a byte cap (64 MiB unless told otherwise);
//!   entries not used recently are evicted first.
//! - `SqliteCache` (cargo feature `sqlite-cache`): one SQLite file on disk, so a job that
//!   is killed and started again only makes the calls it had not finished. Every reply is
//!   committed on its own as soon as it arrives, on tokio's blocking pool (never on the
//!   async task that asked).
//!
//! ```
//! # async fn demo() -> Result<(), synthkit::model::ModelError> {
//! use std::sync::Arc;
//! use synthkit::layer::cache::{CachedModel, MemoryCache};
//! use synthkit::{model::ModelInfo, testing::ScriptedModel};
//!
//! let inner = ScriptedModel::constant(ModelInfo::new("demo"), "ok");
//! let model = Arc::new(CachedModel::new(
//!     inner,
//!     Arc::new(MemoryCache::new()),
//!     "scripted",      // the backend's identity: kind and address
//!     "temperature=0", // parameters that change replies but are not in the request
//! ));
//! // Use `model` wherever an `Arc<dyn LanguageModel>` goes; `model.stats()` counts hits.
//! # let _ = model; Ok(()) }
//! ```
//!
//! What is cached, and what is not:
//! - **Only successes.** A failed call is never stored, so the next run asks again.
//! - **Streams only when complete.** A streamed reply is stored (its full text, usage and
//!   finish reason, and the thinking the server sent apart) only when the stream reached [`StreamEvent::Done`]; a stream cut off
//!   before that, or failing part-way, stores nothing. Streamed and plain calls share
//!   their key: a stored reply replays as a stream of one delta with the full text, then
//!   `Done` with the stored usage; a stored stream answers a plain call.
//! - **Structured calls** (requests with a schema) are keyed apart from plain ones (a
//!   backend may send the schema differently); only replies that parse as JSON
//!   ([`parse_json_reply`]) are stored, so a garbled one is asked again next time.
//! - **The cache never fails a job.** A store that cannot be read or written logs a
//!   `tracing` warning (the first time; later failures at debug level) and behaves as a
//!   miss; only opening a persistent store reports an error ([`CacheError`]).
//! - Identical requests in flight at the same time are not merged: each one that misses
//!   asks the model, and the last reply stored wins (they are equivalent).
//!
//! Place the cache outermost (around retries and rate limits), so that a hit costs
//! neither a retry budget nor a rate-limit token.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::model::{
    Completion, CompletionStream, FinishReason, LanguageModel, ModelFuture, ModelRequest,
    StreamEvent, Usage, one_delta_stream, parse_json_reply,
};
use crate::prompt::{RenderedPrompt, TemplateKind};

mod memory;
pub use memory::MemoryCache;
#[cfg(feature = "sqlite-cache")]
mod sqlite;
#[cfg(feature = "sqlite-cache")]
pub use sqlite::SqliteCache;

/// The version of the key format; bumped when what the key covers changes, so old
/// entries are simply never found again.
pub const KEY_VERSION: u32 = 1;

/// A stored reply: its text, the usage the model reported and why it stopped.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CachedReply {
    /// The reply's full text (for a structured call, the raw text before parsing).
    pub text: String,
    /// Usage the model reported, if any.
    pub usage: Option<Usage>,
    /// Why the model stopped, if known.
    pub finish_reason: Option<FinishReason>,
    /// The thinking the server sent apart ([`Completion::thinking`]; at most
    /// [`crate::text::thinking::MAX_THINKING_BYTES`]), so that a hit's steps show it as the
    /// call's did. Empty for other models and in entries stored before it was kept.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub thinking: String,
}

impl CachedReply {
    /// The reply as a [`Completion`].
    pub(crate) fn to_completion(&self) -> Completion {
        Completion {
            text: self.text.clone(),
            usage: self.usage,
            finish_reason: self.finish_reason,
            thinking: self.thinking.clone(),
        }
    }
}

impl From<&Completion> for CachedReply {
    fn from(c: &Completion) -> Self {
        Self {
            text: c.text.clone(),
            usage: c.usage,
            finish_reason: c.finish_reason,
            thinking: c.thinking.clone(),
        }
    }
}

/// A store of replies by key.
///
/// Methods return boxed futures (the trait stays object-safe, like [`LanguageModel`]), and
/// are awaited on the caller's async task: a store whose work can block (disk, network,
/// a lock held by another process) must do it off that task, for example on
/// [`tokio::task::spawn_blocking`] as `SqliteCache` does, or with an async client. A store
/// that answers at once (like [`MemoryCache`]) returns a ready future.
///
/// A store never fails the caller: on an internal error `get` resolves to `None` and
/// `put` does nothing, after logging a `tracing` warning (the first time; later failures
/// at debug level).
pub trait ResponseCache: Send + Sync {
    /// The reply stored under `key`, if any.
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Option<CachedReply>>;
    /// Stores `value` under `key`, replacing what was there. Once the future resolves,
    /// the value is as durable as the store promises. Dropping the future before then may
    /// or may not store the value.
    fn put<'a>(&'a self, key: &'a str, value: &'a CachedReply) -> BoxFuture<'a, ()>;
}

impl<C: ResponseCache + ?Sized> ResponseCache for Arc<C> {
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Option<CachedReply>> {
        (**self).get(key)
    }
    fn put<'a>(&'a self, key: &'a str, value: &'a CachedReply) -> BoxFuture<'a, ()> {
        (**self).put(key, value)
    }
}

/// Why a persistent store could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheError {
    /// The file cannot be opened, created or written, or is not a cache.
    #[error("cannot open cache {path}: {message}")]
    Open {
        /// The path given.
        path: String,
        /// What went wrong.
        message: String,
    },
}

/// The kind of call a key is for. Streamed calls use [`CallKind::Complete`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallKind {
    /// A plain or streamed call.
    Complete,
    /// A structured call (the request carries a schema).
    Structured,
}

impl CallKind {
    /// The kind of `request`: structured when it carries a schema.
    pub fn of(request: &ModelRequest) -> Self {
        if request.schema.is_some() {
            CallKind::Structured
        } else {
            CallKind::Complete
        }
    }
}

/// Hits and misses so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CacheStats {
    /// Calls answered from the store.
    pub hits: u64,
    /// Calls sent to the model (whether or not they succeeded).
    pub misses: u64,
}

/// Live hit and miss counters, shared with a [`CachedModel`]: keep a clone to read them
/// after the model has been handed on as an `Arc<dyn LanguageModel>`.
#[derive(Debug, Clone, Default)]
pub struct CacheCounters {
    inner: Arc<Counters>,
}

#[derive(Debug, Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
}

impl CacheCounters {
    /// The counts now.
    pub fn snapshot(&self) -> CacheStats {
        CacheStats {
            hits: self.inner.hits.load(Ordering::Relaxed),
            misses: self.inner.misses.load(Ordering::Relaxed),
        }
    }

    fn hit(&self) {
        self.inner.hits.fetch_add(1, Ordering::Relaxed);
    }

    fn miss(&self) {
        self.inner.misses.fetch_add(1, Ordering::Relaxed);
    }
}

/// What a key covers, serialized as JSON (fields in this order) and hashed with SHA-256.
#[derive(Serialize)]
struct KeyMaterial<'a> {
    v: u32,
    backend: &'a str,
    model: &'a str,
    params: &'a str,
    call: CallKind,
    max_tokens: usize,
    prompt: &'a RenderedPrompt,
    schema: Option<&'a Value>,
    kind: TemplateKind,
    variables: &'a [(String, String)],
}

/// A [`LanguageModel`] that answers repeated requests from a [`ResponseCache`].
pub struct CachedModel<M> {
    inner: M,
    cache: Arc<dyn ResponseCache>,
    backend: String,
    params: String,
    counters: CacheCounters,
}

impl<M: LanguageModel> fmt::Debug for CachedModel<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedModel")
            .field("model", &self.inner.info().name)
            .field("backend", &crate::secret::redact_urls(&self.backend))
            .field("params", &self.params)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl<M: LanguageModel> CachedModel<M> {
    /// Wraps `inner` with `cache`.
    ///
    /// `backend` names where replies come from (kind and address, e.g.
    /// `"openai http://127.0.0.1:8080/v1"`), and `params` whatever else changes replies
    /// without being in the request (temperature, chat or completion endpoint, extra
    /// body fields, e.g. `"temperature=0.1 chat"`). Both are part of every key, with the
    /// model's name ([`ModelInfo::name`](crate::model::ModelInfo::name)).
    pub fn new(
        inner: M,
        cache: Arc<dyn ResponseCache>,
        backend: impl Into<String>,
        params: impl Into<String>,
    ) -> Self {
        Self {
            inner,
            cache,
            backend: backend.into(),
            params: params.into(),
            counters: CacheCounters::default(),
        }
    }

    /// The wrapped model.
    pub fn inner(&self) -> &M {
        &self.inner
    }

    /// Hits and misses so far.
    pub fn stats(&self) -> CacheStats {
        self.counters.snapshot()
    }

    /// The live counters (a shared handle).
    pub fn counters(&self) -> CacheCounters {
        self.counters.clone()
    }

    /// The key of `request` for a call of `call` kind: the lowercase hex SHA-256 of a JSON
    /// object holding, in order, the key format version ([`KEY_VERSION`]), the backend
    /// identity, the model's name, the parameters, the call kind, `max_tokens`, the
    /// rendered prompt (system prompt included), the schema (or `null`), the template kind
    /// and the variables the prompt was rendered from (offline backends answer from
    /// them). The step (mode, level, index) and our token count are not part of it: the
    /// same prompt gets the same reply wherever it occurs.
    pub fn key(&self, request: &ModelRequest, call: CallKind) -> String {
        let model = self.inner.info().name;
        let source = request.source();
        let material = KeyMaterial {
            v: KEY_VERSION,
            backend: &self.backend,
            model: &model,
            params: &self.params,
            call,
            max_tokens: request.max_tokens,
            prompt: &request.prompt,
            schema: request.schema.as_deref(),
            kind: source.map_or(TemplateKind::Custom, |s| s.kind),
            variables: source.map_or(&[][..], |s| s.variables.as_slice()),
        };
        let mut hasher = Sha256::new();
        // Serializing these types cannot fail; should it ever, the Debug text (which
        // holds the same fields) keeps the key unique enough to stay correct.
        match serde_json::to_vec(&material) {
            Ok(bytes) => hasher.update(&bytes),
            Err(_) => hasher.update(format!("{request:?}{:?}", request.prompt).as_bytes()),
        }
        hex(&hasher.finalize())
    }

    /// The stored reply for `key`, counted as a hit or a miss. A stored reply to a
    /// structured request that does not parse as JSON is damaged (only replies that
    /// parse are stored): it is a miss, and the model's new reply overwrites it.
    async fn lookup(&self, request: &ModelRequest, key: &str) -> Option<CachedReply> {
        let found = self
            .cache
            .get(key)
            .await
            .filter(|hit| storable(request, &hit.text));
        if found.is_some() {
            self.counters.hit();
        } else {
            self.counters.miss();
        }
        found
    }
}

/// Whether a reply to `request` may be stored: always, except a reply to a structured
/// request (one with a schema) that does not parse as JSON, which would only fail again.
fn storable(request: &ModelRequest, text: &str) -> bool {
    request.schema.is_none() || parse_json_reply(text).is_ok()
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// A stored reply replayed as a stream: one delta with the full text, then `Done`.
fn replay(reply: CachedReply) -> CompletionStream {
    one_delta_stream(Completion {
        text: reply.text,
        usage: reply.usage,
        finish_reason: reply.finish_reason,
        thinking: reply.thinking,
    })
}

/// Passes `inner` on and stores the reply once `Done` arrives (never before: a stream
/// that ends early or fails stores nothing). `Done` is passed on once the store has
/// taken the reply, so a consumer that saw it can count on the reply being stored.
fn recording(
    inner: CompletionStream,
    cache: Arc<dyn ResponseCache>,
    key: String,
    structured: bool,
) -> CompletionStream {
    struct State {
        inner: CompletionStream,
        cache: Arc<dyn ResponseCache>,
        key: String,
        text: String,
        thinking: String,
        stored: bool,
        structured: bool,
    }
    let state = State {
        inner,
        cache,
        key,
        text: String::new(),
        thinking: String::new(),
        stored: false,
        structured,
    };
    Box::pin(futures::stream::unfold(state, |mut st| async move {
        let item = st.inner.next().await?;
        match &item {
            Ok(StreamEvent::Delta(d)) if !st.stored => st.text.push_str(d),
            Ok(StreamEvent::Thinking(t)) if !st.stored => {
                crate::text::thinking::push_capped(
                    &mut st.thinking,
                    t,
                    crate::text::thinking::MAX_THINKING_BYTES,
                );
            }
            Ok(StreamEvent::Done {
                usage,
                finish_reason,
            }) if !st.stored => {
                st.stored = true;
                let reply = CachedReply {
                    text: std::mem::take(&mut st.text),
                    usage: *usage,
                    finish_reason: *finish_reason,
                    thinking: std::mem::take(&mut st.thinking),
                };
                if !st.structured || parse_json_reply(&reply.text).is_ok() {
                    st.cache.put(&st.key, &reply).await;
                }
            }
            _ => {}
        }
        Some((item, st))
    }))
}

impl<M: LanguageModel> crate::model::ModelLayer for CachedModel<M> {
    type Inner = M;

    fn inner(&self) -> &M {
        &self.inner
    }

    fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, Completion> {
        Box::pin(async move {
            let key = self.key(request, CallKind::of(request));
            if let Some(hit) = self.lookup(request, &key).await {
                return Ok(hit.to_completion());
            }
            let c = self.inner.complete(request).await?;
            if storable(request, &c.text) {
                self.cache.put(&key, &CachedReply::from(&c)).await;
            }
            Ok(c)
        })
    }

    fn stream<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, CompletionStream> {
        Box::pin(async move {
            let key = self.key(request, CallKind::of(request));
            if let Some(hit) = self.lookup(request, &key).await {
                return Ok(replay(hit));
            }
            let inner = self.inner.stream(request).await?;
            Ok(recording(
                inner,
                Arc::clone(&self.cache),
                key,
                request.schema.is_some(),
            ))
        })
    }
}
