//! Which host gets which decky, and what each host is sent (reference §1.12): the INI's deckies
//! (after `amount` expansion) in order, each on the host its section pins with `host = <name or
//! uuid>`, else on `hosts[i % n]` over the usable hosts sorted by name (DECNET's round-robin, `i`
//! the decky's place in the INI). Each host gets a deployment INI of its own: `[general]`, its
//! deckies' sections (an expanded decky as its own section) and their per-service sections.

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::db::SwarmHost;
use crate::fleet::ini::{Ini, Options};
use crate::fleet::plan::is_decky_section;
use crate::fleet::subnet::Subnet;

/// The INI option that pins a decky's section to a swarm host; the master reads it, agents never
/// see it.
pub const HOST_OPTION: &str = "host";

/// The INI without its `host` pins (what the fleet's planner checks), and per host the INI it is
/// sent with the names of its deckies, in host-name order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    pub unpinned: String,
    pub slices: Vec<Slice>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slice {
    pub host: Uuid,
    pub deckies: Vec<String>,
    pub ini: String,
}

/// Why a deploy cannot be spread; the text is the operator's (it says what to change).
#[derive(Debug, thiserror::Error)]
pub enum SplitError {
    #[error("no usable swarm host")]
    NoUsableHost,
    #[error("[{section}] host `{pin}` is not a usable swarm host (active: heard from, with an address)")]
    UnusablePin { section: String, pin: String },
}

/// Spreads `ini`'s deckies over `hosts` (the usable ones).
pub fn split(ini: &Ini, hosts: &[SwarmHost]) -> Result<Split, SplitError> {
    let mut hosts: Vec<&SwarmHost> = hosts.iter().collect();
    hosts.sort_by(|a, b| a.name.cmp(&b.name));
    if hosts.is_empty() {
        return Err(SplitError::NoUsableHost);
    }
    let mut by_host: BTreeMap<usize, Vec<(String, &str)>> = BTreeMap::new();
    let mut index = 0;
    for (section, options) in ini.sections().filter(|(name, _)| is_decky_section(name)) {
        let pinned = match options.get(HOST_OPTION).map(|v| v.trim()).filter(|v| !v.is_empty()) {
            Some(pin) => Some(
                hosts
                    .iter()
                    .position(|h| h.name == pin || h.uuid.to_string() == pin)
                    .ok_or_else(|| SplitError::UnusablePin { section: section.to_string(), pin: pin.to_string() })?,
            ),
            None => None,
        };
        for name in expanded_names(section, options) {
            let at = pinned.unwrap_or(index % hosts.len());
            by_host.entry(at).or_default().push((name, section));
            index += 1;
        }
    }
    let slices = by_host
        .into_iter()
        .map(|(at, deckies)| Slice {
            host: hosts[at].uuid,
            ini: slice_text(ini, &deckies),
            deckies: deckies.into_iter().map(|(name, _)| name).collect(),
        })
        .collect();
    Ok(Split { unpinned: unpinned_text(ini), slices })
}

/// The names a section's `amount` expands to, as the fleet's planner names them.
fn expanded_names(section: &str, options: &Options) -> Vec<String> {
    let amount = options.get("amount").and_then(|v| v.trim().parse::<u32>().ok()).unwrap_or(1);
    if amount <= 1 { vec![section.to_string()] } else { (1..=amount).map(|i| format!("{section}-{i:02}")).collect() }
}

fn write_section(out: &mut String, name: &str, options: &Options, skip: &[&str]) {
    out.push_str(&format!("[{name}]\n"));
    for (key, value) in options.iter().filter(|(key, _)| !skip.contains(&key.as_str())) {
        // A multi-line value continues on indented lines.
        out.push_str(&format!("{key} = {}\n", value.replace('\n', "\n    ")));
    }
    out.push('\n');
}

/// `ini` with its deckies on `subnet` (gateway: its first host) instead of the network its
/// `[general]` names: how an agent whose deckies have a network of their own
/// (`SVC_AGENT_DECKY_NET`) takes a deploy, as DECNET's agents re-localise theirs. Each decky's
/// address is then the agent's to choose.
pub fn localised(ini: &Ini, subnet: Subnet) -> String {
    let mut out = format!("[general]\nnet = {subnet}\ngw = {}\n", subnet.first_host());
    if let Some(general) = ini.section("general") {
        let mut rest = String::new();
        write_section(&mut rest, "general", general, &["net", "gw"]);
        out.push_str(rest.strip_prefix("[general]\n").unwrap_or_default());
    } else {
        out.push('\n');
    }
    for (name, options) in ini.sections().filter(|(name, _)| *name != "general") {
        write_section(&mut out, name, options, &["ip"]);
    }
    out
}

