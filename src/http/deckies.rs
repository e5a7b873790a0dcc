//! The fleet's routes: `POST /deckies/deploy` (a deployment INI, carried out in the background),
//! `GET /deckies/lifecycle` (polling those deploys), `GET /deckies` (the fleet with each
//! container's state, and with the swarm on the deckies its hosts report, each with its host),
//! `DELETE /deckies/{name}` and `POST /deckies/{name}/mutate` (each carried out where the decky
//! runs, on this host or a swarm host: `swarm::placement` chooses), and `POST`/`DELETE /deckies/files` (a file dropped into or
//! removed from a running decky of this host, `fleet::file_drop`). Shapes are DECNET's; the
//! engine's own words never reach the client.

use axum::extract::{DefaultBodyLimit, RawQuery, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::error::OrNotFound;
use super::extract::{FieldError, Integer, InvalidDetail, ValidJson, ValidPath, Validate, reject};
use super::guard::{Admin, Viewer};
use super::responses::{AdminOnly, ViewerOnly};
use super::{ApiError, AppState, Result};
use crate::db::{DeckyConfig, DeckyLifecycle};
use crate::fleet::FleetError;
use crate::fleet::decky_name::DeckyName;
use crate::fleet::file_drop::{self, DropError, DropPath, MAX_FILE_BYTES, MAX_MODE};
use crate::fleet::ini::{Ini, IniSyntaxError};
use crate::fleet::mutate::{INTERVAL_PATTERN, interval_minutes};
use crate::fleet::plan::is_decky_section;
use crate::swarm::placement::PlacedDecky;

/// How a deploy's 422 reads (DECNET's words), whatever was refused.
pub const INVALID_INI: InvalidDetail = InvalidDetail("Invalid INI config");
/// The largest INI a deploy accepts.
const MAX_INI_BYTES: usize = 512 * 1024;
/// The most records one lifecycle poll may ask for.
const MAX_LIFECYCLE_IDS: usize = 200;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_deckies))
        .merge(OpenApiRouter::new().routes(routes!(deploy)).layer(Extension(INVALID_INI)))
        .routes(routes!(lifecycle))
        .routes(routes!(teardown))
        .routes(routes!(mutate))
        .routes(routes!(mutate_interval))
        .layer(axum::middleware::from_fn(super::extract::require_json))
        // DECNET reads a file drop's body as JSON whatever type it is declared.
        .merge(
            OpenApiRouter::new().routes(routes!(drop_file, remove_file)).layer(DefaultBodyLimit::max(FILES_BODY_LIMIT)),
        )
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeployRequest {
    /// The deployment INI (at most 512 KiB).
    pub ini_content: String,
    /// The INI is the whole fleet: deckies it does not name are removed. Default: add to the fleet.
    #[serde(default)]
    pub replace_fleet: bool,
}

