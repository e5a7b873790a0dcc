//! Enrollment: `POST /swarm/enroll-bundle` (admin, 10 per minute per client address) enrolls a host
//! by name and answers the one-line command that installs it; `GET
//! /swarm/enroll-bundle/{token}.sh` (no login, until the `.tgz` is fetched) is that script, and
//! `GET …/{token}.tgz` (no login, once) the bundle itself. Both expire `SVC_SWARM_ENROLL_TTL_S`
//! after the POST (5 minutes). The agent's certificates are issued when the `.tgz` is fetched, for
//! the address that fetched it (which becomes the host's address, so the master's hostname check
//! against it holds), and their fingerprints stored on the host: the private keys exist only in
//! that one answer. Only the token's hash is stored; the token and the keys are never logged.

use std::net::{IpAddr, SocketAddr};

use axum::Json;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use chrono::Utc;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::auth::ticket::{new_ticket, ticket_hash};
use crate::db::{DbError, Enrollment, HostStatus, SwarmHost};
use crate::http::extract::{FieldError, ValidJson, Validate, is_lowercase_name};
use crate::http::guard::Admin;
use crate::http::responses::{AdminOnly, NotJson};
use crate::http::{ApiError, AppState, Result};
use crate::swarm::bundle::{self, BundleSpec};
use crate::swarm::pki::{self, Ca};
use crate::time::format_utc;

/// 404 of a bundle whose token is unknown, spent or expired.
pub const BUNDLE_NOT_FOUND: &str = "bundle not found or expired";
const MAX_SERVICES_INI: usize = 512 * 1024;

pub fn router() -> OpenApiRouter<AppState> {
    // The bundle's own routes take no login and, as DECNET's, stay out of the document.
    OpenApiRouter::new().routes(routes!(create_bundle)).route("/swarm/enroll-bundle/{file}", get(fetch_bundle_file))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct EnrollRequest {
    /// The master as the new host will reach it: a host name or an address.
    #[schema(min_length = 1, max_length = 253, pattern = r"^[A-Za-z0-9\[][A-Za-z0-9.:\[\]-]*$")]
    pub master_host: String,
    #[schema(pattern = "^[a-z0-9][a-z0-9-]{0,62}$")]
    pub agent_name: String,
    /// Also issue an updater certificate (`updater@<agent_name>`).
    #[serde(default = "yes")]
    pub with_updater: bool,
    #[serde(default)]
    pub use_ipvlan: bool,
    /// A services INI the host keeps as `etc/svc/services.ini`.
    #[serde(default)]
    pub services_ini: Option<String>,
}

fn yes() -> bool {
    true
}

/// A host name or an address, bracketed or not: nothing a shell or a URL would read otherwise.
fn is_master_host(host: &str) -> bool {
    host.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '[')
        && host.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'))
}

impl Validate for EnrollRequest {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        let chars = self.master_host.chars().count();
        if chars == 0 {
            errors.push(FieldError::new(
                "string_too_short",
                &["body", "master_host"],
                "String should have at least 1 character",
            ));
        } else if chars > 253 {
            errors.push(FieldError::new(
                "string_too_long",
                &["body", "master_host"],
                "String should have at most 253 characters",
            ));
        } else if !is_master_host(&self.master_host) {
            errors.push(FieldError::new(
                "string_pattern_mismatch",
                &["body", "master_host"],
                "String should be a host name or an IP address",
            ));
        }
        if !is_lowercase_name(&self.agent_name) {
            errors.push(FieldError::new(
                "string_pattern_mismatch",
                &["body", "agent_name"],
                "String should match pattern '^[a-z0-9][a-z0-9-]{0,62}$'",
            ));
        }
        if self.services_ini.as_ref().is_some_and(|ini| ini.len() > MAX_SERVICES_INI) {
            errors.push(FieldError::new(
                "string_too_long",
                &["body", "services_ini"],
                "String should have at most 524288 bytes",
            ));
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EnrollBundleResponse {
    /// The bundle's token: shown this once.
    pub token: String,
    /// What to run, as root, on the new host.
    pub command: String,
    pub expires_at: String,
    pub host_uuid: Uuid,
}

/// `host` as a URL's authority wants it: an IPv6 address in brackets.
fn url_host(host: &str) -> String {
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V6(v6)) => format!("[{v6}]"),
        _ => host.to_string(),
    }
}

/// The port the client reached this API on (the `Host` header's), else the one it listens on.
fn request_port(headers: &HeaderMap, state: &AppState) -> u16 {
    headers
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .and_then(|host| host.rsplit_once(':'))
        .and_then(|(_, port)| port.parse().ok())
        .unwrap_or(state.config.api.port)
}

/// The URL of one of a bundle's files, on the master as the host will reach it.
fn bundle_url(master_host: &str, port: u16, token: &str, extension: &str) -> String {
    format!("http://{}:{port}/api/v1/swarm/enroll-bundle/{token}.{extension}", url_host(master_host))
}

