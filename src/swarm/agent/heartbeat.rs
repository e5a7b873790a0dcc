//! The agent's heartbeat: every interval, and at once when a deploy or mutation ends, a POST to the
//! master's swarm listener with this host's status and the outcomes not yet delivered. The master
//! is trusted by the swarm CA alone (the agent stores no pin for it) and its name is not checked,
//! as DECNET does; outcomes that could not be delivered go with the next heartbeat.

use std::time::Duration;

use hyper::Method;

use super::{Agent, AgentTls};
use crate::swarm::client::Endpoint;
use crate::swarm::tls::{PeerPin, client_config};
use crate::swarm::wire::{HEARTBEAT_PATH, Heartbeat};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const READ_TIMEOUT: Duration = Duration::from_secs(15);

pub(super) async fn run(agent: Agent, tls: AgentTls) {
    let (Some(master), Some(host_uuid)) = (agent.settings.master_host.clone(), agent.settings.host_uuid) else {
        tracing::warn!("No SVC_MASTER_HOST or SVC_HOST_UUID: this agent sends no heartbeats");
        return;
    };
    let config = match client_config(&tls.identity, &tls.ca_pem, PeerPin::CaSigned, false) {
        Ok(config) => config,
        Err(err) => {
            tracing::error!(error = %err, "Heartbeat TLS configuration refused; no heartbeats");
            return;
        }
    };
    let host = master.trim_matches(['[', ']']).to_string();
    let port = agent.settings.master_port;
    let endpoint = Endpoint { host, port, tls: config, connect_timeout: CONNECT_TIMEOUT, read_timeout: READ_TIMEOUT };
    loop {
        beat(&agent, &endpoint, host_uuid).await;
        tokio::select! {
            () = agent.shutdown.cancelled() => return,
            () = agent.beat_now.notified() => {}
            () = tokio::time::sleep(agent.settings.heartbeat) => {}
        }
    }
}

async fn beat(agent: &Agent, endpoint: &Endpoint, host_uuid: uuid::Uuid) {
    let status = match agent.status().await {
        Ok(status) => status,
        Err(err) => {
            tracing::warn!(error = %err, "Cannot read this host's status for the heartbeat");
            return;
        }
    };
    let topology = match super::topology::reports(agent).await {
        Ok(reports) => Some(serde_json::to_value(reports).expect("topology reports serialise")),
        Err(err) => {
            tracing::warn!(error = %err, "Cannot read this host's topologies for the heartbeat");
            None
        }
    };
    let deltas = agent.take_pending();
    let heartbeat = Heartbeat {
        host_uuid,
        agent_version: env!("CARGO_PKG_VERSION").to_string(),
        status,
        topology,
        lifecycle: (!deltas.is_empty()).then(|| deltas.clone()),
    };
    let body = serde_json::to_value(&heartbeat).expect("a heartbeat serialises");
    let delivered = match endpoint.call(Method::POST, HEARTBEAT_PATH, Some(&body)).await {
        Ok(answer) if answer.status.is_success() => true,
        Ok(answer) => {
            tracing::warn!(status = %answer.status, body = %String::from_utf8_lossy(&answer.body), "The master refused a heartbeat");
            false
        }
        Err(err) => {
            tracing::warn!(error = %err, "Heartbeat not delivered");
            false
        }
    };
    if !delivered {
        let mut pending = agent.pending.lock().expect("pending deltas");
        let later = std::mem::take(&mut *pending);
        *pending = deltas;
        pending.extend(later);
    }
}