impl Validate for DeployRequest {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        let field = ["body", "ini_content"];
        if self.ini_content.len() > MAX_INI_BYTES {
            errors.push(FieldError::new("string_too_long", &field, "INI content is larger than 512 KiB"));
            return;
        }
        match Ini::parse(&self.ini_content) {
            Err(err) => errors.push(FieldError::ini(&field, &err)),
            Ok(ini) if !ini.sections().any(|(name, _)| is_decky_section(name)) => {
                errors.push(FieldError::ini(&field, &IniSyntaxError::NoSections))
            }
            Ok(_) => {}
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DeployResponse {
    pub message: String,
    /// `unihost`: every decky runs on this host's engine; `swarm`: they went to the swarm's hosts
    /// (`SVC_SWARM_ENABLED` and a usable host), each decky's record carrying its `host_uuid`.
    pub mode: String,
    /// One lifecycle record per decky this deploy (re)creates; poll them at `/deckies/lifecycle`.
    pub lifecycle_ids: Vec<Uuid>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LifecycleResponse {
    /// The records asked for that exist, oldest first; unknown ids are left out.
    pub rows: Vec<DeckyLifecycle>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct LifecycleQuery {
    /// A lifecycle record's id; repeat the parameter for several (1 to 200).
    #[param(required = true, min_items = 1, max_items = 200)]
    pub ids: Vec<Uuid>,
}

/// A decky as DECNET's dashboard reads it, with what the engine says of it now.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeckyEntry {
    #[serde(flatten)]
    pub config: DeckyConfig,
    /// `pending` or `failed` while a deploy has not started it, else the container's state:
    /// `running`, `exited`, `restarting`…, `missing` (gone), `unknown` (engine unreachable).
    pub state: String,
    /// Why its last deploy failed.
    pub last_error: Option<String>,
    /// The swarm host that runs it (its uuid is the config's `host_uuid`); absent for a decky of
    /// this host's own engine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_name: Option<String>,
}

impl From<PlacedDecky> for DeckyEntry {
    fn from(decky: PlacedDecky) -> Self {
        DeckyEntry {
            config: decky.config,
            state: decky.state,
            last_error: decky.last_error,
            host_name: decky.host_name,
        }
    }
}

fn fleet_error(err: FleetError) -> ApiError {
    match err {
        FleetError::Refused(detail) => ApiError::Conflict(detail.into()),
        FleetError::NotFound(detail) => ApiError::NotFound(detail.into()),
        FleetError::Runtime => ApiError::Conflict("Container runtime operation failed".into()),
        FleetError::Store(err) => err.into(),
    }
}

/// Deploys deckies from a deployment INI, in the background.
#[utoipa::path(
    post,
    path = "/deckies/deploy",
    tag = "fleet",
    request_body = DeployRequest,
    security(("bearer" = [])),
    responses(
        (status = 202, description = "Accepted; poll /deckies/lifecycle with the ids", body = DeployResponse),
        (status = 400, description = "Malformed body"),
        (status = 409, description = "Empty or malformed INI, no decky section, a name or address already in use, the deployment limit, or an INI the fleet cannot deploy (the detail says which)"),
        (status = 422, description = "Invalid INI config (e.g. over 512 KiB)"),
        AdminOnly,
    )
)]
pub async fn deploy(
    State(state): State<AppState>,
    _admin: Admin,
    ValidJson(request): ValidJson<DeployRequest>,
) -> Result<(StatusCode, Json<DeployResponse>)> {
    let (accepted, mode) =
        state.placement.deploy(&request.ini_content, request.replace_fleet).await.map_err(fleet_error)?;
    let mode = mode.as_str();
    let message = format!(
        "Deploy accepted ({} decky/ies, mode={mode}). Poll /deckies/lifecycle?ids=... for completion.",
        accepted.lifecycle_ids.len()
    );
    Ok((
        StatusCode::ACCEPTED,
        Json(DeployResponse { message, mode: mode.into(), lifecycle_ids: accepted.lifecycle_ids }),
    ))
}

/// The lifecycle records of deploys, for polling until each is `succeeded` or `failed`.
#[utoipa::path(
    get,
    path = "/deckies/lifecycle",
    tag = "fleet",
    params(LifecycleQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The records that exist", body = LifecycleResponse),
        (status = 400, description = "No ids"),
        (status = 422, description = "More than 200 ids, or one that is not a UUID"),
        ViewerOnly,
    )
)]
pub async fn lifecycle(
    State(state): State<AppState>,
    _viewer: Viewer,
    RawQuery(query): RawQuery,
) -> Result<Json<LifecycleResponse>> {
    let ids = lifecycle_ids(query.as_deref().unwrap_or_default())
        .map_err(|errors| ApiError::Invalid(reject(&errors, InvalidDetail::GENERIC, state.config.api.developer)))?;
    let rows = state.db.lifecycles(&ids).await?;
    Ok(Json(LifecycleResponse { rows }))
}

/// The repeated `ids` parameter: at least one, at most 200, each a UUID.
fn lifecycle_ids(query: &str) -> std::result::Result<Vec<Uuid>, Vec<FieldError>> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query)
        .map_err(|e| vec![FieldError::new("value_error", &["query"], e.to_string())])?;
    let raw: Vec<&str> = pairs.iter().filter(|(k, _)| k == "ids").map(|(_, v)| v.as_str()).collect();
    if raw.is_empty() {
        return Err(vec![FieldError::new("missing", &["query", "ids"], "Field required")]);
    }
    if raw.len() > MAX_LIFECYCLE_IDS {
        return Err(vec![FieldError::new(
            "too_long",
            &["query", "ids"],
            format!("List should have at most {MAX_LIFECYCLE_IDS} items"),
        )]);
    }
    raw.iter()
        .map(|v| {
            Uuid::parse_str(v.trim())
                .map_err(|_| FieldError::new("uuid_parsing", &["query", "ids"], "Input should be a valid UUID"))
        })
        .collect::<std::result::Result<Vec<Uuid>, FieldError>>()
        .map_err(|e| vec![e])
}

