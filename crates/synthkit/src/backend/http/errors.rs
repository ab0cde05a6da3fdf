//! Mapping HTTP failures to [`ModelError`]: statuses, provider error bodies (OpenAI's,
//! llama.cpp's, vLLM's and Anthropic's), transport errors and `Retry-After`; redaction and
//! truncation of bodies. Shared by every HTTP backend.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::header::HeaderMap;
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;

use crate::model::ModelError;

/// The most bytes of a server body kept in an error.
pub(crate) const MAX_BODY_BYTES: usize = 2048;

const REDACTED: &str = "[REDACTED]";

/// `text` with every occurrence of the API key replaced by `[REDACTED]`.
pub(crate) fn redact(text: &str, key: Option<&SecretString>) -> String {
    match key.map(|k| k.expose_secret()) {
        Some(k) if !k.is_empty() && text.contains(k) => text.replace(k, REDACTED),
        _ => text.to_string(),
    }
}

/// At most [`MAX_BODY_BYTES`] of `text` (cut at a character boundary), redacted, its
/// control characters escaped ([`crate::text::printable`]: a server's body must not forge
/// log lines or restyle a terminal).
pub(crate) fn clip(text: &str, key: Option<&SecretString>) -> String {
    // Redact first so a key cut at the boundary cannot leak in part.
    let text = crate::text::printable::printable(&redact(text, key)).into_owned();
    if text.len() <= MAX_BODY_BYTES {
        return text;
    }
    let mut end = MAX_BODY_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = text.get(..end).unwrap_or_default().to_string();
    out.push_str(&format!("... ({} bytes in all)", text.len()));
    out
}

/// The error for a non-success HTTP status with its body.
pub(crate) fn from_status(
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    key: Option<&SecretString>,
) -> ModelError {
    let text = String::from_utf8_lossy(body);
    let json = serde_json::from_str::<Value>(&text).ok();
    match status {
        401 | 403 => ModelError::Auth {
            status,
            body: clip(&text, key),
        },
        // 529 is Anthropic's "overloaded_error": an overload like a 429, with the same
        // `retry-after`, so the retry and adaptive layers treat it alike.
        429 | 529 => ModelError::RateLimited {
            status,
            retry_after: retry_after(headers, SystemTime::now()),
            body: clip(&text, key),
        },
        _ => {
            if let Some(e) = context_error(json.as_ref(), &text, key) {
                return e;
            }
            let body = clip(&text, key);
            match status {
                500..=599 => ModelError::Server { status, body },
                400..=499 => ModelError::BadRequest { status, body },
                _ => ModelError::Other(format!("unexpected HTTP status {status}: {body}")),
            }
        }
    }
}

/// The error for an `error` object found in a successful response or inside a stream.
pub(crate) fn from_error_object(error: &Value, key: Option<&SecretString>) -> ModelError {
    let wrapped = serde_json::json!({ "error": error });
    let text = wrapped.to_string();
    if let Some(e) = context_error(Some(&wrapped), &text, key) {
        return e;
    }
    let kind = error
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let code = error
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .or(match kind {
            "authentication_error" | "permission_error" => Some(401),
            "rate_limit_error" | "rate_limit_exceeded" => Some(429),
            "overloaded_error" => Some(529),
            "invalid_request_error" => Some(400),
            _ => None,
        });
    let body = clip(&text, key);
    match code {
        Some(status @ (401 | 403)) => ModelError::Auth { status, body },
        Some(status @ (429 | 529)) => ModelError::RateLimited {
            status,
            retry_after: None,
            body,
        },
        Some(status @ 400..=499) => ModelError::BadRequest { status, body },
        // An error in the middle of a reply is the server's failure.
        Some(status) => ModelError::Server { status, body },
        None => ModelError::Server { status: 500, body },
    }
}

