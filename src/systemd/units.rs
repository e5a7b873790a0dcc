//! The unit files, from the templates in `systemd/` with the svc binary's path filled in. They are
//! the one source: `svc systemd install` writes exactly these.

use std::path::Path;

/// Where a template names the svc binary.
const BIN_PLACEHOLDER: &str = "@SVC_BIN@";

const TEMPLATES: [(&str, &str); 9] = [
    ("svc-api.service", include_str!("../../systemd/svc-api.service")),
    ("svc-ingest.service", include_str!("../../systemd/svc-ingest.service")),
    ("svc-collector.service", include_str!("../../systemd/svc-collector.service")),
    ("svc-profiler.service", include_str!("../../systemd/svc-profiler.service")),
    ("svc-sniffer.service", include_str!("../../systemd/svc-sniffer.service")),
    ("svc-tarpit.service", include_str!("../../systemd/svc-tarpit.service")),
    ("svc-mutator.service", include_str!("../../systemd/svc-mutator.service")),
    ("svc-webhook.service", include_str!("../../systemd/svc-webhook.service")),
    ("svc.target", include_str!("../../systemd/svc.target")),
];

/// One unit file to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitFile {
    pub name: &'static str,
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
    Ok(TEMPLATES
        .iter()
        .map(|(name, template)| UnitFile { name, text: template.replace(BIN_PLACEHOLDER, &escaped) })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_runs_the_given_binary() {
        let units = render(Path::new("/opt/svc%1/svc")).unwrap();
        assert_eq!(units.len(), 9);
        for unit in units.iter().filter(|u| u.name.ends_with(".service")) {
            assert!(unit.text.contains("ExecStart=/opt/svc%%1/svc "), "{}", unit.name);
            assert!(!unit.text.contains(BIN_PLACEHOLDER));
        }
        assert!(render(Path::new("relative/svc")).is_err());
        assert!(render(Path::new("/with space/svc")).is_err());
    }

    #[test]
    fn only_the_sniffer_may_capture_and_only_what_enters_deckies_may_change_their_network() {
        for unit in render(Path::new("/usr/bin/svc")).unwrap() {
            assert_eq!(unit.text.contains("CAP_NET_RAW"), unit.name == "svc-sniffer.service", "{}", unit.name);
            // The tarpit shapes a decky's traffic (the API runs it too); the API and the mutator
            // set routes inside topology deckies.
            let enters = ["svc-api.service", "svc-tarpit.service", "svc-mutator.service"].contains(&unit.name);
            assert_eq!(unit.text.contains("CAP_NET_ADMIN"), enters, "{}", unit.name);
            assert_eq!(unit.text.contains("CAP_SYS_ADMIN"), enters, "{}", unit.name);
        }
    }
}
