//! Keeping the host's own services out of a topology's deckies' reach, as the fleet's chain does
//! for its subnet (`fleet::host_isolation`, which says why): the topology holds a chain of its own
//! in the host's `filter` table, `SVC-T<16 hex of its id>`, jumped to first from INPUT, that
//! refuses whatever any of its LANs sends the host itself but replies. Set with the NAT exemption
//! (each converge), checked by every heal, removed at teardown; `SVC_DECKY_HOST_ISOLATION=false`
//! leaves a topology none. A failure (no iptables, no privilege) is logged: the topology runs,
//! the host is only less shielded.

use uuid::Uuid;

use crate::db::TopologyDetail;
use crate::fleet::host_isolation;
use crate::fleet::subnet::Subnet;
use crate::iptables::{IptablesError, OwnChain};

/// Topology `id`'s chain in the host's `filter` table.
pub fn chain(id: Uuid) -> String {
    format!("SVC-T{}", &id.simple().to_string()[..16])
}

/// What the host's chain for `detail` holds: the fleet's refusal for each of its LANs (parsed
/// again, so only well-formed subnets reach the rules); none when isolation is off.
pub fn rules(detail: &TopologyDetail, isolation: bool) -> Vec<String> {
    if !isolation {
        return Vec::new();
    }
    let mut subnets: Vec<Subnet> = detail.lans.iter().filter_map(|lan| lan.subnet.parse().ok()).collect();
    subnets.sort_by_key(|subnet| subnet.to_string());
    subnets.dedup_by_key(|subnet| subnet.to_string());
    subnets.iter().flat_map(host_isolation::rules).collect()
}

fn own(chain: &str) -> OwnChain<'_> {
    OwnChain { table: "filter", hook: "INPUT", name: chain }
}

/// Makes topology `id`'s chain hold exactly `rules` (none: removes it), logging what it did.
pub async fn apply(id: Uuid, rules: &[String]) {
    let chain = chain(id);
    match own(&chain).apply(rules).await {
        Ok(true) => {
            tracing::info!(topology = %id, %chain, rules = rules.len(), "Host shield of the topology's LANs set")
        }
        Ok(false) => {}
        Err(err) if rules.is_empty() => {
            tracing::debug!(topology = %id, error = %err, "Could not check the host shield")
        }
        Err(err) => tracing::warn!(topology = %id, error = %err, "Could not shield the host from the topology's LANs"),
    }
}

/// Whether topology `id`'s chain holds exactly `rules`.
pub async fn is_current(id: Uuid, rules: &[String]) -> Result<bool, IptablesError> {
    own(&chain(id)).is_current(rules).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::routes::tests::{lan, topology};

    #[test]
    fn every_lan_is_refused_the_host_but_replies_and_off_means_none() {
        let lans = vec![lan(1, "10.9.2.0/24"), lan(2, "10.9.1.0/24"), lan(3, "10.9.1.0/24\n-A INPUT -j ACCEPT")];
        let detail = TopologyDetail { topology: topology(), lans, deckies: Vec::new(), edges: Vec::new() };
        let wanted = rules(&detail, true);
        assert_eq!(wanted.len(), 6, "three rules for each well-formed LAN: {wanted:?}");
        assert_eq!(wanted[0], "-s 10.9.1.0/24 -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN");
        assert_eq!(wanted[5], "-s 10.9.2.0/24 -j REJECT --reject-with icmp-port-unreachable");
        assert_eq!(rules(&detail, false), Vec::<String>::new());
        assert!(chain(Uuid::nil()).len() <= 28, "an iptables chain name");
    }
}
