//! OpenTelemetry export of synthkit's spans (feature `otel`): what a command line or a
//! service needs, once, behind one call.
//!
//! [`install`] builds an OTLP/HTTP (protobuf) span exporter on a `reqwest` client,
//! batches spans on a background thread, installs the `tracing-opentelemetry` layer (only
//! synthkit's spans and events, at info and above) beside the caller's own log layer as the
//! process's `tracing` subscriber, turns content capture on when asked
//! ([`super::set_capture_content`]) and returns an [`OtelGuard`] that flushes on drop.
//! [`continue_trace`] makes a span continue a caller's W3C `traceparent`.
//!
//! ```no_run
//! use synthkit::telemetry::otel::{self, OtelConfig};
//! use tracing_subscriber::Layer;
//!
//! let logs = tracing_subscriber::fmt::layer()
//!     .with_writer(std::io::stderr)
//!     .with_filter(tracing_subscriber::filter::LevelFilter::WARN);
//! let config = OtelConfig::new("http://127.0.0.1:6006").with_content(false);
//! let _guard = otel::install(Some(config), logs)?; // flushes when dropped
//! # Ok::<(), synthkit::telemetry::otel::OtelError>(())
//! ```
//!
//! # Bounds
//!
//! An unreachable or slow receiver never holds up an answer: each export has a timeout
//! ([`OtelConfig::DEFAULT_EXPORT_TIMEOUT`]), the batch queue holds at most
//! [`MAX_QUEUED_SPANS`] spans (more are dropped, not buffered), and the guard's flush
//! waits at most [`SHUTDOWN_TIMEOUT`] and then warns. Endpoint user-info (`user:pass@`)
//! is never printed: errors and warnings show the endpoint without it.

use std::fmt;
use std::time::Duration;

use export::{ExportClient, Failures, WatchedExporter};

use crate::secret::{redact_url as redact, redact_urls};

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

mod export;
pub use export::MAX_REPLY_BYTES;

/// The standard variable naming the OTLP endpoint for traces (used as written).
pub const ENV_TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// The standard variable naming the OTLP base endpoint (`/v1/traces` is appended).
pub const ENV_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The standard variable naming the service (`service.name`).
pub const ENV_SERVICE_NAME: &str = "OTEL_SERVICE_NAME";
/// The most finished spans waiting for export (more are dropped).
pub const MAX_QUEUED_SPANS: usize = 4096;
/// The longest the guard's flush waits on drop.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);
/// The path of the traces signal under a base endpoint.
const TRACES_PATH: &str = "/v1/traces";

/// What went wrong setting up the export.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OtelError {
    /// The endpoint is not an `http://` or `https://` URL.
    #[error("the OTLP endpoint `{endpoint}` is not an http:// or https:// URL: {reason}")]
    BadEndpoint {
        /// The endpoint, its user-info hidden.
        endpoint: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The exporter or its HTTP client could not be built.
    #[error("cannot build the OTLP exporter for {endpoint}: {reason}")]
    Exporter {
        /// The endpoint, its user-info hidden.
        endpoint: String,
        /// Why.
        reason: String,
    },
    /// Another `tracing` subscriber was installed already.
    #[error("cannot install the tracing subscriber: {0}")]
    Subscriber(String),
}

/// Where and how to export spans.
#[derive(Clone)]
#[non_exhaustive]
pub struct OtelConfig {
    endpoint: String,
    /// Whether `endpoint` is the full traces URL (nothing appended).
    as_written: bool,
    service_name: String,
    capture_content: bool,
    export_timeout: Duration,
}

impl fmt::Debug for OtelConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OtelConfig")
            .field("endpoint", &redact(&self.endpoint))
            .field("service_name", &self.service_name)
            .field("capture_content", &self.capture_content)
            .field("export_timeout", &self.export_timeout)
            .finish()
    }
}

impl OtelConfig {
    /// The default service name.
    pub const DEFAULT_SERVICE_NAME: &'static str = "synthkit";
    /// The default timeout of one export (connect, send and answer).
    pub const DEFAULT_EXPORT_TIMEOUT: Duration = Duration::from_secs(3);

