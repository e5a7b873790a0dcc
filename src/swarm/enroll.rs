//! Enrollment, the master's side: a host enrolled by name (its record `enrolled`, no address yet)
//! with a one-shot bundle token of which only the hash is stored, live for the enrollment's TTL;
//! and the bundle itself, issued once to whoever fetches it: that address becomes the host's, the
//! agent's (and, when asked, the updater's) certificates are issued for it by the master's CA and
//! their fingerprints stored, and the bundle is built around them. The private keys exist only in
//! that bundle; the token and the keys are never logged.

use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::bundle::{self, BundleSpec};
use super::master::SwarmMaster;
use super::pki;
use crate::auth::ticket::{new_ticket, ticket_hash};
use crate::db::{Db, DbError, Enrollment, HostStatus, SwarmHost};

/// 404 of a bundle whose token is unknown, spent or expired.
pub const BUNDLE_NOT_FOUND: &str = "bundle not found or expired";

/// Why an enrollment, or a bundle's fetch, was not done.
#[derive(Debug, thiserror::Error)]
pub enum EnrollError {
    #[error("Worker '{0}' is already enrolled")]
    AlreadyEnrolled(String),
    /// The token is malformed, unknown, spent or expired, or its host is gone.
    #[error("{}", BUNDLE_NOT_FOUND)]
    BundleNotFound,
    #[error(transparent)]
    Store(#[from] DbError),
    /// The binary, the certificates or the archive could not be had (the cause is in the text).
    #[error("enrollment bundle: {0:#}")]
    Bundle(anyhow::Error),
}

/// A host to enroll, as the operator asked for it.
#[derive(Clone, Debug)]
pub struct HostRequest {
    pub agent_name: String,
    /// The master as the new host will reach it.
    pub master_host: String,
    /// Also issue an updater certificate.
    pub with_updater: bool,
    pub use_ipvlan: bool,
    /// A services INI the host keeps.
    pub services_ini: Option<String>,
}

/// An enrolled host and its bundle's token: the token is in this answer only.
#[derive(Debug)]
pub struct Enrolled {
    pub token: String,
    pub host_uuid: Uuid,
    pub expires_at: DateTime<Utc>,
}

/// Enrolls `request`'s host (its agent serving on `agent_port`), with a bundle to fetch within `ttl`.
pub async fn enroll(
    db: &Db,
    request: HostRequest,
    agent_port: u16,
    ttl: Duration,
    by: &str,
) -> Result<Enrolled, EnrollError> {
    let now = Utc::now();
    let expires_at = now + ttl;
    let host = SwarmHost {
        uuid: Uuid::new_v4(),
        name: request.agent_name,
        address: String::new(),
        agent_port,
        status: HostStatus::Enrolled,
        last_heartbeat: None,
        client_cert_fingerprint: None,
        updater_cert_fingerprint: None,
        enrolled_at: now,
        notes: Some("enrolled via UI bundle".into()),
        use_ipvlan: request.use_ipvlan,
    };
    let token = new_ticket();
    let enrollment = Enrollment {
        token_hash: ticket_hash(&token),
        host_uuid: host.uuid,
        master_host: request.master_host,
        with_updater: request.with_updater,
        services_ini: request.services_ini,
        created_at: now,
        expires_at,
    };
    db.enroll_swarm_host(&host, &enrollment).await.map_err(|err| match err {
        DbError::Conflict => EnrollError::AlreadyEnrolled(host.name.clone()),
        other => other.into(),
    })?;
    tracing::info!(host = %host.name, uuid = %host.uuid, %by, "Swarm host enrolled");
    Ok(Enrolled { token, host_uuid: host.uuid, expires_at })
}

/// The stored hash of `token`, which is 64 hex digits or no token of ours.
fn token_hash(token: &str) -> Result<String, EnrollError> {
    if token.len() != 64 || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(EnrollError::BundleNotFound);
    }
    Ok(ticket_hash(token))
}

fn bundle_not_found(err: DbError) -> EnrollError {
    match err {
        DbError::NotFound => EnrollError::BundleNotFound,
        other => other.into(),
    }
}

/// The live enrollment `token` names, left unspent (its install script is fetched before it).
pub async fn pending(db: &Db, token: &str) -> Result<Enrollment, EnrollError> {
    db.enrollment(&token_hash(token)?, Utc::now()).await.map_err(bundle_not_found)
}

/// A host's bundle, as its one fetch receives it.
#[derive(Debug)]
pub struct IssuedBundle {
    pub host_uuid: Uuid,
    /// The gzipped tar.
    pub tgz: Vec<u8>,
}

/// Spends `token` and issues its host's bundle for `fetcher`, which becomes the host's address:
/// the certificates issued for it by the master's CA and their fingerprints stored, the svc
/// binary shipped to hosts (`bundle::shipped_binary`) in it.
pub async fn issue_bundle(
    db: &Db,
    master: &SwarmMaster,
    configured_binary: Option<&Path>,
    token: &str,
    fetcher: IpAddr,
) -> Result<IssuedBundle, EnrollError> {
    let enrollment = db.claim_enrollment(&token_hash(token)?, Utc::now()).await.map_err(bundle_not_found)?;
    let host = db.swarm_host(enrollment.host_uuid).await.map_err(bundle_not_found)?;
    let address = fetcher.to_string();
    db.set_swarm_host_address(host.uuid, &address).await?;
    let binary = bundle::shipped_binary(configured_binary).map_err(EnrollError::Bundle)?;
    let identity = master.identity().await.map_err(|err| EnrollError::Bundle(err.into()))?;
    let config = master.config();
    let (name, with_updater) = (host.name.clone(), enrollment.with_updater);
    let (master_host, services_ini) = (enrollment.master_host, enrollment.services_ini);
    let (swarm_port, syslog_port, agent_port) = (config.listen_port, config.syslog_port, host.agent_port);
    let host_uuid = host.uuid;
    // Keys are made and the binary read off the request loop.
    let built = tokio::task::spawn_blocking(move || -> anyhow::Result<(Vec<u8>, String, Option<String>)> {
        let agent = identity.issue(&pki::agent_cn(&name), std::slice::from_ref(&address))?;
        let updater = if with_updater {
            Some(identity.issue(&pki::updater_cn(&name), &[address.clone(), "127.0.0.1".to_string()])?)
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
            ca_cert_pem: identity.ca_cert_pem(),
            agent: &agent,
            updater: updater.as_ref(),
            services_ini: services_ini.as_deref(),
            svc_binary: &binary,
        };
        let tgz = bundle::build(&spec)?;
        Ok((tgz, agent.fingerprint, updater.map(|leaf| leaf.fingerprint)))
    })
    .await
    .map_err(|err| EnrollError::Bundle(anyhow::anyhow!("bundle build task: {err}")))?;
    let (tgz, agent_fingerprint, updater_fingerprint) = built.map_err(EnrollError::Bundle)?;
    db.set_swarm_host_fingerprints(host.uuid, &agent_fingerprint, updater_fingerprint.as_deref()).await?;
    tracing::info!(host = %host.name, uuid = %host.uuid, address = %fetcher, bytes = tgz.len(), "Enrollment bundle served");
    Ok(IssuedBundle { host_uuid, tgz })
}
