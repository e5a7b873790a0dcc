//! `svc worker <name>`: one worker as its own process, under the shared runner; `svc worker sniffer
//! --read FILE` replays a capture file through the sniffer and exits.

use std::path::PathBuf;

use anyhow::bail;
use svc::config::Config;
use svc_workers::WorkerBody;

/// The body of worker `name`; an error naming the workers this build has when there is none.
pub fn find(name: &str) -> anyhow::Result<WorkerBody> {
    if let Some(body) = svc_workers::body(name) {
        return Ok(body);
    }
    let available: Vec<&str> = svc_workers::bodies().iter().map(|b| b.name).collect();
    let available = if available.is_empty() { "none yet".to_string() } else { available.join(", ") };
    bail!("no worker `{name}` in this build; available workers: {available}")
}

/// Runs worker `name`; `read` (the sniffer's `--read FILE`) replays a capture file instead.
pub async fn run(name: &str, read: Option<PathBuf>, config: Config) -> anyhow::Result<()> {
    let body = match read {
        None => find(name)?,
        Some(file) if name == svc_workers::sniffer::NAME => svc_workers::sniffer::replay_body(file),
        Some(_) => bail!("--read is the sniffer's option; `{name}` has no capture to replay"),
    };
    svc_workers::runner::run(config, body).await
}
