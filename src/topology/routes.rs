//! Routing between a topology's LANs. A decky on several LANs that forwards (`forwards_l3`) is a
//! router between them; every decky is given, inside its own network namespace, a route to each
//! LAN it reaches only through such routers, via the first router on the shortest way there. The
//! routes carry a protocol number of our own, so each converge replaces exactly what the last one
//! set (a LAN gone, a router gone, its routes go too).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::process::Command;

use uuid::Uuid;

use crate::db::TopologyDetail;
use crate::netns;

/// The `proto` of the routes we set: one the kernel gives no meaning and iproute2 no name.
const ROUTE_PROTOCOL: &str = "245";

/// A route: a LAN's subnet, and the router's address on a LAN the decky is on.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Route {
    pub subnet: String,
    pub via: String,
}

/// Every decky's routes to the LANs it is not on but can reach through routers (an empty list
/// for a decky that reaches none, so that stale routes are removed from it too).
pub fn plan(detail: &TopologyDetail) -> BTreeMap<Uuid, Vec<Route>> {
    // Each LAN's attachments: (decky, its address there, whether it forwards).
    let forwarding: BTreeSet<Uuid> = detail.edges.iter().filter(|e| e.forwards_l3).map(|e| e.decky_uuid).collect();
    let mut on_lan: BTreeMap<Uuid, Vec<(Uuid, &str)>> = BTreeMap::new();
    let mut lans_of: BTreeMap<Uuid, Vec<Uuid>> = BTreeMap::new();
    for edge in &detail.edges {
        let Some(ip) = edge.ip.as_deref().filter(|ip| !ip.is_empty()) else { continue };
        on_lan.entry(edge.lan_id).or_default().push((edge.decky_uuid, ip));
        lans_of.entry(edge.decky_uuid).or_default().push(edge.lan_id);
    }
    let subnet_of: BTreeMap<Uuid, &str> = detail.lans.iter().map(|l| (l.id, l.subnet.as_str())).collect();

    let mut plans = BTreeMap::new();
    for decky in &detail.deckies {
        let own = lans_of.get(&decky.uuid).cloned().unwrap_or_default();
        // Breadth first over LANs; each reached LAN remembers the first router on the way.
        let mut first_hop: BTreeMap<Uuid, Option<String>> = own.iter().map(|lan| (*lan, None)).collect();
        let mut queue: VecDeque<Uuid> = own.iter().copied().collect();
        while let Some(lan) = queue.pop_front() {
            let hop = first_hop[&lan].clone();
            for &(router, router_ip) in on_lan.get(&lan).into_iter().flatten() {
                if router == decky.uuid || !forwarding.contains(&router) {
                    continue;
                }
                for next in lans_of.get(&router).into_iter().flatten() {
                    if !first_hop.contains_key(next) {
                        first_hop.insert(*next, Some(hop.clone().unwrap_or_else(|| router_ip.to_string())));
                        queue.push_back(*next);
                    }
                }
            }
        }
        let mut routes: Vec<Route> = first_hop
            .into_iter()
            .filter_map(|(lan, hop)| Some(Route { subnet: subnet_of.get(&lan)?.to_string(), via: hop? }))
            .collect();
        routes.sort();
        plans.insert(decky.uuid, routes);
    }
    plans
}

/// The `ip -batch` script that makes a namespace's routes of ours exactly `routes`.
pub fn script(routes: &[Route]) -> String {
    let mut script = format!("route flush proto {ROUTE_PROTOCOL}\n");
    for route in routes {
        script.push_str(&format!("route replace {} via {} proto {ROUTE_PROTOCOL}\n", route.subnet, route.via));
    }
    script
}

/// The routes of ours in `ip route show proto 245`'s listing, in order.
pub fn parse(listing: &str) -> Vec<Route> {
    let mut routes: Vec<Route> = listing
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let subnet = words.next()?.to_string();
            let via = words.skip_while(|w| *w != "via").nth(1)?.to_string();
            Some(Route { subnet, via })
        })
        .collect();
    routes.sort();
    routes
}

/// Why the routes in a decky's namespace could not be read or set, in the words of `ip` or the
/// system: for the log, and the decky's stored cause.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error("{0}")]
    Run(#[from] std::io::Error),
    /// `ip -batch` says what failed and on which line.
    #[error("{0}")]
    Refused(String),
}

