//! `/realism/*`: DECNET's Realism pages. `config` (the planner's class weights and canary
//! probability) and `llm` (the LLM provider) are read by viewers and changed by admins, a change
//! naming only what it replaces; `personas` is the global persona pool the fleet's deckies write
//! as, replaced whole by an admin as DECNET's Persona Generation page does; `synthetic-files` lists
//! the files those personas are shown to have written on each decky (`realism::files`). Refusals
//! are 400 with DECNET's texts, as its pages show them. The LLM provider's API key is write-only:
//! sealed at rest, answered only as `api_key_set`.

use axum::Json;
use axum::extract::State;
use chrono::Utc;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::extract::{FieldError, ValidJson, ValidPath, ValidQuery, Validate, check_max_chars, given, present};
use super::guard::{Admin, Viewer};
use super::paging::{Listed, Page, Paging};
use super::responses::{AdminOnly, NotJson, ViewerOnly};
use super::topologies::{ALL_INVALID, PersonasBody};
use super::{ApiError, AppState, Result};
use crate::db::RealismSetting;
use crate::realism::files::{self, BODY_LIMIT, FileFilter, SyntheticFile};
use crate::realism::llm::{self, LlmSettings};
use crate::realism::weights::{ClassWeight, ContentClass, RealismWeights};
use crate::realism::{self, LANGUAGE_DEFAULT, PERSONAS_LOCATION};
use crate::secret::Secret;
use crate::time::format_utc;
use crate::topology::personas::{self, Persona};

/// The most files a page of synthetic files holds (DECNET's).
const MAX_FILES_LIMIT: i64 = 500;
const FILE_NOT_FOUND: &str = "synthetic file not found";

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_config, put_config))
        .routes(routes!(get_personas, put_personas))
        .routes(routes!(list_synthetic_files))
        .routes(routes!(get_synthetic_file))
        .routes(routes!(get_llm, put_llm))
}

/// The stored setting under `key`, if any.
async fn setting(state: &AppState, key: &str) -> Result<Option<RealismSetting>> {
    Ok(state.db.realism_setting(key).await?)
}

async fn weights(state: &AppState) -> Result<RealismWeights> {
    Ok(setting(state, realism::WEIGHTS).await?.map(|s| RealismWeights::stored(&s.value)).unwrap_or_default())
}

fn json_text<T: Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|err| ApiError::Internal(err.into()))
}

// ---- config ----

/// A change of the planner's weights: each field given replaces its list (or the probability);
/// what is absent stays. A class that belongs to another list is dropped and reported.
#[derive(Debug, Deserialize, ToSchema)]
pub struct WeightsChange {
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Vec<ClassWeight>>)]
    user_class_weights: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Vec<ClassWeight>>)]
    system_class_weights: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Vec<ClassWeight>>)]
    canary_class_weights: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<f64>, minimum = 0.0, maximum = 1.0)]
    canary_probability: Option<Value>,
}

impl Validate for WeightsChange {}

/// The weights as changed, and the classes dropped from the lists they did not belong to.
#[derive(Debug, Serialize, ToSchema)]
pub struct WeightsChanged {
    #[serde(flatten)]
    weights: RealismWeights,
    /// Present when a class was given in a list it does not belong to (and so not kept).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    dropped_entries: Vec<ContentClass>,
}

/// The planner's weights: DECNET's defaults until an admin changes them.
#[utoipa::path(
    get, path = "/realism/config", tag = "realism", security(("bearer" = [])),
    responses((status = 200, description = "The weights", body = RealismWeights), ViewerOnly)
)]
pub async fn get_config(State(state): State<AppState>, _viewer: Viewer) -> Result<Json<RealismWeights>> {
    Ok(Json(weights(&state).await?))
}

