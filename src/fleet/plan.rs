//! From a deployment INI to the deckies it asks for: which sections are deckies, `amount`
//! expansion, per-service sections, names, services and archetypes, and the address each decky
//! takes in the fleet's subnet. Every refusal is a [`PlanError`] whose text tells the operator what
//! to change (the API answers it as a 409).

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use super::DEFAULT_IMAGE;
use super::catalog::{self, NMAP_OS_FAMILIES};
use super::decky_name::is_decky_name;
use super::ini::{Ini, Options};
use super::subnet::{Subnet, SubnetError};
use crate::db::{DeckyConfig, FleetNetwork};

/// Why an INI cannot be deployed; the text is shown to the operator as is.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PlanError(pub String);

/// The most deckies one section may expand to (`amount`).
pub const MAX_AMOUNT: u32 = 100;

/// The subnet a fleet gets when neither its INI nor an earlier deploy names one.
pub const DEFAULT_SUBNET: &str = "172.29.0.0/24";

/// Options a decky section may carry; anything else is most likely a typo, and refused.
const DECKY_OPTIONS: &[&str] = &[
    "ip",
    "services",
    "archetype",
    "nmap_os",
    "nmap-os",
    "mutate_interval",
    "mutate-interval",
    "amount",
    "image",
    "hostname",
    "distro",
];

fn refuse<T>(message: impl Into<String>) -> Result<T, PlanError> {
    Err(PlanError(message.into()))
}

/// Whether a section of the INI describes a decky (not `[general]`, a per-service `[a.b]` or a
/// `[custom-…]` service).
pub fn is_decky_section(name: &str) -> bool {
    name != "general" && !name.contains('.')
}

/// The network an INI's `[general]` names, falling back to `current` (the stored fleet's) and then
/// to the default private bridge.
pub fn network(ini: &Ini, current: Option<&FleetNetwork>) -> Result<FleetNetwork, PlanError> {
    let general = ini.section("general");
    let get = |key: &str| general.and_then(|g| g.get(key)).map(|v| v.trim()).filter(|v| !v.is_empty());
    let (net, gw, interface) = (get("net"), get("gw"), get("interface"));
    if net.is_none()
        && gw.is_none()
        && interface.is_none()
        && let Some(current) = current
    {
        return Ok(current.clone());
    }
    let subnet: Subnet = match net {
        Some(net) => net.parse().map_err(|e| PlanError(format!("[general] net: {e}")))?,
        None => current
            .map_or(DEFAULT_SUBNET, |c| c.subnet.as_str())
            .parse()
            .map_err(|e: SubnetError| PlanError(e.to_string()))?,
    };
    let gateway = match gw {
        Some(gw) => {
            gw.parse::<Ipv4Addr>().map_err(|_| PlanError(format!("[general] gw: `{gw}` is not an IPv4 address")))?
        }
        None => subnet.first_host(),
    };
    if !subnet.is_host(gateway) {
        return refuse(format!("[general] gw {gateway} is not a host address of {subnet}"));
    }
    if let Some(interface) = interface
        && (interface.len() > 15 || !interface.chars().all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c)))
    {
        return refuse(format!("[general] interface `{interface}` is not a network interface name"));
    }
    Ok(FleetNetwork {
        subnet: subnet.to_string(),
        gateway: gateway.to_string(),
        interface: interface.map(str::to_string),
    })
}

