//! [`Server`]: what an HTTP backend's model knows about its server and how it calls it,
//! the same for every API: the link, what discovery found, the tokenizer it was given,
//! the model name the server answers with; one call sent, its reply read whole or as a
//! stream.

use std::fmt;

use reqwest::header::{ACCEPT, HeaderMap, HeaderValue};
use secrecy::SecretString;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::clock::{CallClock, ServedModel};
use super::errors::{clip, from_error_object};
use super::sse::{EventParser, sse_stream};
use super::{Link, Transport, is_json};
use crate::model::{Completion, CompletionStream, ModelError, one_delta_stream};
use crate::text::SharedTokenizer;

/// Parses a whole reply body: the completion and the model the server named.
pub(crate) type ParseReply =
    fn(&[u8], Option<&SecretString>) -> Result<(Completion, Option<String>), ModelError>;

/// The per-server state of an HTTP backend's model.
#[derive(Debug)]
pub(crate) struct Server {
    /// The client and whether discovery stalled.
    pub link: Link,
    /// The context window discovery found.
    pub discovered_context_window: Option<usize>,
    /// How many requests the server runs at once, when discovery found it.
    pub discovered_slots: Option<usize>,
    /// The tokenizer the caller gave the model.
    pub tokenizer: Option<SharedTokenizer>,
    /// The model the server named in its latest reply.
    pub served: ServedModel,
}

impl Server {
    /// Nothing discovered yet; fails only if `transport`'s client cannot be built.
    pub(crate) fn new(transport: &Transport) -> Result<Self, ModelError> {
        Ok(Self {
            link: Link::new(transport)?,
            discovered_context_window: None,
            discovered_slots: None,
            tokenizer: None,
            served: ServedModel::default(),
        })
    }

    /// Writes a model's `Debug`: its config, what discovery found, its tokenizer, its
    /// `counter` and the model the server named (never a key: the config hides it).
    pub(crate) fn debug_model(
        &self,
        f: &mut fmt::Formatter<'_>,
        name: &str,
        config: &dyn fmt::Debug,
        counter: &dyn fmt::Debug,
    ) -> fmt::Result {
        f.debug_struct(name)
            .field("config", config)
            .field("discovered_context_window", &self.discovered_context_window)
            .field("tokenizer", &self.tokenizer)
            .field("counter", counter)
            .field("served_model", &self.served.get())
            .finish()
    }

    /// Sends `body` to `url` once with `headers` (and `Accept: text/event-stream` for a
    /// stream), on a call clock started now: the response when its status is a success,
    /// else the mapped error; and the clock, for reading the reply.
    pub(crate) async fn send(
        &self,
        transport: &Transport,
        (url, mut headers): (&str, HeaderMap),
        body: &Value,
        stream: bool,
    ) -> Result<(reqwest::Response, CallClock), ModelError> {
        if stream {
            headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        }
        let clock = transport.clock();
        let post = self.link.post(transport, url, headers);
        Ok((post.send(body, &clock).await?, clock))
    }

    /// Reads a non-streamed reply within what is left of the request timeout and the
    /// reply cap, parses it with `parse` and records the model the server named.
    pub(crate) async fn read_completion(
        &self,
        transport: &Transport,
        response: reqwest::Response,
        clock: &CallClock,
        parse: ParseReply,
    ) -> Result<Completion, ModelError> {
        let bytes = transport.read_body(response, clock).await?;
        let (completion, served) = parse(&bytes, transport.api_key.as_ref())?;
        if let Some(name) = served {
            self.served.set(&name);
        }
        Ok(completion)
    }

    /// A streamed reply as a [`CompletionStream`]: its SSE events read by the parser
    /// `parser` makes (from the key, to redact, and where to record the served model),
    /// under `transport`'s stream limits; a server that answered JSON instead is read
    /// whole with `parse` and streamed as one delta.
    pub(crate) async fn read_stream<P: EventParser>(
        &self,
        transport: &Transport,
        (response, clock): (reqwest::Response, CallClock),
        parse: ParseReply,
        parser: impl FnOnce(Option<SecretString>, ServedModel) -> P,
    ) -> Result<CompletionStream, ModelError> {
        if is_json(&response) {
            let c = self
                .read_completion(transport, response, &clock, parse)
                .await?;
            return Ok(one_delta_stream(c));
        }
        let key = transport.api_key.clone();
        Ok(sse_stream(
            response,
            transport.sse_limits(clock),
            key.clone(),
            parser(key, self.served.clone()),
        ))
    }
}

