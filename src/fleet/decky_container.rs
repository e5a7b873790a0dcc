//! The decky-container contract, written once: the labels that mark what a fleet made (containers
//! and networks, the flat fleet's and a topology's), the environment a decky's container is given,
//! and the [`ContainerSpec`] handed to the runtime. The fleet's deploy, its reconcile and mutation,
//! and a topology's deploy all build their deckies here; `svc decky`, inside the container, reads
//! the same environment names.
//!
//! Ownership: everything carries the fleet's name and this deployment's identity (a UUID made
//! once and kept in its database). Two deployments may share an engine and even a fleet name; each
//! only ever removes or replaces what carries its own identity. A container made before
//! identities existed carries none: it is this deployment's when this database's fleet names its
//! decky (it is adopted, and recreated with the label when it must be), else another's.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::artifacts::{ARTIFACTS_MOUNT, DeckyArtifacts};
use crate::runtime::{Confinement, ContainerSpec};

/// The label that marks a fleet's containers and network, valued with the fleet's name.
pub const FLEET_LABEL: &str = "svc.fleet";
/// The label naming the decky a container is.
pub const DECKY_LABEL: &str = "svc.decky";
/// The label naming the topology a container or network belongs to (absent on the flat fleet's).
pub const TOPOLOGY_LABEL: &str = "svc.topology";
/// The label naming the deployment (its identity, a UUID) that made a container or network.
pub const DEPLOYMENT_LABEL: &str = "svc.deployment";

/// The decky's name: every log line's HOSTNAME, and the INI sections it reads.
pub const NODE_NAME_ENV: &str = "NODE_NAME";
/// The services the decky runs, comma-separated, each with an optional port.
pub const SERVICES_ENV: &str = "SVC_DECKY_SERVICES";
/// The decky's `[<decky>.<service>]` INI sections as text (absent when it has none).
pub const INI_TEXT_ENV: &str = "SVC_DECKY_INI_TEXT";
/// Where the decky keeps captured files, and how much for how long (absent: it keeps none).
pub const ARTIFACTS_DIR_ENV: &str = "SVC_DECKY_ARTIFACTS_DIR";
pub const ARTIFACTS_QUOTA_ENV: &str = "SVC_DECKY_ARTIFACTS_QUOTA_MB";
pub const ARTIFACTS_RETENTION_ENV: &str = "SVC_DECKY_ARTIFACTS_RETENTION_DAYS";

/// Per-service settings, service → key → value: the INI's `[<decky>.<service>]` sections.
pub type ServiceSettings = BTreeMap<String, BTreeMap<String, String>>;

/// Who makes a container or network: the fleet (by name) of one deployment (by identity). Every
/// label this deployment writes comes from here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerOwner {
    pub fleet: String,
    pub deployment: Uuid,
}

impl ContainerOwner {
    /// Whether `labels` say another deployment made it; one without an identity says nothing.
    pub fn made_by_another(&self, labels: &BTreeMap<String, String>) -> bool {
        labels.get(DEPLOYMENT_LABEL).is_some_and(|id| *id != self.deployment.to_string())
    }

    /// Whether a container of this fleet is this deployment's to change: it carries this
    /// deployment's identity, or none and `named_here` (this database's fleet names its decky).
    pub fn owns(&self, labels: &BTreeMap<String, String>, named_here: impl Fn(&str) -> bool) -> bool {
        match labels.get(DEPLOYMENT_LABEL) {
            Some(id) => *id == self.deployment.to_string(),
            None => labels.get(DECKY_LABEL).is_some_and(|decky| named_here(decky)),
        }
    }

    /// The labels of something this owner makes: a network (`decky` is `None`) or a decky's
    /// container, of the flat fleet or of `topology`.
    pub fn labels(&self, topology: Option<Uuid>, decky: Option<&str>) -> BTreeMap<String, String> {
        let mut labels = BTreeMap::from([
            (FLEET_LABEL.to_string(), self.fleet.clone()),
            (DEPLOYMENT_LABEL.to_string(), self.deployment.to_string()),
        ]);
        if let Some(topology) = topology {
            labels.insert(TOPOLOGY_LABEL.to_string(), topology.to_string());
        }
        if let Some(decky) = decky {
            labels.insert(DECKY_LABEL.to_string(), decky.to_string());
        }
        labels
    }

    /// What the runtime is asked to run for `decky`.
    pub fn spec(&self, decky: &DeckyContainer<'_>) -> ContainerSpec {
        ContainerSpec {
            name: decky.container.clone(),
            image: decky.image.clone(),
            cmd: Vec::new(),
            env: decky.environment(),
            hostname: decky.hostname.to_string(),
            network: decky.network.clone(),
            ip: decky.ip.clone(),
            labels: self.labels(decky.topology, Some(decky.name)),
            sysctls: decky_sysctls(decky.forwards),
            confinement: Confinement {
                binds: decky.artifacts.iter().map(DeckyArtifacts::mount).collect(),
                ..decky_confinement()
            },
        }
    }
}

