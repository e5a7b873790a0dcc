//! `svc worker <name>`: one worker as its own process, under the shared runner.

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

pub async fn run(name: &str, config: Config) -> anyhow::Result<()> {
    svc_workers::runner::run(config, find(name)?).await
}
