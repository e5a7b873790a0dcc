//! `GET /health`: unauthenticated (probes and load balancers call it), generic details only.
//! A failing required component makes the service `unhealthy` (answered as [`ApiError::Unhealthy`],
//! 503); a failing optional one only `degraded`. A worker counts as up when it runs embedded in this
//! process or its heartbeat on the bus is fresh, so a deployment whose workers run as their own
//! processes reads `healthy`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ApiError, AppState, Result};
use crate::db::{Db, Enforcement, HostStatus};
use crate::recent::Recent;
use crate::roster::WORKERS;

/// A probe result is reused this long, so a flood of health calls costs one query a second.
const PROBE_CACHE: Duration = Duration::from_secs(1);
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(health))
}

/// Whether the database finished initialisation, and the last probe of it.
#[derive(Debug, Default)]
pub struct DatabaseHealth {
    ready: AtomicBool,
    last_probe: Recent<bool>,
}

impl DatabaseHealth {
    /// Set once migrations are applied; until then the database counts as failing.
    pub fn mark_ready(&self) {
        self.ready.store(true, Ordering::Release);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    async fn probe(&self, db: &Db) -> bool {
        if !self.is_ready() {
            return false;
        }
        self.last_probe.get_or_find(PROBE_CACHE, Self::ping(db)).await
    }

    async fn ping(db: &Db) -> bool {
        match tokio::time::timeout(PROBE_TIMEOUT, db.ping()).await {
            Ok(Ok(())) => true,
            Ok(Err(err)) => {
                tracing::warn!(error = %err, "Database health probe failed");
                false
            }
            Err(_) => {
                tracing::warn!("Database health probe timed out");
                false
            }
        }
    }
}

#[derive(Debug, Serialize, ToSchema, PartialEq, Eq, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub enum OverallStatus {
    Healthy,
    Degraded,
    Unhealthy,
}

