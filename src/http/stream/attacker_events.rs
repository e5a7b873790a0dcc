//! `GET /attackers/{uuid}/events`: one attacker's live behavioural events as Server-Sent Events,
//! in DECNET's frames. On connect, `event: snapshot` with the attacker's latest observation of each
//! primitive (from the database); then, from the bus, every `attacker.observation.<primitive>`
//! (as `event: observation`) and `attacker.scored` (as `event: attacker.scored`) whose payload
//! names this attacker, each as `{topic, type, ts, payload}`; subscribed before the snapshot is
//! read, so none is lost in between (`bus_events`). Without a bus the stream holds the snapshot and
//! keepalives; a client that falls 256 events behind is dropped. Authentication as `/stream` (bearer header or `?ticket=`), counted
//! against the same per-user cap; the 404 comes after authentication, so an unauthenticated probe
//! learns nothing about which attackers exist.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::response::Response;
use axum::response::sse::Event;
use serde_json::json;
use uuid::Uuid;

use super::bus_events::BusEvents;
use super::sse;
use crate::bus::{self, topics};
use crate::db::Db;
use crate::http::attackers::{ATTACKER_NOT_FOUND, ObservationEntry};
use crate::http::error::OrNotFound;
use crate::http::extract::{ValidPath, ValidQuery};
use crate::http::guard::StreamViewer;
use crate::http::responses::{AttackerNotFound, EventStream, NotAUuid};
use crate::http::{AppState, Result};

/// The observations read for the snapshot: enough to find each primitive's latest.
const SNAPSHOT_OBSERVATIONS: u32 = 1000;

/// One attacker's behavioural events, live.
#[utoipa::path(
    get,
    path = "/attackers/{uuid}/events",
    tag = "attackers",
    security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The attacker"), sse::TicketQuery),
    responses(
        (status = 200, description = "The event stream", content_type = "text/event-stream", body = sse::SseFrame),
        EventStream, NotAUuid, AttackerNotFound,
    )
)]
pub async fn attacker_events(
    State(state): State<AppState>,
    StreamViewer(session): StreamViewer,
    ValidPath(uuid): ValidPath<Uuid>,
    ValidQuery(_query): ValidQuery<sse::TicketQuery>,
) -> Result<Response> {
    state.db.attacker(uuid).await.or_not_found(ATTACKER_NOT_FOUND)?;
    let slot = state.sse.acquire(session.user.uuid)?;
    let attacker = uuid.to_string();
    let events = BusEvents {
        label: format!("attacker {uuid}"),
        subjects: vec![topics::ALL_ATTACKER_OBSERVATIONS.to_string(), topics::ATTACKER_SCORED.to_string()],
        name: move |_subject: &str, event: &bus::Event| {
            let ours = event.payload.get("attacker_uuid").and_then(|a| a.as_str()) == Some(attacker.as_str());
            let name = if event.topic == topics::ATTACKER_SCORED { "attacker.scored" } else { "observation" };
            ours.then(|| name.to_string())
        },
    };
    let frames = events.open(&state.bus, state.closing.clone(), slot, snapshot(&state.db, uuid)).await?;
    Ok(super::revocation::response(&state, &session, frames))
}

/// The `snapshot` frame: the attacker's latest observation of each primitive.
async fn snapshot(db: &Db, uuid: Uuid) -> Result<Vec<Event>> {
    let mut latest = BTreeMap::new();
    for observation in db.attacker_observations(uuid, SNAPSHOT_OBSERVATIONS).await? {
        latest.entry(observation.primitive.clone()).or_insert_with(|| ObservationEntry::from(observation));
    }
    let snapshot = json!({"attacker_uuid": uuid, "observations": latest.into_values().collect::<Vec<_>>()});
    Ok(vec![Event::default().event("snapshot").data(snapshot.to_string())])
}