/// Changes the planner's weights.
#[utoipa::path(
    put, path = "/realism/config", tag = "realism", security(("bearer" = [])),
    request_body = WeightsChange,
    responses(
        (status = 200, description = "The weights as changed", body = WeightsChanged),
        (status = 400, description = "A list or weight DECNET refuses (the detail says which), or a body not an object"),
        (status = 422, description = "The body is not JSON"),
        AdminOnly, NotJson,
    )
)]
pub async fn put_config(
    State(state): State<AppState>,
    Admin(admin): Admin,
    ValidJson(body): ValidJson<WeightsChange>,
) -> Result<Json<WeightsChanged>> {
    let given = [
        ("user_class_weights", body.user_class_weights),
        ("system_class_weights", body.system_class_weights),
        ("canary_class_weights", body.canary_class_weights),
        ("canary_probability", body.canary_probability),
    ];
    let change: Map<String, Value> =
        given.into_iter().filter_map(|(field, value)| Some((field.to_string(), value?))).collect();
    let (weights, dropped_entries) =
        weights(&state).await?.changed(&change).map_err(|refused| ApiError::bad_request(refused.0))?;
    let stored = RealismSetting { value: json_text(&weights)?, secret: None };
    state.db.put_realism_setting(realism::WEIGHTS, &stored, Utc::now()).await?;
    tracing::info!(by = %admin.user.username, canary_probability = weights.canary_probability, "Realism weights changed");
    Ok(Json(WeightsChanged { weights, dropped_entries }))
}

// ---- personas ----

/// The global persona pool and where it is kept.
#[derive(Debug, Serialize, ToSchema)]
pub struct PoolResponse {
    /// Where the pool is kept (DECNET: a file's path; here the database row).
    path: String,
    personas: Vec<Persona>,
}

async fn pool(state: &AppState) -> Result<Vec<Persona>> {
    Ok(realism::stored_personas(setting(state, realism::PERSONAS).await?.as_ref().map(|s| s.value.as_str())))
}

/// The global persona pool: who the fleet's deckies (those of no topology) write as.
#[utoipa::path(
    get, path = "/realism/personas", tag = "realism", security(("bearer" = [])),
    responses((status = 200, description = "The pool", body = PoolResponse), ViewerOnly)
)]
pub async fn get_personas(State(state): State<AppState>, _viewer: Viewer) -> Result<Json<PoolResponse>> {
    Ok(Json(PoolResponse { path: PERSONAS_LOCATION.into(), personas: pool(&state).await? }))
}

/// Replaces the global persona pool with the valid entries given.
#[utoipa::path(
    put, path = "/realism/personas", tag = "realism", security(("bearer" = [])),
    request_body = PersonasBody,
    responses(
        (status = 200, description = "The pool as stored", body = PoolResponse),
        (status = 400, description = "`personas` is not a list, or every entry in it is invalid"),
        (status = 422, description = "The body is not JSON"),
        AdminOnly, NotJson,
    )
)]
pub async fn put_personas(
    State(state): State<AppState>,
    Admin(admin): Admin,
    ValidJson(body): ValidJson<PersonasBody>,
) -> Result<Json<PoolResponse>> {
    let Some(Value::Array(entries)) = body.personas else {
        return Err(ApiError::bad_request("body.personas must be a list"));
    };
    let given = entries.len();
    let kept = personas::parse(entries, LANGUAGE_DEFAULT);
    if given > 0 && kept.is_empty() {
        return Err(ApiError::bad_request(ALL_INVALID));
    }
    let stored = RealismSetting { value: json_text(&kept)?, secret: None };
    state.db.put_realism_setting(realism::PERSONAS, &stored, Utc::now()).await?;
    tracing::info!(by = %admin.user.username, given, kept = kept.len(), "Realism persona pool replaced");
    Ok(Json(PoolResponse { path: PERSONAS_LOCATION.into(), personas: kept }))
}

// ---- synthetic files ----

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SyntheticFilesQuery {
    /// Files per page, 1 to 500.
    #[param(minimum = 1, maximum = 500, default = 50)]
    pub limit: Option<i64>,
    /// Files to skip.
    #[param(minimum = 0, maximum = 2147483647, default = 0)]
    pub offset: Option<i64>,
    /// Only this decky's files.
    #[param(max_length = 64)]
    pub decky_uuid: Option<String>,
    /// Only this persona's files (its name).
    #[param(max_length = 128)]
    pub persona: Option<String>,
    /// Only files of this content class (`note`, `log_cron`…).
    #[param(max_length = 32)]
    pub content_class: Option<String>,
}

impl Validate for SyntheticFilesQuery {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        Paging::check(self.limit, self.offset, MAX_FILES_LIMIT, errors);
        check_max_chars("decky_uuid", self.decky_uuid.as_deref(), 64, errors);
        check_max_chars("persona", self.persona.as_deref(), 128, errors);
        check_max_chars("content_class", self.content_class.as_deref(), 32, errors);
    }
}

