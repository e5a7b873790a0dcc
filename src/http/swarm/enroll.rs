//! Enrollment's routes (the work is `swarm::enroll`'s): `POST /swarm/enroll-bundle` (admin, 10 per
//! minute per client address) enrolls a host by name and answers the one-line command that
//! installs it; `GET /swarm/enroll-bundle/{token}.sh` (no login, until the `.tgz` is fetched) is
//! that script, and `GET …/{token}.tgz` (no login, once) the bundle itself. Both expire
//! `SVC_SWARM_ENROLL_TTL_S` after the POST (5 minutes). The agent's certificates are issued when
//! the `.tgz` is fetched, for the address that fetched it (which becomes the host's address, so the
//! master's hostname check against it holds), and their fingerprints stored on the host: the
//! private keys exist only in that one answer.

use std::net::{IpAddr, SocketAddr};

use axum::Json;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::http::extract::{FieldError, ValidJson, Validate, is_lowercase_name};
use crate::http::guard::Admin;
use crate::http::responses::{AdminOnly, NotJson};
use crate::http::{ApiError, AppState, Result};
use crate::swarm::bundle;
use crate::swarm::enroll::{self, EnrollError, HostRequest};
use crate::time::format_utc;

pub use crate::swarm::enroll::BUNDLE_NOT_FOUND;
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
    let master_host = body.master_host.clone();
    let request = HostRequest {
        agent_name: body.agent_name,
        master_host: body.master_host,
        with_updater: body.with_updater,
        use_ipvlan: body.use_ipvlan,
        services_ini: body.services_ini,
    };
    let (agent_port, ttl) = (state.config.swarm.agent.port, state.config.api.enroll_ttl);
    let enrolled =
        enroll::enroll(&state.db, request, agent_port, ttl, &admin.user.username).await.map_err(enroll_error)?;
    let script = bundle_url(&master_host, request_port(&headers, &state), &enrolled.token, "sh");
    let answer = EnrollBundleResponse {
        command: format!("curl -fsSL {script} | sudo bash"),
        token: enrolled.token,
        expires_at: format_utc(enrolled.expires_at),
        host_uuid: enrolled.host_uuid,
    };
    Ok((StatusCode::CREATED, Json(answer)))
}

fn enroll_error(err: EnrollError) -> ApiError {
    match err {
        EnrollError::AlreadyEnrolled(_) => ApiError::conflict(err.to_string()),
        EnrollError::BundleNotFound => ApiError::not_found(BUNDLE_NOT_FOUND),
        EnrollError::Store(err) => err.into(),
        EnrollError::Bundle(err) => ApiError::Internal(err),
    }
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
    match extension {
        "sh" => {
            let enrollment = enroll::pending(&state.db, token).await.map_err(enroll_error)?;
            let url = bundle_url(&enrollment.master_host, request_port(&headers, &state), token, "tgz");
            Ok(([(header::CONTENT_TYPE, "text/x-shellscript")], bundle::install_script(&url)).into_response())
        }
        "tgz" => {
            let fetcher = peer.ip().to_canonical();
            let binary = state.config.api.bundle_binary.as_deref();
            let issued =
                enroll::issue_bundle(&state.db, &state.swarm, binary, token, fetcher).await.map_err(enroll_error)?;
            let disposition = format!("attachment; filename=\"svc-agent-{}.tgz\"", issued.host_uuid);
            Ok((
                [(header::CONTENT_TYPE, "application/gzip".to_string()), (header::CONTENT_DISPOSITION, disposition)],
                issued.tgz,
            )
                .into_response())
        }
        _ => Err(not_found()),
    }
}
