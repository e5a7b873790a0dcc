//! `/config` and `/config/users/*`: what the dashboard's settings page reads, and user management.

use axum::Json;
use axum::extract::State;
use chrono::Utc;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::error::OrNotFound;
use super::extract::{FieldError, ValidJson, ValidPath, Validate, check_name, check_password};
use super::guard::{Admin, Viewer};
use super::responses::{AdminOnly, AuthRequired, NotAUuid, NotJson, ViewerOnly};
use super::{ApiError, AppState, Message, Result};
use crate::db::{DbError, NewUser, Role, User};

const GLOBAL_MUTATION_INTERVAL: &str = "30m";

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(config))
        .routes(routes!(create_user))
        .routes(routes!(delete_user))
        .routes(routes!(set_role))
        .routes(routes!(reset_password))
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct UserResponse {
    pub uuid: Uuid,
    pub username: String,
    pub role: Role,
    pub must_change_password: bool,
}

impl From<User> for UserResponse {
    fn from(user: User) -> Self {
        UserResponse {
            uuid: user.uuid,
            username: user.username,
            role: user.role,
            must_change_password: user.must_change_password,
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ConfigResponse {
    /// The caller's role.
    pub role: Role,
    pub deployment_limit: u32,
    pub global_mutation_interval: String,
    /// Admins only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub users: Option<Vec<UserResponse>>,
    /// Present, and true, in developer mode for admins.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub developer_mode: Option<bool>,
}

/// The caller's role and the deployment settings; admins also get the user list.
#[utoipa::path(
    get, path = "/config", tag = "config", security(("bearer" = [])),
    responses(
        (status = 200, description = "Settings", body = ConfigResponse),
        ViewerOnly,
    )
)]
pub async fn config(State(state): State<AppState>, Viewer(session): Viewer) -> Result<Json<ConfigResponse>> {
    let is_admin = session.user.role == Role::Admin;
    let users =
        if is_admin { Some(state.db.list_users().await?.into_iter().map(UserResponse::from).collect()) } else { None };
    Ok(Json(ConfigResponse {
        role: session.user.role,
        deployment_limit: state.config.fleet.deployment_limit as u32,
        global_mutation_interval: GLOBAL_MUTATION_INTERVAL.into(),
        users,
        developer_mode: (is_admin && state.config.api.developer).then_some(true),
    }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateUserRequest {
    /// 1 to 64 characters, without surrounding spaces or control characters; unique in any letter case.
    #[schema(
        min_length = 1,
        max_length = 64,
        pattern = r"^[^\s\x00-\x1f\x7f-\x9f]([^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f])?$"
    )]
    pub username: String,
    /// 12 characters to 72 bytes (UTF-8): the format `utf8-bytes-max-72`.
    #[schema(min_length = 12, max_length = 72, format = "utf8-bytes-max-72")]
    pub password: String,
    #[serde(default = "viewer")]
    pub role: Role,
}

fn viewer() -> Role {
    Role::Viewer
}

impl Validate for CreateUserRequest {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        check_name("username", &self.username, errors);
        check_password("password", &self.password, errors);
    }
}

/// Creates a user, who must change the password at first login.
#[utoipa::path(
    post, path = "/config/users", tag = "config", security(("bearer" = [])),
    request_body = CreateUserRequest,
    responses(
        (status = 200, description = "Created", body = UserResponse),
        (status = 400, description = "Structurally invalid body, or a password under 12 characters"),
        (status = 409, description = "Username already exists"),
        (status = 422, description = "A password over 72 bytes, an unknown role, or malformed JSON"),
        AdminOnly, NotJson,
    )
)]
pub async fn create_user(
    State(state): State<AppState>,
    Admin(admin): Admin,
    ValidJson(body): ValidJson<CreateUserRequest>,
) -> Result<Json<UserResponse>> {
    let password_hash = state.passwords.hash(body.password).await?;
    let new = NewUser { username: body.username, password_hash, role: body.role, must_change_password: true };
    let user = match state.db.add_user(new, Utc::now()).await {
        Err(DbError::Conflict) => return Err(ApiError::conflict("Username already exists")),
        other => other?,
    };
    tracing::info!(user = %user.username, role = user.role.as_str(), by = %admin.user.username, "User created");
    Ok(Json(user.into()))
}

