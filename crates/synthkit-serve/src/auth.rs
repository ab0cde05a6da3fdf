//! Bearer-token authentication: [`ApiKeys`] read from a file, compared in constant time.
//!
//! The file has one key per line; blank lines and lines starting with `#` are ignored,
//! and surrounding whitespace is trimmed (a UTF-8 byte order mark, as some Windows editors
//! write at the start of a file, and the CR of CRLF line ends included). Keys are kept only as SHA-256 digests, and a
//! presented key is hashed and compared with every stored digest without stopping early,
//! so the time taken says nothing about how much of a key matched, or which key. Keys
//! are never logged.

use std::fmt;
use std::net::SocketAddr;
use std::path::Path;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::{Choice, ConstantTimeEq};

use crate::error::{ApiError, ServeError};
use crate::state::AppState;

/// The accepted API keys, as digests.
#[derive(Clone)]
pub struct ApiKeys {
    digests: Vec<[u8; 32]>,
}

impl fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiKeys")
            .field("keys", &self.digests.len())
            .finish()
    }
}

impl ApiKeys {
    /// Keys from text: one per line, `#` comments and blank lines ignored, each line
    /// trimmed of whitespace and byte order marks (U+FEFF, which `trim` keeps). `None` when
    /// there is no key.
    pub fn parse(text: &str) -> Option<Self> {
        let digests: Vec<[u8; 32]> = text
            .lines()
            .map(|l| l.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}'))
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(digest)
            .collect();
        (!digests.is_empty()).then_some(Self { digests })
    }

    /// Keys from a file (see [`ApiKeys::parse`]).
    pub fn from_file(path: &Path) -> Result<Self, ServeError> {
        let err = |message: String| ServeError::ApiKeys {
            path: path.display().to_string(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        Self::parse(&text).ok_or_else(|| {
            err(
                "it holds no key: write one key per line (lines starting with # are comments)"
                    .into(),
            )
        })
    }

    /// How many keys there are.
    pub fn len(&self) -> usize {
        self.digests.len()
    }

    /// Whether there is no key (never true for keys built by this module).
    pub fn is_empty(&self) -> bool {
        self.digests.is_empty()
    }

    /// Whether `key` is one of the keys, in time independent of which key matches and
    /// how much of it.
    pub fn accepts(&self, key: &str) -> bool {
        let presented = digest(key);
        let mut found = Choice::from(0);
        for d in &self.digests {
            found |= d.ct_eq(&presented);
        }
        found.into()
    }

    /// Checks a request's `Authorization: Bearer KEY` header.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let Some(value) = headers.get(header::AUTHORIZATION) else {
            return Err(ApiError::Unauthorized(
                "missing API key: send the header `Authorization: Bearer YOUR_KEY`",
            ));
        };
        // The scheme is case-insensitive (RFC 9110 11.1): `Bearer`, `bearer`, `BEARER`.
        let key = value
            .to_str()
            .ok()
            .and_then(|v| v.trim_start().split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, key)| key.trim());
        match key {
            Some(k) if self.accepts(k) => Ok(()),
            Some(_) => Err(ApiError::Unauthorized(
                "the API key is not valid: check the key sent in `Authorization: Bearer`",
            )),
            None => Err(ApiError::Unauthorized(
                "the Authorization header must be `Bearer YOUR_KEY`",
            )),
        }
    }
}

/// The route layer in front of `/v1/*` and `/metrics`: with keys, a request without a
/// valid `Authorization: Bearer KEY` is answered 401 and goes no further.
pub(crate) async fn require_key(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(keys) = &state.inner.keys
        && let Err(e) = keys.check(request.headers())
    {
        return e.into_response();
    }
    next.run(request).await
}

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// Refuses to serve a non-loopback address without keys unless `allow_public` says so.
pub fn check_bind(
    addr: SocketAddr,
    keys: Option<&ApiKeys>,
    allow_public: bool,
) -> Result<(), ServeError> {
    if keys.is_some() || allow_public || addr.ip().is_loopback() {
        Ok(())
    } else {
        Err(ServeError::PublicWithoutAuth { addr })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn keys_file_format() {
        let keys = ApiKeys::parse("# staging\n  key-one  \n\n#key-old\nkey-two\n").unwrap();
        assert_eq!(keys.len(), 2);
        assert!(keys.accepts("key-one"));
        assert!(keys.accepts("key-two"));
        assert!(!keys.accepts("key-old"));
        assert!(!keys.accepts("key-on"));
        assert!(ApiKeys::parse("# nothing\n\n").is_none());
        assert!(!format!("{keys:?}").contains("key-one"));
    }

    #[test]
    fn a_byte_order_mark_and_crlf_line_ends_are_not_part_of_a_key() {
        let keys = ApiKeys::parse("\u{feff}key-one\r\n\r\n# c\r\nkey-two\r\n").unwrap();
        assert_eq!(keys.len(), 2);
        assert!(keys.accepts("key-one"), "the first key, after the BOM");
        assert!(keys.accepts("key-two"));
        assert!(ApiKeys::parse("\u{feff}\r\n  \r\n").is_none());
    }

    #[test]
    fn the_scheme_is_case_insensitive() {
        let keys = ApiKeys::parse("k-1").unwrap();
        let check = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, value.parse().unwrap());
            keys.check(&headers)
        };
        for ok in ["Bearer k-1", "bearer k-1", "BEARER k-1", "BeArEr  k-1 "] {
            assert!(check(ok).is_ok(), "{ok}");
        }
        for bad in ["Basic k-1", "Bearer k-2", "Bearerk-1", "k-1"] {
            assert!(check(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn public_bind_needs_keys_or_flag() {
        let public: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        let local: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let keys = ApiKeys::parse("k").unwrap();
        assert!(check_bind(local, None, false).is_ok());
        assert!(check_bind(public, None, false).is_err());
        assert!(check_bind(public, Some(&keys), false).is_ok());
        assert!(check_bind(public, None, true).is_ok());
        assert!(check_bind("[::1]:80".parse().unwrap(), None, false).is_ok());
    }
}
