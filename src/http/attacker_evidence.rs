//! What an attacker left beyond its profile, in DECNET's shapes: `GET /attackers/{uuid}/artifacts`
//! (the files it dropped: `file_captured` log rows), `/attackers/{uuid}/mail` (the messages it sent
//! through the SMTP decoys: `message_accepted` and DECNET's `message_stored` rows; admins only, as
//! in DECNET, because bodies are attacker content) and `/attackers/{uuid}/smtp-targets` (the victim
//! domains of its recipients, counted). All of it is read from the stored log rows of the
//! attacker's address, newest first and at most [`MAX_ROWS`] of each kind.

use std::collections::HashMap;

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::attackers::ATTACKER_NOT_FOUND;
use super::error::OrNotFound;
use super::extract::ValidPath;
use super::guard::{Admin, Viewer};
use super::logs::LogEntry;
use super::redact;
use super::responses::{AdminOnly, AttackerNotFound, NotAUuid, ViewerOnly};
use super::{AppState, Result};
use crate::db::{AttackerProfile, Db, LogColumn, LogFilter, LogRecord, Page, Role, SearchTerm};
use crate::time::format_utc;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(attacker_artifacts))
        .routes(routes!(attacker_mail))
        .routes(routes!(attacker_smtp_targets))
}

/// Rows of each kind read at most: the newest, so an attacker that sent a million mails still
/// gets an answer at once (`total` counts them all).
const MAX_ROWS: u32 = 1000;

/// Event types of a stored message: this project's SMTP decoy and DECNET's.
const MAIL_EVENTS: [&str; 2] = ["message_accepted", "message_stored"];
/// Event types naming one recipient each (DECNET's `rcpt_denied` too).
const RECIPIENT_EVENTS: [&str; 2] = ["rcpt_to", "rcpt_denied"];
/// Where a recipient event keeps the address: this decoy's field, then DECNET's.
const RECIPIENT_FIELDS: [&str; 2] = ["rcpt_to", "value"];
/// Top-level domains that name no victim (DECNET drops them too).
const PLACEHOLDER_TLDS: [&str; 5] = ["invalid", "test", "localhost", "local", "example"];

/// Log rows of one attacker, newest first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AttackerRowsResponse {
    /// Matching rows, all of them; `data` holds the newest of them (1000 at most; 200 transcripts).
    pub total: u64,
    pub data: Vec<LogEntry>,
}

impl AttackerRowsResponse {
    /// The rows as a reader of `role` may see them.
    pub(super) fn of(role: Role, page: Page<LogRecord>) -> Self {
        let data = page.rows.into_iter().map(|row| redact::for_reader(role, LogEntry::from(row))).collect();
        AttackerRowsResponse { total: page.total, data }
    }
}

/// One victim domain an attacker sent mail to.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SmtpTargetEntry {
    /// Position in this list (1 is the most recently targeted).
    pub id: u64,
    pub attacker_uuid: Uuid,
    /// Lowercased; the local part of the addresses is never shown.
    pub domain: String,
    /// RFC 3339, UTC, milliseconds.
    pub first_seen: String,
    pub last_seen: String,
    /// Recipients at this domain.
    pub count: u64,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SmtpTargetsResponse {
    pub total: u64,
    pub data: Vec<SmtpTargetEntry>,
}

/// The files an attacker dropped (`file_captured` rows), newest first.
#[utoipa::path(
    get,
    path = "/attackers/{uuid}/artifacts",
    tag = "attackers",
    security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The attacker")),
    responses(
        (status = 200, description = "Captured files, newest first", body = AttackerRowsResponse),
        ViewerOnly, NotAUuid, AttackerNotFound,
    )
)]
pub async fn attacker_artifacts(
    State(state): State<AppState>,
    Viewer(session): Viewer,
    ValidPath(uuid): ValidPath<Uuid>,
) -> Result<Json<AttackerRowsResponse>> {
    let profile = state.db.attacker(uuid).await.or_not_found(ATTACKER_NOT_FOUND)?;
    let page = rows_of(&state.db, &profile, &["file_captured"], MAX_ROWS).await?;
    Ok(Json(AttackerRowsResponse::of(session.user.role, page)))
}

/// The messages an attacker sent through the SMTP decoys, newest first. Admins only.
#[utoipa::path(
    get,
    path = "/attackers/{uuid}/mail",
    tag = "attackers",
    security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The attacker")),
    responses(
        (status = 200, description = "Stored messages, newest first", body = AttackerRowsResponse),
        AdminOnly, NotAUuid, AttackerNotFound,
    )
)]
pub async fn attacker_mail(
    State(state): State<AppState>,
    Admin(session): Admin,
    ValidPath(uuid): ValidPath<Uuid>,
) -> Result<Json<AttackerRowsResponse>> {
    let profile = state.db.attacker(uuid).await.or_not_found(ATTACKER_NOT_FOUND)?;
    let page = rows_of(&state.db, &profile, &MAIL_EVENTS, MAX_ROWS).await?;
    Ok(Json(AttackerRowsResponse::of(session.user.role, page)))
}

