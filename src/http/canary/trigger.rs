//! What every canary callback does with a known token, the HTTP one and the DNS lookup alike: one
//! path ([`record`]) that applies the per-token limit, stores the trigger, appends its line to the
//! ingest file and publishes its bus event (see the module above).

use std::net::IpAddr;
use std::time::{Duration, Instant};

use chrono::Utc;
use uuid::Uuid;

use crate::bus::{Event, topics};
use crate::canary::{Admission, CallbackToken, Trigger};
use crate::db::{CanaryToken, CanaryTrigger, DbError};
use crate::http::AppState;

/// A callback waits at most this long for the store before answering anyway.
pub(super) const CALLBACK_DEADLINE: Duration = Duration::from_secs(5);
/// The longest request path a trigger keeps.
const MAX_PATH_CHARS: usize = 2048;

/// One callback, as its listener saw it: what the trigger carries beyond its token.
pub(super) struct Call {
    pub src_ip: IpAddr,
    /// `GET`, `HEAD`, `POST`, or `DNS`.
    pub method: String,
    pub path: Option<String>,
    pub user_agent: Option<String>,
    pub dns_qname: Option<String>,
    /// The request's headers as a JSON object text (`{}` for a lookup).
    pub headers: String,
}

/// The stored token `token` names, then its trigger recorded, awaited at most [`CALLBACK_DEADLINE`].
/// `Some(true)`: known (recorded or limited); `Some(false)`: unknown; `None`: the store failed or
/// was too slow (logged), which the caller answers as known, so the answer never tells a failure.
///
/// The work runs as a task of its own: a caller that hangs up, or the deadline, must not cut a
/// trigger between its stored row and its line and event (a load test saw a counted trigger with
/// no line when wrk closed its connections).
pub(super) async fn find_and_record(state: &AppState, token: &CallbackToken, call: Call) -> Option<bool> {
    let (state, token) = (state.clone(), token.clone());
    let task = tokio::spawn(async move {
        let Some(stored) = state.db.canary_token_by_callback(token.as_str()).await? else { return Ok(false) };
        record(&state, stored, call).await?;
        Ok::<bool, DbError>(true)
    });
    match tokio::time::timeout(CALLBACK_DEADLINE, task).await {
        Ok(Ok(Ok(known))) => Some(known),
        Ok(Ok(Err(err))) => {
            tracing::error!(error = %err, "Canary trigger not stored");
            None
        }
        Ok(Err(err)) => {
            tracing::error!(error = %err, "Canary trigger task failed");
            None
        }
        Err(_) => {
            tracing::error!("Canary trigger not stored in time; it is still being recorded");
            None
        }
    }
}

/// Stores the trigger, then hands it to the ingest file and the bus; nothing past the token's limit
/// a minute.
async fn record(state: &AppState, token: CanaryToken, call: Call) -> Result<(), DbError> {
    let admission =
        state.canary_limit.lock().unwrap_or_else(|poison| poison.into_inner()).admit(token.uuid, Instant::now());
    match admission {
        Admission::Record => {}
        Admission::DropAndWarn => {
            tracing::warn!(
                token = %token.uuid,
                per_minute = state.config.api.canary_triggers_per_minute,
                "Canary token over its trigger limit: further callbacks this minute are answered but not recorded"
            );
            return Ok(());
        }
        Admission::Drop => return Ok(()),
    }
    let now = Utc::now();
    let trigger = Trigger {
        token_uuid: token.uuid,
        trigger_uuid: Uuid::new_v4(),
        decky: token.decky_name,
        kind: token.kind,
        generator: token.generator,
        placement_path: token.placement_path,
        src_ip: call.src_ip.to_canonical().to_string(),
        method: call.method,
        path: call.path.map(|path| crate::text::prefix_chars(&path, MAX_PATH_CHARS).to_string()),
        user_agent: call.user_agent,
        dns_qname: call.dns_qname,
    };
    let stored = CanaryTrigger {
        uuid: trigger.trigger_uuid,
        token_uuid: trigger.token_uuid,
        occurred_at: now,
        src_ip: trigger.src_ip.clone(),
        user_agent: trigger.user_agent.clone(),
        method: trigger.method.clone(),
        request_path: trigger.path.clone(),
        dns_qname: trigger.dns_qname.clone(),
        headers: call.headers,
    };
    state.db.record_canary_trigger(&stored).await?;
    tracing::warn!(token = %trigger.token_uuid, decky = %trigger.decky, src_ip = %trigger.src_ip, method = %trigger.method, "Canary token triggered");
    match state.config.ingest.log_file.as_deref() {
        Some(file) => {
            let line = trigger.line(now) + "\n";
            if let Err(err) = crate::logline::append(file, line.as_bytes()).await {
                tracing::error!(path = %file.display(), error = %err, "Cannot write a canary trigger to the ingest file");
            }
        }
        None => tracing::warn!(token = %trigger.token_uuid, "No ingest file: canary trigger not in the logs"),
    }
    let event = Event::new(topics::canary_triggered(trigger.token_uuid), "triggered", trigger.event_payload());
    if let Err(err) = state.bus.publish(&event).await {
        tracing::warn!(error = %err, token = %trigger.token_uuid, "Canary trigger event not published");
    }
    Ok(())
}
