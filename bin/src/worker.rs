//! `svc worker <name>`: one worker as its own process, under the shared runner.

use anyhow::bail;
use svc::config::Config;

/// Fails, naming the workers this build has, unless `name` is one of them.
pub fn check(name: &str) -> anyhow::Result<()> {
    if svc_workers::body(name).is_some() {
        return Ok(());
    }
    let available: Vec<&str> = svc_workers::bodies().iter().map(|b| b.name).collect();
    let available = if available.is_empty() { "none yet".to_string() } else { available.join(", ") };
    bail!("no worker `{name}` in this build; available workers: {available}")
}

pub async fn run(name: &str, config: Config) -> anyhow::Result<()> {
    check(name)?;
    let body = svc_workers::body(name).expect("checked above");
    svc_workers::runner::run(config, body).await
}
