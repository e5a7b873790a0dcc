//! `GET /identities/events`: identity changes as Server-Sent Events, in DECNET's frames. On
//! connect, `event: snapshot` with `{identities: [...]}` (the first 50, as `/identities` lists
//! them); then, as the identities are recomputed (looked at every 5 s), `event: formed` for an
//! identity that was not there before and `event: observation.linked` for an attacker that joined
//! one, each `{topic, type, ts, payload}` with the identity's uuid (and the attacker's). Identities
//! are computed, not published on the bus, so each stream compares what it last saw with the
//! current computation. Authentication as `/stream` (bearer header or `?ticket=`), counted against
//! the same per-user cap.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::response::Response;
use axum::response::sse::Event;
use futures::StreamExt;
use serde_json::{Value, json};

use super::sse::{self, SseSlot};
use crate::http::extract::ValidQuery;
use crate::http::guard::StreamViewer;
use crate::http::identities::IdentityRow;
use crate::http::responses::EventStream;
use crate::http::{AppState, Result};
use crate::identity::Snapshot;

/// How often a stream looks at the current identities.
const WATCH_EVERY: Duration = Duration::from_secs(5);
/// Identities in the snapshot frame, as DECNET's.
const SNAPSHOT_IDENTITIES: usize = 50;

/// Identity changes, live.
#[utoipa::path(
    get,
    path = "/identities/events",
    tag = "identities",
    security(("bearer" = [])),
    params(sse::TicketQuery),
    responses(
        (status = 200, description = "The event stream", content_type = "text/event-stream", body = sse::SseFrame),
        EventStream,
    )
)]
pub async fn identity_events(
    State(state): State<AppState>,
    StreamViewer(session): StreamViewer,
    ValidQuery(_query): ValidQuery<sse::TicketQuery>,
) -> Result<Response> {
    let slot = state.sse.acquire(session.user.uuid)?;
    let first = state.identities.snapshot(&state.db).await?;
    let rows: Vec<IdentityRow> = first.identities.iter().take(SNAPSHOT_IDENTITIES).map(IdentityRow::from).collect();
    let snapshot = Event::default().event("snapshot").data(json!({ "identities": rows }).to_string());
    let watch = Watch { state: state.clone(), seen: first, pending: VecDeque::new(), _slot: slot };
    let changes = futures::stream::unfold(watch, |mut watch| async move {
        loop {
            if let Some(event) = watch.pending.pop_front() {
                return Some((Ok(event), watch));
            }
            tokio::select! {
                () = watch.state.closing.cancelled() => return None,
                () = tokio::time::sleep(WATCH_EVERY) => {}
            }
            match watch.state.identities.snapshot(&watch.state.db).await {
                Ok(current) => {
                    watch.pending.extend(changes(&watch.seen, &current));
                    watch.seen = current;
                }
                Err(err) => tracing::warn!(error = %err, "Identities unreadable for a stream; trying again"),
            }
        }
    });
    let frames = futures::stream::once(async { Ok(snapshot) }).chain(changes);
    Ok(super::revocation::response(&state, &session, frames))
}

/// What a stream holds between looks.
struct Watch {
    state: AppState,
    seen: Arc<Snapshot>,
    pending: VecDeque<Event>,
    _slot: SseSlot,
}

/// The frames from `seen` to `current`: identities formed, attackers linked into one.
fn changes(seen: &Snapshot, current: &Snapshot) -> Vec<Event> {
    let frame = |leaf: &str, payload: Value| {
        let ts = chrono::Utc::now().timestamp_millis() as f64 / 1000.0;
        let data = json!({"topic": format!("identity.{leaf}"), "type": leaf, "ts": ts, "payload": payload});
        Event::default().event(leaf).data(data.to_string())
    };
    let mut frames = Vec::new();
    for identity in &current.identities {
        match seen.identity(identity.uuid) {
            None => frames.push(frame(
                "formed",
                json!({"identity_uuid": identity.uuid, "identity": IdentityRow::from(identity)}),
            )),
            Some(before) => {
                for member in identity.members.iter().filter(|m| !before.members.iter().any(|b| b.uuid == m.uuid)) {
                    frames.push(frame(
                        "observation.linked",
                        json!({"identity_uuid": identity.uuid, "attacker_uuid": member.uuid, "ip": member.ip}),
                    ));
                }
            }
        }
    }
    frames
}
