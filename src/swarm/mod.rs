//! The swarm: many sensor hosts, one master. Everything that crosses the wire between them lives
//! here: the private CA and its certificates (`pki`), the mutual-TLS configurations with pinning
//! (`tls`). The master's records of its hosts live in `db::swarm`; its dashboard routes in `http`.

pub mod bundle;
pub mod pki;
pub mod sweep;
pub mod tls;
