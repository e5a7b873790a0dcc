//! `TarpitConfig`: what the tarpit watcher reads. It runs in the API always (spec, startup step 8)
//! and as `svc worker tarpit` on a host whose deckies it watches.

use std::time::Duration;

use super::env::Env;

#[derive(Clone, Debug)]
pub struct TarpitConfig {
    /// `SVC_TARPIT_POLL_SECS` (the spec's poll): how often the deckies' connection
    /// tables are read and their rules checked.
    pub poll_interval: Duration,
}

impl TarpitConfig {
    pub(super) fn read(env: &mut Env) -> TarpitConfig {
        TarpitConfig { poll_interval: env.seconds("SVC_TARPIT_POLL_SECS", 15.0) }
    }
}
