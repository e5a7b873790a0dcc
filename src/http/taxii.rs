//! A read-only TAXII 2.1 server over svc's STIX objects, beside the API on its port: discovery at
//! `/taxii2/`, one API root (`/taxii2/svc/`), one collection of every attacker's objects
//! ([`COLLECTION`]), and its objects with `added_after`, `limit` and `next` (TAXII 2.1 §3.4, §5.3), so
//! an intel platform (OpenCTI, MISP) pulls what is new on a schedule. An attacker's objects are
//! "added" when its profile last changed, so a poll with `added_after` gets the attackers seen since,
//! with their objects' new versions. Callers are the API's viewers: a bearer token, as every route
//! takes, or HTTP Basic with the svc username and password (what TAXII clients send), verified as a
//! login is (argon2, the login rate limits), then remembered for [`BASIC_REUSE`] while the password
//! is unchanged so a client paging through the collection is not rate-limited.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::{ConnectInfo, FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine;
use chrono::DateTime;
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::extract::{FieldError, ValidQuery, Validate, check_datetime, check_range, given};
use super::guard::Viewer;
use super::{ApiError, AppState, Result};
use crate::db::{AttackerWindow, ChangePosition, DbError, Role, User};
use crate::export::record::fleet_records;
use crate::export::stix;
use crate::recent::RecentByKey;
use crate::time::{format_utc, parse_utc};

pub const MEDIA_TYPE: &str = "application/taxii+json;version=2.1";
const STIX_MEDIA_TYPE: &str = "application/stix+json;version=2.1";
/// The one collection: every attacker's STIX objects.
pub const COLLECTION: Uuid = Uuid::from_u128(0x5f0c_2d6e_8a41_4e07_9b3c_7d1a_e2f4_6b90);
const API_ROOT: &str = "/taxii2/svc/";
const DEFAULT_LIMIT: i64 = 100;
const MAX_LIMIT: i64 = 1000;
/// How long a verified Basic login is reused while the user's password hash stays the same.
pub const BASIC_REUSE: Duration = Duration::from_secs(60);
const MAX_REMEMBERED_LOGINS: usize = 1000;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/taxii2/", get(discovery))
        .route(API_ROOT, get(api_root))
        .route("/taxii2/svc/collections/", get(collections))
        .route("/taxii2/svc/collections/{id}/", get(collection))
        .route("/taxii2/svc/collections/{id}/objects/", get(objects))
}

/// Verified Basic logins: a digest of the username and password → the user's password hash then.
pub struct BasicLogins(RecentByKey<[u8; 32], String>);

impl Default for BasicLogins {
    fn default() -> Self {
        BasicLogins(RecentByKey::new(BASIC_REUSE, MAX_REMEMBERED_LOGINS))
    }
}

/// A TAXII caller: a viewer by bearer token or by HTTP Basic.
pub struct Reader;

impl FromRequestParts<AppState> for Reader {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> std::result::Result<Self, Response> {
        let basic = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("basic"))
            .map(|(_, credentials)| credentials.trim().to_string());
        let admitted = match basic {
            Some(credentials) => basic_login(parts, state, &credentials).await,
            None => Viewer::from_request_parts(parts, state).await.map(|_| ()),
        };
        admitted.map(|()| Reader).map_err(challenge)
    }
}

/// The API's answer, with HTTP Basic offered beside Bearer on a 401.
fn challenge(err: ApiError) -> Response {
    let mut response = err.into_response();
    if response.status() == axum::http::StatusCode::UNAUTHORIZED {
        response.headers_mut().append(header::WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"svc\""));
    }
    response
}

async fn basic_login(parts: &Parts, state: &AppState, credentials: &str) -> std::result::Result<(), ApiError> {
    let rejected = || ApiError::Unauthenticated(super::error::INVALID_CREDENTIALS);
    let decoded = base64::engine::general_purpose::STANDARD.decode(credentials).map_err(|_| rejected())?;
    let decoded = String::from_utf8(decoded).map_err(|_| rejected())?;
    let (username, password) = decoded.split_once(':').ok_or_else(rejected)?;
    if password.len() > crate::auth::password::MAX_BYTES {
        return Err(rejected());
    }
    let key: [u8; 32] = Sha256::new().chain_update(username).chain_update([0]).chain_update(password).finalize().into();
    let user = match state.db.user_by_name(username).await {
        Ok(user) => Some(user),
        Err(DbError::NotFound) => None,
        Err(err) => return Err(err.into()),
    };
    let remembered = user.as_ref().is_some_and(|u| state.basic_logins.0.get(&key).as_deref() == Some(&u.password_hash));
    if !remembered {
        let client = parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
        if let Some(client) = client {
            state.limits.login(client, username).await?;
        }
        let hash = user.as_ref().map(|u| u.password_hash.clone());
        if !state.passwords.verify(password.to_string(), hash).await? {
            tracing::info!(client = ?client, "TAXII Basic login failed");
            return Err(rejected());
        }
    }
    let user: User = user.ok_or_else(rejected)?;
    if user.must_change_password {
        return Err(ApiError::forbidden(super::guard::PASSWORD_CHANGE_REQUIRED));
    }
    // Both roles read; the role check is here so a third role would not slip through.
    if !matches!(user.role, Role::Viewer | Role::Admin) {
        return Err(ApiError::forbidden(super::guard::INSUFFICIENT_PERMISSIONS));
    }
    state.basic_logins.0.insert(key, user.password_hash);
    Ok(())
}

