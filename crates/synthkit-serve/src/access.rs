//! Cross-site protection: which `Host` names and which web origins the service answers,
//! and that request bodies are JSON.
//!
//! A web page a user opens can make the browser send requests to a service on the user's
//! machine: a form post (`text/plain`, no preflight), a `fetch` from another origin, or a
//! DNS rebinding attack (the page's own host name resolved to 127.0.0.1, so the request
//! is same-origin to the browser but carries the page's `Host`). Without keys such a
//! request would spend the user's model budget. The service therefore refuses:
//!
//! - a `POST` body that is not `Content-Type: application/json` (415; browsers cannot send
//!   JSON cross-site without a CORS preflight);
//! - on a loopback bind, a `Host` that is not a loopback name or address (`localhost`,
//!   `127.0.0.1`, `[::1]`, any port) nor listed with [`AccessPolicy::allow_host`] (421);
//!   on another bind the `Host` is checked only when hosts are listed;
//! - a request carrying an `Origin` not listed with [`AccessPolicy::allow_origin`] (403).
//!   Listed origins get CORS headers, and their preflights are answered.
//!
//! `/healthz` and `/readyz` answer any `Host` (probes address a pod by its IP).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::http::{HeaderValue, Method, header};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::error::{ApiError, ServeError};

/// How long a browser may keep a preflight's answer.
const PREFLIGHT_MAX_AGE: Duration = Duration::from_secs(600);

/// The `Host` names and web origins the service accepts besides its own loopback names.
/// Empty by default: on a loopback bind only loopback hosts are answered, and no request
/// from a web page is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AccessPolicy {
    hosts: Vec<String>,
    origins: Vec<String>,
}

impl AccessPolicy {
    /// No extra host, no origin.
    pub fn new() -> Self {
        Self::default()
    }

    /// Also answers requests whose `Host` is `host` (a name or an address, any port;
    /// `*` turns the check off).
    pub fn allow_host(mut self, host: &str) -> Result<Self, ServeError> {
        let bad = |message: &str| ServeError::Access {
            value: host.to_string(),
            message: message.to_string(),
        };
        let h = host.trim();
        if h.is_empty() || h.contains(['/', ' ', '\t', '@', ',']) {
            return Err(bad(
                "give a host name or an address, without scheme or path (--allowed-host api.example.com)",
            ));
        }
        let name = host_name(h);
        let plain = h.trim_end_matches('.').to_ascii_lowercase();
        if name.is_empty() || (name != plain && !h.starts_with('[')) {
            return Err(bad(
                "give the host without a port: every port of that host is accepted",
            ));
        }
        self.hosts.push(name);
        Ok(self)
    }

    /// Answers requests from web pages at `origin` (`scheme://host[:port]`, or `*` for
    /// any origin), with CORS headers.
    pub fn allow_origin(mut self, origin: &str) -> Result<Self, ServeError> {
        let o = origin.trim();
        if o == "*" {
            self.origins.push("*".into());
            return Ok(self);
        }
        let normal = normalize_origin(o).ok_or_else(|| ServeError::Access {
            value: origin.to_string(),
            message: "an origin is scheme://host[:port] with no path, like https://app.example.com or http://localhost:3000".into(),
        })?;
        self.origins.push(normal);
        Ok(self)
    }

    /// The extra hosts, lowercased.
    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }

    /// The accepted origins, normalized.
    pub fn origins(&self) -> &[String] {
        &self.origins
    }

    fn any_host(&self) -> bool {
        self.hosts.iter().any(|h| h == "*")
    }

    /// Whether a request from a page at `origin` (an `Origin` header) is answered.
    pub fn origin_allowed(&self, origin: &HeaderValue) -> bool {
        if self.origins.iter().any(|o| o == "*") {
            return true;
        }
        let Some(normal) = origin.to_str().ok().and_then(normalize_origin) else {
            return false;
        };
        self.origins.contains(&normal)
    }
}

/// The checks as a middleware's state: the policy and whether the bind is loopback.
#[derive(Debug, Clone)]
pub(crate) struct AccessRules {
    policy: Arc<AccessPolicy>,
    loopback: bool,
}

impl AccessRules {
    pub(crate) fn new(policy: AccessPolicy, loopback_bind: bool) -> Self {
        Self {
            policy: Arc::new(policy),
            loopback: loopback_bind,
        }
    }

    /// Whether a request naming `host` (its `Host`, or the URI's authority) is answered.
    fn host_allowed(&self, host: Option<&str>) -> bool {
        let p = &self.policy;
        let checked = self.loopback || !p.hosts.is_empty();
        let Some(host) = host else {
            // No Host at all: not a browser (browsers always send one).
            return true;
        };
        if !checked || p.any_host() {
            return true;
        }
        let name = host_name(host);
        (self.loopback && is_loopback_name(&name)) || p.hosts.contains(&name)
    }

