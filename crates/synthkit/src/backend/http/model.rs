//! [`HttpModel`]: the model of every HTTP API, one type generic over the [`HttpApi`]:
//! the call sent once and its reply read whole or as a stream, discovery (the listed
//! model, the window and the slots), the server's exact prompt counter, and
//! [`LanguageModel`].

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use super::api::HttpApi;
use super::clock::CallClock;
use super::config::HttpConfig;
use super::discovery::{
    first_model_id, models_context_window, props_context_window, props_window_error, slots_in,
    vision_in,
};
use super::reuse::{self, Reuse, SlotLease};
use super::server::Server;
use crate::model::{
    Completion, CompletionStream, LanguageModel, ModelError, ModelFuture, ModelInfo, ModelRequest,
    SharedCounter,
};
use crate::prompt::PromptPrefix;
use crate::secret::redact_url;
use crate::text::SharedTokenizer;

/// A model behind the HTTP API `A`. Implements [`LanguageModel`]. The backends name it:
/// [`OpenAiModel`](crate::backend::openai::OpenAiModel),
/// `anthropic::AnthropicModel` (feature `anthropic`).
///
/// Each call makes exactly one HTTP attempt (retries are a layer around any
/// [`LanguageModel`]); `Debug` shows the config (never the key), what discovery found,
/// the tokenizer, the counter and the model the server named.
pub struct HttpModel<A: HttpApi> {
    config: HttpConfig<A>,
    server: Server,
    counter: Option<A::Counter>,
}

impl<A: HttpApi> fmt::Debug for HttpModel<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.server
            .debug_model(f, A::MODEL_NAME, &self.config, &self.counter)
    }
}

impl<A: HttpApi> HttpModel<A> {
    /// A model with `config`; makes no request. Fails only if the HTTP client cannot be
    /// built (TLS initialisation), the API's options cannot be sent (a header value), or
    /// the extra body fields would cost more than the budget charges
    /// ([`check_extra_body`](super::check_extra_body)).
    pub fn new(config: HttpConfig<A>) -> Result<Self, ModelError> {
        A::check(&config)?;
        super::check_extra_body(&config.extra_body).map_err(ModelError::Other)?;
        Ok(Self {
            server: Server::new(&config.transport)?,
            config,
            counter: None,
        })
    }

    /// A model with `config`, then: when [`HttpConfig::discover_model`] is set, the
    /// model name from the server's models listing ([`HttpModel::discover_model`]); the
    /// window (unless the config sets it) and the slots from llama.cpp's `GET
    /// {root}/props`, else (for the APIs that read it there) the window from the
    /// listing; when [`HttpConfig::server_tokenizer`] is set, the server's counter
    /// ([`HttpModel::use_server_counter`]). None of them failing is an error, but a
    /// `/props` window that cannot be right is. A discovery request that times out (the
    /// server accepts connections but does not answer) skips the rest, so a hanging
    /// server costs one discovery timeout (at most 10 s) before the first call.
    pub async fn connect(config: HttpConfig<A>) -> Result<Self, ModelError> {
        let mut model = Self::new(config)?;
        let mut listing = None;
        if model.config.discover_model {
            listing = model.get_json(&A::models_url(&model.config)).await;
            model.use_listed_model(listing.as_ref());
        }
        // One `/props` answers both the window and the slots (llama.cpp).
        let props = model.get_json(&model.props_url()).await;
        model.use_slots(props.as_ref());
        model.server.discovered_vision =
            vision_in(props.as_ref(), listing.as_ref(), &model.config.model);
        if model.config.context_window.is_none() {
            let found = model
                .context_window_from(props.as_ref(), listing.as_ref())
                .await;
            // A window the server got wrong is an error, unless another answer gave one.
            if found.is_none()
                && let Some(e) = props
                    .as_ref()
                    .and_then(|p| props_window_error(p, &model.props_url()))
            {
                return Err(e);
            }
            if found.is_some() {
                model.server.discovered_context_window = found;
            }
        }
        if model.config.server_tokenizer && !model.use_server_counter().await {
            tracing::warn!(
                root = %redact_url(model.config.root_url()),
                "the server has no usable {}; counting with the built-in tokenizer",
                A::COUNTER_PATH
            );
        }
        Ok(model)
    }

    /// Asks the server which models it serves (its models listing: `GET {base}/models`
    /// for OpenAI-compatible servers, `GET {root}/v1/models` for the Messages API) and
    /// uses the first one's `id` as the model name in requests and in
    /// [`LanguageModel::info`]. Returns that id; `None` (no usable listing) keeps
    /// [`HttpConfig::model`]. Never fails.
    pub async fn discover_model(&mut self) -> Option<String> {
        let listing = self.get_json(&A::models_url(&self.config)).await;
        self.use_listed_model(listing.as_ref())
    }

