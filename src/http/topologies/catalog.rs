//! The catalog the dashboard builds topologies from: the services, the archetypes, the next free
//! subnet of the pool and a LAN's next free address.

use super::topology_error;
use crate::fleet::catalog;
use crate::http::extract::ValidPath;
use crate::http::guard::Viewer;
use crate::http::responses::{NotAUuid, ViewerOnly};
use crate::http::{ApiError, AppState, Result};
use crate::topology::generate::next_ip;
use axum::Json;
use axum::extract::State;
use serde::Serialize;
use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use utoipa::ToSchema;
use uuid::Uuid;

#[derive(Debug, Serialize, ToSchema)]
pub struct ArchetypeCatalog {
    archetypes: Vec<ArchetypeEntry>,
}

/// A kind of host a decky can be made as (DECNET's archetype shape).
#[derive(Debug, Serialize, ToSchema)]
pub struct ArchetypeEntry {
    slug: &'static str,
    display_name: &'static str,
    description: &'static str,
    services: &'static [&'static str],
    preferred_distros: &'static [&'static str],
    nmap_os: &'static str,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct NextSubnet {
    /// A /24 no topology holds.
    subnet: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct NextIp {
    subnet: String,
    /// The LAN's next free host address (`.1` is the gateway).
    ip: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ServiceCatalog {
    services: Vec<&'static str>,
    fleet_singletons: Vec<&'static str>,
}

/// The services a topology decky may run.
#[utoipa::path(
    get, path = "/topologies/services", tag = "topologies", security(("bearer" = [])),
    responses(
        (status = 200, description = "The catalog", body = ServiceCatalog),
        ViewerOnly,
    )
)]
pub async fn services(_viewer: Viewer) -> Json<ServiceCatalog> {
    Json(ServiceCatalog { services: catalog::service_names(), fleet_singletons: Vec::new() })
}

/// The archetypes a decky may be made as (`add_decky`'s `archetype`).
#[utoipa::path(
    get, path = "/topologies/archetypes", tag = "topologies", security(("bearer" = [])),
    responses(
        (status = 200, description = "The archetypes", body = ArchetypeCatalog),
        ViewerOnly,
    )
)]
pub async fn archetypes(_viewer: Viewer) -> Json<ArchetypeCatalog> {
    let archetypes = catalog::ARCHETYPES
        .iter()
        .map(|a| ArchetypeEntry {
            slug: a.name,
            display_name: a.name,
            description: "",
            services: a.services,
            preferred_distros: &[],
            nmap_os: a.nmap_os,
        })
        .collect();
    Json(ArchetypeCatalog { archetypes })
}

/// The next /24 of the subnet pool no topology holds.
#[utoipa::path(
    get, path = "/topologies/next-subnet", tag = "topologies", security(("bearer" = [])),
    responses(
        (status = 200, description = "A free subnet", body = NextSubnet),
        (status = 409, description = "Subnet pool exhausted"),
        ViewerOnly,
    )
)]
pub async fn next_subnet(State(state): State<AppState>, _viewer: Viewer) -> Result<Json<NextSubnet>> {
    let subnet = state.topologies.next_subnet().await.map_err(topology_error)?;
    Ok(Json(NextSubnet { subnet }))
}

/// The next free address on one of the topology's LANs.
#[utoipa::path(
    get, path = "/topologies/{id}/lans/{lan}/next-ip", tag = "topologies", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology"), ("lan" = Uuid, Path, description = "The LAN")),
    responses(
        (status = 200, description = "A free address", body = NextIp),
        (status = 404, description = "Topology not found, or LAN not found"),
        (status = 409, description = "IP allocator exhausted"),
        ViewerOnly, NotAUuid,
    )
)]
pub async fn lan_next_ip(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidPath((id, lan)): ValidPath<(Uuid, Uuid)>,
) -> Result<Json<NextIp>> {
    let detail = state.topologies.detail(id).await.map_err(topology_error)?;
    let lan = detail.lans.iter().find(|l| l.id == lan).ok_or_else(|| ApiError::not_found("LAN not found"))?;
    let taken: BTreeSet<Ipv4Addr> =
        detail.edges.iter().filter(|e| e.lan_id == lan.id).filter_map(|e| e.ip.as_deref()?.parse().ok()).collect();
    let ip = next_ip(&lan.subnet, &taken).ok_or_else(|| ApiError::conflict("IP allocator exhausted"))?;
    Ok(Json(NextIp { subnet: lan.subnet.clone(), ip: ip.to_string() }))
}
