//! Keeping the host's NAT off a topology's own traffic between its LANs. A DMZ's network is not
//! internal, so the engine masquerades what leaves its subnet (netavark: `-s <dmz> -j
//! NETAVARK-…`, MASQUERADE unless the destination is the DMZ itself), and where `br_netfilter` is
//! loaded the host's NAT sees bridged traffic too: a client on the DMZ reaching an inner decky
//! through a bridge decky would arrive as the host's address (and, masqueraded again on the inner
//! LAN's bridge, not at all). So each topology has a chain of its own in the host's `nat` table,
//! jumped to first from POSTROUTING, that accepts (leaves untranslated) exactly the traffic from
//! each of its DMZ subnets to its other LANs. Nothing else on the host changes; each converge
//! replaces the chain as a whole, and a topology with no such traffic (or torn down) has none.
//!
//! This works where the engine's rules are iptables rules (netavark's iptables driver, Docker):
//! an accept ends the `nat` POSTROUTING chain they share.

use uuid::Uuid;

use crate::db::TopologyDetail;
use crate::fleet::subnet::Subnet;
use crate::iptables::{IptablesError, OwnChain};

/// Topology `id`'s chain in the host's `nat` table (iptables names are at most 28 characters).
pub fn chain(id: Uuid) -> String {
    format!("SVC-{}", &id.simple().to_string()[..16])
}

/// The traffic to leave untranslated: (a DMZ's subnet, another LAN's subnet), for every DMZ.
pub fn exemptions(detail: &TopologyDetail) -> Vec<(String, String)> {
    // Parsed again, so only well-formed subnets ever reach the rules.
    let subnet = |text: &str| text.parse::<Subnet>().ok().map(|s| s.to_string());
    let mut pairs: Vec<(String, String)> = detail
        .lans
        .iter()
        .filter(|dmz| dmz.is_dmz)
        .flat_map(|dmz| detail.lans.iter().filter(move |lan| lan.id != dmz.id).map(move |lan| (dmz, lan)))
        .filter_map(|(dmz, lan)| Some((subnet(&dmz.subnet)?, subnet(&lan.subnet)?)))
        .filter(|(from, to)| from != to)
        .collect();
    pairs.sort();
    pairs.dedup();
    pairs
}

/// `chain` in the host's `nat` table, jumped to first from POSTROUTING.
fn own(chain: &str) -> OwnChain<'_> {
    OwnChain { table: "nat", hook: "POSTROUTING", name: chain }
}

fn rules(pairs: &[(String, String)]) -> Vec<String> {
    pairs.iter().map(|(from, to)| format!("-s {from} -d {to} -j ACCEPT")).collect()
}

/// The `iptables-restore --noflush` input that takes the host's `nat` table, as `iptables -S`
/// lists it, to `chain` holding exactly `pairs` and jumped to first from POSTROUTING; with no
/// pairs, to no chain and no jump. `None` when the table is so already.
pub fn script(listing: &str, chain: &str, pairs: &[(String, String)]) -> Option<String> {
    own(chain).script(listing, &rules(pairs))
}

/// Makes the host's `chain` hold exactly `pairs` (none: removes it); whether it had to change.
pub async fn apply(chain: &str, pairs: &[(String, String)]) -> Result<bool, IptablesError> {
    own(chain).apply(&rules(pairs)).await
}

/// Whether the host's `chain` holds exactly `pairs` (none: is absent).
pub async fn is_current(chain: &str, pairs: &[(String, String)]) -> Result<bool, IptablesError> {
    own(chain).is_current(&rules(pairs)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::TopologyDetail;
    use crate::topology::routes::tests::{lan, topology};

    fn pair(from: &str, to: &str) -> (String, String) {
        (from.into(), to.into())
    }

    #[test]
    fn traffic_from_each_dmz_to_every_other_lan_is_exempt() {
        let lans = vec![lan(1, "10.9.1.0/24"), lan(2, "10.9.2.0/24"), lan(3, "10.9.3.0/24")];
        let mut detail = TopologyDetail { topology: topology(), lans, deckies: Vec::new(), edges: Vec::new() };
        assert_eq!(exemptions(&detail), [pair("10.9.1.0/24", "10.9.2.0/24"), pair("10.9.1.0/24", "10.9.3.0/24")]);
        detail.lans[0].is_dmz = false;
        assert_eq!(exemptions(&detail), [], "no DMZ, nothing masqueraded");
        detail.lans[0].is_dmz = true;
        detail.lans[1].subnet = "10.9.2.0/24\n-A POSTROUTING -j ACCEPT".into();
        assert_eq!(exemptions(&detail), [pair("10.9.1.0/24", "10.9.3.0/24")], "only well-formed subnets");
    }

    #[test]
    fn the_chain_is_filled_anew_and_jumped_to_once_first() {
        let pairs = [pair("10.9.1.0/24", "10.9.2.0/24")];
        let fresh = "-P POSTROUTING ACCEPT\n-A POSTROUTING -s 10.9.1.0/24 -j NETAVARK-1\n";
        assert_eq!(
            script(fresh, "SVC-1", &pairs).unwrap(),
            "*nat\n:SVC-1 - [0:0]\n-A SVC-1 -s 10.9.1.0/24 -d 10.9.2.0/24 -j ACCEPT\n-I POSTROUTING 1 -j SVC-1\nCOMMIT\n"
        );
        let present = "-N SVC-1\n-A POSTROUTING -j SVC-1\n-A SVC-1 -s 10.9.1.0/24 -d 10.9.7.0/24 -j ACCEPT\n";
        assert_eq!(
            script(present, "SVC-1", &pairs).unwrap(),
            "*nat\n:SVC-1 - [0:0]\n-A SVC-1 -s 10.9.1.0/24 -d 10.9.2.0/24 -j ACCEPT\nCOMMIT\n",
            "already jumped to: only its rules are replaced"
        );
        let current = "-N SVC-1\n-A POSTROUTING -j SVC-1\n-A SVC-1 -s 10.9.1.0/24 -d 10.9.2.0/24 -j ACCEPT\n";
        assert_eq!(script(current, "SVC-1", &pairs), None, "as wanted already: nothing to do");
    }

    #[test]
    fn no_exemption_left_means_no_chain_and_no_jump() {
        let present = "-N SVC-1\n-N SVC-12\n-A POSTROUTING -j SVC-1\n-A POSTROUTING -j SVC-12\n";
        assert_eq!(
            script(present, "SVC-1", &[]).unwrap(),
            "*nat\n-D POSTROUTING -j SVC-1\n-F SVC-1\n-X SVC-1\nCOMMIT\n"
        );
        assert_eq!(script("-N SVC-12\n", "SVC-1", &[]), None, "nothing of ours: nothing to do");
    }
}
