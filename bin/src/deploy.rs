//! `svc deploy FILE`: deploys a deployment INI from the command line, as `POST /deckies/deploy`
//! does, and waits until every decky has started or failed. `scripts/start` deploys its default
//! fleet this way.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use svc::config::Config;
use svc::db::LifecycleStatus;
use svc::fleet::Fleet;

/// How long a deploy may take (the first builds the decky image).
const DEPLOY_DEADLINE: Duration = Duration::from_secs(600);

#[derive(clap::Args)]
pub struct DeployArgs {
    /// The deployment INI.
    file: std::path::PathBuf,
    /// The INI is the whole fleet: deckies it does not name are removed.
    #[arg(long)]
    replace: bool,
    /// Do nothing when a fleet is already deployed (for start-up scripts run more than once).
    #[arg(long, conflicts_with = "replace")]
    if_empty: bool,
}

pub async fn run(args: DeployArgs, config: Config) -> anyhow::Result<()> {
    let ini = std::fs::read_to_string(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    let db = crate::user::open(&config).await?;
    if args.if_empty && !db.fleet().await?.deckies.is_empty() {
        println!("a fleet is already deployed; nothing to do");
        return Ok(());
    }
    let fleet = Fleet::new(db.clone(), svc::bus::Bus::absent(), config.fleet.clone());
    let accepted = fleet.deploy(&ini, args.replace).await.map_err(|e| anyhow::anyhow!("deploy refused: {e}"))?;
    println!("deploying {} decky/ies", accepted.lifecycle_ids.len());
    let deadline = Instant::now() + DEPLOY_DEADLINE;
    let records = loop {
        let records = db.lifecycles(&accepted.lifecycle_ids).await?;
        if records.iter().all(|r| matches!(r.status, LifecycleStatus::Succeeded | LifecycleStatus::Failed)) {
            break records;
        }
        if Instant::now() > deadline {
            bail!("the deploy did not finish within {} s", DEPLOY_DEADLINE.as_secs());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let mut failed = 0;
    for record in &records {
        match &record.error {
            Some(error) => {
                failed += 1;
                println!("{}: {} ({error})", record.decky_name, record.status.as_str());
            }
            None => println!("{}: {}", record.decky_name, record.status.as_str()),
        }
    }
    db.close().await;
    if failed > 0 {
        bail!("{failed} decky/ies failed to start; the log above says why");
    }
    Ok(())
}
