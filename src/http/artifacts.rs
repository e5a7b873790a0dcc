//! `GET /artifacts/{decky}/{stored_as}`: the bytes of a file an attacker left on a decky (an FTP
//! upload, a mail message), for admins only as in DECNET, because they are the attacker's content.
//! The decoys keep them on their host (`fleet/artifacts.rs`); the file's metadata is its log line.

use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::export::download;
use super::extract::{FieldError, ValidQuery, Validate};
use super::guard::Admin;
use super::responses::AdminOnly;
use super::{ApiError, AppState, Result};
use crate::fleet::artifacts::ArtifactError;
use crate::fleet::decky_name::DeckyName;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(artifact))
}

/// The services whose decoys keep files: DECNET's `ssh` and `smtp`, and svc's `ftp`.
const SERVICES: [&str; 3] = ["ssh", "smtp", "ftp"];

/// [`SERVICES`], as the document names them. The query keeps the text, so that another service
/// gets DECNET's 400 `invalid service` rather than a parse error.
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code, reason = "a schema only")]
enum CapturingService {
    Ssh,
    Smtp,
    Ftp,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ArtifactPath {
    /// The decky that captured it.
    #[param(value_type = DeckyName)]
    decky: String,
    /// The name it is stored under: the capture line's `stored_as`.
    #[param(pattern = r"^[A-Za-z0-9_:-][A-Za-z0-9._:-]{0,254}$")]
    stored_as: String,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ArtifactQuery {
    /// The service that captured it: `ssh` (the default, as in DECNET), `smtp` or `ftp`.
    #[param(value_type = Option<CapturingService>)]
    service: Option<String>,
}

impl Validate for ArtifactQuery {
    /// DECNET's pattern: 1 to 16 of a-z (422); a service that keeps no files is a 400.
    fn validate(&self, errors: &mut Vec<FieldError>) {
        if let Some(service) = &self.service
            && !((1..=16).contains(&service.len()) && service.bytes().all(|b| b.is_ascii_lowercase()))
        {
            errors.push(FieldError::new(
                "string_pattern_mismatch",
                &["query", "service"],
                "String should match pattern '^[a-z]{1,16}$'",
            ));
        }
    }
}

/// A captured file's bytes, as an attachment. Admins only.
#[utoipa::path(
    get,
    path = "/artifacts/{decky}/{stored_as}",
    tag = "attackers",
    security(("bearer" = [])),
    params(ArtifactPath, ArtifactQuery),
    responses(
        (status = 200, description = "The file", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 400, description = "`invalid service`, `invalid decky name` or `invalid stored_as`"),
        (status = 404, description = "artifact not found"),
        (status = 422, description = "`service` is not 1 to 16 of a-z"),
        AdminOnly,
    )
)]
pub async fn artifact(
    State(state): State<AppState>,
    _admin: Admin,
    Path(ArtifactPath { decky, stored_as }): Path<ArtifactPath>,
    ValidQuery(query): ValidQuery<ArtifactQuery>,
) -> Result<Response> {
    if !SERVICES.contains(&query.service.as_deref().unwrap_or("ssh")) {
        return Err(ApiError::bad_request("invalid service"));
    }
    let path = state.fleet.artifacts().file(&decky, &stored_as).map_err(|err| match err {
        ArtifactError::BadDecky => ApiError::bad_request("invalid decky name"),
        ArtifactError::BadName => ApiError::bad_request("invalid stored_as"),
        ArtifactError::NotFound => ApiError::not_found("artifact not found"),
    })?;
    let bytes = tokio::fs::read(&path).await.map_err(|err| {
        tracing::warn!(path = %path.display(), error = %err, "Cannot read a captured file");
        ApiError::not_found("artifact not found")
    })?;
    // The name was checked to be plain ([A-Za-z0-9._:-]): nothing to escape.
    let mut response = download(bytes, "application/octet-stream", &stored_as);
    response.headers_mut().insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    Ok(response)
}
