//! The swarm: many sensor hosts, one master. Everything that crosses the wire between them lives
//! here: the private CA and its certificates (`pki`), the mutual-TLS configurations with pinning
//! (`tls`), the master's identity loaded once (`master`), how the swarm's servers serve over them
//! (`serve`) and refuse (`refusal`), the paths and bodies both sides exchange (`wire`), one HTTPS
//! call (`client`), the master's pinned calls to agents (`caller`), where each decky operation
//! runs (`placement`), how a deploy is spread over hosts (`dispatch`, `deploy`), `svc agent`
//! (`agent`), the master's
//! heartbeat listener (`listener`) with what a heartbeat writes (`record`), the silence sweep that
//! marks a quiet host unreachable (`sweep`), the log shipping wire between a host's forwarder and
//! the master's log listener (`shipping`), enrollment (`enroll`) and the bundle a new host installs (`bundle`),
//! `svc updater` (`updater`), the master's pushes of releases to it (`updates`) and the topologies
//! it sends whole to the host they target (`topology`). The master's
//! records of its hosts live in `db::swarm`, its dashboard routes in
//! `http::swarm`.

pub mod agent;
pub mod bundle;
pub mod caller;
pub mod client;
pub mod config;
pub mod deploy;
pub mod dispatch;
pub mod enroll;
pub mod listener;
pub mod master;
pub mod pki;
pub mod placement;
pub mod record;
pub mod refusal;
pub mod remote;
pub mod serve;
pub mod shipping;
pub mod sweep;
pub mod tls;
pub mod topology;
pub mod updater;
pub mod updates;
pub mod wire;
