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
use std::path::Path;

use flate2::Compression;
use flate2::write::GzEncoder;
use uuid::Uuid;

use super::pki::Leaf;
use crate::systemd::units;

/// Where the installed files name the install root.
pub const ROOT_PLACEHOLDER: &str = "@SVC_ROOT@";
/// The binary, relative to the install root.
pub const BINARY_PATH: &str = "usr/local/bin/svc";
/// The agent's settings, relative to the install root.
pub const SETTINGS_PATH: &str = "etc/svc/env";
const AGENT_DIR: &str = "etc/svc/agent";
const UPDATER_DIR: &str = "etc/svc/updater";
const UNIT_DIR: &str = "etc/systemd/system";
const AGENT_UNIT_TEMPLATE: &str = include_str!("../../systemd/svc-agent.service");
const UPDATER_UNIT_TEMPLATE: &str = include_str!("../../systemd/svc-updater.service");
/// The updater's unit: in a bundle with an updater certificate.
pub const UPDATER_UNIT: &str = "svc-updater.service";
/// The units a worker host runs besides its agent, as a single host runs them.
const HOST_WORKER_UNITS: [&str; 2] = ["svc-collector.service", "svc-forwarder.service"];

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

/// The units the bundle installs, by file name: the agent's and each worker's the host runs.
pub fn unit_names() -> Vec<String> {
    std::iter::once("svc-agent.service".to_string()).chain(HOST_WORKER_UNITS.map(String::from)).collect()
}

/// The settings file: what makes `svc` on the host an agent of this master.
fn settings(spec: &BundleSpec<'_>) -> String {
    let root = ROOT_PLACEHOLDER;
    format!(
        "# svc agent `{name}` of the master at {master}: written by its enrollment bundle.\n\
         SVC_MODE=agent\n\
         SVC_DISALLOW_MASTER=true\n\
         SVC_HOST_UUID={uuid}\n\
         SVC_MASTER_HOST={master}\n\
         SVC_SWARM_PORT={swarm_port}\n\
         SVC_SWARM_SYSLOG_PORT={syslog_port}\n\
         SVC_AGENT_PORT={agent_port}\n\
         SVC_AGENT_CERT={root}/{AGENT_DIR}/agent.crt\n\
         SVC_AGENT_KEY={root}/{AGENT_DIR}/agent.key\n\
         SVC_AGENT_CA={root}/{AGENT_DIR}/ca.crt\n\
         SVC_INSTALL_ROOT={root}/\n\
         SVC_UPDATER_CERT={root}/{UPDATER_DIR}/updater.crt\n\
         SVC_UPDATER_KEY={root}/{UPDATER_DIR}/updater.key\n\
         SVC_UPDATER_CA={root}/{UPDATER_DIR}/ca.crt\n",
        name = spec.agent_name,
        master = spec.master_host,
        uuid = spec.host_uuid,
        swarm_port = spec.swarm_port,
        syslog_port = spec.syslog_port,
        agent_port = spec.agent_port,
    )
}

/// The agent's unit, the workers' units and the updater's, naming the installed binary and
/// settings.
pub(crate) fn unit_files() -> Vec<(String, String)> {
    let bin = format!("{ROOT_PLACEHOLDER}/{BINARY_PATH}");
    let agent = AGENT_UNIT_TEMPLATE.replace("@SVC_BIN@", &bin);
    let updater = (UPDATER_UNIT.to_string(), UPDATER_UNIT_TEMPLATE.replace("@SVC_BIN@", &bin));
    // The single-host units read `/etc/svc/env`; on a worker host that is the bundle's settings.
    let rendered = units::render(Path::new("/usr/local/bin/svc")).unwrap_or_default();
    let workers = rendered.into_iter().filter(|unit| HOST_WORKER_UNITS.contains(&unit.name.as_str())).map(|unit| {
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
        (format!("{AGENT_DIR}/ca.crt"), 0o644, spec.ca_cert_pem.into()),
        (format!("{AGENT_DIR}/agent.crt"), 0o644, spec.agent.cert_pem.clone()),
        (format!("{AGENT_DIR}/agent.key"), 0o600, spec.agent.key_pem.clone()),
    ];
    if let Some(updater) = spec.updater {
        files.push((format!("{UPDATER_DIR}/ca.crt"), 0o644, spec.ca_cert_pem.into()));
        files.push((format!("{UPDATER_DIR}/updater.crt"), 0o644, updater.cert_pem.clone()));
        files.push((format!("{UPDATER_DIR}/updater.key"), 0o600, updater.key_pem.clone()));
    }
    if let Some(ini) = spec.services_ini {
        files.push(("etc/svc/services.ini".into(), 0o644, ini.into()));
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
        for (name, text) in unit_files() {
            assert!(text.contains("@SVC_ROOT@/usr/local/bin/svc "), "{name}");
            assert!(text.contains("EnvironmentFile=-@SVC_ROOT@/etc/svc/env"), "{name}");
        }
        assert!(build(&spec).is_err(), "no binary, no bundle");
    }
}
