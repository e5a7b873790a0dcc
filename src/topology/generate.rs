//! The topology generator: a tree of LANs (a DMZ root, then `depth` levels of 1 to
//! `branching_factor` children per LAN), deckies on each, one decky per child LAN bridging it to
//! its parent, and optional cross edges that make the tree a DAG. Deterministic under `seed`: its
//! own small generator (splitmix64), so a seed gives the same topology on every build.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use crate::fleet::subnet::Subnet;

/// The generator's parameters (DECNET's `TopologyGenerateRequest`, limits checked by the caller).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Params {
    pub depth: u32,
    pub branching_factor: u32,
    pub deckies_per_lan_min: u32,
    pub deckies_per_lan_max: u32,
    pub bridge_forward_probability: f64,
    pub cross_edge_probability: f64,
    pub services_explicit: Option<Vec<String>>,
    pub randomize_services: bool,
    pub seed: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PlannedLan {
    pub name: String,
    pub subnet: String,
    pub is_dmz: bool,
    pub parent: Option<usize>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PlannedDecky {
    pub name: String,
    pub services: Vec<String>,
    /// LAN index → address, home LAN first.
    pub addresses: Vec<(usize, String)>,
    pub forwards_l3: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub lans: Vec<PlannedLan>,
    pub deckies: Vec<PlannedDecky>,
}

/// The subnet pool ran out before the plan was complete.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("subnet pool exhausted")]
pub struct Exhausted;

/// The LANs one generated topology has at most: depth 16 and branching 8 allow a tree of billions,
/// and one of thousands held the database's writer for seconds while it was stored.
pub const MAX_LANS: usize = 256;

/// Why no plan was made.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error(transparent)]
    Exhausted(#[from] Exhausted),
    #[error("a generated topology has at most {MAX_LANS} LANs; lower depth or branching_factor")]
    TooLarge,
}

/// splitmix64: tiny, fast, and fixed forever, unlike a library's generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `low..=high`.
    fn between(&mut self, low: u32, high: u32) -> u32 {
        if high <= low {
            return low;
        }
        low + (self.next() % u64::from(high - low + 1)) as u32
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn pick(&mut self, len: usize) -> usize {
        (self.next() % len as u64) as usize
    }
}

/// The /24s of `pool` in order, skipping `taken`.
pub struct SubnetPool {
    next: u32,
    end: u32,
    taken: BTreeSet<String>,
}

impl SubnetPool {
    pub fn new(pool: Subnet, taken: BTreeSet<String>) -> SubnetPool {
        let text = pool.to_string();
        let (addr, prefix) = text.split_once('/').unwrap_or((&text, "24"));
        let start = u32::from(addr.parse::<Ipv4Addr>().unwrap_or(Ipv4Addr::UNSPECIFIED));
        let size = 1u64 << (32 - prefix.parse::<u32>().unwrap_or(24).min(24));
        SubnetPool { next: start, end: (u64::from(start) + size).min(u64::from(u32::MAX)) as u32, taken }
    }

    pub fn next_free(&mut self) -> Result<String, Exhausted> {
        while self.next < self.end {
            let subnet = format!("{}/24", Ipv4Addr::from(self.next));
            self.next = self.next.saturating_add(256);
            if self.taken.insert(subnet.clone()) {
                return Ok(subnet);
            }
        }
        Err(Exhausted)
    }
}

/// The next host address of a /24 LAN not in `taken`; `.1` is the gateway.
pub fn next_ip(subnet: &str, taken: &BTreeSet<Ipv4Addr>) -> Option<Ipv4Addr> {
    let subnet: Subnet = subnet.parse().ok()?;
    let mut taken = taken.clone();
    taken.insert(subnet.first_host());
    subnet.next_free(&taken)
}

/// Plans a topology under `params.seed`, its subnets from `subnets`.
pub fn generate(params: &Params, services: &[&str], subnets: &mut SubnetPool) -> Result<Plan, Refused> {
    let mut rng = Rng(params.seed);
    let mut lans = vec![PlannedLan { name: "LAN-00".into(), subnet: subnets.next_free()?, is_dmz: true, parent: None }];
    let mut frontier = vec![0usize];
    for _ in 0..params.depth {
        let mut next = Vec::new();
        for parent in frontier {
            for _ in 0..rng.between(1, params.branching_factor) {
                let index = lans.len();
                if index == MAX_LANS {
                    return Err(Refused::TooLarge);
                }
                lans.push(PlannedLan {
                    name: format!("LAN-{index:02}"),
                    subnet: subnets.next_free()?,
                    is_dmz: false,
                    parent: Some(parent),
                });
                next.push(index);
            }
        }
        frontier = next;
    }

    let mut taken: BTreeMap<usize, BTreeSet<Ipv4Addr>> = BTreeMap::new();
    let mut take_ip = |lan: usize| -> Result<String, Exhausted> {
        let set = taken.entry(lan).or_default();
        let ip = next_ip(&lans[lan].subnet, set).ok_or(Exhausted)?;
        set.insert(ip);
        Ok(ip.to_string())
    };
    let mut used: BTreeSet<Vec<String>> = BTreeSet::new();
    let mut deckies: Vec<PlannedDecky> = Vec::new();
    let mut by_lan: Vec<Vec<usize>> = vec![Vec::new(); lans.len()];
    for (index, lan) in lans.iter().enumerate() {
        let count = if lan.is_dmz {
            1
        } else {
            rng.between(params.deckies_per_lan_min, params.deckies_per_lan_max.max(params.deckies_per_lan_min)).max(1)
        };
        for _ in 0..count {
            let services = pick_services(&mut rng, params, services, &mut used);
            by_lan[index].push(deckies.len());
            deckies.push(PlannedDecky {
                name: format!("decky-{:03}", deckies.len() + 1),
                services,
                addresses: vec![(index, take_ip(index)?)],
                forwards_l3: false,
            });
        }
    }
    for (index, lan) in lans.iter().enumerate() {
        let Some(parent) = lan.parent else { continue };
        let bridge = by_lan[index][rng.pick(by_lan[index].len())];
        let ip = take_ip(parent)?;
        let decky = &mut deckies[bridge];
        decky.addresses.push((parent, ip));
        decky.forwards_l3 |= rng.unit() < params.bridge_forward_probability;
    }
    if params.cross_edge_probability > 0.0 {
        for (index, lan) in lans.iter().enumerate() {
            if lan.is_dmz || rng.unit() >= params.cross_edge_probability {
                continue;
            }
            let peers: Vec<usize> = (0..lans.len())
                .filter(|&p| p != index && Some(p) != lan.parent && lans[p].parent != Some(index))
                .collect();
            if peers.is_empty() {
                continue;
            }
            let peer = peers[rng.pick(peers.len())];
            let chosen = by_lan[index][rng.pick(by_lan[index].len())];
            if deckies[chosen].addresses.iter().any(|(l, _)| *l == peer) {
                continue;
            }
            let ip = take_ip(peer)?;
            let decky = &mut deckies[chosen];
            decky.addresses.push((peer, ip));
            decky.forwards_l3 |= rng.unit() < params.bridge_forward_probability;
        }
    }
    Ok(Plan { lans, deckies })
}

/// 1 to 3 services from the pool, trying (20 times) for a set no other decky has.
fn pick_services(rng: &mut Rng, params: &Params, pool: &[&str], used: &mut BTreeSet<Vec<String>>) -> Vec<String> {
    if let Some(explicit) = &params.services_explicit {
        return explicit.clone();
    }
    if !params.randomize_services || pool.is_empty() {
        return Vec::new();
    }
    let mut chosen = Vec::new();
    for _ in 0..=20 {
        let count = rng.between(1, 3.min(pool.len() as u32)) as usize;
        let mut left: Vec<&str> = pool.to_vec();
        chosen = (0..count).map(|_| left.remove(rng.pick(left.len())).to_string()).collect();
        chosen.sort();
        if !used.contains(&chosen) {
            break;
        }
    }
    used.insert(chosen.clone());
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(seed: u64) -> Params {
        Params {
            depth: 2,
            branching_factor: 3,
            deckies_per_lan_min: 1,
            deckies_per_lan_max: 3,
            bridge_forward_probability: 1.0,
            cross_edge_probability: 0.5,
            services_explicit: None,
            randomize_services: true,
            seed,
        }
    }

    fn plan(seed: u64) -> Plan {
        let mut pool = SubnetPool::new("10.214.0.0/16".parse().unwrap(), BTreeSet::new());
        generate(&params(seed), &["ssh", "http", "ftp", "smtp"], &mut pool).unwrap()
    }

    #[test]
    fn a_seed_reproduces_its_topology_and_another_differs() {
        assert_eq!(plan(7), plan(7));
        assert_ne!(plan(7), plan(8));
        let plan = plan(7);
        assert!(plan.lans[0].is_dmz && plan.lans.iter().skip(1).all(|l| !l.is_dmz && l.parent.is_some()));
        // Every child LAN is bridged to its parent by one of its deckies.
        for (index, lan) in plan.lans.iter().enumerate().skip(1) {
            let parent = lan.parent.unwrap();
            assert!(
                plan.deckies.iter().any(|d| d.addresses[0].0 == index && d.addresses.iter().any(|a| a.0 == parent))
            );
        }
        let addresses: BTreeSet<&String> = plan.deckies.iter().flat_map(|d| d.addresses.iter().map(|a| &a.1)).collect();
        assert_eq!(addresses.len(), plan.deckies.iter().map(|d| d.addresses.len()).sum::<usize>(), "no address twice");
    }

    #[test]
    fn the_pool_runs_out_cleanly() {
        let mut pool = SubnetPool::new("10.214.0.0/23".parse().unwrap(), BTreeSet::new());
        assert_eq!(generate(&params(1), &["ssh"], &mut pool), Err(Refused::Exhausted(Exhausted)));
        let mut pool = SubnetPool::new("10.214.0.0/16".parse().unwrap(), BTreeSet::from(["10.214.0.0/24".to_string()]));
        assert_eq!(pool.next_free().unwrap(), "10.214.1.0/24");
    }

    #[test]
    fn a_tree_over_the_lan_bound_is_refused_before_taking_the_pool() {
        let huge = Params { depth: 16, branching_factor: 8, ..params(1) };
        let mut pool = SubnetPool::new("10.0.0.0/8".parse().unwrap(), BTreeSet::new());
        assert_eq!(generate(&huge, &["ssh"], &mut pool), Err(Refused::TooLarge));
        let within = Params { depth: 2, branching_factor: 8, ..params(1) };
        assert!(generate(&within, &["ssh"], &mut pool).unwrap().lans.len() <= MAX_LANS);
    }
}
