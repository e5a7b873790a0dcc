//! The master's side of every call to an agent: its `svc-master` identity and the CA (made on first
//! use under `SVC_SWARM_DIR`), and per host an [`Endpoint`] pinned by the fingerprint stored for it
//! (none stored: every handshake fails), checking the host's address against its certificate when
//! `SVC_VERIFY_HOSTNAME`. Dispatch, mutation, teardown and decommission all call agents through it
//! ([`AgentCaller::post`]); what went wrong comes back as an [`AgentCallError`] whose text is
//! generic (the agent's own words and the TLS detail go to the log).

use std::sync::Arc;

use serde_json::Value;

use super::client::{Answer, CallError, Endpoint};
use super::config::SwarmConfig;
use super::pki::Ca;
use super::tls::{Identity, PeerPin, client_config};
use crate::db::SwarmHost;

/// Why a call to an agent did not do what was asked; the texts are what a client or a record sees.
#[derive(Debug, thiserror::Error)]
pub enum AgentCallError {
    #[error("host has no address yet")]
    NoAddress,
    #[error("the swarm's certificates are unavailable")]
    Certificates,
    #[error(transparent)]
    Call(#[from] CallError),
    #[error("agent answered {0}")]
    Refused(u16),
}

/// The master's identity and the swarm's settings, ready to call any host's agent; cheap to clone.
#[derive(Clone, Debug)]
pub struct AgentCaller {
    identity: Identity,
    ca_pem: Arc<String>,
    config: Arc<SwarmConfig>,
}

/// The CA or the master's certificate could not be read or made (the cause is logged).
#[derive(Debug, thiserror::Error)]
#[error("the swarm's certificates are unavailable")]
pub struct CertificatesUnavailable;

impl AgentCaller {
    pub fn load(config: &SwarmConfig) -> Result<AgentCaller, CertificatesUnavailable> {
        let loaded = Ca::load_or_create(&config.ca_dir()).and_then(|ca| {
            let leaf = ca.master_leaf(&config.master_dir())?;
            Ok((ca.cert_pem().to_string(), leaf))
        });
        let (ca_pem, leaf) = loaded.map_err(|err| {
            tracing::error!(error = %err, "The swarm CA or the master's certificate is unavailable");
            CertificatesUnavailable
        })?;
        let identity = Identity::from_pem(&leaf.cert_pem, &leaf.key_pem).map_err(|err| {
            tracing::error!(error = %err, "The master's certificate is unusable");
            CertificatesUnavailable
        })?;
        Ok(AgentCaller { identity, ca_pem: Arc::new(ca_pem), config: Arc::new(config.clone()) })
    }

    /// `host`'s agent, pinned; `None` when the TLS configuration cannot be built (logged).
    pub fn endpoint(&self, host: &SwarmHost) -> Option<Endpoint> {
        let pin = PeerPin::Fingerprint(host.client_cert_fingerprint.clone());
        self.pinned(pin, host.address.clone(), host.agent_port, self.config.read_timeout)
    }

    /// `host`'s updater (`SVC_UPDATER_PORT`), pinned by its own fingerprint. `None` when none is
    /// stored (fail closed: nothing is dialled) or the TLS configuration cannot be built.
    pub fn updater_endpoint(&self, host: &SwarmHost) -> Option<Endpoint> {
        let fingerprint = host.updater_cert_fingerprint.clone()?;
        let pin = PeerPin::Fingerprint(Some(fingerprint));
        self.pinned(pin, host.address.clone(), self.config.updater.port, self.config.updater.read_timeout)
    }

    fn pinned(&self, pin: PeerPin, address: String, port: u16, read_timeout: std::time::Duration) -> Option<Endpoint> {
        let tls = client_config(&self.identity, &self.ca_pem, pin, self.config.verify_hostname)
            .map_err(|err| tracing::error!(error = %err, "Swarm TLS configuration refused"))
            .ok()?;
        Some(Endpoint { host: address, port, tls, connect_timeout: self.config.connect_timeout, read_timeout })
    }

    /// `POST path` with `body` to `host`'s agent; a 2xx answer is the answer, any other status is
    /// [`AgentCallError::Refused`] (the agent's body is logged, never returned).
    pub async fn post(&self, host: &SwarmHost, path: &str, body: &Value) -> Result<Answer, AgentCallError> {
        self.post_within(host, path, body, self.config.read_timeout).await
    }

    /// [`post`](AgentCaller::post) waiting up to `read_timeout` for the answer (work the agent
    /// does before answering, such as applying a topology).
    pub async fn post_within(
        &self,
        host: &SwarmHost,
        path: &str,
        body: &Value,
        read_timeout: std::time::Duration,
    ) -> Result<Answer, AgentCallError> {
        if host.address.is_empty() {
            return Err(AgentCallError::NoAddress);
        }
        let mut endpoint = self.endpoint(host).ok_or(AgentCallError::Certificates)?;
        endpoint.read_timeout = read_timeout;
        let answer = endpoint.post(path, body).await?;
        if answer.status.is_success() {
            return Ok(answer);
        }
        tracing::warn!(
            host = %host.name,
            %path,
            status = answer.status.as_u16(),
            body = %crate::text::prefix_chars(&String::from_utf8_lossy(&answer.body), 300),
            "Agent refused the call"
        );
        Err(AgentCallError::Refused(answer.status.as_u16()))
    }
}
