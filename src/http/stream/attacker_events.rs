//! `GET /attackers/{uuid}/events`: one attacker's live behavioural events as Server-Sent Events,
//! in DECNET's frames. On connect, `event: snapshot` with the attacker's latest observation of each
//! primitive (from the database); then, from the bus, every `attacker.observation.<primitive>`
//! (as `event: observation`) and `attacker.scored` (as `event: attacker.scored`) whose payload
//! names this attacker, each as `{topic, type, ts, payload}`. Without a bus the stream holds the
//! snapshot and keepalives. Authentication as `/stream` (bearer header or `?ticket=`), counted
//! against the same per-user cap; the 404 comes after authentication, so an unauthenticated probe
//! learns nothing about which attackers exist.

use std::collections::BTreeMap;
use std::convert::Infallible;

use axum::extract::State;
use axum::response::Response;
use axum::response::sse::Event;
use futures::{StreamExt, stream};
use serde::Deserialize;
use serde_json::json;
use utoipa::IntoParams;
use uuid::Uuid;

use super::sse;
use crate::bus::{self, topics};
use crate::http::attackers::{ObservationEntry, attacker_not_found};
use crate::http::extract::{ValidPath, ValidQuery, Validate};
use crate::http::guard::StreamViewer;
use crate::http::responses::{AttackerNotFound, EventStream, NotAUuid};
use crate::http::{AppState, Result};

/// The observations read for the snapshot: enough to find each primitive's latest.
const SNAPSHOT_OBSERVATIONS: u32 = 1000;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AttackerEventsQuery {
    /// A single-use ticket from `POST /auth/sse-ticket`, for clients that cannot send a header.
    pub ticket: Option<String>,
}

impl Validate for AttackerEventsQuery {}

/// One attacker's behavioural events, live.
#[utoipa::path(
    get,
    path = "/attackers/{uuid}/events",
    tag = "attackers",
    security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The attacker"), AttackerEventsQuery),
    responses(
        (status = 200, description = "The event stream", content_type = "text/event-stream", body = sse::SseFrame),
        EventStream, NotAUuid, AttackerNotFound,
    )
)]
pub async fn attacker_events(
    State(state): State<AppState>,
    StreamViewer(session): StreamViewer,
    ValidPath(uuid): ValidPath<Uuid>,
    ValidQuery(_query): ValidQuery<AttackerEventsQuery>,
) -> Result<Response> {
    state.db.attacker(uuid).await.map_err(attacker_not_found)?;
    let slot = state.sse.acquire(session.user.uuid)?;
    let mut latest = BTreeMap::new();
    for observation in state.db.attacker_observations(uuid, SNAPSHOT_OBSERVATIONS).await? {
        latest.entry(observation.primitive.clone()).or_insert_with(|| ObservationEntry::from(observation));
    }
    let snapshot = json!({"attacker_uuid": uuid, "observations": latest.into_values().collect::<Vec<_>>()});
    let snapshot = Event::default().event("snapshot").data(snapshot.to_string());

    // Subscribed before the response starts: nothing published after the snapshot is missed.
    let subjects = [topics::ALL_ATTACKER_OBSERVATIONS, topics::ATTACKER_SCORED];
    let mut live = Vec::new();
    for subject in subjects {
        if let Some(subscriber) = state.bus.subscribe(subject.to_string()).await {
            live.push(subscriber);
        }
    }
    let attacker = uuid.to_string();
    let events = stream::select_all(live).filter_map(move |message| {
        let frame = serde_json::from_slice::<bus::Event>(&message.payload)
            .ok()
            .filter(|event| event.payload.get("attacker_uuid").and_then(|a| a.as_str()) == Some(attacker.as_str()))
            .map(|event| {
                let name = if event.topic == topics::ATTACKER_SCORED { "attacker.scored" } else { "observation" };
                Event::default().event(name).data(json!(event).to_string())
            });
        std::future::ready(frame)
    });
    // Without a bus the stream stays open on keepalives, as DECNET's does.
    let events = events.chain(stream::pending());
    let closing = state.closing.clone().cancelled_owned();
    let frames = stream::once(std::future::ready(snapshot)).chain(events).take_until(closing).map(move |event| {
        // The stream owns its slot: however it ends, dropping it frees the slot.
        let _held = &slot;
        Ok::<_, Infallible>(event)
    });
    Ok(sse::response(frames))
}
