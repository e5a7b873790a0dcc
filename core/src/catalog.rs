//! What a decky can run: the decoy services of `svc decky` with their usual ports, and the
//! archetypes, named service sets an INI can ask for instead of listing services. (Its OpenAPI
//! schemas are `svc::fleet::catalog`'s, beside the API.)

/// Every decoy service this build has, with the port it usually listens on. `svc decky` reads its
/// `--services` against this list, the deployment INI its `services =`.
pub const SERVICES: &[(&str, u16)] =
    &[("ssh", 22), ("http", 80), ("https", 443), ("telnet", 23), ("ftp", 21), ("smtp", 25)];

pub fn is_service(name: &str) -> bool {
    SERVICES.iter().any(|(known, _)| *known == name)
}

pub fn service_names() -> Vec<&'static str> {
    SERVICES.iter().map(|(name, _)| *name).collect()
}

/// A named kind of host: the services it runs and the OS family nmap should guess.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Archetype {
    pub name: &'static str,
    pub services: &'static [&'static str],
    pub nmap_os: &'static str,
}

pub const ARCHETYPES: &[Archetype] = &[
    Archetype { name: "linux-server", services: &["ssh", "http", "ftp"], nmap_os: "linux" },
    Archetype { name: "web-server", services: &["http", "https", "ssh"], nmap_os: "linux" },
    Archetype { name: "mail-server", services: &["smtp", "ssh"], nmap_os: "linux" },
    Archetype { name: "file-server", services: &["ftp", "ssh"], nmap_os: "linux" },
    Archetype { name: "iot-device", services: &["telnet", "http"], nmap_os: "embedded" },
    Archetype { name: "legacy-unix", services: &["telnet", "ftp", "smtp"], nmap_os: "bsd" },
];

pub fn archetype(name: &str) -> Option<&'static Archetype> {
    ARCHETYPES.iter().find(|a| a.name == name)
}

/// The OS families an INI's `nmap_os` may name.
pub const NMAP_OS_FAMILIES: &[&str] = &["linux", "windows", "bsd", "embedded", "cisco"];
