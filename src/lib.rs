//! svc, the control plane of a honeypot fleet: everything the API, the workers and the `svc` command
//! share. The binary (`bin/`) parses the command line and calls in here; workers (`workers/`) build on
//! this crate and never the other way round.
//!
//! Inside it, `startup` (the API's lifespan) and `http` sit on top; `db`, `bus`, `worker`, `auth`,
//! `logline`, `observation`, `webhook`, `canary` and `systemd` never reach up into them, so a worker
//! needs no API. A part lives in one home: the canary's bait, planting, trigger recording and DNS
//! listener are all `canary`, and `http::canary` holds only its routes. The `roster` of workers,
//! facts alone, sits beneath them all.
//! What the decoys share with everything else (the log line's grammar, text, time, the INI grammar,
//! the service catalogue) is the small crate `svc-core` beneath this one.

pub mod accept;
pub mod auth;
pub mod bus;
pub mod canary;
pub mod config;
pub mod db;
pub mod disk_watermark;
pub mod export;
pub mod file_modes;
pub mod fleet;
pub mod http;
pub mod identity;
pub mod iptables;
pub mod logging;
pub mod logline;
pub mod metrics;
pub mod netns;
pub mod observation;
pub mod realism;
pub mod recent;
pub mod retention;
pub mod roster;
pub mod runtime;
pub mod secret;
pub mod signals;
pub mod startup;
pub mod swarm;
pub mod systemd;
pub mod tarpit;
pub mod topology;
pub mod traces;
pub mod webhook;
pub mod worker;

// Pure code the decoys share too, in `svc-core`; re-exported where it always lived.
pub use svc_core::{text, time};