/// A synthetic file as listed: everything but its body.
#[derive(Debug, Serialize, ToSchema)]
pub struct SyntheticFileEntry {
    pub uuid: uuid::Uuid,
    pub decky_uuid: uuid::Uuid,
    /// The decky's name (the fleet knows deckies by name).
    pub decky_name: String,
    pub path: String,
    /// The persona's name.
    pub persona: String,
    pub content_class: ContentClass,
    /// RFC 3339, UTC.
    pub created_at: String,
    /// RFC 3339, UTC.
    pub last_modified: String,
    pub edit_count: u32,
    /// SHA-256 of the body, hex.
    pub content_hash: String,
}

impl Listed for SyntheticFileEntry {
    const PAGE: &'static str = "SyntheticFilesResponse";
    const COUNTED: &'static str = "Files matching the filters, on every page.";
}

pub type SyntheticFilesResponse = Page<SyntheticFileEntry>;

/// One synthetic file with its body.
#[derive(Debug, Serialize, ToSchema)]
pub struct SyntheticFileDetail {
    #[serde(flatten)]
    pub file: SyntheticFileEntry,
    pub last_body: String,
    /// Whether the body reached the 64 KiB preview cap (the decky holds it whole).
    pub truncated: bool,
}

fn entry(file: &SyntheticFile, body: &str) -> SyntheticFileEntry {
    SyntheticFileEntry {
        uuid: file.uuid,
        decky_uuid: file.decky_uuid,
        decky_name: file.decky_name.clone(),
        path: file.path.clone(),
        persona: file.persona.clone(),
        content_class: file.content_class,
        created_at: format_utc(file.created_at),
        last_modified: format_utc(file.last_modified),
        edit_count: file.edit_count,
        content_hash: crate::text::hex(&Sha256::digest(body.as_bytes())),
    }
}

/// Every synthetic file of the fleet as of now, newest change first.
async fn every_file(state: &AppState) -> Result<Vec<SyntheticFile>> {
    let deckies: Vec<String> = state.db.fleet().await?.deckies.into_iter().map(|d| d.config.name).collect();
    Ok(files::grow(&deckies, &pool(state).await?, &weights(state).await?, Utc::now()))
}

/// One page of the synthetic files, newest change first, without their bodies.
#[utoipa::path(
    get, path = "/realism/synthetic-files", tag = "realism", security(("bearer" = [])),
    params(SyntheticFilesQuery),
    responses(
        (status = 200, description = "A page of files", body = SyntheticFilesResponse),
        (status = 422, description = "A parameter out of range or too long"),
        ViewerOnly,
    )
)]
pub async fn list_synthetic_files(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidQuery(query): ValidQuery<SyntheticFilesQuery>,
) -> Result<Json<SyntheticFilesResponse>> {
    let paging = Paging::of(query.limit, query.offset);
    let filter = FileFilter {
        decky_uuid: given(&query.decky_uuid),
        persona: given(&query.persona),
        content_class: given(&query.content_class),
    };
    let matching: Vec<SyntheticFile> = every_file(&state).await?.into_iter().filter(|f| filter.matches(f)).collect();
    let start = usize::try_from(paging.offset).unwrap_or(usize::MAX);
    let data = matching.iter().skip(start).take(paging.limit as usize).map(|f| entry(f, &f.body())).collect();
    Ok(Json(paging.page_of(matching.len() as u64, data)))
}

/// One synthetic file with its body.
#[utoipa::path(
    get, path = "/realism/synthetic-files/{uuid}", tag = "realism", security(("bearer" = [])),
    params(("uuid" = String, Path, description = "The file")),
    responses(
        (status = 200, description = "The file", body = SyntheticFileDetail),
        (status = 404, description = "synthetic file not found"),
        ViewerOnly,
    )
)]
pub async fn get_synthetic_file(
    State(state): State<AppState>,
    _viewer: Viewer,
    ValidPath(uuid): ValidPath<String>,
) -> Result<Json<SyntheticFileDetail>> {
    let file = every_file(&state)
        .await?
        .into_iter()
        .find(|f| f.uuid.to_string() == uuid.to_ascii_lowercase())
        .ok_or_else(|| ApiError::not_found(FILE_NOT_FOUND))?;
    let body = file.body();
    let truncated = body.len() >= BODY_LIMIT;
    let last_body = crate::text::prefix_chars(&body, BODY_LIMIT).to_string();
    Ok(Json(SyntheticFileDetail { file: entry(&file, &body), last_body, truncated }))
}

