//! [`ModelError`]: what went wrong in a model call, split by what the caller must do.

use std::time::Duration;

/// Errors from a model, split by what the caller must do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The prompt is longer than the model's context: re-pack with a smaller budget.
    #[error(
        "the prompt is too long for the model's context{}: give the model a smaller context window or output reserve (server said: {message})",
        fmt_excess(*.prompt_tokens, *.context_window)
    )]
    ContextTooLong {
        /// What the server said.
        message: String,
        /// The prompt's tokens as the server counted them, if it said.
        prompt_tokens: Option<u64>,
        /// The server's context size, if it said.
        context_window: Option<u64>,
    },
    /// The server refused the credentials.
    #[error("the server refused the credentials (HTTP {status}): check the API key; body: {body}")]
    Auth {
        /// HTTP status.
        status: u16,
        /// The response body (secrets redacted).
        body: String,
    },
    /// Too many requests: wait and retry.
    #[error("rate limited by the server (HTTP {status}){}: slow down or retry later; body: {body}", retry_after.map(|d| format!(", retry after {:.1}s", d.as_secs_f64())).unwrap_or_default())]
    RateLimited {
        /// HTTP status.
        status: u16,
        /// How long the server asked to wait.
        retry_after: Option<Duration>,
        /// The response body.
        body: String,
    },
    /// A server-side failure (5xx): may succeed on retry.
    #[error("server error (HTTP {status}): {body}")]
    Server {
        /// HTTP status.
        status: u16,
        /// The response body.
        body: String,
    },
    /// The server rejected the request (4xx other than the above).
    #[error("the server rejected the request (HTTP {status}): {body}")]
    BadRequest {
        /// HTTP status.
        status: u16,
        /// The response body.
        body: String,
    },
    /// No answer in time. The message says which timeout fired, how long the call had
    /// actually waited, and which setting to change.
    #[error("{}", fmt_timeout(*.kind, *.waited, *.limit))]
    Timeout {
        /// Which timeout fired.
        kind: TimeoutKind,
        /// How long the call had waited when it gave up (measured, not configured).
        waited: Duration,
        /// The configured limit that fired.
        limit: Duration,
    },
    /// The connection failed or was reset.
    #[error("connection to the model failed: {0}")]
    Connection(String),
    /// The reply could not be understood.
    #[error("the model's reply could not be understood: {0}")]
    Malformed(String),
    /// A streamed reply ended before it was complete.
    #[error("the model's streamed reply was cut off: {0}")]
    Incomplete(String),
    /// The reply was larger than the backend accepts (the OpenAI-compatible backend's
    /// `OpenAiConfig::max_reply_bytes`, 8 MiB by default); reading stopped at the cap, so
    /// the reply was never held whole. Not transient: the same request would get the
    /// same reply.
    #[error(
        "the model's reply is larger than the {} allowed, so reading stopped there: raise the reply size cap (`OpenAiConfig::with_max_reply_bytes`) if replies this large are expected, or check the server",
        fmt_bytes(*.limit)
    )]
    ReplyTooLarge {
        /// The cap that was passed, in bytes.
        limit: usize,
    },
    /// The model declined to answer: a refusal (OpenAI's `refusal`, Anthropic's
    /// `stop_reason: "refusal"`) or a reply stopped by the server's content filter
    /// (`finish_reason: "content_filter"`), with or without partial text. Not transient:
    /// the same request gets the same refusal.
    #[error(
        "the model refused to answer ({reason}): rephrase the question or leave out the context it objects to, or use another model"
    )]
    Refused {
        /// What the server said (the refusal's start, or which stop reason).
        reason: String,
    },
    /// The reply has no text: only tool calls, or only reasoning ("thinking"). Not
    /// transient: the same request gets the same kind of reply.
    #[error(
        "the model's reply has no text, only {what}: turn tool calling or thinking off for this model on the server (or raise the output reserve, if thinking used it up before any answer), or use another model"
    )]
    NoText {
        /// What the reply held instead (`tool calls`, `reasoning`).
        what: String,
    },
    /// A structured reply is not JSON.
    #[error("the model's structured reply is not valid JSON for the schema: {0}")]
    Structured(String),
    /// A structured reply is JSON that breaks the request's schema.
    #[error(
        "the model's structured reply does not follow the output schema at {path}: {message}; use a model or server that enforces JSON schemas, or simplify the schema"
    )]
    SchemaMismatch {
        /// The JSON pointer of the first violation (`/` for the whole value).
        path: String,
        /// What is wrong there.
        message: String,
    },
    /// A layer around the model (a rate limiter, a cache) failed the call.
    #[error("{layer}: {source}")]
    Layer {
        /// The layer (`limiter`, `cache`, ...).
        layer: &'static str,
        /// What went wrong.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

/// Which timeout of a model call fired ([`ModelError::Timeout`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TimeoutKind {
    /// The connection to the server could not be opened in time (the OpenAI backend's
    /// `OpenAiConfig::connect_timeout`).
    Connect,
    /// The reply did not come in time: the whole reply of a non-streamed call, or the
    /// first event of a stream (`OpenAiConfig::timeout`).
    Request,
    /// A stream went silent for too long between two events (`OpenAiConfig::idle_timeout`).
    Idle,
}

