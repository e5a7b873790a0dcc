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

use std::time::Duration;

use uuid::Uuid;

use crate::db::TopologyDetail;
use crate::fleet::subnet::Subnet;

/// How long one `iptables` command may take (it waits for the xtables lock).
const IPTABLES_TIMEOUT: Duration = Duration::from_secs(30);

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

/// The `iptables-restore --noflush` input that takes the host's `nat` table, as `iptables -S`
/// lists it, to `chain` holding exactly `pairs` and jumped to first from POSTROUTING; with no
/// pairs, to no chain and no jump. `None` when the table is so already.
pub fn script(listing: &str, chain: &str, pairs: &[(String, String)]) -> Option<String> {
    let jump = format!("-A POSTROUTING -j {chain}");
    let jumps = listing.lines().filter(|line| line.trim() == jump).count();
    let exists = listing.lines().any(|line| line.trim() == format!("-N {chain}"));
    let rule = |(from, to): &(String, String)| format!("-A {chain} -s {from} -d {to} -j ACCEPT");
    let wanted: Vec<String> = pairs.iter().map(rule).collect();
    let own = format!("-A {chain} ");
    let held: Vec<&str> = listing.lines().map(str::trim).filter(|line| line.starts_with(&own)).collect();
    let current = if pairs.is_empty() { !exists } else { exists && jumps == 1 && held == wanted };
    if current {
        return None;
    }
    let mut lines = vec!["*nat".to_string()];
    if pairs.is_empty() {
        lines.extend((0..jumps).map(|_| format!("-D POSTROUTING -j {chain}")));
        lines.push(format!("-F {chain}"));
        lines.push(format!("-X {chain}"));
    } else {
        // Declaring the chain makes it, or empties one that exists.
        lines.push(format!(":{chain} - [0:0]"));
        lines.extend(wanted);
        if jumps == 0 {
            lines.push(format!("-I POSTROUTING 1 -j {chain}"));
        }
    }
    lines.push("COMMIT".into());
    Some(lines.join("\n") + "\n")
}

/// Why iptables could not read or change the host's NAT table, in its own words: for the log.
#[derive(Debug, thiserror::Error)]
pub enum NatError {
    #[error("{program}: {source}")]
    Run { program: &'static str, source: std::io::Error },
    #[error("{program}: {stderr}")]
    Refused { program: &'static str, stderr: String },
    #[error("{program}: timed out")]
    TimedOut { program: &'static str },
}

/// Makes the host's `chain` hold exactly `pairs` (none: removes it); whether it had to change.
pub async fn apply(chain: &str, pairs: &[(String, String)]) -> Result<bool, NatError> {
    match script(&iptables(&["-w", "-t", "nat", "-S"], "").await?, chain, pairs) {
        Some(script) => iptables_restore(&script).await.map(|()| true),
        None => Ok(false),
    }
}

/// Whether the host's `chain` holds exactly `pairs` (none: is absent).
pub async fn is_current(chain: &str, pairs: &[(String, String)]) -> Result<bool, NatError> {
    Ok(script(&iptables(&["-w", "-t", "nat", "-S"], "").await?, chain, pairs).is_none())
}

async fn iptables(args: &[&str], input: &str) -> Result<String, NatError> {
    run("iptables", args, input).await
}

async fn iptables_restore(script: &str) -> Result<(), NatError> {
    run("iptables-restore", &["-w", "--noflush"], script).await.map(drop)
}

/// `program args` with `input` on its standard input; its standard output.
async fn run(program: &'static str, args: &[&str], input: &str) -> Result<String, NatError> {
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .env("LC_ALL", "C")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| NatError::Run { program, source })?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let work = async move {
        stdin.write_all(input.as_bytes()).await?;
        drop(stdin);
        child.wait_with_output().await
    };
    match tokio::time::timeout(IPTABLES_TIMEOUT, work).await {
        Ok(Ok(output)) if output.status.success() => Ok(String::from_utf8_lossy(&output.stdout).into_owned()),
        Ok(Ok(output)) => {
            Err(NatError::Refused { program, stderr: String::from_utf8_lossy(&output.stderr).trim().to_string() })
        }
        Ok(Err(source)) => Err(NatError::Run { program, source }),
        Err(_) => Err(NatError::TimedOut { program }),
    }
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
