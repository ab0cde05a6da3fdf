//! [`Transport`]: how a backend reaches its server, whatever API the server speaks.

use std::fmt;
use std::time::Duration;

use secrecy::SecretString;

use super::clock::CallClock;
use crate::model::ModelError;
use crate::secret::redact_url;

/// How to reach a model server: where it is, the key, the timeouts, the HTTP client and
/// the cap on a reply. Shared by every HTTP backend
/// ([`OpenAiConfig::transport`](crate::backend::openai::OpenAiConfig::transport),
/// `anthropic::AnthropicConfig::transport`, feature `anthropic`);
/// what to ask of the server is each backend's own.
///
/// The API key is a [`SecretString`]: it never appears in `Debug` output, logs or
/// errors. A base URL with user-info (`http://user:password@host/v1`, sent as basic
/// authentication) is shown without it everywhere ([`crate::secret::redact_url`]:
/// `http://***@host/v1`).
///
/// ```
/// use std::time::Duration;
/// use synthkit::backend::http::Transport;
///
/// let t = Transport::new("http://me:hunter2@127.0.0.1:8080/v1")
///     .with_api_key("sk-secret")
///     .with_timeout(Duration::from_secs(30));
/// let shown = format!("{t:?}");
/// assert!(shown.contains("http://***@127.0.0.1:8080/v1"));
/// assert!(!shown.contains("hunter2") && !shown.contains("sk-secret"));
/// assert_eq!(t.root_url(), "http://me:hunter2@127.0.0.1:8080");
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct Transport {
    /// The API base URL (each backend says whether it ends with `/v1`).
    pub base_url: String,
    /// The API key (each backend says in which header it is sent); local servers need
    /// none.
    pub api_key: Option<SecretString>,
    /// The request timeout (default 600 s, as OpenAI's SDKs use). A non-streamed call must
    /// be answered in full within it; a streamed call must send its first event within
    /// it (a server reads the whole prompt before the first token, which takes minutes
    /// for long prompts on a CPU), after which only [`Transport::idle_timeout`] applies,
    /// so a stream that keeps producing tokens is never cut.
    pub timeout: Duration,
    /// How long opening the connection may take (default 10 s). Not used with an
    /// [`Transport::http_client`] of your own (set it on that client).
    pub connect_timeout: Duration,
    /// How long a stream may stay silent between two events once its first event came
    /// (default 120 s).
    pub idle_timeout: Duration,
    /// The HTTP client to send with (default `None`: one built with synthkit's user agent
    /// and [`Transport::connect_timeout`]). Give your own for proxies, custom root
    /// certificates, or one connection pool shared with the rest of your program; the
    /// per-call timeouts above still apply to every call.
    pub http_client: Option<reqwest::Client>,
    /// The most bytes read of one reply (default [`Transport::DEFAULT_MAX_REPLY_BYTES`],
    /// 8 MiB): a non-streamed body, or all the bytes of a streamed one (SSE framing
    /// included: at typical chunk sizes 8 MiB is some 35,000 streamed tokens), also the
    /// answers to discovery and token counting. Reading stops as soon as a reply passes
    /// it, with [`ModelError::ReplyTooLarge`], so a server that answers without end costs
    /// at most this much memory. Error bodies are read up to 64 KiB (or this cap, if
    /// smaller) and cut there.
    pub max_reply_bytes: usize,
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transport")
            .field("base_url", &redact_url(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| "[REDACTED]"))
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("http_client", &self.http_client.as_ref().map(|_| "custom"))
            .field("max_reply_bytes", &self.max_reply_bytes)
            .finish()
    }
}