/// Parses a whole reply body as `T`: valid UTF-8 and the expected JSON, with no error
/// object in it (`error` finds it). Returns the reply and its text (for messages, cut and
/// redacted with [`clip`]).
pub(crate) fn parse_reply<'b, T: DeserializeOwned>(
    bytes: &'b [u8],
    key: Option<&SecretString>,
    error: impl Fn(&T) -> Option<&Value>,
) -> Result<(T, &'b str), ModelError> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| ModelError::Malformed(format!("the reply is not valid UTF-8: {e}")))?;
    let reply: T = serde_json::from_str(text).map_err(|e| {
        ModelError::Malformed(format!(
            "the reply is not the expected JSON ({e}): {}",
            clip(text, key)
        ))
    })?;
    if let Some(err) = error(&reply).filter(|e| !e.is_null()) {
        return Err(from_error_object(err, key));
    }
    Ok((reply, text))
}

/// The model a reply's `model` field names: a non-empty string (anything else is
/// ignored).
pub(crate) fn model_name(field: Option<&Value>) -> Option<&str> {
    field
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|m| !m.is_empty())
}

/// Implements what every HTTP backend's model has the same way, on a struct with the
/// fields `config`, `server` ([`Server`]) and `counter` (`Option` of the backend's exact
/// prompt counter), a config with `endpoint()`, `transport` and `model`, and the methods
/// `request_headers(&self)` and `body(&self, &ModelRequest, stream: bool)`: its `Debug`
/// (through [`Server::debug_model`]), the private `send` (one request sent once) and
/// `complete_with`, the accessors `config`, `discovered_context_window`,
/// `server_slots`, `served_model` and `server_counter`, the builder `with_tokenizer`,
/// and [`LanguageModel`](crate::model::LanguageModel): `info` from the config and what
/// discovery found (a chat model when `is_chat` says so), `complete` through
/// `complete_with`, `stream` through `send` and [`Server::read_stream`] with the
/// backend's reply parser `parse` and SSE parser `stream_parser`.
macro_rules! http_model {
    (
        model: $model:ident,
        config: $config:ty,
        counter: $counter:ty,
        api: $api:literal,
        is_chat: $is_chat:expr,
        parse: $parse:path,
        stream_parser: $parser:path $(,)?
    ) => {
        impl std::fmt::Debug for $model {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.server
                    .debug_model(f, stringify!($model), &self.config, &self.counter)
            }
        }

        impl $model {
            /// The model of `config` before any discovery: no request made.
            fn unconnected(config: $config) -> Result<Self, $crate::model::ModelError> {
                $crate::backend::http::check_extra_body(&config.extra_body)
                    .map_err($crate::model::ModelError::Other)?;
                Ok(Self {
                    server: $crate::backend::http::server::Server::new(&config.transport)?,
                    config,
                    counter: None,
                })
            }

            /// Sends one request (its body made for `stream` or not), once, on a clock
            /// started now: the seam where a retry layer would sit. Returns the response
            /// when its status is a success, else the mapped error.
            async fn send(
                &self,
                request: &$crate::model::ModelRequest,
                stream: bool,
            ) -> Result<
                (reqwest::Response, $crate::backend::http::clock::CallClock),
                $crate::model::ModelError,
            > {
                let url = self.config.endpoint();
                let to = (url.as_str(), self.request_headers()?);
                let body = self.body(request, stream);
                self.server
                    .send(&self.config.transport, to, &body, stream)
                    .await
            }

            async fn complete_with(
                &self,
                request: &$crate::model::ModelRequest,
            ) -> Result<$crate::model::Completion, $crate::model::ModelError> {
                let (response, clock) = self.send(request, false).await?;
                let completion = self
                    .server
                    .read_completion(&self.config.transport, response, &clock, $parse)
                    .await?;
                let usage = completion.usage.unwrap_or_default();
                tracing::debug!(
                    model = %self.config.model,
                    step = request.step().step.as_str(),
                    prompt_tokens = usage.prompt_tokens,
                    completion_tokens = usage.completion_tokens,
                    finish_reason = ?completion.finish_reason,
                    "{} call finished",
                    $api
                );
                Ok(completion)
            }

            /// The config.
            pub fn config(&self) -> &$config {
                &self.config
            }

            /// The context window the server reported, if discovery found one.
            pub fn discovered_context_window(&self) -> Option<usize> {
                self.server.discovered_context_window
            }

            /// How many requests the server runs at once, when discovery found it
            /// (llama.cpp's `/props` `total_slots`).
            pub fn server_slots(&self) -> Option<usize> {
                self.server.discovered_slots
            }

            /// The model name the server gave in its latest reply (the `model` field of a
            /// reply or of a stream's events), if it gave one. It can differ from the
            /// config's `model`: servers that serve one model (llama.cpp) answer with
            /// their own name whatever the request said.
            pub fn served_model(&self) -> Option<String> {
                self.server.served.get()
            }

            setters! {
                /// Uses `tokenizer` as the model's tokenizer
                /// ([`LanguageModel::tokenizer`](crate::model::LanguageModel::tokenizer)).
                pub fn with_tokenizer(tokenizer: $crate::text::SharedTokenizer) => Some(server.tokenizer);
            }

            /// The server's exact prompt counter, when `use_server_counter` found one.
            pub fn server_counter(&self) -> Option<&$counter> {
                self.counter.as_ref()
            }
        }

        impl $crate::model::LanguageModel for $model {
            fn info(&self) -> $crate::model::ModelInfo {
                let is_chat: fn(&$config) -> bool = $is_chat;
                self.config
                    .model_info(self.server.discovered_context_window)
                    .with_chat(is_chat(&self.config))
                    .with_provider($api)
            }

            fn complete<'a>(
                &'a self,
                request: &'a $crate::model::ModelRequest,
            ) -> $crate::model::ModelFuture<'a, $crate::model::Completion> {
                Box::pin(self.complete_with(request))
            }

            /// Streams with SSE: text deltas, then exactly one
            /// [`StreamEvent::Done`](crate::model::StreamEvent::Done) with the usage the
            /// server reported. A stream that ends before the API's end event (or a stop
            /// reason) yields [`ModelError::Incomplete`](crate::model::ModelError::Incomplete).
            /// The first event must come within the request timeout
            /// ([`Transport::timeout`](crate::backend::http::Transport::timeout), counted
            /// from the start of the call), each next one within the idle timeout
            /// ([`Transport::idle_timeout`](crate::backend::http::Transport::idle_timeout))
            /// of the wait for it; otherwise the stream yields
            /// [`ModelError::Timeout`](crate::model::ModelError::Timeout). There is no total
            /// time limit: a stream that keeps producing tokens is never cut for time; its
            /// bytes in all are capped by
            /// [`Transport::max_reply_bytes`](crate::backend::http::Transport::max_reply_bytes)
            /// ([`ModelError::ReplyTooLarge`](crate::model::ModelError::ReplyTooLarge)). A
            /// server that ignores `stream: true` and answers JSON is handled too (within
            /// the request timeout).
            fn stream<'a>(
                &'a self,
                request: &'a $crate::model::ModelRequest,
            ) -> $crate::model::ModelFuture<'a, $crate::model::CompletionStream> {
                Box::pin(async move {
                    let reply = self.send(request, true).await?;
                    let transport = &self.config.transport;
                    (self.server)
                        .read_stream(transport, reply, $parse, $parser)
                        .await
                })
            }

            fn tokenizer(&self) -> Option<$crate::text::SharedTokenizer> {
                self.server.tokenizer.clone()
            }

            fn counter(&self) -> Option<$crate::model::SharedCounter> {
                let counter = self.counter.clone()?;
                Some(std::sync::Arc::new(counter))
            }
        }
    };
}

pub(crate) use http_model;
