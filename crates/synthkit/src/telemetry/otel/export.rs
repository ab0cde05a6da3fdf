//! The export's plumbing: the HTTP client the OTLP exporter posts with, and the wrapper
//! that remembers failed exports so the guard can say so (the SDK drops them silently).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use opentelemetry_http::{HttpClient, HttpError};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};

/// The most bytes of the last export error kept for the warning.
const MAX_ERROR_BYTES: usize = 512;

/// The most bytes read of a receiver's reply to an export (64 KiB): an OTLP answer is a
/// small protobuf (or an error message), and the exporter reads only its status, so
/// reading stops there and the rest is dropped unread.
pub const MAX_REPLY_BYTES: usize = 64 << 10;

/// Failed exports so far: their number and the last error (without URLs).
#[derive(Debug, Clone, Default)]
pub(super) struct Failures(Arc<Mutex<(u64, String)>>);

impl Failures {
    fn record(&self, error: &str) {
        if let Ok(mut f) = self.0.lock() {
            f.0 += 1;
            let mut end = error.len().min(MAX_ERROR_BYTES);
            while !error.is_char_boundary(end) {
                end -= 1;
            }
            f.1 = crate::secret::redact_urls(error.get(..end).unwrap_or_default());
        }
    }

    /// The number of failed exports and the last error, if any failed.
    pub(super) fn summary(&self) -> Option<(u64, String)> {
        let f = self.0.lock().ok()?;
        (f.0 > 0).then(|| (f.0, f.1.clone()))
    }
}

/// An exporter whose failed exports are counted in [`Failures`].
#[derive(Debug)]
pub(super) struct WatchedExporter<E> {
    inner: E,
    failures: Failures,
}

impl<E> WatchedExporter<E> {
    pub(super) fn new(inner: E, failures: Failures) -> Self {
        Self { inner, failures }
    }
}

impl<E: SpanExporter> SpanExporter for WatchedExporter<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let result = self.inner.export(batch).await;
        if let Err(e) = &result {
            self.failures.record(&e.to_string());
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource);
    }
}

/// The exporter's HTTP client: the `reqwest` client synthkit's backends use, driven by a
/// one-worker tokio runtime of its own (the batch processor exports from a plain thread,
/// and reqwest needs a tokio reactor).
pub(super) struct ExportClient {
    client: reqwest::Client,
    runtime: Arc<OwnedRuntime>,
}

/// A runtime dropped without blocking (it may be dropped on an async worker).
struct OwnedRuntime(Option<tokio::runtime::Runtime>);

impl Drop for OwnedRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

impl fmt::Debug for ExportClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExportClient").finish_non_exhaustive()
    }
}

impl ExportClient {
    pub(super) fn new(timeout: Duration) -> Result<Self, String> {
        crate::tls::install_default_provider();
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(1)))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| e.without_url().to_string())?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("synthkit-otel-export")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Self {
            client,
            runtime: Arc::new(OwnedRuntime(Some(runtime))),
        })
    }

    async fn send(
        client: reqwest::Client,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, HttpError> {
        let request = reqwest::Request::try_from(request).map_err(|e| e.without_url())?;
        let response = client.execute(request).await.map_err(|e| e.without_url())?;
        let status = response.status();
        let headers = response.headers().clone();
        let body = read_prefix(response, MAX_REPLY_BYTES).await?;
        let mut out = http::Response::new(body);
        *out.status_mut() = status;
        *out.headers_mut() = headers;
        Ok(out)
    }
}

/// At most the first `limit` bytes of `response`'s body: an OTLP answer is small and the
/// exporter reads only its status, so a receiver that answers without end (or with
/// gigabytes) costs at most `limit`; the rest is never read.
async fn read_prefix(mut response: reqwest::Response, limit: usize) -> Result<Bytes, HttpError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.without_url())? {
        let room = limit.saturating_sub(body.len());
        body.extend_from_slice(chunk.get(..room.min(chunk.len())).unwrap_or_default());
        if body.len() >= limit {
            break;
        }
    }
    Ok(Bytes::from(body))
}

impl HttpClient for ExportClient {
    fn send_bytes<'a, 'b>(
        &'a self,
        request: http::Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<http::Response<Bytes>, HttpError>> + Send + 'b>>
    where
        'a: 'b,
        Self: 'b,
    {
        let client = self.client.clone();
        let handle = self.runtime.0.as_ref().map(|rt| rt.handle().clone());
        Box::pin(async move {
            let handle = handle.ok_or("the export runtime has stopped")?;
            handle
                .spawn(Self::send(client, request))
                .await
                .map_err(|e| -> HttpError { e.to_string().into() })?
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use synthkit_testkit::hostile::{HostilePeer, endless_body};

    /// A receiver answering 200 with a body without end costs at most the cap: the
    /// export gets its status once [`MAX_REPLY_BYTES`] are read, long before the export
    /// timeout (reading it whole would never end).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_receivers_endless_reply_is_read_only_up_to_the_cap() {
        let peer = HostilePeer::start(|_, _| endless_body(200));
        let client = ExportClient::new(Duration::from_secs(120)).unwrap();
        let request = http::Request::post(format!("{}/traces", peer.base))
            .body(Bytes::from_static(b"spans"))
            .unwrap();
        let reply = tokio::time::timeout(Duration::from_secs(60), client.send_bytes(request))
            .await
            .expect("an endless reply must not be read to its end")
            .unwrap();
        assert_eq!(reply.status(), 200);
        assert_eq!(reply.body().len(), MAX_REPLY_BYTES);
    }
}
