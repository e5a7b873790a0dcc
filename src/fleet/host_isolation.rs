//! Keeping the host's own services out of the deckies' reach. A decky is bait: whoever takes one
//! over must not find the host's API, database, SSH or anything else listening on the host behind
//! it. On a bridge of this host every host address is one hop away (the bridge's gateway address
//! first), so the fleet holds a chain of its own in the host's `filter` table, jumped to first
//! from INPUT, that refuses whatever comes from the fleet's subnet to the host itself: TCP with a
//! reset, the rest with ICMP port unreachable. Replies to connections the host opened (the prober,
//! an operator, the tarpit's checks) pass. Nothing of svc's design needs more: the collector
//! reads the deckies' output through the engine, the tarpit and the sniffer act on a decky's
//! namespace from the host, and no decoy resolves names (the engine's DNS on the gateway is
//! refused too). Traffic the host forwards (a decky's egress, attackers reaching deckies) is not
//! INPUT and is left alone.
//!
//! The chain is set where the host route is held (a deploy, the engine followed again, every
//! reconcile pass) and removed with the fleet; `SVC_DECKY_HOST_ISOLATION=false` removes it.
//! Only for a bridge on a local engine: a macvlan subnet is a real LAN whose hosts may need the
//! host, and a remote engine's bridge is not on this host. IPv4 only, as fleet subnets are.

use sha2::{Digest, Sha256};

use super::Fleet;
use super::subnet::Subnet;
use crate::iptables::OwnChain;

/// What a decky on `subnet` meets at the host: replies pass, all else is refused.
pub fn rules(subnet: &Subnet) -> Vec<String> {
    vec![
        format!("-s {subnet} -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN"),
        format!("-s {subnet} -p tcp -j REJECT --reject-with tcp-reset"),
        format!("-s {subnet} -j REJECT --reject-with icmp-port-unreachable"),
    ]
}

impl Fleet {
    /// This fleet's chain in the host's `filter` table: `SVC-F` and 16 hex of a digest of its
    /// engine and name, so two fleets on one host never share one.
    pub fn isolation_chain(&self) -> String {
        let digest = Sha256::digest(format!("{}\n{}", self.settings.docker_host, self.settings.name));
        let hex: String = crate::text::hex(&digest[..8]);
        format!("SVC-F{hex}")
    }

    /// Makes the host refuse what a decky on `subnet` sends it (`None`, or isolation turned off:
    /// removes the chain). A failure (no iptables, no privilege) is logged: the fleet runs, the
    /// host is only less shielded.
    pub(super) async fn isolate_host(&self, subnet: Option<&str>) {
        let subnet = subnet.filter(|_| self.settings.host_isolation).and_then(|s| s.parse::<Subnet>().ok());
        let rules = subnet.as_ref().map(rules).unwrap_or_default();
        let chain = self.isolation_chain();
        let own = OwnChain { table: "filter", hook: "INPUT", name: &chain };
        match own.apply(&rules).await {
            Ok(true) => {
                tracing::info!(%chain, subnet = ?subnet.map(|s| s.to_string()), "Host isolation of the deckies set")
            }
            Ok(false) => {}
            Err(err) if rules.is_empty() => tracing::debug!(%chain, error = %err, "Could not check the host isolation"),
            Err(err) => tracing::warn!(%chain, error = %err, "Could not shield the host from the deckies"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iptables::OwnChain;

    #[test]
    fn the_chain_refuses_all_but_replies_and_goes_with_the_fleet() {
        let subnet: Subnet = "10.9.1.0/24".parse().unwrap();
        let own = OwnChain { table: "filter", hook: "INPUT", name: "SVC-F1" };
        let wanted = rules(&subnet);
        let script = own.script("-P INPUT ACCEPT\n", &wanted).unwrap();
        assert_eq!(
            script,
            "*filter\n:SVC-F1 - [0:0]\n\
             -A SVC-F1 -s 10.9.1.0/24 -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN\n\
             -A SVC-F1 -s 10.9.1.0/24 -p tcp -j REJECT --reject-with tcp-reset\n\
             -A SVC-F1 -s 10.9.1.0/24 -j REJECT --reject-with icmp-port-unreachable\n\
             -I INPUT 1 -j SVC-F1\nCOMMIT\n"
        );
        // As `iptables -S` lists it back: nothing to do, a second jump is dropped.
        let listed = "-N SVC-F1\n-A INPUT -j SVC-F1\n".to_string()
            + &wanted.iter().map(|r| format!("-A SVC-F1 {r}\n")).collect::<String>();
        assert_eq!(own.script(&listed, &wanted), None);
        let doubled = listed.clone() + "-A INPUT -j SVC-F1\n";
        assert!(own.script(&doubled, &wanted).unwrap().contains("-D INPUT -j SVC-F1\n"));
        assert_eq!(own.script(&listed, &[]).unwrap(), "*filter\n-D INPUT -j SVC-F1\n-F SVC-F1\n-X SVC-F1\nCOMMIT\n");
    }
}
