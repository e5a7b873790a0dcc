//! `svc decky`: the decoy services of one decky, in this process, until SIGTERM or SIGINT.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use svc::fleet::{artifacts, decky_container};
use svc_decoy::Decky;
use svc_decoy::artifacts::{Artifacts, ArtifactsConfig};
use svc_decoy::emit::Emitter;
use svc_decoy::session::{Limits, Shared};
use svc_decoy::settings::{apply_ini, apply_ini_file, default_bind, parse_services};

#[derive(clap::Args)]
pub struct DeckyArgs {
    /// The services to run, each with an optional port: `ssh,http:8080,https,telnet,ftp,smtp`.
    #[arg(long, env = decky_container::SERVICES_ENV)]
    services: String,
    /// The decky's name: every line's HOSTNAME, and the `[<name>.<service>]` INI sections read.
    #[arg(long, env = decky_container::NODE_NAME_ENV, default_value = "decky")]
    name: String,
    /// The deployment INI whose `[<name>.<service>]` sections set banners, hostnames and users.
    #[arg(long, env = "SVC_DECKY_INI")]
    ini: Option<PathBuf>,
    /// The same sections as text (how a deployed decky's container receives them: the contract is
    /// `svc::fleet::decky_container`).
    #[arg(long, env = decky_container::INI_TEXT_ENV, conflicts_with = "ini")]
    ini_text: Option<String>,
    /// The address to listen on.
    #[arg(long, env = "SVC_DECKY_BIND", default_value_t = default_bind())]
    bind: IpAddr,
    /// Where to keep what attackers leave (FTP uploads, mail), each file named by its SHA-256;
    /// unset: nothing is kept, only logged. A deployed decky's is its host's `SVC_ARTIFACTS_DIR`.
    #[arg(long, env = decky_container::ARTIFACTS_DIR_ENV)]
    artifacts_dir: Option<PathBuf>,
    /// The most the artifacts directory holds, in MiB; a file past it is logged, not kept.
    #[arg(long, env = decky_container::ARTIFACTS_QUOTA_ENV, default_value_t = artifacts::DEFAULT_QUOTA_MB)]
    artifacts_quota_mb: u64,
    /// Kept files older than this many days are removed (at start, then hourly).
    #[arg(long, env = decky_container::ARTIFACTS_RETENTION_ENV, default_value_t = artifacts::DEFAULT_RETENTION_DAYS)]
    artifacts_retention_days: u64,
}

pub async fn run(args: DeckyArgs) -> anyhow::Result<()> {
    let stop = svc::signals::stop_on_signal()?;
    let mut specs = parse_services(&args.services)?;
    if let Some(ini) = &args.ini {
        apply_ini_file(&mut specs, &args.name, ini)?;
    }
    if let Some(text) = &args.ini_text {
        apply_ini(&mut specs, &args.name, text)?;
    }
    let mut shared = Shared::new(Emitter::stdout(&args.name), Limits::default());
    if let Some(dir) = &args.artifacts_dir {
        let opened = Artifacts::open(ArtifactsConfig {
            dir: dir.clone(),
            quota: args.artifacts_quota_mb << 20,
            retention: Duration::from_secs(args.artifacts_retention_days * 86_400),
        });
        let artifacts = Arc::new(opened.with_context(|| format!("opening the artifacts directory {}", dir.display()))?);
        tokio::spawn(artifacts.clone().prune_hourly());
        shared = shared.keeping(artifacts);
    }
    let decky = Decky::bind(&specs, args.bind, shared).await?;
    for (service, addr) in decky.addresses() {
        tracing::info!(service, %addr, decky = %args.name, "Decoy listening");
    }
    decky.serve(stop).await;
    Ok(())
}