    /// Takes the model name from a models listing, if it names one.
    fn use_listed_model(&mut self, listing: Option<&Value>) -> Option<String> {
        match listing.and_then(first_model_id) {
            Some(id) => {
                tracing::info!(
                    model = %id,
                    "using the model the server lists first at {}",
                    A::MODELS_PATH
                );
                self.config.model = id.clone();
                Some(id)
            }
            // A server that did not answer discovery was warned about already.
            None if self.server.link.stalled() => None,
            None => {
                tracing::info!(
                    base = %redact_url(self.config.base()),
                    model = %self.config.model,
                    "the server lists no model at {}; sending the configured model name",
                    A::MODELS_PATH
                );
                None
            }
        }
    }

    /// Asks the server for its context window and remembers it: llama.cpp's
    /// `GET {root}/props` (`default_generation_settings.n_ctx`, the per-slot context,
    /// else a top-level `n_ctx`), else, for the APIs that read it there, the models
    /// listing (vLLM's `max_model_len`, llama.cpp's `meta.n_ctx`, `context_length`).
    /// Returns what it found; `None` leaves the config's window or
    /// [`ModelInfo::DEFAULT_CONTEXT_WINDOW`] in force. Never fails.
    pub async fn discover(&mut self) -> Option<usize> {
        let props = self.get_json(&self.props_url()).await;
        self.use_slots(props.as_ref());
        let found = self.context_window_from(props.as_ref(), None).await;
        if found.is_some() {
            self.server.discovered_context_window = found;
        }
        found
    }

    /// Takes the slots from a `/props` answer, and tracks them for `id_slot` when the
    /// API sends it ([`HttpApi::slot_affinity`]).
    fn use_slots(&mut self, props: Option<&Value>) {
        let slots = props.and_then(slots_in);
        self.server.discovered_slots = slots;
        let tracked = slots.filter(|_| A::slot_affinity(&self.config));
        self.server.reuse.set_slots(tracked);
    }

    fn props_url(&self) -> String {
        self.config.root_join("/props")
    }

    /// The context window from a `/props` answer, else from the models listing
    /// (`listing` when it was fetched already; asked for only when the API reads the
    /// window there).
    async fn context_window_from(
        &self,
        props: Option<&Value>,
        listing: Option<&Value>,
    ) -> Option<usize> {
        if let Some(n) = props.and_then(props_context_window) {
            return Some(n);
        }
        let fetched;
        let models = match listing {
            Some(l) => Some(l),
            None if A::WINDOW_FROM_LISTING => {
                fetched = self.get_json(&A::models_url(&self.config)).await;
                fetched.as_ref()
            }
            None => None,
        };
        models.and_then(|m| models_context_window(m, &self.config.model))
    }

    /// `GET url` with the API's headers, as discovery asks.
    async fn get_json(&self, url: &str) -> Option<Value> {
        let headers = A::headers(&self.config).unwrap_or_default();
        self.server
            .link
            .discover(&self.config.transport, url, headers)
            .await
    }

    /// Probes the server's exact prompt counter (`/tokenize`,
    /// `/v1/messages/count_tokens`) and, if it counts, uses it as the model's
    /// ([`LanguageModel::counter`]). Returns whether it does. Skipped (`false`) when a
    /// discovery request of this model timed out.
    pub async fn use_server_counter(&mut self) -> bool {
        if self.server.link.stalled() {
            tracing::debug!(
                "the server did not answer discovery; not probing {}",
                A::COUNTER_PATH
            );
            return false;
        }
        match A::probe_counter(&self.config).await {
            Some(c) => {
                self.counter = Some(c);
                true
            }
            None => false,
        }
    }

    /// Sends one request (its body made for `stream` or not), once, on a clock started
    /// now: the seam where a retry layer would sit. Returns the response when its status
    /// is a success, else the mapped error, and the server slot the call holds (when the
    /// backend tracks slots), to keep until the reply is read. The body carries the
    /// prompt-reuse hints the API writes ([`HttpApi::write_hints`]); a server that
    /// refuses them gets the request once more without those it refused
    /// ([`super::reuse`]).
    async fn send(
        &self,
        request: &ModelRequest,
        stream: bool,
    ) -> Result<(reqwest::Response, CallClock, Option<SlotLease>), ModelError> {
        let url = A::endpoint(&self.config);
        let headers = A::headers(&self.config)?;
        let reuse = &self.server.reuse;
        let prefix = PromptPrefix::of(request);
        let lease = reuse.lease(prefix);
        let mut body = A::body(&self.config, request, stream);
        let hints = reuse.hints(prefix, lease.as_ref());
        let sent = A::write_hints(&self.config, request, &mut body, &hints);
        let transport = &self.config.transport;
        let to = (url.as_str(), headers.clone());
        let (said, status) = match self.server.send(transport, to, &body, stream).await {
            Ok((response, clock)) => {
                if !sent.is_empty() {
                    reuse.answered();
                }
                return Ok((response, clock, lease));
            }
            Err(ModelError::BadRequest { status, body }) => (body, status),
            Err(e) => return Err(e),
        };
        let Some(dropped) = reuse.to_drop(sent, &said) else {
            return Err(ModelError::BadRequest { status, body: said });
        };
        let mut body = A::body(&self.config, request, stream);
        let hints = reuse.hints_without(prefix, lease.as_ref(), dropped);
        A::write_hints(&self.config, request, &mut body, &hints);
        let again = (self.server)
            .send(transport, (url.as_str(), headers), &body, stream)
            .await;
        reuse.after_resend(dropped, Reuse::names_any(sent, &said), again.is_ok());
        again.map(|(response, clock)| (response, clock, lease))
    }