/// The fleet, ordered by name, each decky with its container's state.
#[utoipa::path(
    get,
    path = "/deckies",
    tag = "fleet",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Every decky", body = [DeckyEntry]),
        ViewerOnly,
    )
)]
pub async fn list_deckies(State(state): State<AppState>, _viewer: Viewer) -> Result<Json<Vec<DeckyEntry>>> {
    let deckies = state.placement.deckies().await.map_err(fleet_error)?;
    Ok(Json(deckies.into_iter().map(DeckyEntry::from).collect()))
}

/// Removes a decky and its container; a decky of a swarm host is removed there (its agent's answer
/// awaited).
#[utoipa::path(
    delete,
    path = "/deckies/{name}",
    tag = "fleet",
    params(("name" = DeckyName, Path, description = "The decky's name")),
    security(("bearer" = [])),
    responses(
        (status = 204, description = "Removed"),
        (status = 404, description = "No active deployment, or no such decky"),
        (status = 409, description = "The container runtime failed, or the decky's swarm host did not tear it down"),
        (status = 422, description = "The name does not match the pattern"),
        AdminOnly,
    )
)]
pub async fn teardown(
    State(state): State<AppState>,
    _admin: Admin,
    ValidPath(DeckyName(name)): ValidPath<DeckyName>,
) -> Result<StatusCode> {
    state.placement.teardown(&name).await.map_err(fleet_error)?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MutateResponse {
    /// The mutation's lifecycle record; poll it at `/deckies/lifecycle`.
    pub lifecycle_ids: Vec<Uuid>,
}

/// Gives a decky a new set of services now (trigger `operator`), in the background; a decky of a
/// swarm host is mutated by its agent, its record carrying the host.
#[utoipa::path(
    post,
    path = "/deckies/{name}/mutate",
    tag = "fleet",
    params(("name" = DeckyName, Path, description = "The decky's name")),
    security(("bearer" = [])),
    responses(
        (status = 202, description = "Accepted; poll /deckies/lifecycle with the id", body = MutateResponse),
        (status = 404, description = "No active deployment, no such decky, or no services to mutate it to"),
        (status = 409, description = "Another mutation of the decky got there first, or its swarm host did not take the mutation"),
        (status = 422, description = "The name does not match the pattern"),
        AdminOnly,
    )
)]
pub async fn mutate(
    State(state): State<AppState>,
    _admin: Admin,
    ValidPath(DeckyName(name)): ValidPath<DeckyName>,
) -> Result<(StatusCode, Json<MutateResponse>)> {
    let id = state.placement.mutate(&name).await.map_err(fleet_error)?;
    Ok((StatusCode::ACCEPTED, Json(MutateResponse { lifecycle_ids: vec![id] })))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MutateIntervalRequest {
    /// `<n>m`, `<n>d`, `<n>M` (30 days) or `<n>y` (as many digits as keep it under 8,000 years);
    /// `null` clears it.
    #[schema(pattern = "^([1-9][0-9]{0,8}m|[1-9][0-9]{0,5}d|[1-9][0-9]{0,3}M|[1-9][0-9]{0,2}[yY])$")]
    pub mutate_interval: Option<String>,
}

impl Validate for MutateIntervalRequest {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        if let Some(text) = &self.mutate_interval
            && interval_minutes(text).is_none()
        {
            errors.push(FieldError::new(
                "string_pattern_mismatch",
                &["body", "mutate_interval"],
                format!("String should match pattern '{INTERVAL_PATTERN}'"),
            ));
        }
    }
}

/// Sets or clears how often a decky is mutated on schedule.
#[utoipa::path(
    put,
    path = "/deckies/{name}/mutate-interval",
    tag = "fleet",
    params(("name" = DeckyName, Path, description = "The decky's name")),
    request_body = MutateIntervalRequest,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Updated", body = super::Message),
        (status = 400, description = "Malformed body"),
        (status = 404, description = "No active deployment, or no such decky"),
        (status = 422, description = "Not an interval, or the name does not match the pattern"),
        AdminOnly,
    )
)]
pub async fn mutate_interval(
    State(state): State<AppState>,
    _admin: Admin,
    ValidPath(DeckyName(name)): ValidPath<DeckyName>,
    ValidJson(request): ValidJson<MutateIntervalRequest>,
) -> Result<Json<super::Message>> {
    let minutes = request.mutate_interval.as_deref().and_then(interval_minutes);
    state.fleet.set_mutate_interval(&name, minutes).await.map_err(fleet_error)?;
    Ok(Json(super::Message::new("Mutation interval updated")))
}

