//! Process-wide logging: `tracing` events to stderr as text, or one JSON object per line
//! (`SVC_LOG_FORMAT=json`) for journald or Loki. `RUST_LOG` filters; the default is `info`.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Colour only for a person at a terminal, never into journald or a log file.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    // A second call (tests, embedded use) keeps the first subscriber.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}
