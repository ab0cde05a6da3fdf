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
use super::reuse::Reuse;
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
    /// Whether the server said its model takes images (llama.cpp's `/props`, a models
    /// listing's capabilities), when it said.
    pub discovered_vision: Option<bool>,
    /// The tokenizer the caller gave the model.
    pub tokenizer: Option<SharedTokenizer>,
    /// The model the server named in its latest reply.
    pub served: ServedModel,
    /// The slots' table and the prompt-reuse hints the server refused.
    pub reuse: Reuse,
}

impl Server {
    /// Nothing discovered yet; fails only if `transport`'s client cannot be built.
    pub(crate) fn new(transport: &Transport) -> Result<Self, ModelError> {
        Ok(Self {
            link: Link::new(transport)?,
            discovered_context_window: None,
            discovered_slots: None,
            discovered_vision: None,
            tokenizer: None,
            served: ServedModel::default(),
            reuse: Reuse::default(),
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