    /// Export to the OTLP/HTTP base `endpoint` (`http://host:port`; spans go to
    /// `{endpoint}/v1/traces`, unless the endpoint already ends with `/v1/traces`), as
    /// service `$OTEL_SERVICE_NAME` or `synthkit`, content capture off.
    pub fn new(endpoint: impl Into<String>) -> Self {
        let service_name = std::env::var(ENV_SERVICE_NAME)
            .ok()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| Self::DEFAULT_SERVICE_NAME.to_string());
        Self {
            endpoint: endpoint.into(),
            as_written: false,
            service_name,
            capture_content: false,
            export_timeout: Self::DEFAULT_EXPORT_TIMEOUT,
        }
    }

    /// The endpoint the standard variables name: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (as
    /// written), else `OTEL_EXPORTER_OTLP_ENDPOINT` (a base); `None` when neither is set.
    pub fn from_env() -> Option<Self> {
        let var = |name| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        var(ENV_TRACES_ENDPOINT)
            .map(|e| Self::new(e).traces_url_as_written())
            .or_else(|| var(ENV_ENDPOINT).map(Self::new))
    }

    /// Marks the endpoint as the full traces URL (nothing appended).
    fn traces_url_as_written(mut self) -> Self {
        self.as_written = true;
        self
    }

    setters! {
        /// Sets `service.name`.
        pub fn with_service_name(name: impl Into<String>) => service_name;

        /// Records prompts, replies and queries on spans (off by default; see
        /// [`super::set_capture_content`]).
        pub fn with_content(on: bool) => capture_content;

        /// Sets the timeout of one export.
        pub fn with_export_timeout(timeout: Duration) => export_timeout;
    }

    /// The endpoint as configured, its user-info hidden (for messages).
    pub fn endpoint_for_display(&self) -> String {
        redact(&self.endpoint)
    }

    /// The URL spans are posted to.
    fn traces_url(&self) -> Result<String, OtelError> {
        let bad = |reason: &str| OtelError::BadEndpoint {
            endpoint: self.endpoint_for_display(),
            reason: reason.to_string(),
        };
        let raw = self.endpoint.trim();
        let rest = raw
            .strip_prefix("http://")
            .or_else(|| raw.strip_prefix("https://"))
            .ok_or_else(|| bad("it must start with http:// or https://"))?;
        if rest.is_empty() || rest.starts_with('/') {
            return Err(bad("it names no host"));
        }
        if rest.contains(char::is_whitespace) {
            return Err(bad("it contains white space"));
        }
        let base = raw.trim_end_matches('/');
        if self.as_written || base.ends_with(TRACES_PATH) {
            Ok(base.to_string())
        } else {
            Ok(format!("{base}{TRACES_PATH}"))
        }
    }
}

/// Flushes the exported spans when dropped (at most [`SHUTDOWN_TIMEOUT`]; a failed
/// export is a warning on standard error, never a panic).
#[must_use = "the spans are flushed when the guard is dropped"]
pub struct OtelGuard {
    provider: SdkTracerProvider,
    endpoint: String,
    failures: Failures,
}

debug_fields!(OtelGuard {
    endpoint: endpoint,
    ..
});

impl Drop for OtelGuard {
    fn drop(&mut self) {
        let shutdown = self.provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT);
        if let Some((count, last)) = self.failures.summary() {
            eprintln!(
                "warning: {count} OpenTelemetry export(s) to {} failed, their spans are lost: {last}",
                self.endpoint
            );
        } else if let Err(e) = shutdown {
            eprintln!(
                "warning: OpenTelemetry spans may not all have reached {}: {e}",
                self.endpoint
            );
        }
    }
}

/// Installs `logs` (the caller's log layer, with its own filter) as the process's
/// `tracing` subscriber, plus, with a `config`, the OpenTelemetry layer that exports
/// synthkit's spans to it. Returns the guard that flushes the spans (`None` without a
/// config). Call it once, early, before any synthesis.
pub fn install<L>(config: Option<OtelConfig>, logs: L) -> Result<Option<OtelGuard>, OtelError>
where
    L: Layer<tracing_subscriber::Registry> + Send + Sync + 'static,
{
    let Some(config) = config else {
        tracing_subscriber::registry()
            .with(logs)
            .try_init()
            .map_err(|e| OtelError::Subscriber(e.to_string()))?;
        return Ok(None);
    };
    let (provider, endpoint, failures) = provider(&config)?;
    let tracer = provider.tracer("synthkit");
    // Only the spans' own attributes: no source locations, thread names or busy/idle
    // times on every span.
    let spans = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false)
        .with_filter(exported_targets());
    tracing_subscriber::registry()
        .with(logs)
        .with(spans)
        .try_init()
        .map_err(|e| OtelError::Subscriber(e.to_string()))?;
    super::set_capture_content(config.capture_content);
    Ok(Some(OtelGuard {
        provider,
        endpoint,
        failures,
    }))
}

