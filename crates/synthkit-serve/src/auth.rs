//! Bearer-token authentication: [`ApiKeys`] read from a file, compared in constant time.
//!
//! The file has one key per line. A `#` at the start of a line, or after whitespace,
//! starts a comment to the end of the line (`key-one  # staging`); blank lines are
//! ignored, and surrounding whitespace is trimmed (a UTF-8 byte order mark, as some
//! Windows editors write at the start of a file, and the CR of CRLF line ends included).
//! A key never holds whitespace: a line with two words before its comment is refused,
//! naming its line (never its text). Keys are kept only as SHA-256 digests, and a
//! presented key is hashed and compared with every stored digest without stopping early,
//! so the time taken says nothing about how much of a key matched, or which key. Keys
//! are never logged.
//!
//! A request with a valid key carries its [`KeyId`] (the key's digest) in its
//! extensions: a report belongs to the key that made it ([`crate::reports`]).

use std::fmt;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::{Choice, ConstantTimeEq};

use crate::error::{ApiError, ServeError};

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

/// Which key made a request: the SHA-256 digest of the key (never the key). Set in the
/// request's extensions by `require_key` when the service has keys.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct KeyId([u8; 32]);

impl KeyId {
    /// Whether `other` is the same key, in time independent of where they differ.
    pub fn same(&self, other: &KeyId) -> bool {
        self.0.ct_eq(&other.0).into()
    }
}

impl fmt::Debug for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeyId(..)")
    }
}

/// Why a key file's text gives no keys. The messages name lines, never their text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeysError {
    /// No line holds a key.
    #[error(
        "it holds no key: write one key per line (a `#` at the start of a line or after a space starts a comment)"
    )]
    NoKey,
    /// A line holds whitespace inside its key.
    #[error(
        "line {line} holds more than one word before its comment, and a key has no whitespace: write one key per line, and start a comment after it with ` #`"
    )]
    Whitespace {
        /// The line, counted from 1.
        line: usize,
    },
}

/// The key of one line of a key file, if it holds one: the text before its comment (a
/// `#` at the start or after whitespace), trimmed.
fn line_key(line: &str) -> Result<Option<&str>, ()> {
    let line = line.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    let mut end = line.len();
    let mut after_space = true;
    for (i, c) in line.char_indices() {
        if c == '#' && after_space {
            end = i;
            break;
        }
        after_space = c.is_whitespace();
    }
    let key = line.get(..end).unwrap_or_default().trim_end();
    if key.is_empty() {
        Ok(None)
    } else if key.contains(char::is_whitespace) {
        Err(())
    } else {
        Ok(Some(key))
    }
}

impl ApiKeys {
    /// Keys from text: one per line; a `#` at the start of a line or after whitespace
    /// starts a comment; blank lines are ignored; each line is trimmed of whitespace and
    /// byte order marks (U+FEFF, which `trim` keeps).
    pub fn parse(text: &str) -> Result<Self, KeysError> {
        let mut digests: Vec<[u8; 32]> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            match line_key(line) {
                Ok(Some(key)) => digests.push(digest(key)),
                Ok(None) => {}
                Err(()) => return Err(KeysError::Whitespace { line: i + 1 }),
            }
        }
        if digests.is_empty() {
            return Err(KeysError::NoKey);
        }
        Ok(Self { digests })
    }

    /// Keys from a file (see [`ApiKeys::parse`]).
    pub fn from_file(path: &Path) -> Result<Self, ServeError> {
        let err = |message: String| ServeError::ApiKeys {
            path: path.display().to_string(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        Self::parse(&text).map_err(|e| err(e.to_string()))
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

    /// Checks a request's `Authorization: Bearer KEY` header: which key it is.
    pub fn check(&self, headers: &HeaderMap) -> Result<KeyId, ApiError> {
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
            Some(k) if self.accepts(k) => Ok(KeyId(digest(k))),
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
/// valid `Authorization: Bearer KEY` is answered 401 and goes no further; one with a
/// valid key carries its [`KeyId`] on.
pub(crate) async fn require_key(
    State(keys): State<Option<Arc<ApiKeys>>>,
    mut request: Request,
    next: Next,
) -> Response {
    if let Some(keys) = &keys {
        match keys.check(request.headers()) {
            Ok(id) => {
                request.extensions_mut().insert(id);
            }
            Err(e) => return e.into_response(),
        }
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
        assert_eq!(
            ApiKeys::parse("# nothing\n\n").unwrap_err(),
            KeysError::NoKey
        );
        assert!(!format!("{keys:?}").contains("key-one"));
    }

    #[test]
    fn a_byte_order_mark_and_crlf_line_ends_are_not_part_of_a_key() {
        let keys = ApiKeys::parse("\u{feff}key-one\r\n\r\n# c\r\nkey-two\r\n").unwrap();
        assert_eq!(keys.len(), 2);
        assert!(keys.accepts("key-one"), "the first key, after the BOM");
        assert!(keys.accepts("key-two"));
        assert!(ApiKeys::parse("\u{feff}\r\n  \r\n").is_err());
    }

    /// Issue 42: `key # note` kept the comment in the key (`key # note` was the key).
    #[test]
    fn a_comment_after_a_key_is_not_part_of_it() {
        let keys = ApiKeys::parse(
            "key-one # staging\nkey-two\t#ci, rotated monthly\n  # whole line\nkey#three\n",
        )
        .unwrap();
        assert_eq!(keys.len(), 3);
        assert!(keys.accepts("key-one"));
        assert!(!keys.accepts("key-one # staging"));
        assert!(keys.accepts("key-two"));
        assert!(keys.accepts("key#three"), "a # inside a key is part of it");
        let e = ApiKeys::parse("good\nsecret-a secret-b # two words\n").unwrap_err();
        assert_eq!(e, KeysError::Whitespace { line: 2 });
        assert!(!e.to_string().contains("secret"), "{e}");
        assert_eq!(
            ApiKeys::parse("# a\n   # b\n").unwrap_err(),
            KeysError::NoKey
        );
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
