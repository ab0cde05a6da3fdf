//! What the HTTP backends (`openai`, `anthropic`) share: how to reach the server
//! ([`Transport`]) and how it samples ([`Sampling`]), both public parts of each
//! backend's config; inside the crate, the client, one request sent once under the
//! call's timeouts, bodies read within the reply cap, SSE streams, the mapping of
//! failures to [`ModelError`] (`Retry-After` included), redaction of keys, and what
//! servers say about themselves (llama.cpp's `/props`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;

use crate::model::ModelError;

mod api;
pub(crate) mod body;
pub(crate) mod clock;
mod config;
pub(crate) mod count;
pub(crate) mod count_cache;
pub(crate) mod discovery;
pub(crate) mod errors;
mod model;
pub mod reuse;
mod sampling;
pub(crate) mod server;
pub(crate) mod sse;
#[cfg(test)]
pub(crate) mod test_support;
mod transport;
pub(crate) mod verdict;

pub use api::HttpApi;
use clock::CallClock;
pub use config::HttpConfig;
pub use model::HttpModel;
pub use sampling::Sampling;
pub use transport::Transport;

/// The context-length error that a server's error message describes, if it describes one:
/// llama.cpp's `exceed_context_size_error`, OpenAI's `context_length_exceeded`, and the
/// wording of vLLM, llama.cpp and Anthropic ("maximum context length", "exceeds the
/// available context size", "longer than the maximum model length", "prompt is too
/// long"), with the prompt's tokens and the window when the message gives them. For front
/// ends that get a server's message from elsewhere (an SDK's exception): the engine lowers
/// its prompt limit and packs again on [`ContextTooLong`](crate::model::ModelError::ContextTooLong).
///
/// ```
/// use synthkit::backend::http::context_error_in;
/// use synthkit::model::ModelError;
/// let said = "Error code: 400 - {'error': {'message': \"This model's maximum context length is 2048 tokens. However, your messages resulted in 3027 tokens.\"}}";
/// match context_error_in(said) {
///     Some(ModelError::ContextTooLong { prompt_tokens, context_window, .. }) => {
///         assert_eq!((prompt_tokens, context_window), (Some(3027), Some(2048)));
///     }
///     other => panic!("{other:?}"),
/// }
/// assert!(context_error_in("connection refused").is_none());
/// ```
pub fn context_error_in(message: &str) -> Option<crate::model::ModelError> {
    let json: Option<serde_json::Value> = serde_json::from_str(message).ok();
    errors::context_error(json.as_ref(), message, None)
}

/// An HTTP client with synthkit's user agent and `connect_timeout`.
pub(crate) fn build_client(connect_timeout: Duration) -> Result<reqwest::Client, ModelError> {
    crate::tls::install_default_provider();
    reqwest::Client::builder()
        .user_agent(concat!("synthkit/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(connect_timeout)
        .build()
        .map_err(|e| {
            ModelError::Other(format!(
                "cannot build the HTTP client: {}",
                errors::describe(&e)
            ))
        })
}

/// The client a backend sends with: the caller's own (`given`), else [`build_client`].
pub(crate) fn given_or_built(
    given: Option<&reqwest::Client>,
    connect_timeout: Duration,
) -> Result<reqwest::Client, ModelError> {
    match given {
        Some(client) => Ok(client.clone()),
        None => build_client(connect_timeout),
    }
}

/// A header that carries a secret (`Bearer sk-...`, an `x-api-key`): marked sensitive,
/// so the HTTP stack never shows it.
pub(crate) fn secret_header(value: &str) -> Result<HeaderValue, ModelError> {
    let mut v = HeaderValue::from_str(value).map_err(|_| {
        ModelError::Other("the API key contains characters not allowed in an HTTP header".into())
    })?;
    v.set_sensitive(true);
    Ok(v)
}

/// The headers that carry `key` as `name: {prefix}{key}` (none without a key).
pub(crate) fn key_headers(
    name: HeaderName,
    prefix: &str,
    key: Option<&SecretString>,
) -> Result<HeaderMap, ModelError> {
    let mut headers = HeaderMap::new();
    if let Some(key) = key {
        headers.insert(
            name,
            secret_header(&format!("{prefix}{}", key.expose_secret()))?,
        );
    }
    Ok(headers)
}

/// One request: where, with what, and within what.
pub(crate) struct Post<'a> {
    pub client: &'a reqwest::Client,
    pub url: &'a str,
    /// Auth and API headers (`Content-Type: application/json` is added).
    pub headers: HeaderMap,
    /// The key, redacted from every error.
    pub key: Option<&'a SecretString>,
    /// The most bytes read of a reply.
    pub max_reply_bytes: usize,
}

impl Post<'_> {
    /// Sends `body` once (the seam where a retry layer would sit): the response when its
    /// status is a success, else the mapped error. The response headers (and an error
    /// body) must come within what is left of the request timeout.
    pub(crate) async fn send(
        self,
        body: &Value,
        clock: &CallClock,
    ) -> Result<reqwest::Response, ModelError> {
        let payload = serde_json::to_vec(body)
            .map_err(|e| ModelError::Other(format!("cannot encode the request: {e}")))?;
        let req = self
            .client
            .post(self.url)
            .headers(self.headers)
            .header(CONTENT_TYPE, "application/json")
            .body(payload);
        let response = tokio::time::timeout(clock.request_left(), req.send())
            .await
            .map_err(|_| clock.request_timed_out())?
            .map_err(|e| clock.transport(&e, self.key))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let headers = response.headers().clone();
        // Only the start of an error body is shown: the rest is never read.
        let limit = self.max_reply_bytes.min(body::MAX_ERROR_BODY_BYTES);
        let bytes = tokio::time::timeout(clock.request_left(), body::read_prefix(response, limit))
            .await
            .map_err(|_| clock.request_timed_out())?
            .map_err(|e| clock.transport(&e, self.key))?;
        Err(errors::from_status(
            status.as_u16(),
            &headers,
            &bytes,
            self.key,
        ))
    }

    /// Sends `body` once and reads the whole reply (within what is left of the request
    /// timeout and the reply cap).
    pub(crate) async fn fetch(
        self,
        body: &Value,
        clock: &CallClock,
    ) -> Result<Vec<u8>, ModelError> {
        let key = self.key;
        let max = self.max_reply_bytes;
        let response = self.send(body, clock).await?;
        read_body(response, clock, max, key).await
    }
}

