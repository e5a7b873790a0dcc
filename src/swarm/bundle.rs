//! The enrollment bundle a worker host installs: a gzipped tar of this master's svc binary, the
//! swarm CA's certificate, the agent's (and, when asked, the updater's) certificate and key (0600),
//! the settings that make the host an agent of this master (`etc/svc/env`), the systemd units it
//! runs (the agent, the collector as a single host runs it, and the forwarder shipping its lines to
//! the master) and, when given, a services INI;
//! and the script that fetches and installs it under `${SVC_INSTALL_ROOT:-/}`. Paths inside the
//! bundle are relative to that root; files that name a path say `@SVC_ROOT@`, which the script
//! replaces with the root it installs under. Keys go into the archive and nowhere else: never a
//! log line, never a file on the master.

use std::io::Write;
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::write::GzEncoder;
use uuid::Uuid;

use super::config::{
    AGENT_CA, AGENT_CERT, AGENT_KEY, AGENT_PORT_VAR, BINARY_PATH, DISALLOW_MASTER_VAR, HOST_UUID_VAR, HostFile,
    INSTALL_ROOT_VAR, MASTER_HOST_VAR, MODE_VAR, SERVICES_INI_PATH, SETTINGS_PATH, SWARM_PORT_VAR, SYSLOG_PORT_VAR,
    UPDATER_CA, UPDATER_CERT, UPDATER_KEY,
};
use super::pki::Leaf;
use crate::systemd::{unit_of_worker, units};
use crate::worker::WORKERS;
use crate::worker::roster::runs_on_worker_hosts;

/// Where the installed files name the install root.
pub const ROOT_PLACEHOLDER: &str = "@SVC_ROOT@";
const UNIT_DIR: &str = "etc/systemd/system";
const AGENT_UNIT_TEMPLATE: &str = include_str!("../../systemd/svc-agent.service");
const UPDATER_UNIT_TEMPLATE: &str = include_str!("../../systemd/svc-updater.service");
/// The updater's unit: in a bundle with an updater certificate.
pub const UPDATER_UNIT: &str = "svc-updater.service";

/// Everything one host's bundle is made of.
#[derive(Debug)]
pub struct BundleSpec<'a> {
    pub host_uuid: Uuid,
    pub agent_name: &'a str,
    /// The master as the agent dials it (heartbeats).
    pub master_host: &'a str,
    /// The master's heartbeat listener port.
    pub swarm_port: u16,
    /// The master's log listener port, where the host's forwarder ships.
    pub syslog_port: u16,
    /// The port the agent serves its API on.
    pub agent_port: u16,
    pub ca_cert_pem: &'a str,
    pub agent: &'a Leaf,
    pub updater: Option<&'a Leaf>,
    pub services_ini: Option<&'a str>,
    /// The svc binary the host runs: this master's.
    pub svc_binary: &'a Path,
}

/// The svc binary shipped to hosts (bundles and releases): `configured` (`SVC_SWARM_BUNDLE_BIN`),
/// else this one.
pub fn shipped_binary(configured: Option<&Path>) -> anyhow::Result<PathBuf> {
    match configured {
        Some(path) => Ok(path.to_path_buf()),
        None => std::env::current_exe().map_err(|err| anyhow::anyhow!("the running svc binary: {err}")),
    }
}

/// The units a worker host runs besides its agent: those of the roster's workers that run on worker
/// hosts, as a single host runs them.
fn host_worker_units() -> Vec<String> {
    WORKERS.iter().filter(|worker| runs_on_worker_hosts(worker)).map(|worker| unit_of_worker(worker.name)).collect()
}

/// The units the bundle installs, by file name: the agent's and each worker's the host runs.
pub fn unit_names() -> Vec<String> {
    std::iter::once("svc-agent.service".to_string()).chain(host_worker_units()).collect()
}

