//! `svc systemd install`: writes the unit files for this binary's installed path.

use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;

#[derive(Subcommand)]
pub enum SystemdCommand {
    /// Write svc-api.service, one svc-<worker>.service per worker and svc.target, each running
    /// this svc binary. Then: `systemctl daemon-reload && systemctl enable --now svc.target`.
    Install {
        /// Where to write them.
        #[arg(long, default_value = "/etc/systemd/system")]
        dir: PathBuf,
        /// Print the units instead of writing them.
        #[arg(long)]
        dry_run: bool,
    },
}

pub fn run(command: SystemdCommand) -> anyhow::Result<()> {
    let SystemdCommand::Install { dir, dry_run } = command;
    let bin = std::env::current_exe().context("locating the svc binary")?;
    let bin = bin.canonicalize().unwrap_or(bin);
    let units = svc::systemd::units::render(&bin)?;
    for unit in &units {
        let path = dir.join(&unit.name);
        if dry_run {
            println!("# {}\n{}", path.display(), unit.text);
        } else {
            std::fs::write(&path, &unit.text).with_context(|| format!("writing {}", path.display()))?;
            println!("wrote {}", path.display());
        }
    }
    if !dry_run {
        println!("next: systemctl daemon-reload && systemctl enable --now svc.target");
    }
    Ok(())
}
