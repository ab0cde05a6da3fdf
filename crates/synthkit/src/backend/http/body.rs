//! Reading response bodies within a backend's reply cap (`max_reply_bytes`):
//! chunk by chunk, stopping as soon as the cap is passed, so a server that answers
//! without end costs at most the cap in memory (and a few network buffers).

use futures::{Stream, StreamExt};

use crate::model::ModelError;

/// The most bytes of an error body read: enough for any provider's error object (only
/// [`MAX_BODY_BYTES`](super::errors::MAX_BODY_BYTES) of it is kept in the error).
pub(crate) const MAX_ERROR_BODY_BYTES: usize = 64 << 10;

/// Why a body could not be read whole.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BodyError {
    /// The connection failed (or timed out) while reading.
    #[error("{0}")]
    Transport(reqwest::Error),
    /// The body passed the cap; reading stopped there.
    #[error("the reply is larger than {limit} bytes")]
    TooLarge {
        /// The cap, in bytes.
        limit: usize,
    },
}

impl BodyError {
    /// As a model error; `transport` maps a connection failure.
    pub(crate) fn into_model_error(
        self,
        transport: impl FnOnce(&reqwest::Error) -> ModelError,
    ) -> ModelError {
        match self {
            BodyError::Transport(e) => transport(&e),
            BodyError::TooLarge { limit } => ModelError::ReplyTooLarge { limit },
        }
    }
}

/// The whole body of `response`, or [`BodyError::TooLarge`] as soon as more than `limit`
/// bytes have come (at once when the server announces a longer `Content-Length`).
pub(crate) async fn read_capped(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, BodyError> {
    if response
        .content_length()
        .is_some_and(|n| n > u64::try_from(limit).unwrap_or(u64::MAX))
    {
        return Err(BodyError::TooLarge { limit });
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(BodyError::Transport)? {
        if body.len().saturating_add(chunk.len()) > limit {
            return Err(BodyError::TooLarge { limit });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// At most the first `limit` bytes of the body of `response` (for error bodies, of which
/// only the start is shown): reading stops there, and the rest is never read.
pub(crate) async fn read_prefix(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = limit.saturating_sub(body.len());
        body.extend_from_slice(chunk.get(..room.min(chunk.len())).unwrap_or_default());
        if body.len() >= limit {
            break;
        }
    }
    Ok(body)
}

/// The body of `response` as a stream of chunks that fails with [`BodyError::TooLarge`]
/// once more than `limit` bytes have come in all (so a line without end, which an SSE
/// parser would buffer, is stopped too). The stream ends after its first error: nothing
/// more is read.
pub(crate) fn capped_stream(
    response: reqwest::Response,
    limit: usize,
) -> impl Stream<Item = Result<impl AsRef<[u8]> + Send + use<>, BodyError>> + Send + 'static {
    struct State<S> {
        inner: S,
        read: usize,
        done: bool,
    }
    let state = State {
        inner: Box::pin(response.bytes_stream()),
        read: 0,
        done: false,
    };
    futures::stream::unfold(state, move |mut st| async move {
        if st.done {
            return None;
        }
        let item = match st.inner.next().await? {
            Ok(chunk) => {
                st.read = st.read.saturating_add(chunk.len());
                if st.read > limit {
                    Err(BodyError::TooLarge { limit })
                } else {
                    Ok(chunk)
                }
            }
            Err(e) => Err(BodyError::Transport(e)),
        };
        st.done = item.is_err();
        Some((item, st))
    })
}