/// A context-length error, recognised by llama.cpp's `exceed_context_size_error` type,
/// OpenAI's `context_length_exceeded` code, or the wording of vLLM, Anthropic
/// (`prompt is too long: 201234 tokens > 200000 maximum`) and others.
pub(crate) fn context_error(
    json: Option<&Value>,
    text: &str,
    key: Option<&SecretString>,
) -> Option<ModelError> {
    // `{"error": {...}}` (OpenAI, llama.cpp, newer vLLM) or a flat object (older vLLM).
    let err = json.map(|v| match v.get("error") {
        Some(e) if e.is_object() => e,
        _ => v,
    });
    let field = |name: &str| err.and_then(|e| e.get(name));
    let message = field("message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| text.to_string());
    let kind = field("type").and_then(Value::as_str).unwrap_or_default();
    let code = field("code").and_then(Value::as_str).unwrap_or_default();
    let lower = message.to_ascii_lowercase();
    let by_marker = kind == "exceed_context_size_error"
        || code == "context_length_exceeded"
        || kind == "context_length_exceeded";
    let by_words = [
        "maximum context length",
        "exceeds the available context size",
        "context length exceeded",
        "longer than the maximum model length",
        "context_length_exceeded",
        "exceed_context_size_error",
        "prompt is too long",
    ]
    .iter()
    .any(|p| lower.contains(p));
    if !by_marker && !by_words {
        return None;
    }
    let prompt_tokens = field("n_prompt_tokens")
        .and_then(Value::as_u64)
        .or_else(|| {
            number_after(&lower, "resulted in ")
                .or_else(|| number_before(&lower, " in the messages"))
                .or_else(|| number_after(&lower, "request has "))
                .or_else(|| number_after(&lower, "prompt (length "))
                .or_else(|| number_after(&lower, "request ("))
                .or_else(|| number_after(&lower, "you requested "))
                .or_else(|| number_after(&lower, "prompt is too long: "))
        });
    let context_window = field("n_ctx").and_then(Value::as_u64).or_else(|| {
        number_after(&lower, "maximum context length is ")
            .or_else(|| number_after(&lower, "maximum model length of "))
            .or_else(|| number_after(&lower, "available context size ("))
            .or_else(|| number_after(&lower, " tokens > "))
    });
    Some(ModelError::ContextTooLong {
        message: clip(&message, key),
        prompt_tokens,
        context_window,
    })
}

/// The number written right after `needle` in `hay`.
fn number_after(hay: &str, needle: &str) -> Option<u64> {
    let start = hay.find(needle)? + needle.len();
    let digits: String = hay
        .get(start..)?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// The number written right before `needle` in `hay`.
fn number_before(hay: &str, needle: &str) -> Option<u64> {
    let end = hay.find(needle)?;
    let head = hay.get(..end)?;
    let start = head
        .rfind(|c: char| !c.is_ascii_digit())
        .map_or(0, |i| i + 1);
    head.get(start..)?.parse().ok()
}

/// The longest wait taken from a peer (`Retry-After`, `retry-after-ms`): one day. A
/// larger (or overflowing) value is taken as this much; the retry layer then gives up at
/// once, since no retry budget is that long.
pub(crate) const MAX_PEER_WAIT: Duration = Duration::from_secs(86_400);

/// `secs` seconds from a peer as a wait: `None` for a negative, NaN or unparsable value,
/// at most [`MAX_PEER_WAIT`] (infinite and huge values included). Never panics.
pub(crate) fn peer_seconds(secs: f64) -> Option<Duration> {
    if secs.is_nan() || secs < 0.0 {
        return None;
    }
    Some(
        Duration::try_from_secs_f64(secs)
            .unwrap_or(MAX_PEER_WAIT)
            .min(MAX_PEER_WAIT),
    )
}

/// How long a 429 (or 529) response asks to wait: `retry-after-ms`, else `Retry-After` in seconds
/// or as an HTTP date; at most [`MAX_PEER_WAIT`], and `None` for what is not a wait.
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(wait) = header("retry-after-ms")
        .and_then(|v| v.parse::<f64>().ok())
        .and_then(|ms| peer_seconds(ms / 1000.0))
    {
        return Some(wait);
    }
    let value = header("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return peer_seconds(secs);
    }
    let at = parse_http_date(value)?;
    Some(
        at.duration_since(now)
            .unwrap_or(Duration::ZERO)
            .min(MAX_PEER_WAIT),
    )
}

/// Parses an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the form HTTP requires.
pub(crate) fn parse_http_date(s: &str) -> Option<SystemTime> {
    let rest = s.split_once(',').map_or(s, |(_, r)| r);
    let mut parts = rest.split_whitespace();
    let day: u64 = parts.next()?.parse().ok()?;
    let month = parts.next()?;
    let year: u64 = parts.next()?.parse().ok()?;
    let time = parts.next()?;
    let zone = parts.next()?;
    if parts.next().is_some() || !(zone == "GMT" || zone == "UTC") {
        return None;
    }
    const MONTHS: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let month = MONTHS
        .iter()
        .position(|m| month.eq_ignore_ascii_case(m))
        .and_then(|m| u64::try_from(m + 1).ok())?;
    let mut hms = time.split(':').map(|p| p.parse::<u64>().ok());
    let (h, m, sec) = (hms.next()??, hms.next()??, hms.next()??);
    if hms.next().is_some() || !(1..=31).contains(&day) || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    // Four-digit years only: larger ones would overflow the arithmetic below.
    if !(1970..=9999).contains(&year) {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm), years from 1970 on.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe).checked_sub(719_468)?;
    let secs = days * 86_400 + h * 3600 + m * 60 + sec;
    UNIX_EPOCH.checked_add(Duration::from_secs(secs))
}

