//! What a decky runs: which services, on which ports, with which per-service settings (the INI's
//! `[<decky>.<service>]` sections: `banner`, `hostname`, `users`, …), read from the command line
//! and the deployment INI.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

use anyhow::{Context, bail};
use svc_core::ini::Ini;

/// Every service this build can run, with its usual port: the fleet's catalog, so a deployment
/// INI and `svc decky` agree.
pub use svc_core::catalog::SERVICES;

/// One service to run: its name, the port it listens on and its settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceSpec {
    pub name: &'static str,
    pub port: u16,
    pub settings: Settings,
}

/// A service's settings from its INI section; keys are lowercase.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings(BTreeMap<String, String>);

impl Settings {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str).filter(|v| !v.is_empty())
    }

    pub fn set(&mut self, key: &str, value: &str) {
        self.0.insert(key.to_ascii_lowercase(), value.to_string());
    }

    /// The credentials that open the fake shell: `users = root:root, admin:admin` (`user:password`
    /// pairs, comma-separated), or `defaults` when the section names none.
    pub fn users(&self, defaults: &[(&str, &str)]) -> Vec<(String, String)> {
        match self.get("users") {
            Some(list) => list
                .split(',')
                .filter_map(|pair| pair.trim().split_once(':'))
                .map(|(user, password)| (user.trim().to_string(), password.to_string()))
                .collect(),
            None => defaults.iter().map(|(u, p)| (u.to_string(), p.to_string())).collect(),
        }
    }
}

/// Weak credentials the fake shells accept when the INI names none: what attackers try first.
pub const DEFAULT_USERS: &[(&str, &str)] = &[("root", "root"), ("root", "123456"), ("admin", "admin")];

/// Reads `--services ssh,http:8080,…`: each name with an optional `:port`, each known, none twice.
pub fn parse_services(list: &str) -> anyhow::Result<Vec<ServiceSpec>> {
    let mut specs: Vec<ServiceSpec> = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, port) = match item.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (item, None),
        };
        let name = name.to_ascii_lowercase();
        let Some(&(name, usual)) = SERVICES.iter().find(|(known, _)| *known == name) else {
            let known: Vec<&str> = SERVICES.iter().map(|(n, _)| *n).collect();
            bail!("unknown service `{name}`; this build has {}", known.join(", "));
        };
        let port = match port {
            None => usual,
            Some(port) => match port.parse::<u16>() {
                Ok(port) if port > 0 => port,
                _ => bail!("`{item}`: the port must be a number in 1..65535"),
            },
        };
        if specs.iter().any(|s| s.name == name) {
            bail!("service `{name}` is named twice");
        }
        specs.push(ServiceSpec { name, port, settings: Settings::default() });
    }
    if specs.is_empty() {
        bail!("no service named (e.g. --services ssh,http)");
    }
    Ok(specs)
}

/// Adds each service's settings from the INI sections `[<decky>.<service>]` (the decky's name in
/// any letter case), read with the deployment INI's own grammar, so `key: value`, continuation
/// lines and `[DEFAULT]` mean here what they mean to a deploy.
pub fn apply_ini(specs: &mut [ServiceSpec], decky: &str, text: &str) -> anyhow::Result<()> {
    let ini = Ini::parse(text).context("reading the INI")?;
    for (section, options) in ini.sections() {
        let Some((name, service)) = section.rsplit_once('.') else { continue };
        if !name.eq_ignore_ascii_case(decky) {
            continue;
        }
        if let Some(spec) = specs.iter_mut().find(|s| s.name.eq_ignore_ascii_case(service)) {
            for (key, value) in options {
                spec.settings.set(key, value);
            }
        }
    }
    Ok(())
}

/// Reads the INI file at `path` into `specs`.
pub fn apply_ini_file(specs: &mut [ServiceSpec], decky: &str, path: &Path) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    apply_ini(specs, decky, &text).with_context(|| format!("in {}", path.display()))
}

/// Where the services listen: every address unless told otherwise.
pub fn default_bind() -> IpAddr {
    IpAddr::from([0, 0, 0, 0])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_take_their_usual_port_or_the_one_given() {
        let specs = parse_services("ssh, HTTP:8080,ftp").unwrap();
        let ports: Vec<(&str, u16)> = specs.iter().map(|s| (s.name, s.port)).collect();
        assert_eq!(ports, [("ssh", 22), ("http", 8080), ("ftp", 21)]);
        assert!(parse_services("ssh,gopher").unwrap_err().to_string().contains("unknown service `gopher`"));
        assert!(parse_services("ssh:0").is_err());
        assert!(parse_services("ssh:x").is_err());
        assert!(parse_services("ssh,ssh:2222").is_err());
        assert!(parse_services(" , ").is_err());
    }

    #[test]
    fn the_decky_sections_of_the_ini_set_each_service() {
        let mut specs = parse_services("ssh,http").unwrap();
        let ini = "[general]\nnet = 10.0.0.0/24\n[web-01.ssh]\nbanner = SSH-2.0-OpenSSH_8.4\n\
                   users = root:toor, pi:raspberry\n[other.ssh]\nbanner = no\n[WEB-01.http]\nhostname = intranet\n";
        apply_ini(&mut specs, "web-01", ini).unwrap();
        assert_eq!(specs[0].settings.get("banner"), Some("SSH-2.0-OpenSSH_8.4"));
        assert_eq!(
            specs[0].settings.users(DEFAULT_USERS),
            [("root".into(), "toor".into()), ("pi".into(), "raspberry".into())]
        );
        assert_eq!(specs[1].settings.get("hostname"), Some("intranet"));
        assert_eq!(specs[1].settings.users(DEFAULT_USERS).len(), DEFAULT_USERS.len());
    }

    #[test]
    fn the_ini_reads_with_the_deployments_grammar_and_refuses_what_a_deploy_refuses() {
        let mut specs = parse_services("ssh").unwrap();
        let ini = "[web-01.ssh]\nbanner: SSH-2.0-dropbear\nusers = root:toor,\n  admin:admin\n";
        apply_ini(&mut specs, "web-01", ini).unwrap();
        assert_eq!(specs[0].settings.get("banner"), Some("SSH-2.0-dropbear"));
        assert_eq!(specs[0].settings.users(DEFAULT_USERS).len(), 2, "a continuation line continues the value");
        let err = apply_ini(&mut specs, "web-01", "banner = x\n[web-01.ssh]\n").unwrap_err();
        assert!(format!("{err:#}").contains("an option before any section header"), "{err:#}");
    }
}
