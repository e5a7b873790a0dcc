//! `GET /topologies/{id}/events`: a topology's live events as Server-Sent Events, in DECNET's
//! frames. On connect, a `: keepalive` comment (so a client sees the stream open at once), then
//! `event: snapshot` with `{topology_id, status, in_flight}` (its `pending` and `applying`
//! mutations); then every bus event under `topology.<id>.`, named as DECNET names them
//! (`mutation.enqueued|applying|applied|failed`, `status`), and every `decky.<name>.<leaf>` whose
//! payload's `topology_id` is this topology, as `decky.<leaf>`; each `{topic, type, ts, payload}`.
//! A keepalive comment follows every 15 s without an event. Authentication as `/stream` (bearer
//! header or single-use `?ticket=`; a token in the query never authenticates), counted against the
//! same per-user cap; the 404 comes after authentication and before the stream starts. A client
//! that falls 256 events behind is dropped rather than buffered. Without a bus: the keepalive, the
//! snapshot, then keepalives.

use axum::extract::State;
use axum::response::Response;
use axum::response::sse::Event;
use serde_json::json;
use uuid::Uuid;

use super::bus_events::BusEvents;
use super::sse;
use crate::bus::{self, topics};
use crate::db::MutationState;
use crate::http::error::OrNotFound;
use crate::http::extract::{ValidPath, ValidQuery};
use crate::http::guard::StreamViewer;
use crate::http::responses::{EventStream, NotAUuid, TopologyNotFound};
use crate::http::{AppState, Result};

/// The frame name DECNET gives a bus event, when it belongs on this topology's stream: the rest of
/// a `topology.<id>.` subject, or `decky.<leaf>` for a decky event about one of its deckies.
fn frame_name(topology: Uuid, subject: &str, event: &bus::Event) -> Option<String> {
    if let Some(rest) = subject.strip_prefix(&format!("topology.{topology}.")) {
        return Some(rest.to_string());
    }
    let leaf = topics::decky_event_leaf(subject)?;
    let ours = event.payload.get("topology_id").and_then(|v| v.as_str()) == Some(topology.to_string().as_str());
    ours.then(|| format!("decky.{leaf}"))
}

/// A topology's live events: its snapshot, then its mutations, status changes and its deckies'
/// service changes as they happen.
#[utoipa::path(
    get,
    path = "/topologies/{id}/events",
    tag = "topologies",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "The topology"), sse::TicketQuery),
    responses(
        (status = 200, description = "The event stream", content_type = "text/event-stream", body = sse::SseFrame),
        EventStream, NotAUuid, TopologyNotFound,
    )
)]
pub async fn topology_events(
    State(state): State<AppState>,
    StreamViewer(session): StreamViewer,
    ValidPath(id): ValidPath<Uuid>,
    ValidQuery(_query): ValidQuery<sse::TicketQuery>,
) -> Result<Response> {
    let topology = state.db.topology(id).await.or_not_found(crate::topology::NOT_FOUND)?;
    let slot = state.sse.acquire(session.user.uuid)?;
    let events = BusEvents {
        label: format!("topology {id}"),
        subjects: vec![topics::topology_events(id), topics::ALL_DECKY_EVENTS.to_string()],
        name: move |subject: &str, event: &bus::Event| frame_name(id, subject, event),
    };
    let opening = async {
        let mut in_flight = state.db.mutations(id, Some(MutationState::Applying)).await?;
        in_flight.extend(state.db.mutations(id, Some(MutationState::Pending)).await?);
        let snapshot = json!({"topology_id": id, "status": topology.status, "in_flight": in_flight});
        // The keepalive first, so a client sees the stream open at once.
        Ok(vec![Event::default().comment("keepalive"), Event::default().event("snapshot").data(snapshot.to_string())])
    };
    let frames = events.open(&state.bus, state.closing.clone(), slot, opening).await?;
    Ok(super::revocation::response(&state, &session, frames))
}