    async fn complete_with(&self, request: &ModelRequest) -> Result<Completion, ModelError> {
        let (response, clock, _slot) = self.send(request, false).await?;
        let completion = self
            .server
            .read_completion(&self.config.transport, response, &clock, A::parse_reply)
            .await?;
        let usage = completion.usage.unwrap_or_default();
        tracing::debug!(
            model = %self.config.model,
            step = request.step().step.as_str(),
            prompt_tokens = usage.prompt_tokens,
            completion_tokens = usage.completion_tokens,
            finish_reason = ?completion.finish_reason,
            "{} call finished",
            A::NAME
        );
        Ok(completion)
    }

    /// The config.
    pub fn config(&self) -> &HttpConfig<A> {
        &self.config
    }

    /// The context window the server reported, if discovery found one.
    pub fn discovered_context_window(&self) -> Option<usize> {
        self.server.discovered_context_window
    }

    /// Whether the server said its model takes images (llama.cpp's `/props`
    /// `modalities.vision`, a models listing's capabilities), when discovery found it.
    pub fn discovered_vision(&self) -> Option<bool> {
        self.server.discovered_vision
    }

    /// How many requests the server runs at once, when discovery found it (llama.cpp's
    /// `/props` `total_slots`).
    pub fn server_slots(&self) -> Option<usize> {
        self.server.discovered_slots
    }

    /// The model name the server gave in its latest reply (the `model` field of a reply
    /// or of a stream's events), if it gave one. It can differ from the config's `model`:
    /// servers that serve one model (llama.cpp) answer with their own name whatever the
    /// request said.
    pub fn served_model(&self) -> Option<String> {
        self.server.served.get()
    }

    /// Where the model the server names is recorded (shared: it follows later calls).
    pub(crate) fn served(&self) -> super::clock::ServedModel {
        self.server.served.clone()
    }

    setters! {
        /// Uses `tokenizer` as the model's tokenizer ([`LanguageModel::tokenizer`]).
        pub fn with_tokenizer(tokenizer: SharedTokenizer) => Some(server.tokenizer);
    }

    /// The server's exact prompt counter, when [`HttpModel::use_server_counter`] found
    /// one.
    pub fn server_counter(&self) -> Option<&A::Counter> {
        self.counter.as_ref()
    }
}

impl<A: HttpApi> LanguageModel for HttpModel<A> {
    fn info(&self) -> ModelInfo {
        self.config
            .model_info(self.server.discovered_context_window)
            .with_chat(A::is_chat(&self.config))
            .with_provider(A::NAME)
            .with_vision(self.config.vision.or(self.server.discovered_vision))
    }

    fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, Completion> {
        Box::pin(self.complete_with(request))
    }

    /// Streams with SSE: text deltas, then exactly one
    /// [`StreamEvent::Done`](crate::model::StreamEvent::Done) with the usage the server
    /// reported. A stream that ends before the API's end event (or a stop reason) yields
    /// [`ModelError::Incomplete`]. The first event must come within the request timeout
    /// ([`Transport::timeout`](super::Transport::timeout), counted from the start of the
    /// call), each next one within the idle timeout
    /// ([`Transport::idle_timeout`](super::Transport::idle_timeout)) of the wait for it;
    /// otherwise the stream yields [`ModelError::Timeout`]. There is no total time limit:
    /// a stream that keeps producing tokens is never cut for time; its bytes in all are
    /// capped by [`Transport::max_reply_bytes`](super::Transport::max_reply_bytes)
    /// ([`ModelError::ReplyTooLarge`]). A server that ignores `stream: true` and answers
    /// JSON is handled too (within the request timeout).
    fn stream<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a, CompletionStream> {
        Box::pin(async move {
            let (response, clock, slot) = self.send(request, true).await?;
            let transport = &self.config.transport;
            let stream = (self.server)
                .read_stream(
                    transport,
                    (response, clock),
                    A::parse_reply,
                    A::stream_parser,
                )
                .await?;
            Ok(reuse::hold(stream, slot))
        })
    }

    fn tokenizer(&self) -> Option<SharedTokenizer> {
        self.server.tokenizer.clone()
    }

    fn counter(&self) -> Option<SharedCounter> {
        let counter: SharedCounter = Arc::new(self.counter.clone()?);
        Some(counter)
    }
}