const USER_NOT_FOUND: &str = "User not found";

/// Deletes a user; their tokens stop working at once here and within seconds on other replicas.
#[utoipa::path(
    delete, path = "/config/users/{uuid}", tag = "config", security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The user")),
    responses(
        (status = 200, description = "Deleted", body = Message),
        (status = 403, description = "Not an admin, password change required, or deleting yourself"),
        (status = 404, description = "User not found"),
        AuthRequired, NotAUuid,
    )
)]
pub async fn delete_user(
    State(state): State<AppState>,
    Admin(admin): Admin,
    ValidPath(uuid): ValidPath<Uuid>,
) -> Result<Json<Message>> {
    if uuid == admin.user.uuid {
        return Err(ApiError::forbidden("Cannot delete your own account"));
    }
    state.db.delete_user(uuid).await.or_not_found(USER_NOT_FOUND)?;
    state.sessions.forget_user(uuid);
    tracing::info!(%uuid, by = %admin.user.username, "User deleted");
    Ok(Json(Message::new("User deleted")))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RoleRequest {
    pub role: Role,
}

impl Validate for RoleRequest {}

/// Changes a user's role and ends their sessions.
#[utoipa::path(
    put, path = "/config/users/{uuid}/role", tag = "config", security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The user")),
    request_body = RoleRequest,
    responses(
        (status = 200, description = "Role changed", body = Message),
        (status = 400, description = "Structurally invalid body"),
        (status = 403, description = "Not an admin, password change required, or changing your own role"),
        (status = 404, description = "User not found"),
        (status = 422, description = "Unknown role, not a uuid, or malformed JSON"),
        AuthRequired, NotJson,
    )
)]
pub async fn set_role(
    State(state): State<AppState>,
    Admin(admin): Admin,
    ValidPath(uuid): ValidPath<Uuid>,
    ValidJson(body): ValidJson<RoleRequest>,
) -> Result<Json<Message>> {
    if uuid == admin.user.uuid {
        return Err(ApiError::forbidden("Cannot change your own role"));
    }
    state.db.set_role(uuid, body.role, Utc::now()).await.or_not_found(USER_NOT_FOUND)?;
    state.sessions.forget_user(uuid);
    tracing::info!(%uuid, role = body.role.as_str(), by = %admin.user.username, "User role changed");
    Ok(Json(Message::new("User role updated")))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResetPasswordRequest {
    /// 12 characters to 72 bytes (UTF-8): the format `utf8-bytes-max-72`.
    #[schema(min_length = 12, max_length = 72, format = "utf8-bytes-max-72")]
    pub new_password: String,
}

impl Validate for ResetPasswordRequest {
    fn validate(&self, errors: &mut Vec<FieldError>) {
        check_password("new_password", &self.new_password, errors);
    }
}

/// Sets a user's password, flags it must-change and ends their sessions.
#[utoipa::path(
    put, path = "/config/users/{uuid}/reset-password", tag = "config", security(("bearer" = [])),
    params(("uuid" = Uuid, Path, description = "The user")),
    request_body = ResetPasswordRequest,
    responses(
        (status = 200, description = "Password reset", body = Message),
        (status = 400, description = "Structurally invalid body, or a password under 12 characters"),
        (status = 404, description = "User not found"),
        (status = 422, description = "A password over 72 bytes, not a uuid, or malformed JSON"),
        AdminOnly, NotJson,
    )
)]
pub async fn reset_password(
    State(state): State<AppState>,
    Admin(admin): Admin,
    ValidPath(uuid): ValidPath<Uuid>,
    ValidJson(body): ValidJson<ResetPasswordRequest>,
) -> Result<Json<Message>> {
    let password_hash = state.passwords.hash(body.new_password).await?;
    state.db.set_password(uuid, &password_hash, true, Utc::now()).await.or_not_found(USER_NOT_FOUND)?;
    state.sessions.forget_user(uuid);
    tracing::info!(%uuid, by = %admin.user.username, "Password reset; the user must change it");
    Ok(Json(Message::new("Password reset successfully")))
}