    /// tower-http's CORS layer for the listed origins (none listed: it adds nothing, and
    /// `refuse_origin` has refused every request with an `Origin` before it).
    pub(crate) fn cors_layer(&self) -> CorsLayer {
        let policy = Arc::clone(&self.policy);
        CorsLayer::new()
            .allow_origin(AllowOrigin::predicate(move |origin, _| {
                policy.origin_allowed(origin)
            }))
            .allow_methods([Method::GET, Method::POST])
            .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE])
            .expose_headers([header::RETRY_AFTER])
            .max_age(PREFLIGHT_MAX_AGE)
    }
}

/// The host part of a `Host` value (`name`, `name:port`, `[v6]:port`), lowercased, without
/// a trailing dot.
fn host_name(host: &str) -> String {
    let host = host.trim();
    let name = if let Some(rest) = host.strip_prefix('[') {
        match rest.split_once(']') {
            Some((inside, _)) => inside,
            None => rest,
        }
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
            _ => host,
        }
    };
    name.trim_end_matches('.').to_ascii_lowercase()
}

fn is_loopback_name(name: &str) -> bool {
    name == "localhost" || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// `scheme://host[:port]` lowercased, the default port left out; `None` if it is not an
/// origin.
fn normalize_origin(origin: &str) -> Option<String> {
    let origin = origin.trim().trim_end_matches('/').to_ascii_lowercase();
    let (scheme, rest) = origin.split_once("://")?;
    if !matches!(scheme, "http" | "https") || rest.is_empty() || rest.contains(['/', '?', '#', '@'])
    {
        return None;
    }
    let rest = match (scheme, rest.rsplit_once(':')) {
        ("http", Some((h, "80"))) | ("https", Some((h, "443"))) => h,
        _ => rest,
    };
    Some(format!("{scheme}://{rest}"))
}

/// The refusal of a request whose `Host` this service does not answer to (421); the
/// probes answer any host.
pub(crate) fn refuse_host(rules: &AccessRules, request: &Request) -> Option<ApiError> {
    let path = request.uri().path();
    if path == "/healthz" || path == "/readyz" {
        return None;
    }
    let host = request
        .uri()
        .host()
        .or_else(|| request.headers().get(header::HOST)?.to_str().ok());
    (!rules.host_allowed(host)).then_some(ApiError::HostNotAllowed)
}

/// The refusal of a request from a web page whose origin is not listed (403).
pub(crate) fn refuse_origin(rules: &AccessRules, request: &Request) -> Option<ApiError> {
    let origin = request.headers().get(header::ORIGIN)?;
    (!rules.policy.origin_allowed(origin)).then_some(ApiError::OriginNotAllowed)
}

/// The refusal of a body that is not `Content-Type: application/json` (415).
pub(crate) fn refuse_non_json(request: &Request) -> Option<ApiError> {
    let json = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim())
        .is_some_and(|essence| essence.eq_ignore_ascii_case("application/json"));
    (!json).then_some(ApiError::UnsupportedMediaType)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn loopback_hosts_and_listed_hosts() {
        let rules = AccessRules::new(AccessPolicy::new(), true);
        for ok in [
            "localhost",
            "LOCALHOST:8080",
            "127.0.0.1",
            "127.0.0.1:80",
            "[::1]:8080",
            "[::1]",
            "localhost.",
        ] {
            assert!(rules.host_allowed(Some(ok)), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8080",
            "127.0.0.1.nip.io",
            "[::2]",
            "0.0.0.0",
        ] {
            assert!(!rules.host_allowed(Some(bad)), "{bad}");
        }
        let policy = AccessPolicy::new().allow_host("Synthkit.Internal").unwrap();
        let rules = AccessRules::new(policy.clone(), true);
        assert!(rules.host_allowed(Some("synthkit.internal:8080")));
        // A public bind checks hosts only when some are listed.
        assert!(AccessRules::new(AccessPolicy::new(), false).host_allowed(Some("any.example")));
        let public = AccessRules::new(policy, false);
        assert!(!public.host_allowed(Some("localhost")));
        assert!(public.host_allowed(Some("synthkit.internal")));
        assert!(AccessPolicy::new().allow_host("a.example:80").is_err());
        assert!(AccessPolicy::new().allow_host("http://a.example").is_err());
        let any = AccessRules::new(AccessPolicy::new().allow_host("*").unwrap(), true);
        assert!(any.host_allowed(Some("evil.example")));
    }

    #[test]
    fn origins_are_normalized() {
        let p = AccessPolicy::new()
            .allow_origin("https://App.example.com/")
            .unwrap()
            .allow_origin("http://localhost:3000")
            .unwrap();
        let ok = |o: &str| p.origin_allowed(&HeaderValue::from_str(o).unwrap());
        assert!(ok("https://app.example.com"));
        assert!(ok("https://app.example.com:443"));
        assert!(ok("http://localhost:3000"));
        assert!(!ok("http://app.example.com"));
        assert!(!ok("null"));
        assert!(!ok("http://localhost:3001"));
        assert!(AccessPolicy::new().allow_origin("app.example.com").is_err());
        assert!(
            AccessPolicy::new()
                .allow_origin("https://a.example/x")
                .is_err()
        );
        let any = AccessPolicy::new().allow_origin("*").unwrap();
        assert!(any.origin_allowed(&HeaderValue::from_static("null")));
    }
}
