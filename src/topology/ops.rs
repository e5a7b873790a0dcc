//! The eight mutation ops (reference `decnet-workers.md` §8) and the child edits of a pending
//! topology, turned into store edits against a topology as read: every check that needs the whole
//! topology (names, addresses, home LANs) is made here, before the store is touched.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use serde::Deserialize;
use serde_json::Value;
use uuid::Uuid;

use super::generate::{SubnetPool, next_ip};
use crate::db::{Edge, Lan, TopologyDecky, TopologyDetail, TopologyEdit};
use crate::fleet::catalog;
use crate::fleet::decky_name::{DeckyName, is_decky_name};
use crate::fleet::subnet::{Subnet, SubnetError};

/// The ops a mutation may name.
pub const OPS: &[&str] = &[
    "add_lan",
    "remove_lan",
    "add_decky",
    "attach_decky",
    "detach_decky",
    "remove_decky",
    "update_decky",
    "update_lan",
];

/// Why an op cannot apply to this topology (a client error: 400 on enqueue, `failed` when applied).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct OpError(pub String);

fn refuse<T>(text: impl Into<String>) -> Result<T, OpError> {
    Err(OpError(text.into()))
}

fn payload<T: for<'de> Deserialize<'de>>(op: &str, value: &Value) -> Result<T, OpError> {
    serde_json::from_value(value.clone()).map_err(|e| OpError(format!("invalid payload for {op}: {e}")))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddLan {
    pub name: String,
    pub subnet: Option<String>,
    #[serde(default)]
    pub is_dmz: bool,
    pub x: Option<f64>,
    pub y: Option<f64>,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Named {
    name: String,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddDecky {
    #[schema(value_type = DeckyName)]
    pub name: String,
    pub lan: String,
    #[schema(schema_with = catalog::services_or_null_schema)]
    pub services: Option<Vec<String>>,
    pub archetype: Option<String>,
    #[serde(default)]
    pub forwards_l3: bool,
    pub ip: Option<String>,
    pub x: Option<f64>,
    pub y: Option<f64>,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Attach {
    decky: String,
    lan: String,
    ip: Option<String>,
    forwards_l3: Option<bool>,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Detach {
    decky: String,
    lan: String,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoveDecky {
    decky: String,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateDecky {
    decky: String,
    #[schema(value_type = Option<Object>)]
    patch: Option<serde_json::Map<String, Value>>,
    #[schema(schema_with = catalog::services_or_null_schema)]
    services: Option<Vec<String>>,
    forwards_l3: Option<bool>,
    x: Option<f64>,
    y: Option<f64>,
    #[serde(default)]
    force: bool,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateLan {
    pub name: String,
    pub new_name: Option<String>,
    pub subnet: Option<String>,
    pub is_dmz: Option<bool>,
    pub x: Option<f64>,
    pub y: Option<f64>,
}

/// A name as DECNET's dashboard gives one: 1 to 64 of letters, digits, `-`, `_`, `.`.
pub fn check_name(what: &str, name: &str) -> Result<(), OpError> {
    let ok = (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok { Ok(()) } else { refuse(format!("invalid {what} name '{name}'")) }
}

/// A decky's name also names its container: lower-case letters, digits and `-`.
fn check_decky_name(name: &str) -> Result<(), OpError> {
    if is_decky_name(name) { Ok(()) } else { refuse(format!("invalid decky name '{name}': use a-z, 0-9 and -")) }
}

fn check_services(services: &[String]) -> Result<(), OpError> {
    match services.iter().find(|s| !catalog::is_service(s)) {
        Some(unknown) => refuse(format!("unknown service '{unknown}'")),
        None => Ok(()),
    }
}

/// A /24 written as its network, `10.1.2.0/24` (no spaces, no leading zeros: it is stored and
/// handed to the engine as written).
pub fn check_subnet_format(subnet: &str) -> Result<(), OpError> {
    let parsed: Subnet = subnet.parse().map_err(|e: SubnetError| OpError(e.to_string()))?;
    if !subnet.ends_with("/24") {
        return refuse(format!("subnet {subnet} is not a /24"));
    }
    if parsed.to_string() != subnet {
        return refuse(format!("subnet {subnet:?} is not written as {parsed}"));
    }
    Ok(())
}

/// A /24 no other LAN of the topology has (LANs are all /24s, so overlapping is being equal).
fn check_subnet(detail: &TopologyDetail, subnet: &str, except: Option<Uuid>) -> Result<(), OpError> {
    check_subnet_format(subnet)?;
    if detail.lans.iter().any(|l| Some(l.id) != except && l.subnet == subnet) {
        return refuse(format!("subnet {subnet} overlaps another LAN"));
    }
    Ok(())
}

fn lan<'a>(detail: &'a TopologyDetail, name: &str) -> Result<&'a Lan, OpError> {
    detail.lan_named(name).ok_or_else(|| OpError(format!("LAN '{name}' not found")))
}

fn decky<'a>(detail: &'a TopologyDetail, name: &str) -> Result<&'a TopologyDecky, OpError> {
    detail.decky_named(name).ok_or_else(|| OpError(format!("decky '{name}' not found")))
}

/// The addresses taken on a LAN.
fn taken(detail: &TopologyDetail, lan: Uuid) -> BTreeSet<Ipv4Addr> {
    detail.edges.iter().filter(|e| e.lan_id == lan).filter_map(|e| e.ip.as_deref()?.parse().ok()).collect()
}

/// `ip` if given and free on the LAN, else the next free address.
fn address(detail: &TopologyDetail, lan: &Lan, ip: Option<&str>) -> Result<String, OpError> {
    let taken = taken(detail, lan.id);
    match ip {
        Some(ip) => {
            let addr: Ipv4Addr = ip.parse().map_err(|_| OpError(format!("'{ip}' is not an IPv4 address")))?;
            let subnet: Subnet = lan.subnet.parse().map_err(|e: SubnetError| OpError(e.to_string()))?;
            if !subnet.is_host(addr) || addr == subnet.first_host() {
                return refuse(format!("{ip} is not a host address of {}", lan.subnet));
            }
            if taken.contains(&addr) {
                return refuse(format!("IP {ip} is already in use on LAN '{}'", lan.name));
            }
            Ok(ip.to_string())
        }
        None => next_ip(&lan.subnet, &taken)
            .map(|a| a.to_string())
            .ok_or_else(|| OpError(format!("LAN '{}' has no free address", lan.name))),
    }
}

/// A new LAN (`add_lan`), its subnet from `pool` when none is given.
pub fn new_lan(detail: &TopologyDetail, request: AddLan, pool: &mut SubnetPool) -> Result<Lan, OpError> {
    check_name("LAN", &request.name)?;
    if detail.lan_named(&request.name).is_some() {
        return refuse(format!("LAN '{}' already exists", request.name));
    }
    let subnet = match request.subnet {
        Some(subnet) => {
            check_subnet(detail, &subnet, None)?;
            subnet
        }
        None => pool.next_free().map_err(|e| OpError(e.to_string()))?,
    };
    Ok(Lan {
        id: Uuid::new_v4(),
        topology_id: detail.topology.id,
        name: request.name,
        subnet,
        is_dmz: request.is_dmz,
        docker_network_id: None,
        x: request.x,
        y: request.y,
    })
}

/// A new decky on its home LAN (`add_decky`), with its edge.
pub fn new_decky(detail: &TopologyDetail, request: AddDecky) -> Result<(TopologyDecky, Edge), OpError> {
    check_decky_name(&request.name)?;
    if detail.decky_named(&request.name).is_some() {
        return refuse(format!("decky '{}' already exists", request.name));
    }
    let home = lan(detail, &request.lan)?;
    let services = match (request.services, &request.archetype) {
        (Some(services), _) => services,
        (None, Some(name)) => catalog::archetype(name)
            .ok_or_else(|| OpError(format!("unknown archetype '{name}'")))?
            .services
            .iter()
            .map(|s| s.to_string())
            .collect(),
        (None, None) => vec!["ssh".to_string()],
    };
    check_services(&services)?;
    let ip = address(detail, home, request.ip.as_deref())?;
    let uuid = Uuid::new_v4();
    let config = serde_json::json!({"archetype": request.archetype, "forwards_l3": request.forwards_l3});
    let decky = TopologyDecky {
        uuid,
        topology_id: detail.topology.id,
        name: request.name,
        services,
        decky_config: Some(config),
        ip: Some(ip.clone()),
        state: "pending".into(),
        last_error: None,
        x: request.x,
        y: request.y,
    };
    let edge = Edge {
        id: Uuid::new_v4(),
        topology_id: detail.topology.id,
        decky_uuid: uuid,
        lan_id: home.id,
        ip: Some(ip),
        is_bridge: false,
        forwards_l3: request.forwards_l3,
    };
    Ok((decky, edge))
}

/// The edits that attach a decky to one more LAN: the new edge, and its other edges now bridging.
fn attach(detail: &TopologyDetail, request: Attach) -> Result<Vec<TopologyEdit>, OpError> {
    let decky = decky(detail, &request.decky)?;
    let lan = lan(detail, &request.lan)?;
    let edges = detail.edges_of(decky);
    if edges.iter().any(|e| e.lan_id == lan.id) {
        return refuse(format!("decky '{}' is already on LAN '{}'", decky.name, lan.name));
    }
    let forwards = request.forwards_l3.unwrap_or_else(|| edges.iter().any(|e| e.forwards_l3));
    let ip = address(detail, lan, request.ip.as_deref())?;
    let mut edits: Vec<TopologyEdit> = edges
        .iter()
        .map(|e| TopologyEdit::UpdateEdge(Edge { is_bridge: true, forwards_l3: forwards, ..(*e).clone() }))
        .collect();
    edits.push(TopologyEdit::AddEdge(Edge {
        id: Uuid::new_v4(),
        topology_id: detail.topology.id,
        decky_uuid: decky.uuid,
        lan_id: lan.id,
        ip: Some(ip),
        is_bridge: true,
        forwards_l3: forwards,
    }));
    Ok(edits)
}

fn detach(detail: &TopologyDetail, request: Detach) -> Result<Vec<TopologyEdit>, OpError> {
    let decky = decky(detail, &request.decky)?;
    let lan = lan(detail, &request.lan)?;
    let edges = detail.edges_of(decky);
    let Some(edge) = edges.iter().find(|e| e.lan_id == lan.id) else {
        return refuse(format!("decky '{}' is not on LAN '{}'", decky.name, lan.name));
    };
    if edges.first().is_some_and(|home| home.id == edge.id) {
        return refuse(format!("cannot detach decky '{}' from its home LAN '{}'", decky.name, lan.name));
    }
    let mut edits = vec![TopologyEdit::RemoveEdge(edge.id)];
    if edges.len() == 2 {
        // One LAN left: it no longer bridges.
        let home = edges[0];
        edits.push(TopologyEdit::UpdateEdge(Edge { is_bridge: false, ..home.clone() }));
    }
    Ok(edits)
}

fn update_decky(detail: &TopologyDetail, request: UpdateDecky, live: bool) -> Result<Vec<TopologyEdit>, OpError> {
    let current = decky(detail, &request.decky)?;
    let mut updated = current.clone();
    if let Some(services) = request.services {
        check_services(&services)?;
        updated.services = services;
    }
    let mut config = match updated.decky_config.take() {
        Some(Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    };
    if let Some(patch) = request.patch {
        config.extend(patch);
    }
    let mut edits = Vec::new();
    if let Some(forwards) = request.forwards_l3 {
        let edges = detail.edges_of(current);
        let was = edges.iter().any(|e| e.forwards_l3);
        if forwards != was && live && !request.force {
            return refuse(format!("changing forwards_l3 of live decky '{}' needs force", current.name));
        }
        config.insert("forwards_l3".into(), Value::Bool(forwards));
        edits.extend(edges.iter().map(|e| TopologyEdit::UpdateEdge(Edge { forwards_l3: forwards, ..(*e).clone() })));
    }
    updated.decky_config = Some(Value::Object(config));
    updated.x = request.x.or(updated.x);
    updated.y = request.y.or(updated.y);
    edits.insert(0, TopologyEdit::UpdateDecky(updated));
    Ok(edits)
}

/// `update_lan`: a live LAN keeps its subnet and DMZ flag (its network exists).
pub fn update_lan(detail: &TopologyDetail, request: UpdateLan, live: bool) -> Result<TopologyEdit, OpError> {
    let current = lan(detail, &request.name)?;
    let mut updated = current.clone();
    if let Some(name) = request.new_name {
        check_name("LAN", &name)?;
        if name != current.name && detail.lan_named(&name).is_some() {
            return refuse(format!("LAN '{name}' already exists"));
        }
        updated.name = name;
    }
    let frozen = request.subnet.as_ref().is_some_and(|s| *s != current.subnet)
        || request.is_dmz.is_some_and(|d| d != current.is_dmz);
    if frozen && live {
        return refuse(format!("subnet and is_dmz of live LAN '{}' cannot change", current.name));
    }
    if let Some(subnet) = request.subnet {
        check_subnet(detail, &subnet, Some(current.id))?;
        updated.subnet = subnet;
    }
    updated.is_dmz = request.is_dmz.unwrap_or(updated.is_dmz);
    updated.x = request.x.or(updated.x);
    updated.y = request.y.or(updated.y);
    Ok(TopologyEdit::UpdateLan(updated))
}

/// Whether `body` is a payload `op` can take at all (its fields and types, known services): what
/// an enqueue checks. Whether it applies is decided against the topology the mutator applies it to,
/// so a queued op may name what an earlier queued op makes.
pub fn check_payload(op: &str, body: &Value) -> Result<(), OpError> {
    match op {
        "add_lan" => payload::<AddLan>(op, body).map(drop),
        "remove_lan" => payload::<Named>(op, body).map(drop),
        "add_decky" => {
            let request: AddDecky = payload(op, body)?;
            check_decky_name(&request.name)?;
            request.services.as_deref().map_or(Ok(()), check_services)
        }
        "attach_decky" => payload::<Attach>(op, body).map(drop),
        "detach_decky" => payload::<Detach>(op, body).map(drop),
        "remove_decky" => payload::<RemoveDecky>(op, body).map(drop),
        "update_decky" => {
            let request: UpdateDecky = payload(op, body)?;
            request.services.as_deref().map_or(Ok(()), check_services)
        }
        "update_lan" => payload::<UpdateLan>(op, body).map(drop),
        other => refuse(format!("unknown op '{other}'")),
    }
}

/// The store edits of `op` with `payload` on `detail` (live: deployed, so some fields are frozen).
pub fn edits(
    detail: &TopologyDetail,
    op: &str,
    body: &Value,
    pool: &mut SubnetPool,
    live: bool,
) -> Result<Vec<TopologyEdit>, OpError> {
    match op {
        "add_lan" => Ok(vec![TopologyEdit::AddLan(new_lan(detail, payload(op, body)?, pool)?)]),
        "remove_lan" => {
            let Named { name } = payload(op, body)?;
            let lan = lan(detail, &name)?;
            if detail.deckies.iter().any(|d| detail.edges_of(d).first().is_some_and(|home| home.lan_id == lan.id)) {
                return refuse(format!("LAN '{name}' is the home LAN of a decky"));
            }
            Ok(vec![TopologyEdit::RemoveLan(lan.id)])
        }
        "add_decky" => {
            let (decky, edge) = new_decky(detail, payload(op, body)?)?;
            Ok(vec![TopologyEdit::AddDecky(decky, vec![edge])])
        }
        "attach_decky" => attach(detail, payload(op, body)?),
        "detach_decky" => detach(detail, payload(op, body)?),
        "remove_decky" => {
            let RemoveDecky { decky: name } = payload(op, body)?;
            Ok(vec![TopologyEdit::RemoveDecky(decky(detail, &name)?.uuid)])
        }
        "update_decky" => update_decky(detail, payload(op, body)?, live),
        "update_lan" => Ok(vec![update_lan(detail, payload(op, body)?, live)?]),
        other => refuse(format!("unknown op '{other}'")),
    }
}
