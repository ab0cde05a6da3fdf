//! Is the model server there? A readiness probe that asks a server's models listing with
//! the headers its API sends on every call (the key as that API carries it), so a front
//! end's health check never rebuilds a backend's auth.
//!
//! [`Connect`](crate::backend::connect::Connect) gives every connected server its probe
//! ([`ConnectedServer::readiness`](crate::backend::connect::ConnectedServer::readiness));
//! the offline backends have [`Readiness::Always`].
//!
//! ```
//! use synthkit::backend::openai::OpenAiConfig;
//! use synthkit::backend::probe::Readiness;
//!
//! let config = OpenAiConfig::new("qwen").with_base_url("http://user:pw@127.0.0.1:9/v1");
//! let probe = Readiness::of_server(&config);
//! assert_eq!(probe.url(), Some("http://user:pw@127.0.0.1:9/v1/models"));
//! // Debug output shows neither the URL's user-info nor the key.
//! assert!(!format!("{probe:?}").contains("pw"));
//! ```

use std::fmt;
use std::time::Duration;

use reqwest::header::HeaderMap;

use crate::backend::http::{HttpApi, HttpConfig};
use crate::secret::{redact_url, redact_urls};

/// How long one probe may take before the server counts as not answering.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// How to tell whether a backend is ready.
#[derive(Clone)]
#[non_exhaustive]
pub enum Readiness {
    /// Always ready (an offline backend).
    Always,
    /// Ready when `GET url` with `headers` answers 2xx (the server's models listing, with
    /// the key as its API carries it, marked sensitive).
    Http {
        /// The URL asked.
        url: String,
        /// The API's headers.
        headers: HeaderMap,
    },
    /// Never ready: the API's headers cannot be made (a key that is not a valid header
    /// value); the text says why.
    Broken(String),
}

impl fmt::Debug for Readiness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Readiness::Always => f.write_str("Always"),
            Readiness::Http { url, headers } => f
                .debug_struct("Http")
                .field("url", &redact_url(url))
                .field("headers", &headers.keys().collect::<Vec<_>>())
                .finish(),
            Readiness::Broken(why) => f.debug_tuple("Broken").field(why).finish(),
        }
    }
}

impl Readiness {
    /// The probe of a server of the API `A`: its models listing, with the headers of
    /// every call.
    pub fn of_server<A: HttpApi>(config: &HttpConfig<A>) -> Self {
        match A::headers(config) {
            Ok(headers) => Readiness::Http {
                url: A::models_url(config),
                headers,
            },
            Err(e) => Readiness::Broken(format!("the API's headers cannot be made: {e}")),
        }
    }

    /// The URL asked, if any (with its user-info: redact it before showing it).
    pub fn url(&self) -> Option<&str> {
        match self {
            Readiness::Http { url, .. } => Some(url),
            _ => None,
        }
    }

    /// Asks the backend, waiting at most [`PROBE_TIMEOUT`]: `Err` says why it is not
    /// ready, naming the URL without user-info or query and never the key.
    pub async fn check(&self, client: &reqwest::Client) -> Result<(), String> {
        let (url, headers) = match self {
            Readiness::Always => return Ok(()),
            Readiness::Broken(why) => return Err(why.clone()),
            Readiness::Http { url, headers } => (url, headers),
        };
        let request = client
            .get(url)
            .headers(headers.clone())
            .timeout(PROBE_TIMEOUT);
        let shown = redact_url(url);
        match request.send().await {
            Ok(r) if r.status().is_success() => Ok(()),
            Ok(r) => Err(format!(
                "the model server answered {shown} with {}",
                r.status()
            )),
            Err(e) => Err(format!(
                "the model server does not answer {shown}: {}",
                redact_urls(&e.to_string())
            )),
        }
    }
}