#[derive(Debug, Serialize, ToSchema, PartialEq, Eq, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub enum ComponentStatus {
    Ok,
    Failing,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ComponentHealth {
    pub status: ComponentStatus,
    /// A generic reason when failing; never a raw store or tool error.
    pub detail: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct HealthResponse {
    pub status: OverallStatus,
    pub components: BTreeMap<String, ComponentHealth>,
}

struct Component {
    name: &'static str,
    /// A failing required component makes the whole service unhealthy.
    required: bool,
    failure: Option<String>,
}

async fn components(state: &AppState) -> Vec<Component> {
    let database_ok = state.db_health.probe(&state.db).await;
    let mut components = vec![Component {
        name: "database",
        required: true,
        failure: (!database_ok).then(|| super::error::DATABASE_UNAVAILABLE.into()),
    }];
    let (bus_connected, now) = (state.bus.is_connected(), crate::bus::epoch_seconds());
    // A worker this deployment does not run (never embedded, never heard from) is not a component:
    // it would make every deployment without it read degraded.
    // The engine is a component once deckies are deployed, and then a required one: without it the
    // fleet is out of reach. (Before, like a worker this deployment does not run, it is not one.)
    if let Some(runtime_ok) = state.fleet.runtime_health().await {
        components.push(Component {
            name: "container_runtime",
            required: true,
            failure: (!runtime_ok).then(|| "container runtime unavailable".into()),
        });
    }
    // Another deployment's containers of this fleet's name are left alone; health says so.
    if let Some(detail) = state.fleet.other_deployments() {
        components.push(Component { name: "fleet", required: false, failure: Some(detail) });
    }
    // Below the free-disk watermark the collector and the ingester shed low-value events.
    let watermark = state.config.disk_watermark();
    if let Some(low) = watermark.low() {
        components.push(Component { name: "disk", required: false, failure: Some(watermark.detail(&low)) });
    }
    if database_ok && let Some(tarpit) = tarpit_component(state).await {
        components.push(tarpit);
    }
    if database_ok && let Some(swarm) = swarm_component(state).await {
        components.push(swarm);
    }
    for worker in &WORKERS {
        let Some(component) = worker.health else { continue };
        if state.workers.is_deployed(worker.name) {
            // A running worker that cannot do its work (the sniffer without its interface) fails
            // with the generic reason it gives.
            let failure = if state.workers.is_up(worker.name, bus_connected, now) {
                state.workers.fault(worker.name, bus_connected, now)
            } else {
                Some("not running".into())
            };
            components.push(Component { name: component.name, required: component.required, failure });
        }
    }
    components
}

/// The tarpit, once a rule exists: failing while any rule's delay is not in force, with the reason
/// (optional: the deckies still serve). `None` without rules, or when the store cannot tell (the
/// database component says so).
async fn tarpit_component(state: &AppState) -> Option<Component> {
    let rules = tokio::time::timeout(PROBE_TIMEOUT, state.db.tarpit_rules()).await.ok()?.ok()?;
    if rules.is_empty() {
        return None;
    }
    let failure = if rules.iter().any(|r| r.enforcement == Enforcement::Failed) {
        Some("a tarpit rule is not in force (traffic control failed)".into())
    } else if rules.iter().any(|r| r.enforcement == Enforcement::Throttle) {
        Some("tarpit delay not in force: the kernel lacks netem (the ports are throttled instead)".into())
    } else {
        None
    };
    Some(Component { name: "tarpit", required: false, failure })
}

/// Names of down swarm hosts `/health` lists; more are counted.
const DOWN_HOSTS_NAMED: usize = 10;

/// The swarm, once a host is enrolled: failing while any host is `unreachable`, naming them
/// (optional: the other hosts and this one still serve). `None` without hosts, or when the store
/// cannot tell.
async fn swarm_component(state: &AppState) -> Option<Component> {
    let hosts = tokio::time::timeout(PROBE_TIMEOUT, state.db.swarm_hosts(None)).await.ok()?.ok()?;
    if hosts.is_empty() {
        return None;
    }
    let down: Vec<&str> =
        hosts.iter().filter(|h| h.status == HostStatus::Unreachable).map(|h| h.name.as_str()).collect();
    let failure = (!down.is_empty()).then(|| {
        let mut named = down.iter().take(DOWN_HOSTS_NAMED).copied().collect::<Vec<_>>().join(", ");
        if down.len() > DOWN_HOSTS_NAMED {
            named.push_str(&format!(" and {} more", down.len() - DOWN_HOSTS_NAMED));
        }
        format!("swarm hosts unreachable (no heartbeat): {named}")
    });
    Some(Component { name: "swarm_hosts", required: false, failure })
}

fn overall(components: &[Component]) -> OverallStatus {
    let failing = |required| components.iter().any(|c| c.required == required && c.failure.is_some());
    if failing(true) {
        OverallStatus::Unhealthy
    } else if failing(false) {
        OverallStatus::Degraded
    } else {
        OverallStatus::Healthy
    }
}

/// Service health by component.
#[utoipa::path(
    get,
    path = "/health",
    tag = "system",
    responses(
        (status = 200, description = "Healthy, or degraded with only optional components failing", body = HealthResponse),
        (status = 503, description = "A required component is failing", body = HealthResponse),
    )
)]
pub async fn health(State(state): State<AppState>) -> Result<Json<HealthResponse>> {
    let components = components(&state).await;
    let status = overall(&components);
    let body = HealthResponse {
        status,
        components: components
            .into_iter()
            .map(|c| {
                let status = if c.failure.is_some() { ComponentStatus::Failing } else { ComponentStatus::Ok };
                (c.name.to_string(), ComponentHealth { status, detail: c.failure })
            })
            .collect(),
    };
    if status == OverallStatus::Unhealthy { Err(ApiError::Unhealthy(body)) } else { Ok(Json(body)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn component(required: bool, failing: bool) -> Component {
        Component { name: "x", required, failure: failing.then(|| "down".into()) }
    }

    #[test]
    fn overall_status_follows_required_and_optional_failures() {
        assert_eq!(overall(&[component(true, false), component(false, false)]), OverallStatus::Healthy);
        assert_eq!(overall(&[component(true, false), component(false, true)]), OverallStatus::Degraded);
        assert_eq!(overall(&[component(true, true), component(false, false)]), OverallStatus::Unhealthy);
        assert_eq!(overall(&[component(true, true), component(false, true)]), OverallStatus::Unhealthy);
    }
}