fn taxii(body: Value, extra: HeaderMap) -> Response {
    let mut response = axum::Json(body).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(MEDIA_TYPE));
    response.headers_mut().extend(extra);
    response
}

async fn discovery(_reader: Reader) -> Response {
    taxii(
        json!({
            "title": "svc TAXII 2.1",
            "description": "STIX 2.1 objects of the attackers the svc honeypot fleet observed",
            "default": API_ROOT,
            "api_roots": [API_ROOT],
        }),
        HeaderMap::new(),
    )
}

async fn api_root(_reader: Reader) -> Response {
    taxii(
        json!({
            "title": "svc",
            "description": "The honeypot fleet's threat intelligence",
            "versions": [MEDIA_TYPE],
            "max_content_length": 10_485_760,
        }),
        HeaderMap::new(),
    )
}

fn collection_resource() -> Value {
    json!({
        "id": COLLECTION,
        "title": "Attackers",
        "description": "Every attacker's STIX 2.1 objects, added when its profile last changed",
        "can_read": true,
        "can_write": false,
        "media_types": [STIX_MEDIA_TYPE],
    })
}

async fn collections(_reader: Reader) -> Response {
    taxii(json!({"collections": [collection_resource()]}), HeaderMap::new())
}

fn known(id: &str) -> Result<()> {
    if id.parse::<Uuid>().ok() == Some(COLLECTION) { Ok(()) } else { Err(ApiError::not_found("Collection not found")) }
}

async fn collection(_reader: Reader, Path(id): Path<String>) -> Result<Response> {
    known(&id)?;
    Ok(taxii(collection_resource(), HeaderMap::new()))
}

#[derive(Debug, Deserialize)]
pub struct ObjectsQuery {
    pub added_after: Option<String>,
    pub limit: Option<i64>,
    pub next: Option<String>,
}

impl Validate for ObjectsQuery {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        check_datetime("added_after", self.added_after.as_deref(), errors);
        if let Some(limit) = self.limit {
            check_range("limit", limit, 1, MAX_LIMIT, errors);
        }
        if given(&self.next).is_some_and(|next| position(next).is_none()) {
            errors.push(FieldError::new("value_error", &["query", "next"], "not a `next` this server gave"));
        }
    }
}

/// `next`: the last attacker of the page, `<updated_at ms>_<uuid>`.
fn position(next: &str) -> Option<ChangePosition> {
    let (millis, uuid) = next.split_once('_')?;
    let updated_at = DateTime::from_timestamp_millis(millis.parse().ok()?)?;
    Some(ChangePosition { updated_at, uuid: uuid.parse().ok()? })
}

/// A page of the collection's objects, in the order the attackers changed: whole attackers, as
/// many as fit in `limit` objects (at least one, so a page always moves on).
async fn objects(
    State(state): State<AppState>,
    _reader: Reader,
    Path(id): Path<String>,
    ValidQuery(query): ValidQuery<ObjectsQuery>,
) -> Result<Response> {
    known(&id)?;
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT) as usize;
    let window = AttackerWindow {
        changed_after: given(&query.added_after).and_then(|t| parse_utc(t).ok()),
        ..AttackerWindow::default()
    };
    let after = given(&query.next).and_then(position);
    // An attacker has at least four objects (address, observation, actor, sighting): no more fit.
    let profiles = state.db.attackers_changed(&window, after, (limit / 4 + 2) as u32).await?;
    let read = profiles.len();
    let records = fleet_records(&state.db, profiles).await?;
    let mut objects = Vec::new();
    let mut patterns = std::collections::BTreeSet::new();
    let mut included = Vec::new();
    for record in &records {
        let mut own = stix::attacker_objects(record);
        own.extend(
            record.techniques().into_iter().filter(|t| !patterns.contains(t.id)).map(|t| stix::attack_pattern(&t)),
        );
        if !included.is_empty() && objects.len() + own.len() > limit {
            break;
        }
        patterns.extend(record.techniques().into_iter().map(|t| t.id));
        objects.extend(own);
        included.push(record);
    }
    let more = included.len() < read;
    let mut headers = HeaderMap::new();
    let mut body = json!({"more": more});
    if let (Some(first), Some(last)) = (included.first(), included.last()) {
        let mut all = stix::preamble();
        all.extend(objects);
        body["objects"] = Value::Array(all);
        for (name, record) in [("x-taxii-date-added-first", first), ("x-taxii-date-added-last", last)] {
            if let Ok(value) = HeaderValue::from_str(&format_utc(record.profile.updated_at)) {
                headers.insert(name, value);
            }
        }
        if more {
            body["next"] = json!(format!("{}_{}", last.profile.updated_at.timestamp_millis(), last.profile.uuid));
        }
    }
    Ok(taxii(body, headers))
}