impl Transport {
    /// The default request timeout ([`Transport::timeout`]): 600 s, as OpenAI's SDKs.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
    /// The default connect timeout ([`Transport::connect_timeout`]).
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
    /// The default idle timeout between stream events ([`Transport::idle_timeout`]).
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);
    /// The default cap on one reply's bytes ([`Transport::max_reply_bytes`]): 8 MiB.
    pub const DEFAULT_MAX_REPLY_BYTES: usize = 8 << 20;

    /// The server at `base_url`, with no key and the defaults.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            timeout: Self::DEFAULT_TIMEOUT,
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
            http_client: None,
            max_reply_bytes: Self::DEFAULT_MAX_REPLY_BYTES,
        }
    }

    setters! {
        /// Sets the base URL.
        pub fn with_base_url(url: impl Into<String>) => base_url;

        /// Sets the API key.
        pub fn with_api_key(key: impl Into<SecretString>) => Some(api_key);

        /// Sets the request timeout ([`Transport::timeout`]).
        pub fn with_timeout(timeout: Duration) => timeout;

        /// Sets the connect timeout ([`Transport::connect_timeout`]).
        pub fn with_connect_timeout(timeout: Duration) => connect_timeout;

        /// Sets the idle timeout between stream events ([`Transport::idle_timeout`]).
        pub fn with_idle_timeout(timeout: Duration) => idle_timeout;

        /// Sends with `client` ([`Transport::http_client`]) instead of a client of
        /// synthkit's own.
        pub fn with_http_client(client: reqwest::Client) => Some(http_client);

        /// Sets the most bytes read of one reply ([`Transport::max_reply_bytes`]).
        pub fn with_max_reply_bytes(bytes: usize) => max_reply_bytes;
    }

    /// The base URL without its query (and fragment) and without trailing slashes.
    pub fn base(&self) -> &str {
        let url = self.base_url.as_str();
        let end = url.find(['?', '#']).unwrap_or(url.len());
        url.get(..end).unwrap_or(url).trim_end_matches('/')
    }

    /// The base URL's query, without its `?` (`api-version=2024-06-01`, as Azure-style
    /// gateways want on every request), if it has one.
    pub fn query(&self) -> Option<&str> {
        let url = self.base_url.as_str();
        let (_, rest) = url.split_once('?')?;
        let query = rest.split('#').next().unwrap_or_default();
        (!query.is_empty()).then_some(query)
    }

    /// The server root: the base URL without its query, trailing slashes and `/v1`
    /// (where llama.cpp and vLLM serve `/props`, `/tokenize` and `/health`).
    pub fn root_url(&self) -> &str {
        let base = self.base();
        base.strip_suffix("/v1").unwrap_or(base)
    }

    /// The URL of `path` (`/chat/completions`) under the base URL, with the base URL's
    /// query: `http://host/v1?api-version=1` gives
    /// `http://host/v1/chat/completions?api-version=1`.
    ///
    /// ```
    /// use synthkit::backend::http::Transport;
    ///
    /// let t = Transport::new("http://127.0.0.1:8080/v1/?api-version=2024-06-01");
    /// assert_eq!(t.api_url("/models"), "http://127.0.0.1:8080/v1/models?api-version=2024-06-01");
    /// assert_eq!(t.root_join("/props"), "http://127.0.0.1:8080/props?api-version=2024-06-01");
    /// assert_eq!(Transport::new("http://h/v1").api_url("/models"), "http://h/v1/models");
    /// ```
    pub fn api_url(&self, path: &str) -> String {
        self.with_query(format!("{}{path}", self.base()))
    }

    /// The URL of `path` (`/props`) under the server root, with the base URL's query.
    pub fn root_join(&self, path: &str) -> String {
        self.with_query(format!("{}{path}", self.root_url()))
    }

    fn with_query(&self, mut url: String) -> String {
        if let Some(q) = self.query() {
            url.push('?');
            url.push_str(q);
        }
        url
    }

    /// Whether the server is the one at `api_url` (the same root, with or without
    /// `/v1`): an API's own server, whose model listing is no answer.
    pub(crate) fn is_server(&self, api_url: &str) -> bool {
        let other = api_url.trim_end_matches('/');
        self.root_url() == other.strip_suffix("/v1").unwrap_or(other)
    }

    /// Whether this is the server at `api_url` (an API's own, which wants a key) with
    /// no key: front ends refuse such a config before any call.
    pub(crate) fn lacks_key_for(&self, api_url: &str) -> bool {
        self.api_key.is_none() && self.is_server(api_url)
    }

    /// The client to send with: [`Transport::http_client`], else a new one with
    /// synthkit's user agent and [`Transport::connect_timeout`].
    pub(crate) fn client(&self) -> Result<reqwest::Client, ModelError> {
        super::given_or_built(self.http_client.as_ref(), self.connect_timeout)
    }

    /// A clock for one call started now, with these timeouts.
    pub(crate) fn clock(&self) -> CallClock {
        CallClock::start(self.timeout, self.connect_timeout)
    }

    /// The same transport with its request timeout at most `limit` (for probes and
    /// counting calls, which must not wait as long as a model call).
    pub(crate) fn capped(&self, limit: Duration) -> Self {
        let mut t = self.clone();
        t.timeout = t.timeout.min(limit);
        t
    }

    /// The limits of a stream started on `clock`.
    pub(crate) fn sse_limits(&self, clock: CallClock) -> super::sse::Limits {
        super::sse::Limits {
            clock,
            idle: self.idle_timeout,
            max_bytes: self.max_reply_bytes,
        }
    }

    /// Reads the whole body of a successful `response` within what is left of `clock`'s
    /// request timeout and the reply cap.
    pub(crate) async fn read_body(
        &self,
        response: reqwest::Response,
        clock: &CallClock,
    ) -> Result<Vec<u8>, ModelError> {
        super::read_body(response, clock, self.max_reply_bytes, self.api_key.as_ref()).await
    }

    /// The values of the settings that come from the environment, read through `lookup`
    /// (trimmed; empty means unset): the model (`SYNTHKIT_MODEL`), the base URL
    /// (`SYNTHKIT_BASE_URL`, else `base_url_var`) and the key (`key_var`).
    pub(crate) fn from_lookup(
        default_url: &str,
        (base_url_var, key_var): (&str, &str),
        lookup: impl Fn(&str) -> Option<String>,
    ) -> (Self, Option<String>) {
        let get = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let url = get("SYNTHKIT_BASE_URL")
            .or_else(|| get(base_url_var))
            .unwrap_or_else(|| default_url.to_string());
        let mut transport = Self::new(url);
        transport.api_key = get(key_var).map(SecretString::from);
        (transport, get("SYNTHKIT_MODEL"))
    }
}