/// The victim domains an attacker sent mail to, most recently targeted first.
#[utoipa::path(
    get,
    path = "/attackers/{uuid}/smtp-targets",
    tag = "attackers",
    security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The attacker")),
    responses(
        (status = 200, description = "Victim domains, most recent first", body = SmtpTargetsResponse),
        ViewerOnly, NotAUuid, AttackerNotFound,
    )
)]
pub async fn attacker_smtp_targets(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidPath(uuid): ValidPath<Uuid>,
) -> Result<Json<SmtpTargetsResponse>> {
    let profile = state.db.attacker(uuid).await.or_not_found(ATTACKER_NOT_FOUND)?;
    let page = rows_of(&state.db, &profile, &RECIPIENT_EVENTS, MAX_ROWS).await?;
    let data = smtp_targets(uuid, &page.rows);
    Ok(Json(SmtpTargetsResponse { total: data.len() as u64, data }))
}

/// The attacker's rows of these event types, newest first, at most `limit`, with their total.
pub(super) async fn rows_of(
    db: &Db,
    profile: &AttackerProfile,
    event_types: &[&str],
    limit: u32,
) -> Result<Page<LogRecord>> {
    let mut rows = Vec::new();
    let mut total = 0;
    for event_type in event_types {
        let filter = LogFilter {
            terms: vec![
                SearchTerm::Column(LogColumn::AttackerIp, profile.ip.clone()),
                SearchTerm::Column(LogColumn::EventType, (*event_type).to_string()),
            ],
            ..LogFilter::default()
        };
        let page = db.logs(&filter, limit, 0).await?;
        total += page.total;
        rows.extend(page.rows);
    }
    rows.sort_by_key(|row| std::cmp::Reverse((row.timestamp, row.id)));
    rows.truncate(limit as usize);
    Ok(Page { total, rows })
}

/// Recipient rows (newest first) counted per domain, most recently targeted first.
fn smtp_targets(attacker: Uuid, rows: &[LogRecord]) -> Vec<SmtpTargetEntry> {
    let mut domains: HashMap<String, (DateTime<Utc>, DateTime<Utc>, u64)> = HashMap::new();
    for row in rows {
        let Some(domain) = recipient_domain(&row.fields) else { continue };
        let seen = domains.entry(domain).or_insert((row.timestamp, row.timestamp, 0));
        seen.0 = seen.0.min(row.timestamp);
        seen.1 = seen.1.max(row.timestamp);
        seen.2 += 1;
    }
    let mut targets: Vec<_> = domains.into_iter().collect();
    targets.sort_by(|a, b| (b.1.1, &a.0).cmp(&(a.1.1, &b.0)));
    targets
        .into_iter()
        .enumerate()
        .map(|(n, (domain, (first, last, count)))| SmtpTargetEntry {
            id: n as u64 + 1,
            attacker_uuid: attacker,
            domain,
            first_seen: format_utc(first),
            last_seen: format_utc(last),
            count,
        })
        .collect()
}

/// The lowercased domain of a recipient row's address, unless it names no victim.
fn recipient_domain(fields: &str) -> Option<String> {
    let fields: serde_json::Map<String, serde_json::Value> = serde_json::from_str(fields).ok()?;
    let address = RECIPIENT_FIELDS.iter().find_map(|name| fields.get(*name)?.as_str())?;
    let (_, domain) = address.trim().trim_matches(['<', '>']).rsplit_once('@')?;
    let domain = domain.trim().trim_end_matches('.').to_lowercase();
    let tld = domain.rsplit('.').next()?;
    (!domain.is_empty() && !PLACEHOLDER_TLDS.contains(&tld)).then_some(domain)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recipients_name_their_domain_only() {
        assert_eq!(recipient_domain(r#"{"rcpt_to":"<CFO@Acme.COM>"}"#).as_deref(), Some("acme.com"));
        assert_eq!(recipient_domain(r#"{"value":"a@b.org."}"#).as_deref(), Some("b.org"));
        for none in
            [r#"{"rcpt_to":"postmaster"}"#, r#"{"rcpt_to":"x@host.example"}"#, r#"{"rcpt_to":"x@"}"#, "{}", "[]"]
        {
            assert_eq!(recipient_domain(none), None, "{none}");
        }
    }
}