/// The longest `content_b64`: the base64 of [`MAX_FILE_BYTES`].
const MAX_CONTENT_B64: usize = MAX_FILE_BYTES.div_ceil(3) * 4;
/// The body limit of `/deckies/files`: a file's base64 and the rest of the body.
const FILES_BODY_LIMIT: usize = MAX_CONTENT_B64 + 64 * 1024;
/// The most `mtime_offset` may move a file's time, either way: a hundred years.
const MAX_MTIME_OFFSET: i64 = 100 * 365 * 86_400;
/// What a client is told when the engine fails or refuses a drop (its words go to the log).
const DROP_FAILED: &str = "File operation on the decky failed";

fn default_mode() -> Integer {
    Integer(0o644)
}

/// A file to write into a running decky.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FileDropRequest {
    /// The decky's name.
    #[schema(min_length = 1)]
    pub decky_name: String,
    /// The topology the decky belongs to; `null` or absent for the fleet's.
    #[serde(default)]
    pub topology_id: Option<String>,
    /// Where the file goes: absolute, no `..` segment, no control character, a file's name, under
    /// `/home`, `/root`, `/opt`, `/srv` or `/var/www` (the rest of a decky is read-only).
    #[schema(pattern = "^/", max_length = 4096)]
    pub path: String,
    /// The file's content, base64 (at most 1 MiB decoded).
    #[schema(max_length = 1398104)]
    pub content_b64: String,
    /// Its permission bits, 0 to 511 (0o777; default 420, 0o644).
    #[serde(default = "default_mode")]
    #[schema(value_type = i64, minimum = 0, maximum = 511, default = 420)]
    pub mode: Integer,
    /// Seconds added to now for its modification time (negative: in the past), within 100 years.
    #[serde(default)]
    #[schema(value_type = i64, minimum = -3153600000i64, maximum = 3153600000i64, default = 0)]
    pub mtime_offset: Option<Integer>,
}

impl Validate for FileDropRequest {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        check_decky_name(&self.decky_name, errors);
        if self.content_b64.len() > MAX_CONTENT_B64 {
            errors.push(FieldError::new(
                "string_too_long",
                &["body", "content_b64"],
                format!("String should have at most {MAX_CONTENT_B64} characters"),
            ));
        }
        if !(0..=MAX_MODE).contains(&self.mode.0) {
            errors.push(FieldError::new("less_than_equal", &["body", "mode"], "Input should be 0 to 511"));
        }
        if self.mtime_offset.is_some_and(|o| !(-MAX_MTIME_OFFSET..=MAX_MTIME_OFFSET).contains(&o.0)) {
            errors.push(FieldError::new(
                "less_than_equal",
                &["body", "mtime_offset"],
                format!("Input should be within ±{MAX_MTIME_OFFSET}"),
            ));
        }
    }
}

/// A file to remove from a running decky.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FileRemoveRequest {
    /// The decky's name.
    #[schema(min_length = 1)]
    pub decky_name: String,
    /// The topology the decky belongs to; `null` or absent for the fleet's.
    #[serde(default)]
    pub topology_id: Option<String>,
    /// The file: the same rules as a drop's path.
    #[schema(pattern = "^/", max_length = 4096)]
    pub path: String,
}

impl Validate for FileRemoveRequest {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        check_decky_name(&self.decky_name, errors);
    }
}

fn check_decky_name(name: &str, errors: &mut Vec<FieldError>) {
    if name.is_empty() {
        errors.push(FieldError::new(
            "string_too_short",
            &["body", "decky_name"],
            "String should have at least 1 character",
        ));
    }
}

/// The running container of the decky a drop names, and the path checked: 404 for a topology
/// that does not exist, 422 for a path refused or a decky this host does not run, 409 for one not
/// running.
async fn drop_target(state: &AppState, name: &str, topology: Option<&str>, path: &str) -> Result<(String, DropPath)> {
    let path = DropPath::parse(path).map_err(|e| ApiError::Unprocessable(e.to_string().into()))?;
    let topology = match topology {
        None => None,
        Some(id) => {
            let id = Uuid::parse_str(id).map_err(|_| ApiError::NotFound("Topology not found".into()))?;
            state.db.topology(id).await.or_not_found("Topology not found")?;
            Some(id)
        }
    };
    let container = state.fleet.decky_container(topology, name).await.map_err(fleet_error)?;
    let container = container.ok_or_else(|| ApiError::Unprocessable(format!("Decky '{name}' not found").into()))?;
    if !container.is_running() {
        return Err(ApiError::Conflict(DROP_FAILED.into()));
    }
    Ok((container.id, path))
}

