//! The swarm: many sensor hosts, one master. Everything that crosses the wire between them lives
//! here: the private CA and its certificates (`pki`), the mutual-TLS configurations with pinning
//! (`tls`), the connection loop that serves over them (`serve`), the bodies both sides exchange
//! (`wire`), the master's pinned client (`client`) and its calls to a host's agent
//! (`agent_client`), `svc agent` (`agent`) and the master's
//! heartbeat listener (`listener`) with what a heartbeat writes (`record`), the silence sweep that
//! marks a quiet host unreachable (`sweep`) and the enrollment bundle (`bundle`). The master's
//! records of its hosts live in `db::swarm`.

pub mod agent;
pub mod agent_client;
pub mod bundle;
pub mod client;
pub mod config;
pub mod listener;
pub mod pki;
pub mod record;
pub mod serve;
pub mod sweep;
pub mod tls;
pub mod wire;