/// The routes of ours in the network namespace of process `pid` (a decky's container).
pub async fn current(pid: u32) -> Result<Vec<Route>, RouteError> {
    let listing = ip(pid, &["-4", "route", "show", "proto", ROUTE_PROTOCOL], String::new()).await?;
    Ok(parse(&listing))
}

/// The IPv4 addresses on the interfaces of process `pid`'s namespace (`ip -4 -o addr`).
pub async fn addresses(pid: u32) -> Result<BTreeSet<String>, RouteError> {
    let listing = ip(pid, &["-4", "-o", "addr", "show"], String::new()).await?;
    Ok(listing
        .lines()
        .filter_map(|line| line.split_whitespace().skip_while(|w| *w != "inet").nth(1))
        .filter_map(|cidr| cidr.split('/').next())
        .map(str::to_string)
        .collect())
}

/// Makes the routes of ours in process `pid`'s namespace exactly `routes` (sorted, as [`plan`]
/// gives them); whether they had to change (a new namespace has none).
pub async fn ensure(pid: u32, routes: &[Route]) -> Result<bool, RouteError> {
    if current(pid).await? == routes {
        return Ok(false);
    }
    ip(pid, &["-batch", "-"], script(routes)).await.map(|_| true)
}

/// `ip ARGS` inside process `pid`'s namespace with `input` on its standard input; its output.
async fn ip(pid: u32, args: &[&str], input: String) -> Result<String, RouteError> {
    let mut command = Command::new("ip");
    command.args(args).env("LC_ALL", "C");
    match netns::run(netns::namespace_of(pid), command, input).await {
        Ok(out) if out.status.success() => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
        // `ip -batch` says what failed and on which line, each on a line of its own.
        Ok(out) => Err(RouteError::Refused(
            String::from_utf8_lossy(&out.stderr).split_whitespace().collect::<Vec<_>>().join(" "),
        )),
        Err(err) => Err(RouteError::Run(err)),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::db::{Edge, Lan, Topology, TopologyDecky};

    pub(in crate::topology) fn lan(n: u128, subnet: &str) -> Lan {
        Lan {
            id: Uuid::from_u128(n),
            topology_id: Uuid::nil(),
            name: format!("lan-{n}"),
            subnet: subnet.into(),
            is_dmz: n == 1,
            docker_network_id: None,
            x: None,
            y: None,
        }
    }

    fn decky(n: u128) -> TopologyDecky {
        TopologyDecky {
            uuid: Uuid::from_u128(100 + n),
            topology_id: Uuid::nil(),
            name: format!("d{n}"),
            services: Vec::new(),
            decky_config: None,
            ip: None,
            state: "running".into(),
            last_error: None,
            x: None,
            y: None,
        }
    }

    fn edge(decky: u128, lan: u128, ip: &str, forwards: bool) -> Edge {
        Edge {
            id: Uuid::new_v4(),
            topology_id: Uuid::nil(),
            decky_uuid: Uuid::from_u128(100 + decky),
            lan_id: Uuid::from_u128(lan),
            ip: Some(ip.into()),
            is_bridge: false,
            forwards_l3: forwards,
        }
    }

    fn route(subnet: &str, via: &str) -> Route {
        Route { subnet: subnet.into(), via: via.into() }
    }

    /// DMZ (1) — d2 — LAN 2 — d3 — LAN 3, the two forwarding; d5 on LANs 2 and 4 does not.
    fn chain(topology: Topology) -> TopologyDetail {
        TopologyDetail {
            topology,
            lans: vec![lan(1, "10.9.1.0/24"), lan(2, "10.9.2.0/24"), lan(3, "10.9.3.0/24"), lan(4, "10.9.4.0/24")],
            deckies: (1..=6).map(decky).collect(),
            edges: vec![
                edge(1, 1, "10.9.1.10", false),
                edge(2, 1, "10.9.1.2", true),
                edge(2, 2, "10.9.2.2", true),
                edge(3, 2, "10.9.2.3", true),
                edge(3, 3, "10.9.3.3", true),
                edge(4, 3, "10.9.3.10", false),
                edge(5, 2, "10.9.2.5", false),
                edge(5, 4, "10.9.4.5", false),
                edge(6, 4, "10.9.4.10", false),
            ],
        }
    }

    pub(in crate::topology) fn topology() -> Topology {
        Topology {
            id: Uuid::nil(),
            name: "maze".into(),
            mode: "unihost".into(),
            target_host_uuid: None,
            status: crate::db::TopologyStatus::Active,
            version: 1,
            needs_resync: false,
            created_at: chrono::Utc::now(),
            status_changed_at: chrono::Utc::now(),
            email_personas: "[]".into(),
            language_default: "en".into(),
            config_snapshot: serde_json::Value::Null,
        }
    }

    #[test]
    fn each_decky_routes_through_the_first_router_on_its_way() {
        let plans = plan(&chain(topology()));
        let of = |n: u128| plans[&Uuid::from_u128(100 + n)].clone();
        // The DMZ decky reaches LANs 2 and 3 through d2; LAN 4's bridge d5 does not forward.
        assert_eq!(of(1), [route("10.9.2.0/24", "10.9.1.2"), route("10.9.3.0/24", "10.9.1.2")]);
        // d2 reaches LAN 3 through d3, d3 the DMZ through d2.
        assert_eq!(of(2), [route("10.9.3.0/24", "10.9.2.3")]);
        assert_eq!(of(3), [route("10.9.1.0/24", "10.9.2.2")]);
        // The innermost decky reaches everything back through d3 (then d2).
        assert_eq!(of(4), [route("10.9.1.0/24", "10.9.3.3"), route("10.9.2.0/24", "10.9.3.3")]);
        // A decky behind a non-forwarding bridge reaches nothing it is not on.
        assert_eq!(of(6), []);
        assert_eq!(of(5), [route("10.9.1.0/24", "10.9.2.2"), route("10.9.3.0/24", "10.9.2.3")]);
    }

    #[test]
    fn the_script_replaces_exactly_our_routes() {
        assert_eq!(
            script(&[route("10.9.2.0/24", "10.9.1.2")]),
            "route flush proto 245\nroute replace 10.9.2.0/24 via 10.9.1.2 proto 245\n"
        );
        assert_eq!(script(&[]), "route flush proto 245\n", "no route: ours are removed");
    }

    /// A namespace of its own that cannot take the route (no interface reaches the router): the
    /// error is `ip`'s words on one line, and the namespace keeps none of ours. Needs root.
    #[tokio::test]
    async fn a_route_the_namespace_cannot_take_fails_with_ips_words() {
        use std::os::unix::fs::MetadataExt;
        use std::time::{Duration, Instant};
        let mut holder = std::process::Command::new("unshare").args(["-n", "sleep", "30"]).spawn().unwrap();
        let pid = holder.id();
        let inode = |pid: u32| std::fs::metadata(netns::namespace_of(pid)).map(|m| m.ino()).ok();
        let deadline = Instant::now() + Duration::from_secs(10);
        // Until `unshare` has made the new namespace, the pid is still in ours.
        while inode(pid) == inode(std::process::id()) {
            assert!(Instant::now() < deadline, "unshare made no namespace");
            std::thread::sleep(Duration::from_millis(10));
        }
        let err = ensure(pid, &[route("10.9.2.0/24", "10.9.1.2")]).await.unwrap_err();
        assert!(matches!(err, RouteError::Refused(_)), "{err:?}");
        let err = err.to_string();
        assert!(err.contains("Error:") && !err.contains('\n'), "{err}");
        assert_eq!(current(pid).await.unwrap(), []);
        assert_eq!(ensure(pid, &[]).await.ok(), Some(false), "none wanted, none there");
        holder.kill().unwrap();
        holder.wait().unwrap();
    }

    #[test]
    fn the_listing_gives_back_the_routes_in_order() {
        let listing = "10.9.3.0/24 via 10.9.1.2 dev eth0 \n10.9.2.0/24 via 10.9.1.2 dev eth0 metric 5\nbogus\n";
        assert_eq!(parse(listing), [route("10.9.2.0/24", "10.9.1.2"), route("10.9.3.0/24", "10.9.1.2")]);
        assert_eq!(parse(""), []);
    }
}