/// The whole body of a successful `response`, within what is left of the request timeout
/// and `max_bytes` ([`ModelError::ReplyTooLarge`] past it).
pub(crate) async fn read_body(
    response: reqwest::Response,
    clock: &CallClock,
    max_bytes: usize,
    key: Option<&SecretString>,
) -> Result<Vec<u8>, ModelError> {
    tokio::time::timeout(clock.request_left(), body::read_capped(response, max_bytes))
        .await
        .map_err(|_| clock.request_timed_out())?
        .map_err(|e| e.into_model_error(|e| clock.transport(e, key)))
}

/// A backend's connection to its server: the client it sends with, and whether a
/// discovery request timed out (then the rest of discovery is skipped, so a hanging
/// server costs one discovery timeout before the first call).
#[derive(Debug)]
pub(crate) struct Link {
    pub client: reqwest::Client,
    stalled: AtomicBool,
}

impl Link {
    /// The most time discovery waits for one answer.
    const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(10);

    /// A link with `transport`'s client (fails only if it cannot be built).
    pub(crate) fn new(transport: &Transport) -> Result<Self, ModelError> {
        Ok(Self {
            client: transport.client()?,
            stalled: AtomicBool::new(false),
        })
    }

    /// Whether a discovery request timed out.
    pub(crate) fn stalled(&self) -> bool {
        self.stalled.load(Ordering::Relaxed)
    }

    /// `GET url` with `headers` as JSON, within the discovery timeout and the reply cap;
    /// `None` for no usable answer, and at once after a discovery request timed out.
    pub(crate) async fn discover(
        &self,
        transport: &Transport,
        url: &str,
        headers: HeaderMap,
    ) -> Option<Value> {
        if self.stalled() {
            return None;
        }
        let limit = transport.timeout.min(Self::DISCOVERY_TIMEOUT);
        let caps = (limit, transport.max_reply_bytes);
        let key = transport.api_key.as_ref();
        match get_json(&self.client, url, headers, caps, key).await {
            Fetched::Json(v) => Some(v),
            Fetched::Nothing => None,
            Fetched::TimedOut => {
                if !self.stalled.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        url = %crate::secret::redact_url(url),
                        "the server did not answer discovery within {limit:?}; skipping the rest of discovery (model calls wait up to the request timeout, {:?})",
                        transport.timeout
                    );
                }
                None
            }
        }
    }

    /// One request to `url` with `headers` under `transport`'s key and reply cap.
    pub(crate) fn post<'a>(
        &'a self,
        transport: &'a Transport,
        url: &'a str,
        headers: HeaderMap,
    ) -> Post<'a> {
        Post {
            client: &self.client,
            url,
            headers,
            key: transport.api_key.as_ref(),
            max_reply_bytes: transport.max_reply_bytes,
        }
    }
}

