//! The master's swarm listener (`SVC_SWARM_PORT`, default 8770): mutual TLS with the swarm CA, and
//! `POST /swarm/heartbeat`, where each agent reports. A heartbeat counts only from the host it names
//! presenting the very certificate enrolled for it (the stored fingerprint): 404 `unknown host`,
//! 403 `peer cert unavailable` / `cert fingerprint mismatch`, each logged; else its content is
//! written ([`HeartbeatStore`]) and the answer is 204.

use std::sync::Arc;

use async_trait::async_trait;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use chrono::{DateTime, Utc};
use serde_json::json;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::config::SwarmConfig;
use super::master::MasterIdentity;
use super::pki::fingerprint;
use super::refusal::detail;
use super::serve::Peer;
use super::wire::{HEARTBEAT_PATH, Heartbeat, LISTENER_HEALTH_PATH, MAX_BODY_BYTES};
use crate::db::DbResult;

/// What the listener needs of the master's store.
#[async_trait]
pub trait HeartbeatStore: Send + Sync + 'static {
    /// The fingerprint stored for the host's agent certificate: `None` when no such host,
    /// `Some(None)` when the host has none stored (every heartbeat of it is refused).
    async fn agent_fingerprint(&self, host: Uuid) -> DbResult<Option<Option<String>>>;

    /// Writes what a verified heartbeat says: the host active and heard from `at`, its deckies,
    /// the outcomes of its deploys and mutations.
    async fn record_heartbeat(&self, heartbeat: &Heartbeat, at: DateTime<Utc>) -> DbResult<()>;
}

/// A bound listener with its TLS, ready to [`SwarmListener::run`].
pub struct SwarmListener {
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
}

impl SwarmListener {
    /// Binds `SVC_SWARM_HOST:SVC_SWARM_PORT` with the master's identity.
    pub async fn bind(config: &SwarmConfig, identity: &MasterIdentity) -> anyhow::Result<SwarmListener> {
        let tls = identity.server_config()?;
        let listener = TcpListener::bind((config.listen_host.as_str(), config.listen_port)).await?;
        Ok(SwarmListener { listener, tls })
    }

    pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves heartbeats until `shutdown`.
    pub async fn run(self, store: Arc<dyn HeartbeatStore>, shutdown: CancellationToken) {
        tracing::info!(address = ?self.listener.local_addr().ok(), "Swarm listener (mutual TLS)");
        super::serve::serve(self.listener, self.tls, router(store), shutdown).await;
    }
}

pub fn router(store: Arc<dyn HeartbeatStore>) -> Router {
    Router::new()
        .route(HEARTBEAT_PATH, post(heartbeat))
        .route(LISTENER_HEALTH_PATH, get(health))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        // A heartbeat continues the agent's trace (traces on).
        .layer(tower_http::trace::TraceLayer::new_for_http().make_span_with(crate::traces::server_span))
        .with_state(store)
}

async fn health() -> Json<serde_json::Value> {
    Json(json!({ "status": "ok", "role": "swarm-controller" }))
}

async fn heartbeat(
    State(store): State<Arc<dyn HeartbeatStore>>,
    Extension(peer): Extension<Peer>,
    body: Bytes,
) -> Response {
    let heartbeat: Heartbeat = match serde_json::from_slice(&body) {
        Ok(heartbeat) => heartbeat,
        Err(err) => {
            tracing::warn!(peer = %peer.addr, error = %err, "Malformed heartbeat");
            return detail(StatusCode::UNPROCESSABLE_ENTITY, "invalid heartbeat body");
        }
    };
    let host = heartbeat.host_uuid;
    let stored = match store.agent_fingerprint(host).await {
        Ok(Some(stored)) => stored,
        Ok(None) => {
            tracing::warn!(peer = %peer.addr, %host, "Heartbeat from an unknown host");
            return detail(StatusCode::NOT_FOUND, "unknown host");
        }
        Err(err) => {
            tracing::error!(error = %err, "Cannot read the swarm host of a heartbeat");
            return detail(StatusCode::SERVICE_UNAVAILABLE, "database unavailable");
        }
    };
    let Some(cert) = peer.cert_der.as_deref() else {
        tracing::warn!(peer = %peer.addr, %host, "Heartbeat without a peer certificate");
        return detail(StatusCode::FORBIDDEN, "peer cert unavailable");
    };
    if stored.as_deref().map(str::to_ascii_lowercase) != Some(fingerprint(cert)) {
        tracing::warn!(
            peer = %peer.addr,
            %host,
            cn = peer.common_name.as_deref().unwrap_or("<none>"),
            "Heartbeat refused: the certificate is not the one enrolled for this host"
        );
        return detail(StatusCode::FORBIDDEN, "cert fingerprint mismatch");
    }
    match store.record_heartbeat(&heartbeat, Utc::now()).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(err) => {
            tracing::error!(%host, error = %err, "Cannot record a heartbeat");
            detail(StatusCode::SERVICE_UNAVAILABLE, "database unavailable")
        }
    }
}
