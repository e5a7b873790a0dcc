//! Process-wide logging: `tracing` events to stderr as text, or one JSON object per line
//! (`SVC_LOG_FORMAT=json`) for journald or Loki. `RUST_LOG` filters; the default is `info`. With
//! traces on (`crate::traces`), their layer joins the same subscriber.

use std::io::IsTerminal;

use tracing::Level;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Layer, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;

use crate::config::{Config, LogFormat};
use crate::traces::{TraceLayer, Traces};

pub fn init(format: LogFormat, traces: Option<TraceLayer>) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Colour only for a person at a terminal, never into journald or a log file.
    let text = tracing_subscriber::fmt::layer().with_ansi(std::io::stderr().is_terminal()).with_writer(std::io::stderr);
    // Only svc's own spans are exported: the libraries' (the exporter's gRPC calls among them)
    // would trace the tracing.
    let traces = traces.map(|layer| layer.with_filter(Targets::new().with_target("svc", Level::INFO)));
    let registry = tracing_subscriber::registry().with(traces);
    // A second call (tests, embedded use) keeps the first subscriber.
    let _ = match format {
        LogFormat::Text => registry.with(text.with_filter(filter)).try_init(),
        LogFormat::Json => registry.with(text.json().flatten_event(true).with_filter(filter)).try_init(),
    };
}

/// This process's trace export for `service`: [`Traces::start`] with `SVC_DEVELOPER_TRACING` on,
/// nothing otherwise (no provider, no exporter, no layer).
pub fn traces(config: &Config, service: &str) -> (Traces, Option<TraceLayer>) {
    if !config.api.developer_tracing {
        return (Traces::off(), None);
    }
    Traces::start(config.telemetry.otlp_protocol, &config.telemetry.otlp_endpoint, service)
}