/// The extra body fields that set the reply's token cap: synthkit sets it on every call
/// from the output reserve, and rate limits (`--tpm`) charge that reserve, so an extra
/// field overriding it would send more than is charged.
pub const EXTRA_BODY_OUTPUT_CAPS: [&str; 4] = [
    "max_tokens",
    "max_completion_tokens",
    "n_predict",
    "max_new_tokens",
];

/// The extra body fields that ask for several replies per call (each costing its own
/// output tokens, which the budget does not charge): refused above 1.
pub const EXTRA_BODY_REPLY_COUNTS: [&str; 2] = ["n", "best_of"];

/// Refuses extra body fields (`OpenAiConfig::extra_body`, `AnthropicConfig::extra_body`,
/// the CLI's `--extra-body`) that would make a call cost more than the token budget
/// charges for it: one that sets the output cap ([`EXTRA_BODY_OUTPUT_CAPS`]; set the
/// output reserve instead), or asks for more than one reply ([`EXTRA_BODY_REPLY_COUNTS`]
/// above 1). The message says what to use instead.
///
/// ```
/// use serde_json::json;
/// use synthkit::backend::http::check_extra_body;
///
/// let ok = json!({"top_k": 40, "n": 1});
/// assert!(check_extra_body(ok.as_object().unwrap()).is_ok());
/// let capped = json!({"max_tokens": 100000});
/// assert!(check_extra_body(capped.as_object().unwrap()).unwrap_err().contains("--num-output"));
/// let many = json!({"n": 4});
/// assert!(check_extra_body(many.as_object().unwrap()).is_err());
/// ```
pub fn check_extra_body(extra: &serde_json::Map<String, Value>) -> Result<(), String> {
    if let Some(key) = EXTRA_BODY_OUTPUT_CAPS
        .iter()
        .find(|k| extra.contains_key(**k))
    {
        return Err(format!(
            "the extra body field `{key}` would override the reply's token cap, which synthkit sets on every call from the output reserve (and charges against the token budget): remove it and set the output reserve instead (--num-output, `num_output`)"
        ));
    }
    for key in EXTRA_BODY_REPLY_COUNTS {
        if let Some(v) = extra.get(key)
            && v.as_u64() != Some(1)
        {
            return Err(format!(
                "the extra body field `{key}` = {} asks for several replies per call, which synthkit neither reads nor charges against the token budget: remove it (only 1 is accepted)",
                crate::model::excerpt(&v.to_string(), 40)
            ));
        }
    }
    Ok(())
}

/// A request body from its `fields` with the configured `extra` fields added last (an
/// extra field replaces one of the same name).
pub(crate) fn body_with_extra(
    mut fields: serde_json::Map<String, Value>,
    extra: &serde_json::Map<String, Value>,
) -> Value {
    for (k, v) in extra {
        fields.insert(k.clone(), v.clone());
    }
    Value::Object(fields)
}

/// Whether a reply is JSON (a server that ignored `stream: true` answers whole).
pub(crate) fn is_json(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

/// What a discovery `GET` got.
#[derive(Debug)]
pub(crate) enum Fetched {
    /// A JSON answer.
    Json(Value),
    /// No usable answer (an error status, not JSON, too large, a failed connection).
    Nothing,
    /// No answer within the time allowed.
    TimedOut,
}

/// `GET url` with `headers` within `limit` and `max_bytes`, as JSON; never fails (`key`
/// is redacted from what is logged).
pub(crate) async fn get_json(
    client: &reqwest::Client,
    url: &str,
    headers: HeaderMap,
    (limit, max_bytes): (Duration, usize),
    key: Option<&SecretString>,
) -> Fetched {
    let fetched = match client.get(url).headers(headers).timeout(limit).send().await {
        Ok(r) if r.status().is_success() => body::read_capped(r, max_bytes).await,
        Ok(r) => {
            tracing::debug!(status = r.status().as_u16(), "discovery: no answer");
            return Fetched::Nothing;
        }
        Err(e) => Err(body::BodyError::Transport(e)),
    };
    match fetched {
        Ok(bytes) => serde_json::from_slice(&bytes).map_or(Fetched::Nothing, Fetched::Json),
        Err(body::BodyError::TooLarge { limit }) => {
            tracing::debug!(
                url = %crate::secret::redact_url(url),
                limit,
                "discovery: the answer is larger than the reply cap"
            );
            Fetched::Nothing
        }
        Err(body::BodyError::Transport(e)) if e.is_timeout() => Fetched::TimedOut,
        Err(body::BodyError::Transport(e)) => {
            let error = errors::redact(&errors::describe(&e), key);
            tracing::debug!(%error, "discovery failed");
            Fetched::Nothing
        }
    }
}