fn drop_error(err: DropError) -> ApiError {
    match err {
        DropError::Refused => ApiError::Unprocessable("path is under a symlink or names a directory".into()),
        DropError::Runtime => ApiError::Conflict(DROP_FAILED.into()),
    }
}

/// Writes a file into a running decky of this host (the fleet's, or a topology's), owned by the
/// decky's user, through the engine's archive API. Files go under `/home`, `/root`, `/opt`,
/// `/srv` or `/var/www`, in-memory directories of the decky: a restart of its container loses
/// them.
#[utoipa::path(
    post,
    path = "/deckies/files",
    tag = "fleet",
    request_body = FileDropRequest,
    security(("bearer" = [])),
    responses(
        (status = 201, description = "Written", body = super::Message),
        (status = 400, description = "Malformed body, or content_b64 is not valid base64"),
        (status = 404, description = "Topology not found"),
        (status = 409, description = "The decky's container is not running, or the engine refused the write"),
        (status = 413, description = "Body over the limit (the file over 1 MiB)"),
        (status = 422, description = "Path invalid, outside the drop directories or under a symlink; no such decky on this host; mode, mtime_offset or the file's size out of range"),
        AdminOnly,
    )
)]
pub async fn drop_file(
    State(state): State<AppState>,
    _admin: Admin,
    ValidJson(request): ValidJson<FileDropRequest>,
) -> Result<(StatusCode, Json<super::Message>)> {
    use base64::Engine as _;
    let content = base64::engine::general_purpose::STANDARD
        .decode(request.content_b64.as_bytes())
        .map_err(|_| ApiError::BadRequest("content_b64 is not valid base64".into()))?;
    if content.len() > MAX_FILE_BYTES {
        return Err(ApiError::Unprocessable("The file is larger than 1 MiB".into()));
    }
    let (container, path) =
        drop_target(&state, &request.decky_name, request.topology_id.as_deref(), &request.path).await?;
    let offset = request.mtime_offset.map_or(0, |o| o.0);
    let mtime = u64::try_from(chrono::Utc::now().timestamp().saturating_add(offset)).unwrap_or(0);
    let mode = u32::try_from(request.mode.0).unwrap_or(0o644);
    file_drop::put(state.fleet.runtime(), &container, &path, &content, mode, mtime).await.map_err(drop_error)?;
    Ok((StatusCode::CREATED, Json(super::Message::new("ok"))))
}

/// Removes a file from a running decky of this host; a path with nothing there is already
/// removed, a symlink there is removed itself.
#[utoipa::path(
    delete,
    path = "/deckies/files",
    tag = "fleet",
    request_body = FileRemoveRequest,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Removed", body = super::Message),
        (status = 400, description = "Malformed body"),
        (status = 404, description = "Topology not found"),
        (status = 409, description = "The decky's container is not running, or the engine refused the removal"),
        (status = 422, description = "Path invalid, outside the drop directories or under a symlink; no such decky on this host"),
        AdminOnly,
    )
)]
pub async fn remove_file(
    State(state): State<AppState>,
    _admin: Admin,
    ValidJson(request): ValidJson<FileRemoveRequest>,
) -> Result<Json<super::Message>> {
    let (container, path) =
        drop_target(&state, &request.decky_name, request.topology_id.as_deref(), &request.path).await?;
    file_drop::remove(state.fleet.runtime(), &container, &path).await.map_err(drop_error)?;
    Ok(Json(super::Message::new("ok")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifecycle_ids_are_one_to_two_hundred_uuids() {
        let id = Uuid::new_v4();
        assert_eq!(lifecycle_ids(&format!("ids={id}&ids={id}")).unwrap(), [id, id]);
        assert!(lifecycle_ids("").is_err());
        assert_eq!(lifecycle_ids("other=1").unwrap_err()[0].kind, "missing");
        assert_eq!(lifecycle_ids("ids=nope").unwrap_err()[0].kind, "uuid_parsing");
        let many = (0..201).map(|_| format!("ids={id}")).collect::<Vec<_>>().join("&");
        assert_eq!(lifecycle_ids(&many).unwrap_err()[0].kind, "too_long");
    }
}