/// The error for a failed request (no HTTP status): a timeout (built by `timed_out`,
/// told whether the connection was still being opened), a connection or body failure.
pub(crate) fn from_reqwest(
    e: &reqwest::Error,
    key: Option<&SecretString>,
    timed_out: impl FnOnce(bool) -> ModelError,
) -> ModelError {
    if e.is_timeout() {
        return timed_out(e.is_connect());
    }
    // The backend parses JSON itself, so a reqwest decode or body error means the body
    // could not be read to its end: a broken connection, which a retry may fix.
    ModelError::Connection(redact(&describe(e), key))
}

/// An error with its chain of causes, `a: b: c`, with the user-info of any URL in it
/// hidden (reqwest's errors name the URL they were for).
pub(crate) fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    crate::secret::redact_urls(&crate::error::message_with_sources(e))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn redacts_and_clips() {
        let key = SecretString::from("sk-secret");
        let body = format!("{}sk-secret", "x".repeat(3000));
        let out = clip(&body, Some(&key));
        assert!(!out.contains("sk-secret") && !out.contains("sk-sec"));
        assert!(out.len() < 2100);
        assert_eq!(redact("a sk-secret b", Some(&key)), "a [REDACTED] b");
        assert_eq!(redact("abc", Some(&SecretString::from(""))), "abc");
        let multibyte = "é".repeat(2000);
        assert!(clip(&multibyte, None).starts_with('é'));
        assert_eq!(
            clip("bad\n2026 INFO forged \u{1b}[31m", None),
            "bad\\n2026 INFO forged \\u{1b}[31m"
        );
    }

    #[test]
    fn llama_cpp_context_error() {
        let body = br#"{"error":{"code":400,"message":"request (3027 tokens) exceeds the available context size (2048 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":3027,"n_ctx":2048}}"#;
        let e = from_status(400, &HeaderMap::new(), body, None);
        assert!(
            matches!(
                &e,
                ModelError::ContextTooLong {
                    message,
                    prompt_tokens: Some(3027),
                    context_window: Some(2048),
                } if message == "request (3027 tokens) exceeds the available context size (2048 tokens), try increasing it"
            ),
            "{e:?}"
        );
    }

    /// The prompt tokens and the window a 400 with `body` reports, which must be a
    /// context error.
    fn context_numbers(body: &[u8]) -> (Option<u64>, Option<u64>) {
        match from_status(400, &HeaderMap::new(), body, None) {
            ModelError::ContextTooLong {
                prompt_tokens,
                context_window,
                ..
            } => (prompt_tokens, context_window),
            e => unreachable!("{e:?}"),
        }
    }

    #[test]
    fn openai_and_vllm_context_errors() {
        let openai = br#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
        assert_eq!(context_numbers(openai), (Some(9000), Some(8192)));
        let vllm = br#"{"object":"error","message":"This model's maximum context length is 2048 tokens. However, you requested 3027 tokens (3011 in the messages, 16 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#;
        assert_eq!(context_numbers(vllm), (Some(3011), Some(2048)));
        let vllm_new = br#"{"error":{"message":"'max_tokens' or 'max_completion_tokens' is too large: 16. This model's maximum context length is 2048 tokens and your request has 2040 input tokens (16 > 2048 - 2040).","type":"BadRequestError","code":400}}"#;
        assert_eq!(context_numbers(vllm_new), (Some(2040), Some(2048)));
    }

    #[test]
    fn anthropic_overloads_and_context_errors() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("2"));
        let body =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert!(matches!(
            from_status(529, &h, body, None),
            ModelError::RateLimited { status: 529, retry_after: Some(d), .. } if d == Duration::from_secs(2)
        ));
        assert!(matches!(
            from_error_object(
                &serde_json::json!({"type": "overloaded_error", "message": "Overloaded"}),
                None
            ),
            ModelError::RateLimited {
                status: 529,
                retry_after: None,
                ..
            }
        ));
        let long = br#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 201234 tokens > 200000 maximum"}}"#;
        assert_eq!(context_numbers(long), (Some(201_234), Some(200_000)));
    }

    #[test]
    fn statuses() {
        let h = HeaderMap::new();
        assert!(matches!(
            from_status(401, &h, b"no", None),
            ModelError::Auth { status: 401, .. }
        ));
        assert!(matches!(
            from_status(403, &h, b"no", None),
            ModelError::Auth { status: 403, .. }
        ));
        assert!(matches!(
            from_status(503, &h, b"down", None),
            ModelError::Server { status: 503, .. }
        ));
        assert!(matches!(
            from_status(
                404,
                &h,
                b"{\"error\":{\"message\":\"File Not Found\"}}",
                None
            ),
            ModelError::BadRequest { status: 404, .. }
        ));
        assert!(matches!(
            from_error_object(&serde_json::json!({"message": "boom"}), None),
            ModelError::Server { status: 500, .. }
        ));
        assert!(matches!(
            from_error_object(
                &serde_json::json!({"message": "no", "type": "authentication_error"}),
                None
            ),
            ModelError::Auth { status: 401, .. }
        ));
    }

    #[test]
    fn retry_after_forms() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h, now), None);
        h.insert("retry-after", HeaderValue::from_static("7"));
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(7)));
        h.insert("retry-after", HeaderValue::from_static("0.5"));
        assert_eq!(retry_after(&h, now), Some(Duration::from_millis(500)));
        h.insert(
            "retry-after",
            HeaderValue::from_static("Sun, 06 Nov 1994 08:50:07 GMT"),
        );
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(30)));
        h.insert(
            "retry-after",
            HeaderValue::from_static("Sun, 06 Nov 1994 08:00:00 GMT"),
        );
        assert_eq!(retry_after(&h, now), Some(Duration::ZERO));
        h.insert("retry-after", HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&h, now), None);
        h.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_after(&h, now), Some(Duration::from_millis(250)));
    }

    #[test]
    fn hostile_waits_never_panic_and_are_capped() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_777);
        let wait = |name: &'static str, value: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(name, HeaderValue::from_static(value));
            retry_after(&h, now)
        };
        for huge in ["1e20", "1e308", "19000000000000000000", "inf", "Infinity"] {
            assert_eq!(wait("retry-after", huge), Some(MAX_PEER_WAIT), "{huge}");
        }
        for bad in ["-1", "NaN", "-inf", "", "1e", "0x10"] {
            assert_eq!(wait("retry-after", bad), None, "{bad}");
        }
        assert_eq!(wait("retry-after-ms", "1e30"), Some(MAX_PEER_WAIT));
        assert_eq!(wait("retry-after-ms", "-5"), None);
        assert_eq!(
            wait("retry-after", "Sun, 06 Nov 99999999999999999 08:00:00 GMT"),
            None
        );
        assert_eq!(
            wait("retry-after", "Fri, 31 Dec 9999 23:59:59 GMT"),
            Some(MAX_PEER_WAIT)
        );
    }

    #[test]
    fn http_dates() {
        assert_eq!(
            parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"),
            Some(UNIX_EPOCH)
        );
        assert_eq!(
            parse_http_date("Tue, 29 Feb 2028 12:00:00 GMT")
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map(|d| d.as_secs()),
            Some(1_835_438_400)
        );
        assert_eq!(parse_http_date("Tue, 29 Foo 2028 12:00:00 GMT"), None);
        assert_eq!(parse_http_date("Tue, 29 Feb 2028 12:00:00 PST"), None);
    }

    #[test]
    fn numbers() {
        assert_eq!(number_after("is 12 tokens", "is "), Some(12));
        assert_eq!(
            number_before("(3011 in the messages", " in the messages"),
            Some(3011)
        );
        assert_eq!(number_before("x in the messages", " in the messages"), None);
    }
}