// ---- llm ----

/// The LLM provider as shown: never the key, only whether one is stored.
#[derive(Debug, Serialize, ToSchema)]
pub struct LlmResponse {
    /// `ollama` or `fake`.
    provider: String,
    /// The provider's URL; `null` for its local default.
    base_url: Option<String>,
    model: String,
    /// Seconds a generation may take.
    timeout: f64,
    api_key_set: bool,
}

impl LlmResponse {
    fn of(settings: LlmSettings, api_key_set: bool) -> Self {
        let LlmSettings { provider, base_url, model, timeout } = settings;
        LlmResponse { provider, base_url, model, timeout, api_key_set }
    }
}

/// A change of the LLM provider: what is absent stays.
#[derive(Debug, Deserialize, ToSchema)]
pub struct LlmChange {
    /// `ollama` or `fake`.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    provider: Option<String>,
    /// `http(s)://host[:port][/path]`, without credentials; `null` or `""` for the provider's
    /// local default.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, nullable, max_length = 2000)]
    base_url: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, max_length = 256)]
    model: Option<String>,
    /// Seconds, above 0 and at most 3600.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<f64>)]
    timeout: Option<f64>,
    /// Stored sealed and never shown again; `null` or `""` clears it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, nullable, max_length = 4096)]
    api_key: Option<Option<String>>,
}

impl Validate for LlmChange {}

/// The LLM provider realism's writers use: DECNET's defaults until an admin changes it.
#[utoipa::path(
    get, path = "/realism/llm", tag = "realism", security(("bearer" = [])),
    responses((status = 200, description = "The provider", body = LlmResponse), ViewerOnly)
)]
pub async fn get_llm(State(state): State<AppState>, _viewer: Viewer) -> Result<Json<LlmResponse>> {
    let stored = setting(&state, realism::LLM).await?;
    let settings = stored.as_ref().map(|s| LlmSettings::stored(&s.value)).unwrap_or_default();
    Ok(Json(LlmResponse::of(settings, stored.is_some_and(|s| s.secret.is_some()))))
}

/// Changes the LLM provider; a key given is sealed and never answered.
#[utoipa::path(
    put, path = "/realism/llm", tag = "realism", security(("bearer" = [])),
    request_body = LlmChange,
    responses(
        (status = 200, description = "The provider as changed", body = LlmResponse),
        (status = 400, description = "An unknown provider, a base URL not http(s) or with credentials, a timeout out of range, an empty model, or a body of the wrong shape"),
        (status = 422, description = "The body is not JSON"),
        AdminOnly, NotJson,
    )
)]
pub async fn put_llm(
    State(state): State<AppState>,
    Admin(admin): Admin,
    ValidJson(body): ValidJson<LlmChange>,
) -> Result<Json<LlmResponse>> {
    let refused = |refused: realism::Refused| ApiError::bad_request(refused.0);
    let stored = setting(&state, realism::LLM).await?;
    let (mut settings, mut key) = match stored {
        Some(stored) => (LlmSettings::stored(&stored.value), stored.secret),
        None => (LlmSettings::default(), None),
    };
    if let Some(provider) = body.provider {
        settings.set_provider(provider).map_err(refused)?;
    }
    if let Some(base_url) = body.base_url {
        settings.set_base_url(base_url).map_err(refused)?;
    }
    if let Some(model) = body.model {
        settings.set_model(model).map_err(refused)?;
    }
    if let Some(timeout) = body.timeout {
        settings.set_timeout(timeout).map_err(refused)?;
    }
    match body.api_key {
        None => {}
        Some(None) => key = None,
        Some(Some(given)) if given.is_empty() => key = None,
        Some(Some(given)) => {
            llm::check_key(&given).map_err(refused)?;
            key = Some(Secret::new(given));
        }
    }
    let api_key_set = key.is_some();
    let stored = RealismSetting { value: json_text(&settings)?, secret: key };
    state.db.put_realism_setting(realism::LLM, &stored, Utc::now()).await?;
    tracing::info!(
        by = %admin.user.username, provider = %settings.provider, model = %settings.model,
        base_url = settings.base_url.as_deref().unwrap_or("(local)"), api_key_set, "LLM provider changed"
    );
    Ok(Json(LlmResponse::of(settings, api_key_set)))
}
