//! `GET /identities/events` and `GET /campaigns/events`: identity and campaign changes as
//! Server-Sent Events, in DECNET's frames. On connect, `event: snapshot` with `{identities: [...]}`
//! (or `{campaigns: [...]}`, the first 50 as the lists give them); then, as the identities are
//! recomputed (looked at every 5 s), `event: formed` for an identity (a campaign) that was not there
//! before and `event: observation.linked` for an attacker that joined an identity
//! (`identity.linked` for an identity that joined a campaign), each `{topic, type, ts, payload}`
//! with the uuids. Identities are computed, not published on the bus, so each stream compares what
//! it last saw with the current computation. Authentication as `/stream` (bearer header or
//! `?ticket=`), counted against the same per-user cap.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::response::Response;
use axum::response::sse::Event;
use futures::StreamExt;
use serde_json::{Value, json};

use super::sse::{self, SseSlot};
use crate::auth::session::Session;
use crate::http::campaigns::CampaignRow;
use crate::http::extract::ValidQuery;
use crate::http::guard::StreamViewer;
use crate::http::identities::IdentityRow;
use crate::http::responses::EventStream;
use crate::http::{AppState, Result};
use crate::identity::Snapshot;

/// How often a stream looks at the current identities.
const WATCH_EVERY: Duration = Duration::from_secs(5);
/// Rows in the snapshot frame, as DECNET's.
const SNAPSHOT_ROWS: usize = 50;

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
    let rows: Vec<IdentityRow> = first.identities.iter().take(SNAPSHOT_ROWS).map(IdentityRow::from).collect();
    let snapshot = json!({ "identities": rows });
    Ok(watch(&state, &session, slot, first, snapshot, identity_changes))
}

/// Campaign changes, live.
#[utoipa::path(
    get,
    path = "/campaigns/events",
    tag = "identities",
    security(("bearer" = [])),
    params(sse::TicketQuery),
    responses(
        (status = 200, description = "The event stream", content_type = "text/event-stream", body = sse::SseFrame),
        EventStream,
    )
)]
pub async fn campaign_events(
    State(state): State<AppState>,
    StreamViewer(session): StreamViewer,
    ValidQuery(_query): ValidQuery<sse::TicketQuery>,
) -> Result<Response> {
    let slot = state.sse.acquire(session.user.uuid)?;
    let first = state.identities.snapshot(&state.db).await?;
    let rows: Vec<CampaignRow> =
        first.campaigns.iter().take(SNAPSHOT_ROWS).map(|c| CampaignRow::of(c, &first)).collect();
    let snapshot = json!({ "campaigns": rows });
    Ok(watch(&state, &session, slot, first, snapshot, campaign_changes))
}

/// The stream: `snapshot`, then what `diff` finds between each look and the one before.
fn watch(
    state: &AppState,
    session: &Session,
    slot: SseSlot,
    first: Arc<Snapshot>,
    snapshot: Value,
    diff: fn(&Snapshot, &Snapshot) -> Vec<Event>,
) -> Response {
    let snapshot = Event::default().event("snapshot").data(snapshot.to_string());
    let watch = Watch { state: state.clone(), seen: first, pending: VecDeque::new(), _slot: slot };
    let changes = futures::stream::unfold(watch, move |mut watch| async move {
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
                    watch.pending.extend(diff(&watch.seen, &current));
                    watch.seen = current;
                }
                Err(err) => tracing::warn!(error = %err, "Identities unreadable for a stream; trying again"),
            }
        }
    });
    let frames = futures::stream::once(async { Ok(snapshot) }).chain(changes);
    super::revocation::response(state, session, frames)
}

/// What a stream holds between looks.
struct Watch {
    state: AppState,
    seen: Arc<Snapshot>,
    pending: VecDeque<Event>,
    _slot: SseSlot,
}

/// One of DECNET's frames: event `leaf`, data `{topic: "<prefix>.<leaf>", type, ts, payload}`.
fn frame(prefix: &str, leaf: &str, payload: Value) -> Event {
    let ts = chrono::Utc::now().timestamp_millis() as f64 / 1000.0;
    let data = json!({"topic": format!("{prefix}.{leaf}"), "type": leaf, "ts": ts, "payload": payload});
    Event::default().event(leaf).data(data.to_string())
}

/// The frames from `seen` to `current`: identities formed, attackers linked into one.
fn identity_changes(seen: &Snapshot, current: &Snapshot) -> Vec<Event> {
    let mut frames = Vec::new();
    for identity in &current.identities {
        match seen.identity(identity.uuid) {
            None => frames.push(frame(
                "identity",
                "formed",
                json!({"identity_uuid": identity.uuid, "identity": IdentityRow::from(identity)}),
            )),
            Some(before) => {
                for member in identity.members.iter().filter(|m| !before.members.iter().any(|b| b.uuid == m.uuid)) {
                    frames.push(frame(
                        "identity",
                        "observation.linked",
                        json!({"identity_uuid": identity.uuid, "attacker_uuid": member.uuid, "ip": member.ip}),
                    ));
                }
            }
        }
    }
    frames
}

/// The frames from `seen` to `current`: campaigns formed, identities joined to one.
fn campaign_changes(seen: &Snapshot, current: &Snapshot) -> Vec<Event> {
    let mut frames = Vec::new();
    for campaign in &current.campaigns {
        match seen.campaign(campaign.uuid) {
            None => frames.push(frame(
                "campaign",
                "formed",
                json!({"campaign_uuid": campaign.uuid, "campaign": CampaignRow::of(campaign, current)}),
            )),
            Some(before) => {
                for identity in campaign.identities.iter().filter(|i| !before.identities.contains(i)) {
                    frames.push(frame(
                        "campaign",
                        "identity.linked",
                        json!({"campaign_uuid": campaign.uuid, "identity_uuid": identity}),
                    ));
                }
            }
        }
    }
    frames
}