/// synthkit's spans and events at info and above (the library, the service, the CLI).
fn exported_targets() -> tracing_subscriber::filter::Targets {
    use tracing_subscriber::filter::LevelFilter;
    tracing_subscriber::filter::Targets::new()
        .with_target("synthkit", LevelFilter::INFO)
        .with_target("synthkit_serve", LevelFilter::INFO)
        .with_target("synthkit_cli", LevelFilter::INFO)
}

/// The tracer provider exporting to `config`'s endpoint, the endpoint for messages, and
/// the failed exports' record.
fn provider(config: &OtelConfig) -> Result<(SdkTracerProvider, String, Failures), OtelError> {
    let url = config.traces_url()?;
    let shown = redact(&url);
    let client =
        ExportClient::new(config.export_timeout).map_err(|reason| OtelError::Exporter {
            endpoint: shown.clone(),
            reason,
        })?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(url)
        .with_timeout(config.export_timeout)
        .build()
        .map_err(|e| OtelError::Exporter {
            endpoint: shown.clone(),
            reason: redact_urls(&e.to_string()),
        })?;
    let batch = BatchConfigBuilder::default()
        .with_max_queue_size(MAX_QUEUED_SPANS)
        .with_scheduled_delay(Duration::from_millis(500))
        .build();
    let failures = Failures::default();
    let exporter = WatchedExporter::new(exporter, failures.clone());
    let processor = BatchSpanProcessor::builder(exporter)
        .with_batch_config(batch)
        .build();
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(config.service_name.clone())
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(resource)
        .build();
    Ok((provider, shown, failures))
}

/// Makes `span` continue the caller's trace: its parent becomes the span that the W3C
/// `traceparent` header names (with its `tracestate`). A missing or malformed header
/// leaves the span where it is (a new trace for a root span). Needs the layer that
/// [`install`] sets up; without it, nothing happens.
pub fn continue_trace(span: &tracing::Span, traceparent: Option<&str>, tracestate: Option<&str>) {
    let Some(traceparent) = traceparent else {
        return;
    };
    let mut carrier = std::collections::HashMap::with_capacity(2);
    carrier.insert("traceparent".to_string(), traceparent.to_string());
    if let Some(state) = tracestate {
        carrier.insert("tracestate".to_string(), state.to_string());
    }
    let context = TraceContextPropagator::new().extract(&carrier);
    if opentelemetry::trace::TraceContextExt::span(&context)
        .span_context()
        .is_valid()
    {
        let _ = span.set_parent(context);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_info_is_never_shown() {
        let c = OtelConfig::new("https://a:secret@host:1/x");
        assert!(!format!("{c:?}").contains("secret"));
        assert!(!c.endpoint_for_display().contains("secret"));
        let bad = OtelConfig::new("ftp://a:secret@host").traces_url();
        assert!(bad.is_err_and(|e| !e.to_string().contains("secret")));
    }

    #[test]
    fn base_endpoints_get_the_traces_path() {
        let url = |e: &str| OtelConfig::new(e).traces_url().ok();
        assert_eq!(
            url("http://127.0.0.1:6006").as_deref(),
            Some("http://127.0.0.1:6006/v1/traces")
        );
        assert_eq!(
            url("http://127.0.0.1:6006/v1/traces/").as_deref(),
            Some("http://127.0.0.1:6006/v1/traces")
        );
        assert!(url("127.0.0.1:6006").is_none());
        assert!(url("http://").is_none());
        let written = OtelConfig::new("http://h:1/custom").traces_url_as_written();
        assert_eq!(
            written.traces_url().ok().as_deref(),
            Some("http://h:1/custom")
        );
    }
}