/// The settings file: what makes `svc` on the host an agent of this master.
pub fn settings(spec: &BundleSpec<'_>) -> String {
    let root = ROOT_PLACEHOLDER;
    let mut text = format!(
        "# svc agent `{}` of the master at {}: written by its enrollment bundle.\n",
        spec.agent_name, spec.master_host
    );
    let values = [
        (MODE_VAR, "agent".to_string()),
        (DISALLOW_MASTER_VAR, "true".to_string()),
        (HOST_UUID_VAR, spec.host_uuid.to_string()),
        (MASTER_HOST_VAR, spec.master_host.to_string()),
        (SWARM_PORT_VAR, spec.swarm_port.to_string()),
        (SYSLOG_PORT_VAR, spec.syslog_port.to_string()),
        (AGENT_PORT_VAR, spec.agent_port.to_string()),
    ];
    let files = |files: [HostFile; 3]| files.map(|file| (file.var, format!("{root}/{}", file.path)));
    let install_root = [(INSTALL_ROOT_VAR, format!("{root}/"))];
    let settings = values
        .into_iter()
        .chain(files([AGENT_CERT, AGENT_KEY, AGENT_CA]))
        .chain(install_root)
        .chain(files([UPDATER_CERT, UPDATER_KEY, UPDATER_CA]));
    for (var, value) in settings {
        text.push_str(&format!("{var}={value}\n"));
    }
    text
}

/// The agent's unit, the workers' units and the updater's, naming the installed binary and
/// settings.
pub(crate) fn unit_files() -> Vec<(String, String)> {
    let bin = format!("{ROOT_PLACEHOLDER}/{BINARY_PATH}");
    let agent = AGENT_UNIT_TEMPLATE.replace("@SVC_BIN@", &bin);
    let updater = (UPDATER_UNIT.to_string(), UPDATER_UNIT_TEMPLATE.replace("@SVC_BIN@", &bin));
    // The single-host units read `/etc/svc/env`; on a worker host that is the bundle's settings.
    let rendered = units::render(Path::new("/usr/local/bin/svc")).unwrap_or_default();
    let host_units = host_worker_units();
    let workers = rendered.into_iter().filter(|unit| host_units.contains(&unit.name)).map(|unit| {
        let text = unit
            .text
            .replace("/usr/local/bin/svc", &bin)
            .replace("EnvironmentFile=-/etc/svc/env", &format!("EnvironmentFile=-{ROOT_PLACEHOLDER}/{SETTINGS_PATH}"));
        (unit.name, text)
    });
    std::iter::once(("svc-agent.service".to_string(), agent)).chain(workers).chain(std::iter::once(updater)).collect()
}

/// The bundle as a gzipped tar. Reads the binary, so it belongs off the request loop.
pub fn build(spec: &BundleSpec<'_>) -> std::io::Result<Vec<u8>> {
    let gzip = GzEncoder::new(Vec::new(), Compression::fast());
    let mut tar = tar::Builder::new(gzip);
    let mut binary = std::fs::File::open(spec.svc_binary)?;
    let mut header = tar::Header::new_gnu();
    header.set_size(binary.metadata()?.len());
    header.set_mode(0o755);
    header.set_cksum();
    tar.append_data(&mut header, BINARY_PATH, &mut binary)?;

    let mut files: Vec<(String, u32, String)> = vec![
        (SETTINGS_PATH.into(), 0o600, settings(spec)),
        (AGENT_CA.path.into(), 0o644, spec.ca_cert_pem.into()),
        (AGENT_CERT.path.into(), 0o644, spec.agent.cert_pem.clone()),
        (AGENT_KEY.path.into(), 0o600, spec.agent.key_pem.clone()),
    ];
    if let Some(updater) = spec.updater {
        files.push((UPDATER_CA.path.into(), 0o644, spec.ca_cert_pem.into()));
        files.push((UPDATER_CERT.path.into(), 0o644, updater.cert_pem.clone()));
        files.push((UPDATER_KEY.path.into(), 0o600, updater.key_pem.clone()));
    }
    if let Some(ini) = spec.services_ini {
        files.push((SERVICES_INI_PATH.into(), 0o644, ini.into()));
    }
    for (name, text) in unit_files() {
        if name == UPDATER_UNIT && spec.updater.is_none() {
            continue;
        }
        files.push((format!("{UNIT_DIR}/{name}"), 0o644, text));
    }
    for (path, mode, text) in &files {
        let mut header = tar::Header::new_gnu();
        header.set_size(text.len() as u64);
        header.set_mode(*mode);
        header.set_mtime(chrono::Utc::now().timestamp().max(0) as u64);
        header.set_cksum();
        tar.append_data(&mut header, path, text.as_bytes())?;
    }
    let mut gzip = tar.into_inner()?;
    gzip.flush()?;
    gzip.finish()
}