/// The deckies `ini` asks for on `network`, with addresses that avoid `reserved` (the rest of the
/// fleet's, in an additive deploy).
pub fn deckies(
    ini: &Ini,
    network: &FleetNetwork,
    reserved: &BTreeSet<Ipv4Addr>,
) -> Result<Vec<DeckyConfig>, PlanError> {
    let subnet: Subnet = network.subnet.parse().map_err(|e: SubnetError| PlanError(e.to_string()))?;
    let gateway: Ipv4Addr =
        network.gateway.parse().map_err(|_| PlanError(format!("gateway `{}` is not an address", network.gateway)))?;
    let default_interval = match ini.section("general") {
        Some(general) => interval(general, "general")?,
        None => None,
    };
    let mut deckies: Vec<(DeckyConfig, Option<Ipv4Addr>)> = Vec::new();
    for (section, options) in ini.sections().filter(|(name, _)| is_decky_section(name)) {
        if section.starts_with("custom-") {
            return refuse(format!(
                "[{section}]: bring-your-own services are not supported; use image= in a decky section"
            ));
        }
        if let Some(unknown) = options.keys().find(|k| !DECKY_OPTIONS.contains(&k.as_str())) {
            return refuse(format!("[{section}] unknown option `{unknown}`; known: {}", DECKY_OPTIONS.join(", ")));
        }
        let template = decky(section, options, default_interval)?;
        let amount = amount(section, options)?;
        if amount > 1 && options.get("ip").is_some_and(|ip| !ip.trim().is_empty()) {
            return refuse(format!("[{section}] Cannot combine ip= with amount={amount}. Remove ip= or use amount=1."));
        }
        let ip = explicit_ip(section, options, subnet, gateway)?;
        if amount == 1 {
            deckies.push((template, ip));
        } else {
            for index in 1..=amount {
                let name = format!("{section}-{index:02}");
                let hostname = if options.contains_key("hostname") { template.hostname.clone() } else { name.clone() };
                deckies.push((DeckyConfig { name, hostname, ..template.clone() }, None));
            }
        }
    }
    if deckies.is_empty() {
        return refuse("INI must contain at least one section naming a decky");
    }
    let mut names = BTreeSet::new();
    for (decky, _) in &deckies {
        check_name(&decky.name)?;
        if !names.insert(decky.name.clone()) {
            return refuse(format!("decky '{}' is defined twice in the INI", decky.name));
        }
    }
    apply_service_sections(ini, &mut deckies)?;
    assign_addresses(deckies, subnet, gateway, reserved)
}

/// Decky names are what the API's paths and the containers' hostnames can carry.
fn check_name(name: &str) -> Result<(), PlanError> {
    if is_decky_name(name) {
        Ok(())
    } else {
        refuse(format!("decky name '{name}' must be 1 to 64 of a-z, 0-9 and '-'"))
    }
}

fn decky(section: &str, options: &Options, default_interval: Option<u32>) -> Result<DeckyConfig, PlanError> {
    let get = |key: &str| options.get(key).map(|v| v.trim()).filter(|v| !v.is_empty());
    let archetype = match get("archetype") {
        Some(name) => Some(catalog::archetype(name).ok_or_else(|| {
            let known: Vec<&str> = catalog::ARCHETYPES.iter().map(|a| a.name).collect();
            PlanError(format!("[{section}] unknown archetype `{name}`; known: {}", known.join(", ")))
        })?),
        None => None,
    };
    let services = match get("services") {
        Some(list) => services(section, list)?,
        None => match archetype {
            Some(archetype) => archetype.services.iter().map(|s| s.to_string()).collect(),
            None => default_services(section),
        },
    };
    let nmap_os = match get("nmap_os").or_else(|| get("nmap-os")) {
        Some(os) if NMAP_OS_FAMILIES.contains(&os) => os.to_string(),
        Some(os) => return refuse(format!("[{section}] nmap_os `{os}` is none of {}", NMAP_OS_FAMILIES.join(", "))),
        None => archetype.map_or("linux", |a| a.nmap_os).to_string(),
    };
    let image = get("image").unwrap_or(DEFAULT_IMAGE).to_string();
    if image.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return refuse(format!("[{section}] image `{image}` is not an image reference"));
    }
    let hostname = get("hostname").unwrap_or(section).to_string();
    if hostname.len() > 64 || !hostname.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.') {
        return refuse(format!("[{section}] hostname `{hostname}` is not a host name"));
    }
    Ok(DeckyConfig {
        name: section.to_string(),
        ip: String::new(),
        services,
        distro: get("distro").unwrap_or("debian").to_string(),
        base_image: image.clone(),
        build_base: image,
        hostname,
        archetype: archetype.map(|a| a.name.to_string()),
        service_config: BTreeMap::new(),
        nmap_os,
        mutate_interval: interval(options, section)?.or(default_interval),
        last_mutated: 0.0,
        last_login_attempt: 0.0,
        host_uuid: None,
    })
}

fn services(section: &str, list: &str) -> Result<Vec<String>, PlanError> {
    let mut services: Vec<String> = Vec::new();
    for name in list.split([',', '\n']).map(|s| s.trim().to_ascii_lowercase()).filter(|s| !s.is_empty()) {
        if !catalog::is_service(&name) {
            return refuse(format!(
                "[{section}] unknown service `{name}`; available: {}",
                catalog::service_names().join(", ")
            ));
        }
        if !services.contains(&name) {
            services.push(name);
        }
    }
    if services.is_empty() {
        return refuse(format!("[{section}] services= names no service"));
    }
    Ok(services)
}

