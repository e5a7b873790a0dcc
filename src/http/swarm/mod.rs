//! `/swarm/*` (admin): the worker hosts enrolled into this master and the deckies each runs, in
//! DECNET's paths, shapes and texts. Hosts (`hosts`): list, decommission, tear down their deckies;
//! deckies (`deckies`): the per-host records heartbeats keep; enrollment (`enroll`): the bundle a
//! new host installs itself from; updates (`updates`, `/swarm-updates/*`): releases of svc pushed to
//! each host's updater. A host's status is what its heartbeats and the silence sweep
//! wrote: listing dials no host.

mod deckies;
mod enroll;
mod hosts;
mod updates;

use utoipa_axum::router::OpenApiRouter;

use super::AppState;

pub use hosts::SwarmHostView;

/// 404 of a route naming a host that is not enrolled.
pub const HOST_NOT_FOUND: &str = "host not found";

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(hosts::router())
        .merge(deckies::router())
        .merge(enroll::router())
        .merge(updates::router())
}