/// The install script: `tgz_url` fetched with curl, unpacked under `${SVC_INSTALL_ROOT:-/}` with
/// the modes it carries, the root written into the settings and units, and the units enabled and
/// started unless `SVC_NO_START=1`. It fails on the first error (`set -eu`).
pub fn install_script(tgz_url: &str) -> String {
    let units = unit_names().into_iter().chain(std::iter::once(UPDATER_UNIT.to_string())).collect::<Vec<_>>().join(" ");
    format!(
        r#"#!/bin/sh
# svc swarm agent enrollment: installs this master's svc as an agent of it. Run as root.
set -eu
ROOT="${{SVC_INSTALL_ROOT:-/}}"
ROOT="${{ROOT%/}}"
UNITS="{units}"
for tool in curl tar sed; do
    command -v "$tool" >/dev/null 2>&1 || {{ echo "svc enroll: $tool is required" >&2; exit 1; }}
done
umask 077
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
curl -fsSL -o "$WORK/bundle.tgz" '{tgz_url}'
mkdir -p "$ROOT/"
tar -xzpf "$WORK/bundle.tgz" -C "$ROOT/" --no-same-owner
# A bundle without an updater certificate carries no updater unit.
PRESENT=""
for unit in $UNITS; do
    if [ -f "$ROOT/{UNIT_DIR}/$unit" ]; then PRESENT="$PRESENT $unit"; fi
done
UNITS="${{PRESENT# }}"
for file in "$ROOT/{SETTINGS_PATH}" $(for unit in $UNITS; do echo "$ROOT/{UNIT_DIR}/$unit"; done); do
    sed -i "s#{ROOT_PLACEHOLDER}#$ROOT#g" "$file"
done
echo "svc enroll: installed under ${{ROOT:-/}}"
if [ "${{SVC_NO_START:-0}}" = "1" ]; then
    echo "svc enroll: SVC_NO_START=1, units written but not started"
    exit 0
fi
systemctl daemon-reload
for unit in $UNITS; do
    systemctl enable --now "$unit"
done
echo "svc enroll: started $UNITS"
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_settings_make_an_agent_of_this_master_and_the_units_run_the_installed_binary() {
        let leaf = Leaf { cert_pem: "CERT".into(), key_pem: "secret-key-material".into(), fingerprint: "f".repeat(64) };
        let spec = BundleSpec {
            host_uuid: Uuid::nil(),
            agent_name: "worker-1",
            master_host: "10.0.0.1",
            swarm_port: 8770,
            syslog_port: 6514,
            agent_port: 8765,
            ca_cert_pem: "CA",
            agent: &leaf,
            updater: None,
            services_ini: None,
            svc_binary: Path::new("/nonexistent"),
        };
        let text = settings(&spec);
        for line in [
            "SVC_MODE=agent",
            "SVC_MASTER_HOST=10.0.0.1",
            "SVC_SWARM_PORT=8770",
            "SVC_SWARM_SYSLOG_PORT=6514",
            "SVC_HOST_UUID=00000000",
        ] {
            assert!(text.contains(line), "{line}");
        }
        assert!(!text.contains("secret-key-material"), "the settings never hold a key");
        let files = unit_files();
        for (name, text) in &files {
            assert!(text.contains("@SVC_ROOT@/usr/local/bin/svc "), "{name}");
            assert!(text.contains("EnvironmentFile=-@SVC_ROOT@/etc/svc/env"), "{name}");
        }
        for name in unit_names() {
            assert!(files.iter().any(|(file, _)| *file == name), "{name} is installed");
        }
        assert!(build(&spec).is_err(), "no binary, no bundle");
    }
}