/// The INI as given, less the master's `host` pins.
fn unpinned_text(ini: &Ini) -> String {
    let mut out = String::new();
    for (name, options) in ini.sections() {
        let skip: &[&str] = if is_decky_section(name) { &[HOST_OPTION] } else { &[] };
        write_section(&mut out, name, options, skip);
    }
    out
}

/// One host's INI: `[general]`, then each of its deckies as a section of its own name with its
/// section's options, then the per-service sections of those sections, renamed alike.
fn slice_text(ini: &Ini, deckies: &[(String, &str)]) -> String {
    let mut out = String::new();
    if let Some(general) = ini.section("general") {
        write_section(&mut out, "general", general, &[]);
    }
    for (name, section) in deckies {
        let options = ini.section(section).expect("the decky's section");
        write_section(&mut out, name, options, &[HOST_OPTION, "amount"]);
        let prefix = format!("{section}.");
        for (sub, sub_options) in ini.sections().filter(|(sub, _)| sub.starts_with(&prefix)) {
            write_section(&mut out, &format!("{name}.{}", &sub[prefix.len()..]), sub_options, &[]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::HostStatus;

    fn host(name: &str) -> SwarmHost {
        SwarmHost {
            uuid: Uuid::new_v4(),
            name: name.into(),
            address: "10.0.0.1".into(),
            agent_port: 8765,
            status: HostStatus::Active,
            last_heartbeat: None,
            client_cert_fingerprint: None,
            updater_cert_fingerprint: None,
            enrolled_at: chrono::Utc::now(),
            notes: None,
            use_ipvlan: false,
        }
    }

    #[test]
    fn deckies_go_round_robin_over_hosts_by_name_unless_pinned() {
        let ini = Ini::parse(
            "[general]\nnet = 172.30.0.0/24\n[a]\narchetype = web-server\namount = 3\n[a.ssh]\nusers = root:root\n\
             [b]\nservices = ssh\nhost = zed\n[c]\nservices = ftp\n",
        )
        .unwrap();
        let hosts = [host("zed"), host("alpha")];
        let split = split(&ini, &hosts).unwrap();
        let names: Vec<(String, Vec<String>)> = split
            .slices
            .iter()
            .map(|s| (hosts.iter().find(|h| h.uuid == s.host).unwrap().name.clone(), s.deckies.clone()))
            .collect();
        // Sorted by name: alpha, zed. a-01 alpha, a-02 zed, a-03 alpha, b pinned to zed, c (5th) alpha.
        assert_eq!(
            names,
            vec![
                ("alpha".into(), vec!["a-01".into(), "a-03".into(), "c".into()]),
                ("zed".into(), vec!["a-02".into(), "b".into()])
            ]
        );
        let alpha = Ini::parse(&split.slices[0].ini).unwrap();
        assert_eq!(alpha.section("general").unwrap()["net"], "172.30.0.0/24");
        assert_eq!(alpha.section("a-01.ssh").unwrap()["users"], "root:root");
        assert!(!alpha.section("a-01").unwrap().contains_key("amount"));
        let zed = Ini::parse(&split.slices[1].ini).unwrap();
        assert!(!zed.section("b").unwrap().contains_key("host"), "agents never see the pin");
        assert!(!Ini::parse(&split.unpinned).unwrap().section("b").unwrap().contains_key("host"));
    }

    #[test]
    fn an_agent_with_a_network_of_its_own_puts_the_deckies_there() {
        let ini = Ini::parse(
            "[general]\nnet = 172.30.0.0/24\ngw = 172.30.0.1\nipvlan = false\n[a]\nip = 172.30.0.9\nservices = ssh\n",
        )
        .unwrap();
        let local = Ini::parse(&localised(&ini, "10.213.5.0/24".parse().unwrap())).unwrap();
        let general = local.section("general").unwrap();
        assert_eq!((general["net"].as_str(), general["gw"].as_str()), ("10.213.5.0/24", "10.213.5.1"));
        assert_eq!(general["ipvlan"], "false");
        assert_eq!(local.section("a").unwrap()["services"], "ssh");
        assert!(!local.section("a").unwrap().contains_key("ip"), "the agent picks the address");
        let bare =
            Ini::parse(&localised(&Ini::parse("[a]\nservices = ssh\n").unwrap(), "10.9.0.0/24".parse().unwrap()));
        assert_eq!(bare.unwrap().section("general").unwrap()["net"], "10.9.0.0/24");
    }

    #[test]
    fn a_pin_to_no_usable_host_is_refused_with_its_section() {
        let ini = Ini::parse("[b]\nservices = ssh\nhost = gone\n").unwrap();
        let err = split(&ini, &[host("alpha")]).unwrap_err().to_string();
        assert!(err.contains("[b] host `gone`"), "{err}");
    }
}
