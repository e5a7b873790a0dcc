//! What every canary callback does with the token it carries, the HTTP one (`/c/{token}`, routed by
//! `http::canary`) and the DNS lookup (`dns`) alike: one [`TriggerRecorder`] that finds the token and,
//! when it is known, records the trigger (at most `SVC_CANARY_TRIGGERS_PER_MINUTE` a token; past it
//! the callback answers as ever, only the record is skipped):
//!
//! 1. the trigger row, its token's `trigger_count` and `last_triggered_at`, in one transaction;
//! 2. an RFC 5424 line (`canary`/`canary_triggered`, the caller as `src_ip`) appended to the ingest
//!    file, the path every decoy's line and the tarpit's events take: the ingester stores it (so it
//!    is in `/logs`, the log stream and the caller's attacker profile, whose profiler reads stored
//!    lines) with no second way into those tables to keep in step;
//! 3. DECNET's bus event `canary.<token uuid>.triggered`, which webhooks selecting `canary.>` get.
//!
//! The caller is the socket peer: svc trusts no `X-Forwarded-For` (the spec's rule, also the rate
//! limiter's), so behind a proxy every trigger names the proxy.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::Utc;
use uuid::Uuid;

use super::{Admission, CallbackToken, Trigger, TriggerLimit};
use crate::bus::{Bus, Event, topics};
use crate::db::{CanaryToken, CanaryTrigger, Db, DbError};

/// A callback waits at most this long for the store before answering anyway.
const CALLBACK_DEADLINE: Duration = Duration::from_secs(5);
/// The longest request path a trigger keeps.
const MAX_PATH_CHARS: usize = 2048;

/// One callback, as its listener saw it: what the trigger carries beyond its token.
pub struct Call {
    pub src_ip: IpAddr,
    /// `GET`, `HEAD`, `POST`, or `DNS`.
    pub method: String,
    pub path: Option<String>,
    pub user_agent: Option<String>,
    pub dns_qname: Option<String>,
    /// The request's headers as a JSON object text (`{}` for a lookup).
    pub headers: String,
}

/// What a callback found: the answer it gives depends on it, and never tells a failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Heard {
    /// A known token's callback, recorded (or past its limit).
    Known,
    /// No token by that text.
    Unknown,
    /// The store failed or was too slow (logged): answered as known.
    Unsure,
}

/// Finds and records the triggers of every callback; one per API process, shared by its listeners.
pub struct TriggerRecorder {
    db: Db,
    bus: Bus,
    /// Where the trigger's line goes (`SVC_INGEST_LOG_FILE`); none: not in the logs (warned).
    ingest_file: Option<PathBuf>,
    per_minute: u32,
    limit: Mutex<TriggerLimit>,
}

impl TriggerRecorder {
    pub fn new(db: Db, bus: Bus, ingest_file: Option<PathBuf>, per_minute: u32) -> TriggerRecorder {
        TriggerRecorder { db, bus, ingest_file, per_minute, limit: Mutex::new(TriggerLimit::new(per_minute)) }
    }

    /// The stored token `token` names, then its trigger recorded, awaited at most
    /// [`CALLBACK_DEADLINE`].
    ///
    /// The work runs as a task of its own: a caller that hangs up, or the deadline, must not cut a
    /// trigger between its stored row and its line and event (a load test saw a counted trigger
    /// with no line when wrk closed its connections).
    pub async fn heard(self: &Arc<Self>, token: &CallbackToken, call: Call) -> Heard {
        let (recorder, token) = (self.clone(), token.clone());
        let task = tokio::spawn(async move {
            let Some(stored) = recorder.db.canary_token_by_callback(token.as_str()).await? else {
                return Ok(Heard::Unknown);
            };
            recorder.record(stored, call).await?;
            Ok::<Heard, DbError>(Heard::Known)
        });
        match tokio::time::timeout(CALLBACK_DEADLINE, task).await {
            Ok(Ok(Ok(heard))) => heard,
            Ok(Ok(Err(err))) => {
                tracing::error!(error = %err, "Canary trigger not stored");
                Heard::Unsure
            }
            Ok(Err(err)) => {
                tracing::error!(error = %err, "Canary trigger task failed");
                Heard::Unsure
            }
            Err(_) => {
                tracing::error!("Canary trigger not stored in time; it is still being recorded");
                Heard::Unsure
            }
        }
    }

    /// Stores the trigger, then hands it to the ingest file and the bus; nothing past the token's limit
    /// a minute.
    async fn record(&self, token: CanaryToken, call: Call) -> Result<(), DbError> {
        let admission =
            self.limit.lock().unwrap_or_else(|poison| poison.into_inner()).admit(token.uuid, Instant::now());
        match admission {
            Admission::Record => {}
            Admission::DropAndWarn => {
                tracing::warn!(
                    token = %token.uuid,
                    per_minute = self.per_minute,
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
        self.db.record_canary_trigger(&stored).await?;
        tracing::warn!(token = %trigger.token_uuid, decky = %trigger.decky, src_ip = %trigger.src_ip, method = %trigger.method, "Canary token triggered");
        match self.ingest_file.as_deref() {
            Some(file) => {
                let line = trigger.line(now) + "\n";
                if let Err(err) = crate::logline::append(file, line.as_bytes()).await {
                    tracing::error!(path = %file.display(), error = %err, "Cannot write a canary trigger to the ingest file");
                }
            }
            None => tracing::warn!(token = %trigger.token_uuid, "No ingest file: canary trigger not in the logs"),
        }
        let event = Event::new(topics::canary_triggered(trigger.token_uuid), "triggered", trigger.event_payload());
        if let Err(err) = self.bus.publish(&event).await {
            tracing::warn!(error = %err, token = %trigger.token_uuid, "Canary trigger event not published");
        }
        Ok(())
    }
}
