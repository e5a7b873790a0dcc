//! The master's calls to one host's agent: an [`Endpoint`] at the host's stored address and agent
//! port, presenting the master's identity (`svc-master`), trusting the swarm CA alone, pinned to
//! the agent certificate's stored fingerprint (a host without one is refused: the pin fails
//! closed) and checking the address against the certificate when `SVC_VERIFY_HOSTNAME`. Made per
//! call: reading the CA and the master's key is cheap next to a TLS handshake, and a new host or a
//! re-issued certificate is seen at once.

use hyper::Method;

use super::client::{CallError, Endpoint};
use super::config::SwarmConfig;
use super::pki::Ca;
use super::tls::{Identity, PeerPin, client_config};
use crate::db::SwarmHost;

/// Why a call to an agent did not do what was asked; the texts are generic (the detail is logged
/// where it happens).
#[derive(Debug, thiserror::Error)]
pub enum AgentCallError {
    #[error("host has no address yet")]
    NoAddress,
    #[error("swarm certificates unavailable")]
    Identity,
    #[error(transparent)]
    Call(#[from] CallError),
    #[error("agent answered {0}")]
    Refused(u16),
}

/// The endpoint of `host`'s agent.
pub fn endpoint(config: &SwarmConfig, host: &SwarmHost) -> Result<Endpoint, AgentCallError> {
    if host.address.is_empty() {
        return Err(AgentCallError::NoAddress);
    }
    let identity = || -> anyhow::Result<_> {
        let ca = Ca::load_or_create(&config.dir.join("ca"))?;
        let master = ca.master_leaf(&config.dir.join("master"))?;
        let identity = Identity::from_pem(&master.cert_pem, &master.key_pem)?;
        let pin = PeerPin::Fingerprint(host.client_cert_fingerprint.clone());
        Ok(client_config(&identity, ca.cert_pem(), pin, config.verify_hostname)?)
    };
    let tls = identity().map_err(|err| {
        tracing::warn!(error = %err, "The master's swarm identity could not be loaded");
        AgentCallError::Identity
    })?;
    Ok(Endpoint {
        host: host.address.clone(),
        port: host.agent_port,
        tls,
        connect_timeout: config.connect_timeout,
        read_timeout: config.read_timeout,
    })
}

/// `POST path` with `body` to `host`'s agent; a 2xx answer is success.
pub async fn post(
    config: &SwarmConfig,
    host: &SwarmHost,
    path: &str,
    body: &serde_json::Value,
) -> Result<(), AgentCallError> {
    let endpoint = endpoint(config, host)?;
    let answer = endpoint.call(Method::POST, path, Some(body)).await?;
    if answer.status.is_success() {
        Ok(())
    } else {
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
