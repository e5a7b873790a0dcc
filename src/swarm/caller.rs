//! The master's side of every call to an agent: its identity (`master::MasterIdentity`, loaded
//! once by the process), and per host an [`Endpoint`] pinned by the fingerprint stored for it
//! (none stored: every handshake fails), checking the host's address against its certificate when
//! `SVC_VERIFY_HOSTNAME`. Dispatch, mutation, teardown and decommission all call agents through it
//! ([`AgentCaller::post`]); what went wrong comes back as an [`AgentCallError`] whose text is
//! generic (the agent's own words and the TLS detail go to the log).

use std::sync::Arc;

use serde_json::Value;

use super::client::{Answer, CallError, Endpoint};
use super::config::SwarmConfig;
use super::master::MasterIdentity;
use super::tls::PeerPin;
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
    identity: Arc<MasterIdentity>,
    config: Arc<SwarmConfig>,
}

/// The CA or the master's certificate could not be read or made (the cause is logged).
#[derive(Debug, thiserror::Error)]
#[error("the swarm's certificates are unavailable")]
pub struct CertificatesUnavailable;

impl AgentCaller {
    /// Calls with `identity`, by the timeouts and ports of `config` (see `master::SwarmMaster::caller`).
    pub fn new(identity: Arc<MasterIdentity>, config: Arc<SwarmConfig>) -> AgentCaller {
        AgentCaller { identity, config }
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
        let tls = self
            .identity
            .client_config(pin, self.config.verify_hostname)
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
