//! Reading a synthesis request's body, whole, before the request takes one of the
//! `max_requests` slots ([`crate::stack`]'s `admit`): a client that sends its body slowly
//! holds a connection and the bytes it sent, never a slot.
//!
//! Three bounds ([`ServiceLimits`]):
//!
//! - **the body deadline**, `body_timeout`: the whole body must arrive within it of the
//!   headers, else 408 `body_timeout` (and the connection is closed, its body unread);
//! - **the size**, `max_body_bytes`: a body declared over it is read and dropped (up to
//!   twice the limit, within the deadline) and answered 413, so that a client that sends
//!   its whole body before reading sees the 413 instead of a broken pipe; a body without
//!   a length that grows past it is 413 as it is read;
//! - **the bytes being read at once**, `max_pending_body_bytes`, across all requests:
//!   each chunk's bytes are drawn from one budget, given back once the body is whole (or
//!   dropped); a chunk that would go over it is 503 `overloaded`. Bodies being read are
//!   not bounded by `max_requests`, so this bounds their memory: a slow body holds only
//!   the bytes it sent.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::access;
use crate::error::ApiError;
use crate::limits::ServiceLimits;

/// What reading a body needs: its bounds and the budget shared by every request.
#[derive(Clone)]
pub(crate) struct BodyReader {
    max_body_bytes: usize,
    timeout: Duration,
    pending_limit: usize,
    /// One permit per byte of the bodies being read.
    pending: Arc<Semaphore>,
}

impl BodyReader {
    /// The reader for `limits`.
    pub(crate) fn new(limits: &ServiceLimits) -> Self {
        let pending_limit = limits
            .max_pending_body_bytes
            .clamp(1, Semaphore::MAX_PERMITS);
        Self {
            max_body_bytes: limits.max_body_bytes,
            timeout: limits.body_timeout,
            pending_limit,
            pending: Arc::new(Semaphore::new(pending_limit)),
        }
    }

    /// Bytes of bodies being read now.
    #[cfg(test)]
    fn pending_bytes(&self) -> usize {
        self.pending_limit - self.pending.available_permits()
    }

    /// Reads `body` whole: the bytes, or why not. Nothing is reserved ahead of the bytes
    /// that came (a declared length is only a promise), so a slow body holds what it
    /// sent.
    async fn collect(&self, body: Body) -> Result<Bytes, ApiError> {
        let too_large = || ApiError::BodyTooLarge {
            limit: self.max_body_bytes,
        };
        let mut bytes = Vec::new();
        let mut held: Option<OwnedSemaphorePermit> = None;
        let mut stream = body.into_data_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                ApiError::InvalidRequest(format!("the request body could not be read: {e}"))
            })?;
            if bytes.len().saturating_add(chunk.len()) > self.max_body_bytes {
                return Err(too_large());
            }
            let permit = u32::try_from(chunk.len())
                .ok()
                .and_then(|n| Arc::clone(&self.pending).try_acquire_many_owned(n).ok())
                .ok_or(ApiError::BodiesOverloaded {
                    limit: self.pending_limit,
                })?;
            match held.as_mut() {
                Some(h) => h.merge(permit),
                None => held = Some(permit),
            }
            bytes.extend_from_slice(&chunk);
        }
        // The permits go back here: from now on the body is bounded by the request slots
        // (or dropped at once when none is free).
        Ok(Bytes::from(bytes))
    }
}

/// How much of a body declared over the limit is still read (and dropped) so that its
/// client reads the 413: the limit again, at least 1 MiB.
fn drain_cap(limit: usize) -> u64 {
    let limit = limit as u64;
    limit.saturating_add(limit.max(1 << 20))
}

/// Reads and drops up to `declared` bytes of `body` (at most [`drain_cap`]).
async fn drain(body: Body, declared: u64) {
    let mut stream = body.into_data_stream();
    let mut read: u64 = 0;
    while let Some(Ok(chunk)) = stream.next().await {
        read = read.saturating_add(chunk.len() as u64);
        if read >= declared {
            break;
        }
    }
}

impl BodyReader {
    /// 415 for a body that is not JSON; then the body read whole within its deadline, size
    /// and the shared budget (see the module documentation): the request with its body
    /// in one piece, or the answer that refuses it.
    pub(crate) async fn read(&self, request: Request) -> Result<Request, Response> {
        if let Some(refused) = access::refuse_non_json(&request) {
            return Err(refused.into_response());
        }
        let declared = request
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let limit = self.max_body_bytes;
        let (parts, body) = request.into_parts();
        let late = || {
            ApiError::BodyTimeout {
                secs: self.timeout.as_secs().max(1),
            }
            .into_response()
        };
        if let Some(declared) = declared.filter(|n| *n > limit as u64) {
            let mut response = ApiError::BodyTooLarge { limit }.into_response();
            if declared <= drain_cap(limit) {
                if tokio::time::timeout(self.timeout, drain(body, declared))
                    .await
                    .is_err()
                {
                    return Err(late());
                }
            } else {
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            return Err(response);
        }
        match tokio::time::timeout(self.timeout, self.collect(body)).await {
            Err(_) => Err(late()),
            Ok(Err(e)) => {
                let mut response = e.into_response();
                // The rest of the body is unread.
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
                Err(response)
            }
            Ok(Ok(bytes)) => Ok(Request::from_parts(parts, Body::from(bytes))),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn reader(max_body: usize, pending: usize) -> BodyReader {
        BodyReader::new(
            &ServiceLimits::default()
                .with_max_body_bytes(max_body)
                .with_max_pending_body_bytes(pending),
        )
    }

    /// A body of `chunks`, sent one after another.
    fn body(chunks: &[&'static [u8]]) -> Body {
        let items: Vec<Result<Bytes, std::io::Error>> =
            chunks.iter().map(|c| Ok(Bytes::from_static(c))).collect();
        Body::from_stream(futures::stream::iter(items))
    }

    #[tokio::test]
    async fn a_body_is_read_whole_and_its_bytes_given_back() {
        let r = reader(100, 50);
        let bytes = r.collect(body(&[b"{\"a\":", b" 1}"])).await.unwrap();
        assert_eq!(&bytes[..], b"{\"a\": 1}");
        assert_eq!(r.pending_bytes(), 0, "the budget is whole again");
    }

    #[tokio::test]
    async fn a_body_over_the_size_or_the_shared_budget_is_refused() {
        let r = reader(10, 1000);
        let e = r.collect(body(&[b"123456", b"78901"])).await;
        assert!(
            matches!(e, Err(ApiError::BodyTooLarge { limit: 10 })),
            "{e:?}"
        );
        let r = reader(100, 8);
        // Another body holds 5 of the 8 bytes.
        let other = Arc::clone(&r.pending).try_acquire_many_owned(5).unwrap();
        let e = r.collect(body(&[b"12", b"3456"])).await;
        assert!(
            matches!(e, Err(ApiError::BodiesOverloaded { limit: 8 })),
            "{e:?}"
        );
        assert_eq!(r.pending_bytes(), 5, "the refused body's bytes went back");
        drop(other);
        assert_eq!(
            &r.collect(body(&[b"12", b"3456"])).await.unwrap()[..],
            b"123456"
        );
    }
}