impl TimeoutKind {
    /// `connect`, `request` or `idle`.
    pub fn as_str(self) -> &'static str {
        match self {
            TimeoutKind::Connect => "connect",
            TimeoutKind::Request => "request",
            TimeoutKind::Idle => "idle",
        }
    }
}

impl std::fmt::Display for TimeoutKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A duration for messages: `850ms` below a second, else `12.3s`.
fn fmt_duration(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

fn fmt_timeout(kind: TimeoutKind, waited: Duration, limit: Duration) -> String {
    let (what, hint) = match kind {
        TimeoutKind::Connect => (
            "could not connect to the model's server",
            "check the server address, or raise the connect timeout (`OpenAiConfig::with_connect_timeout`)",
        ),
        TimeoutKind::Request => (
            "no answer from the model",
            "raise the request timeout (`OpenAiConfig::with_timeout`) for long prompts or slow servers, or check the server",
        ),
        TimeoutKind::Idle => (
            "the model's streamed reply stalled",
            "raise the idle timeout (`OpenAiConfig::with_idle_timeout`), or check the server",
        ),
    };
    format!(
        "{what}: gave up after {} (the {kind} timeout is {}): {hint}",
        fmt_duration(waited),
        fmt_duration(limit)
    )
}

/// A byte count for messages: `8388608 bytes (8.0 MiB)`, or `512 bytes`.
fn fmt_bytes(n: usize) -> String {
    const KIB: usize = 1 << 10;
    const MIB: usize = 1 << 20;
    // Only for display: the float's rounding is harmless.
    #[allow(clippy::cast_precision_loss)]
    let scaled = |unit: usize| n as f64 / unit as f64;
    if n >= MIB {
        format!("{n} bytes ({:.1} MiB)", scaled(MIB))
    } else if n >= KIB {
        format!("{n} bytes ({:.1} KiB)", scaled(KIB))
    } else {
        format!("{n} bytes")
    }
}

fn fmt_excess(prompt: Option<u64>, window: Option<u64>) -> String {
    match (prompt, window) {
        (Some(p), Some(w)) => format!(" ({p} tokens > {w})"),
        (Some(p), None) => format!(" ({p} tokens)"),
        _ => String::new(),
    }
}

impl ModelError {
    /// Whether the same request may succeed if sent again later.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ModelError::RateLimited { .. }
                | ModelError::Server { .. }
                | ModelError::Timeout { .. }
                | ModelError::Connection(_)
                | ModelError::Incomplete(_)
        )
    }
}