/// Enrolls a host: its record (`enrolled`, no address yet) and a bundle to fetch within
/// `SVC_SWARM_ENROLL_TTL_S`. The answer's `command` installs it.
#[utoipa::path(
    post, path = "/swarm/enroll-bundle", tag = "swarm", security(("bearer" = [])),
    request_body = EnrollRequest,
    responses(
        (status = 201, description = "Enrolled; the token is in this answer only", body = EnrollBundleResponse),
        (status = 400, description = "A structurally invalid body"),
        (status = 409, description = "Worker '<name>' is already enrolled"),
        (status = 422, description = "An agent name or master host the rules refuse"),
        (status = 429, description = "Over 10 enrollments a minute from this address; see Retry-After"),
        AdminOnly, NotJson,
    )
)]
pub async fn create_bundle(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Admin(admin): Admin,
    ValidJson(body): ValidJson<EnrollRequest>,
) -> Result<(StatusCode, Json<EnrollBundleResponse>)> {
    state.limits.enroll_bundle(peer.ip()).await?;
    let now = Utc::now();
    let expires_at = now + state.config.api.enroll_ttl;
    let host = SwarmHost {
        uuid: Uuid::new_v4(),
        name: body.agent_name.clone(),
        address: String::new(),
        agent_port: state.config.swarm.agent.port,
        status: HostStatus::Enrolled,
        last_heartbeat: None,
        client_cert_fingerprint: None,
        updater_cert_fingerprint: None,
        enrolled_at: now,
        notes: Some("enrolled via UI bundle".into()),
        use_ipvlan: body.use_ipvlan,
    };
    let token = new_ticket();
    let enrollment = Enrollment {
        token_hash: ticket_hash(&token),
        host_uuid: host.uuid,
        master_host: body.master_host.clone(),
        with_updater: body.with_updater,
        services_ini: body.services_ini,
        created_at: now,
        expires_at,
    };
    state.db.enroll_swarm_host(&host, &enrollment).await.map_err(|err| match err {
        DbError::Conflict => ApiError::conflict(format!("Worker '{}' is already enrolled", host.name)),
        other => other.into(),
    })?;
    tracing::info!(host = %host.name, uuid = %host.uuid, by = %admin.user.username, "Swarm host enrolled");
    let script = bundle_url(&body.master_host, request_port(&headers, &state), &token, "sh");
    let answer = EnrollBundleResponse {
        command: format!("curl -fsSL {script} | sudo bash"),
        token,
        expires_at: format_utc(expires_at),
        host_uuid: host.uuid,
    };
    Ok((StatusCode::CREATED, Json(answer)))
}

/// `{token}.sh` or `{token}.tgz`; anything else, an unknown, spent or expired token: 404.
async fn fetch_bundle_file(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(file): Path<String>,
) -> Result<Response> {
    let not_found = || ApiError::not_found(BUNDLE_NOT_FOUND);
    let (token, extension) = file.rsplit_once('.').ok_or_else(not_found)?;
    if token.len() != 64 || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(not_found());
    }
    let hash = ticket_hash(token);
    let found = |err: DbError| match err {
        DbError::NotFound => not_found(),
        other => other.into(),
    };
    match extension {
        "sh" => {
            let enrollment = state.db.enrollment(&hash, Utc::now()).await.map_err(found)?;
            let url = bundle_url(&enrollment.master_host, request_port(&headers, &state), token, "tgz");
            Ok(([(header::CONTENT_TYPE, "text/x-shellscript")], bundle::install_script(&url)).into_response())
        }
        "tgz" => {
            let enrollment = state.db.claim_enrollment(&hash, Utc::now()).await.map_err(found)?;
            let tgz = issue_bundle(&state, &enrollment, peer.ip().to_canonical()).await?;
            let disposition = format!("attachment; filename=\"svc-agent-{}.tgz\"", enrollment.host_uuid);
            Ok((
                [(header::CONTENT_TYPE, "application/gzip".to_string()), (header::CONTENT_DISPOSITION, disposition)],
                tgz,
            )
                .into_response())
        }
        _ => Err(not_found()),
    }
}

/// The host's address becomes `fetcher`; its certificates are issued for it and their
/// fingerprints stored; the bundle is built around them.
async fn issue_bundle(state: &AppState, enrollment: &Enrollment, fetcher: IpAddr) -> Result<Vec<u8>> {
    let host = state.db.swarm_host(enrollment.host_uuid).await.map_err(|err| match err {
        DbError::NotFound => ApiError::not_found(BUNDLE_NOT_FOUND),
        other => other.into(),
    })?;
    let address = fetcher.to_string();
    state.db.set_swarm_host_address(host.uuid, &address).await?;
    let ca_dir = state.config.swarm.ca_dir();
    let binary = super::shipped_binary(state)?;
    let (name, with_updater) = (host.name.clone(), enrollment.with_updater);
    let (master_host, services_ini) = (enrollment.master_host.clone(), enrollment.services_ini.clone());
    let (swarm_port, agent_port) = (state.config.swarm.listen_port, host.agent_port);
    let syslog_port = state.config.swarm.syslog_port;
    let host_uuid = host.uuid;
    let built = tokio::task::spawn_blocking(move || -> anyhow::Result<(Vec<u8>, String, Option<String>)> {
        let ca = Ca::load_or_create(&ca_dir)?;
        let agent = ca.issue(&pki::agent_cn(&name), std::slice::from_ref(&address))?;
        let updater = if with_updater {
            Some(ca.issue(&pki::updater_cn(&name), &[address.clone(), "127.0.0.1".to_string()])?)
        } else {
            None
        };
        let spec = BundleSpec {
            host_uuid,
            agent_name: &name,
            master_host: &master_host,
            swarm_port,
            syslog_port,
            agent_port,
            ca_cert_pem: ca.cert_pem(),
            agent: &agent,
            updater: updater.as_ref(),
            services_ini: services_ini.as_deref(),
            svc_binary: &binary,
        };
        let tgz = bundle::build(&spec)?;
        Ok((tgz, agent.fingerprint, updater.map(|leaf| leaf.fingerprint)))
    })
    .await
    .map_err(|err| anyhow::anyhow!("bundle build task: {err}"))?;
    let (tgz, agent_fingerprint, updater_fingerprint) = built?;
    state.db.set_swarm_host_fingerprints(host.uuid, &agent_fingerprint, updater_fingerprint.as_deref()).await?;
    tracing::info!(host = %host.name, uuid = %host.uuid, address = %fetcher, bytes = tgz.len(), "Enrollment bundle served");
    Ok(tgz)
}
