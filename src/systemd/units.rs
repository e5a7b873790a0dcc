//! The unit files, from the templates in `systemd/` with the svc binary's path filled in. They are
//! the one source: `svc systemd install` writes exactly these.

use std::path::Path;

use crate::roster::{API, WORKERS};

/// Where a template names the svc binary.
const BIN_PLACEHOLDER: &str = "@SVC_BIN@";

const API_TEMPLATE: &str = include_str!("../../systemd/svc-api.service");
const TARGET_TEMPLATE: &str = include_str!("../../systemd/svc.target");

/// Every unit's name and template: the API's, each known worker's, then the target.
fn templates() -> impl Iterator<Item = (String, &'static str)> {
    let workers = WORKERS.iter().map(|worker| (super::unit_of_worker(worker.name), worker.unit_template));
    std::iter::once((super::unit_of_worker(API), API_TEMPLATE))
        .chain(workers)
        .chain(std::iter::once(("svc.target".to_string(), TARGET_TEMPLATE)))
}

/// One unit file to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitFile {
    pub name: String,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the svc binary's path {0:?} cannot be written into a unit file (it must be absolute UTF-8 without whitespace)"
)]
pub struct UnusableBinaryPath(pub String);

/// Every unit, running `bin`.
pub fn render(bin: &Path) -> Result<Vec<UnitFile>, UnusableBinaryPath> {
    let text = bin.to_str().ok_or_else(|| UnusableBinaryPath(bin.display().to_string()))?;
    if !bin.is_absolute() || text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(UnusableBinaryPath(text.to_string()));
    }
    // `%` starts a specifier in a unit file.
    let escaped = text.replace('%', "%%");
    Ok(templates()
        .map(|(name, template)| UnitFile { name, text: template.replace(BIN_PLACEHOLDER, &escaped) })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_runs_the_given_binary() {
        let units = render(Path::new("/opt/svc%1/svc")).unwrap();
        let names: Vec<&str> = units.iter().map(|u| u.name.as_str()).collect();
        assert_eq!(names.len(), WORKERS.len() + 2);
        assert_eq!((names[0], names[names.len() - 1]), ("svc-api.service", "svc.target"));
        for worker in WORKERS {
            assert!(names.contains(&format!("svc-{}.service", worker.name).as_str()), "{}", worker.name);
        }
        for unit in units.iter().filter(|u| u.name.ends_with(".service")) {
            assert!(unit.text.contains("ExecStart=/opt/svc%%1/svc "), "{}", unit.name);
            assert!(!unit.text.contains(BIN_PLACEHOLDER));
        }
        assert!(render(Path::new("relative/svc")).is_err());
        assert!(render(Path::new("/with space/svc")).is_err());
    }

    #[test]
    fn only_the_sniffer_and_prober_may_use_raw_sockets_and_only_what_enters_deckies_may_change_their_network() {
        for unit in render(Path::new("/usr/bin/svc")).unwrap() {
            // The sniffer captures; the prober reads its own SYN-ACKs and ICMP errors.
            let raw = ["svc-sniffer.service", "svc-prober.service"].contains(&unit.name.as_str());
            assert_eq!(unit.text.contains("CAP_NET_RAW"), raw, "{}", unit.name);
            // The tarpit shapes a decky's traffic (the API runs it too); the API and the mutator
            // set routes inside topology deckies.
            let enters = ["svc-api.service", "svc-tarpit.service", "svc-mutator.service"].contains(&unit.name.as_str());
            assert_eq!(unit.text.contains("CAP_NET_ADMIN"), enters, "{}", unit.name);
            assert_eq!(unit.text.contains("CAP_SYS_ADMIN"), enters, "{}", unit.name);
        }
    }
}
