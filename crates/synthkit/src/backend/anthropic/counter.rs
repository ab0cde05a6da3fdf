//! [`CountTokens`]: the model's exact prompt counter through the Messages API's
//! `POST /v1/messages/count_tokens` (Anthropic's, and llama.cpp's `llama-server`'s).
//!
//! A prompt is counted whole, as the server will charge it: its `system` and `messages`
//! go to the server exactly as a `/v1/messages` request sends them, so the chat
//! template's hidden tokens are in the count. Counts are cached by prompt (bounded), the
//! uncounted prompts of a batch asked for concurrently, a few at a time. A count that
//! fails is an error, never a silent switch to another tokenizer.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::HeaderMap;

use super::{AnthropicConfig, api_headers, wire};
use crate::backend::http::count::input_tokens_reply;
use crate::backend::http::count_cache::CountCache;
use crate::backend::http::{Link, Transport};
use crate::model::{ModelError, ModelFuture, PromptCounter};
use crate::prompt::{ChatMessage, RenderedPrompt, Role};

/// How long one count may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

struct Inner {
    link: Link,
    /// The config's transport, its timeout capped at [`CALL_TIMEOUT`].
    transport: Transport,
    url: String,
    model: String,
    headers: HeaderMap,
    cache: CountCache,
}

impl Inner {
    async fn count(&self, prompt: &RenderedPrompt) -> Result<usize, ModelError> {
        let post = self
            .link
            .post(&self.transport, &self.url, self.headers.clone());
        let bytes = post
            .fetch(
                &wire::count_body(&self.model, prompt),
                &self.transport.clock(),
            )
            .await?;
        input_tokens_reply(&bytes, "count_tokens")
    }
}

/// The model's exact prompt counter: `POST /v1/messages/count_tokens`. Build it with
/// [`CountTokens::probe`], which checks that the endpoint answers. Cheap to clone.
#[derive(Clone)]
pub struct CountTokens {
    inner: Arc<Inner>,
}

impl fmt::Debug for CountTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountTokens")
            .field("url", &crate::secret::redact_url(&self.inner.url))
            .field("cached", &self.inner.cache.len())
            .finish_non_exhaustive()
    }
}

impl CountTokens {
    /// Asks the server at `config`'s base URL whether `/v1/messages/count_tokens`
    /// counts a short prompt; `None` when it does not (a server without the endpoint).
    pub async fn probe(config: &AnthropicConfig) -> Option<Self> {
        let counter = Self {
            inner: Arc::new(Inner {
                link: Link::new(&config.transport).ok()?,
                transport: config.transport.capped(CALL_TIMEOUT),
                url: config.count_tokens_url(),
                model: config.model.clone(),
                headers: api_headers(config).ok()?,
                cache: CountCache::default(),
            }),
        };
        let hello = RenderedPrompt::Chat(vec![ChatMessage::new(Role::User, "hello")]);
        match counter.inner.count(&hello).await {
            Ok(n) if n > 0 => Some(counter),
            Ok(_) => None,
            Err(e) => {
                tracing::debug!(error = %e, "no usable /v1/messages/count_tokens");
                None
            }
        }
    }

    /// The server's count of one prompt.
    pub async fn count(&self, prompt: &RenderedPrompt) -> Result<usize, ModelError> {
        let counts = self.count_prompts(std::slice::from_ref(prompt)).await?;
        Ok(counts.first().copied().unwrap_or_default())
    }

    /// How many prompts have their count cached.
    pub fn cached(&self) -> usize {
        self.inner.cache.len()
    }
}

impl PromptCounter for CountTokens {
    fn name(&self) -> &str {
        "anthropic:/v1/messages/count_tokens"
    }

    fn count_prompts<'a>(&'a self, prompts: &'a [RenderedPrompt]) -> ModelFuture<'a, Vec<usize>> {
        Box::pin(async move {
            let keys: Vec<String> = prompts.iter().map(wire::count_key).collect();
            let inner = &self.inner;
            inner
                .cache
                .counts(&keys, |i| async move {
                    match prompts.get(i) {
                        Some(p) => inner.count(p).await,
                        None => Ok(0),
                    }
                })
                .await
        })
    }
}