/// The user a decky runs as: `nobody`. The decoys need no privilege once their ports may be bound,
/// which the network namespace's own setting below allows, and write only their artifacts
/// directory, which is made theirs.
pub const DECKY_USER: &str = "65534:65534";
/// A decky's memory and process limits: a decoy is one process with a few threads per session.
pub const DECKY_MEMORY_BYTES: i64 = 256 << 20;
pub const DECKY_PIDS: i64 = 256;
/// The engine's log of a decky's output, kept at most 3 × 64 MiB: the collector carries the lines
/// to the ingest file as they come, so the engine's copy is only a buffer for a collector away.
/// Generous because podman does not rotate at the cap but truncates, and a truncation under the
/// collector's read cuts the line it is reading.
pub const DECKY_LOG_MAX_BYTES: u64 = 64 << 20;
pub const DECKY_LOG_FILES: u32 = 3;

/// The kernel settings of a decky's network namespace: its ports below 1024 may be bound without
/// a capability (only in its own namespace), and a decky that routes forwards.
fn decky_sysctls(forwards: bool) -> BTreeMap<String, String> {
    let mut sysctls = BTreeMap::from([("net.ipv4.ip_unprivileged_port_start".to_string(), "0".to_string())]);
    if forwards {
        sysctls.insert("net.ipv4.ip_forward".to_string(), "1".to_string());
    }
    sysctls
}

/// A decky's hardened profile: not root, no capability at all (the tarpit and the sniffer act on
/// its namespace from the host, the collector reads its output through the engine: none of them
/// needs anything inside), a read-only root with a small `/tmp` and the directories files are
/// dropped in (`file_drop::drop_mounts`, in memory), no privilege gained by any
/// program it runs, bounded memory, processes and engine log.
pub fn decky_confinement() -> Confinement {
    Confinement {
        user: Some(DECKY_USER.to_string()),
        capabilities: Vec::new(),
        read_only_root: true,
        tmpfs: {
            let mut tmpfs = super::file_drop::drop_mounts();
            tmpfs.insert("/tmp".to_string(), "rw,noexec,nosuid,nodev,size=16m".to_string());
            tmpfs
        },
        binds: BTreeMap::new(),
        no_new_privileges: true,
        memory_bytes: DECKY_MEMORY_BYTES,
        pids: DECKY_PIDS,
        log_max_bytes: DECKY_LOG_MAX_BYTES,
        log_files: DECKY_LOG_FILES,
    }
}

/// A decky's container, as the fleet or a topology describes it.
#[derive(Clone, Debug)]
pub struct DeckyContainer<'a> {
    /// The engine's name of the container.
    pub container: String,
    /// The decky's name.
    pub name: &'a str,
    pub hostname: &'a str,
    pub image: String,
    pub services: &'a [String],
    pub service_config: &'a ServiceSettings,
    /// The network it starts on, and its address there.
    pub network: String,
    pub ip: String,
    /// The topology it belongs to; `None` for the flat fleet's.
    pub topology: Option<Uuid>,
    /// It routes between networks (`net.ipv4.ip_forward`).
    pub forwards: bool,
    /// Its artifacts directory on this host (`None`: it keeps no captured files).
    pub artifacts: Option<DeckyArtifacts>,
}

impl DeckyContainer<'_> {
    /// The environment `svc decky` reads.
    pub fn environment(&self) -> Vec<String> {
        let mut env =
            vec![format!("{NODE_NAME_ENV}={}", self.name), format!("{SERVICES_ENV}={}", self.services.join(","))];
        if !self.service_config.is_empty() {
            env.push(format!("{INI_TEXT_ENV}={}", service_sections(self.name, self.service_config)));
        }
        if let Some(artifacts) = &self.artifacts {
            env.push(format!("{ARTIFACTS_DIR_ENV}={ARTIFACTS_MOUNT}"));
            env.push(format!("{ARTIFACTS_QUOTA_ENV}={}", artifacts.quota_mb));
            env.push(format!("{ARTIFACTS_RETENTION_ENV}={}", artifacts.retention_days));
        }
        env
    }
}

/// The decky's `[<decky>.<service>]` sections, as `svc decky --ini-text` reads them.
fn service_sections(decky: &str, service_config: &ServiceSettings) -> String {
    let mut text = String::new();
    for (service, settings) in service_config {
        text.push_str(&format!("[{decky}.{service}]\n"));
        for (key, value) in settings {
            // A multi-line value keeps its continuation lines indented.
            text.push_str(&format!("{key} = {}\n", value.replace('\n', "\n  ")));
        }
    }
    text
}

