//! `ProfilerConfig`: what the attacker-profiler worker reads (its lease lasts as long as every
//! worker's, `WorkerConfig::lease`).

use std::time::Duration;

use super::env::Env;

#[derive(Clone, Debug)]
pub struct ProfilerConfig {
    /// How often a caught-up profiler looks for new log rows without a bus notice
    /// (`SVC_PROFILER_POLL_MS`); with a bus it wakes on every stored batch.
    pub poll: Duration,
}

impl ProfilerConfig {
    pub(super) fn read(env: &mut Env) -> ProfilerConfig {
        ProfilerConfig { poll: env.millis("SVC_PROFILER_POLL_MS", 2_000, 10..=600_000) }
    }
}
