//! `--otlp-endpoint` and `--otel-content` (ask, summarize, batch, serve): export the
//! synthesis's spans over OTLP/HTTP to a trace UI such as Arize Phoenix. The export itself
//! lives in the library (`synthkit::telemetry::otel`).

use clap::Args;
use synthkit::telemetry::otel::OtelConfig;

/// The OpenTelemetry flags.
#[derive(Debug, Clone, Default, Args)]
pub struct OtelArgs {
    /// Export one span per synthesis, step and model call to the OpenTelemetry collector
    /// or trace UI at URL over OTLP/HTTP (spans go to URL/v1/traces; Arize Phoenix:
    /// http://127.0.0.1:6006). Without it: $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else
    /// $OTEL_EXPORTER_OTLP_ENDPOINT. An unreachable endpoint costs a warning, never the
    /// answer.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "URL",
        help_heading = "Tracing"
    )]
    pub otlp_endpoint: Option<String>,
    /// Put the prompts, replies and the query on the exported spans (off by default: they
    /// may hold private text).
    #[arg(hide_short_help = true, long, help_heading = "Tracing")]
    pub otel_content: bool,
}

impl OtelArgs {
    /// The export's config: the flag, else the standard variables; `None` without either.
    pub fn config(&self) -> Option<OtelConfig> {
        let config = match &self.otlp_endpoint {
            Some(url) => Some(OtelConfig::new(url.clone())),
            None => OtelConfig::from_env(),
        };
        config.map(|c| c.with_content(self.otel_content))
    }
}