/// The `service_config` of a topology decky's free-form `decky_config` (DECNET's `DeckyConfig`
/// shape): each service's scalar settings as text; anything else is not a setting and is skipped.
pub fn service_settings_of(decky_config: Option<&serde_json::Value>) -> ServiceSettings {
    let Some(services) = decky_config.and_then(|c| c.get("service_config")).and_then(|s| s.as_object()) else {
        return ServiceSettings::new();
    };
    services
        .iter()
        .filter_map(|(service, settings)| {
            let settings = settings.as_object()?;
            let settings: BTreeMap<String, String> = settings
                .iter()
                .filter_map(|(key, value)| {
                    let text = match value {
                        serde_json::Value::String(text) => text.clone(),
                        serde_json::Value::Number(_) | serde_json::Value::Bool(_) => value.to_string(),
                        _ => return None,
                    };
                    Some((key.clone(), text))
                })
                .collect();
            Some((service.clone(), settings))
        })
        .filter(|(_, settings)| !settings.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decky<'a>(services: &'a [String], config: &'a ServiceSettings, topology: Option<Uuid>) -> DeckyContainer<'a> {
        DeckyContainer {
            container: "svc-web".into(),
            name: "web",
            hostname: "web",
            image: "localhost/svc-decky:1".into(),
            services,
            service_config: config,
            network: "svc-fleet".into(),
            ip: "10.0.0.2".into(),
            topology,
            forwards: false,
            artifacts: None,
        }
    }

    #[test]
    fn a_decky_is_told_its_name_services_and_sections() {
        let services = vec!["ssh".to_string(), "telnet".to_string()];
        let config =
            ServiceSettings::from([("telnet".into(), BTreeMap::from([("banner".into(), "Ubuntu\nLTS".into())]))]);
        let env = decky(&services, &config, None).environment();
        assert_eq!(
            env,
            [
                "NODE_NAME=web",
                "SVC_DECKY_SERVICES=ssh,telnet",
                "SVC_DECKY_INI_TEXT=[web.telnet]\nbanner = Ubuntu\n  LTS\n"
            ]
        );
        let none = ServiceSettings::new();
        assert_eq!(decky(&services, &none, None).environment().len(), 2, "no sections, no INI text");
    }

    #[test]
    fn labels_say_whose_fleet_deployment_topology_and_decky() {
        let owner = ContainerOwner { fleet: "svc".into(), deployment: Uuid::new_v4() };
        let topology = Uuid::new_v4();
        let (services, config) = (vec!["http".to_string()], ServiceSettings::new());
        let spec = owner.spec(&decky(&services, &config, Some(topology)));
        assert_eq!(
            spec.labels,
            BTreeMap::from([
                (FLEET_LABEL.to_string(), "svc".to_string()),
                (DEPLOYMENT_LABEL.to_string(), owner.deployment.to_string()),
                (TOPOLOGY_LABEL.to_string(), topology.to_string()),
                (DECKY_LABEL.to_string(), "web".to_string()),
            ])
        );
        assert_eq!(owner.labels(None, None).len(), 2, "a network: fleet and deployment");
    }

    #[test]
    fn a_deployment_owns_what_carries_its_identity_and_adopts_unmarked_deckies_it_names() {
        let owner = ContainerOwner { fleet: "svc".into(), deployment: Uuid::new_v4() };
        let other = ContainerOwner { fleet: "svc".into(), deployment: Uuid::new_v4() };
        let named = |decky: &str| decky == "web";
        let ours = owner.labels(None, Some("db"));
        let theirs = other.labels(None, Some("web"));
        let unmarked = BTreeMap::from([
            (FLEET_LABEL.to_string(), "svc".to_string()),
            (DECKY_LABEL.to_string(), "web".to_string()),
        ]);
        let unmarked_unnamed = BTreeMap::from([
            (FLEET_LABEL.to_string(), "svc".to_string()),
            (DECKY_LABEL.to_string(), "mail".to_string()),
        ]);
        assert!(owner.owns(&ours, named), "its own, named here or not");
        assert!(!owner.owns(&theirs, named), "another deployment's, even of a decky named here");
        assert!(owner.owns(&unmarked, named), "made before identities, and named here: adopted");
        assert!(!owner.owns(&unmarked_unnamed, named), "made before identities, named elsewhere");
        assert!(owner.made_by_another(&theirs) && !owner.made_by_another(&ours) && !owner.made_by_another(&unmarked));
    }

    #[test]
    fn a_topology_deckys_settings_come_from_its_decky_config() {
        let config = serde_json::json!({
            "ips_by_lan": {"a": "10.0.0.2"},
            "service_config": {"ssh": {"banner": "OpenSSH", "port": 2222, "nested": {"x": 1}}, "http": "no"},
        });
        assert_eq!(
            service_settings_of(Some(&config)),
            ServiceSettings::from([(
                "ssh".into(),
                BTreeMap::from([("banner".into(), "OpenSSH".into()), ("port".into(), "2222".into())])
            )])
        );
        assert!(service_settings_of(None).is_empty());
        assert!(service_settings_of(Some(&serde_json::json!({"forwards_l3": true}))).is_empty());
    }
}