/// One to three services chosen by the decky's name: varied across a fleet, the same on every
/// redeploy (DECNET picks at random, so a redeploy changed what attackers saw).
fn default_services(name: &str) -> Vec<String> {
    let seed = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    let all = catalog::service_names();
    let count = 1 + (seed % 3) as usize;
    let start = (seed / 3) as usize % all.len();
    (0..count).map(|i| all[(start + i) % all.len()].to_string()).collect()
}

fn interval(options: &Options, section: &str) -> Result<Option<u32>, PlanError> {
    match options.get("mutate_interval").or_else(|| options.get("mutate-interval")).map(|v| v.trim()) {
        None | Some("") => Ok(None),
        Some(raw) => match raw.parse::<u32>() {
            Ok(minutes) if minutes >= 1 => Ok(Some(minutes)),
            _ => refuse(format!("[{section}] mutate_interval= must be a positive number of minutes, got '{raw}'")),
        },
    }
}

fn amount(section: &str, options: &Options) -> Result<u32, PlanError> {
    match options.get("amount").map(|v| v.trim()) {
        None => Ok(1),
        Some(raw) => match raw.parse::<u32>() {
            Ok(n) if (1..=MAX_AMOUNT).contains(&n) => Ok(n),
            _ => refuse(format!("[{section}] amount= must be an integer from 1 to {MAX_AMOUNT}, got '{raw}'")),
        },
    }
}

fn explicit_ip(
    section: &str,
    options: &Options,
    subnet: Subnet,
    gateway: Ipv4Addr,
) -> Result<Option<Ipv4Addr>, PlanError> {
    let Some(raw) = options.get("ip").map(|v| v.trim()).filter(|v| !v.is_empty()) else { return Ok(None) };
    let ip: Ipv4Addr = raw.parse().map_err(|_| PlanError(format!("[{section}] ip `{raw}` is not an IPv4 address")))?;
    if !subnet.is_host(ip) {
        return refuse(format!("[{section}] ip {ip} is not a host address of the fleet network {subnet}"));
    }
    if ip == gateway {
        return refuse(format!("[{section}] ip {ip} is the fleet network's gateway"));
    }
    Ok(Some(ip))
}

/// `[<decky>.<service>]` sections: settings of one decky's service, or of every decky a section's
/// `amount` made (`<decky>-NN`). A section naming no decky is ignored, as DECNET does.
fn apply_service_sections(ini: &Ini, deckies: &mut [(DeckyConfig, Option<Ipv4Addr>)]) -> Result<(), PlanError> {
    for (section, options) in ini.sections().filter(|(name, _)| name.contains('.')) {
        let (decky_name, service) = section.rsplit_once('.').expect("the section has a dot");
        if !catalog::is_service(service) {
            return refuse(format!(
                "[{section}]: `{service}` is not a service; available: {}",
                catalog::service_names().join(", ")
            ));
        }
        let prefix = format!("{decky_name}-");
        let exact = deckies.iter().any(|(d, _)| d.name == decky_name);
        for (decky, _) in deckies.iter_mut() {
            let expanded = decky.name.strip_prefix(&prefix).is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
            if decky.name == decky_name || (!exact && expanded) {
                decky.service_config.insert(service.to_string(), options.clone());
            }
        }
    }
    Ok(())
}

fn assign_addresses(
    deckies: Vec<(DeckyConfig, Option<Ipv4Addr>)>,
    subnet: Subnet,
    gateway: Ipv4Addr,
    reserved: &BTreeSet<Ipv4Addr>,
) -> Result<Vec<DeckyConfig>, PlanError> {
    let mut taken = reserved.clone();
    taken.insert(gateway);
    for (decky, ip) in &deckies {
        let Some(ip) = ip else { continue };
        if reserved.contains(ip) {
            return refuse(format!("IP {ip} is already in use by an existing decky"));
        }
        if !taken.insert(*ip) {
            return refuse(format!("IP {ip} of decky '{}' is already taken", decky.name));
        }
    }
    deckies
        .into_iter()
        .map(|(mut decky, ip)| {
            let ip = match ip {
                Some(ip) => ip,
                None => {
                    let free = subnet.next_free(&taken).ok_or_else(|| {
                        PlanError(format!("no free address left in {subnet} for decky '{}'", decky.name))
                    })?;
                    taken.insert(free);
                    free
                }
            };
            decky.ip = ip.to_string();
            Ok(decky)
        })
        .collect()
}
