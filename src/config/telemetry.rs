//! `TelemetryConfig`: who may read `GET /metrics`. Traces are switched by `SVC_DEVELOPER_TRACING`
//! (the API section), as the spec names it.

use super::env::Env;
use super::rules;
use crate::secret::Secret;

#[derive(Clone, Debug)]
pub struct TelemetryConfig {
    /// `SVC_METRICS_TOKEN`: the bearer token a scraper sends to `/metrics`. Unset: `/metrics` is
    /// served without one only while the API binds loopback, and not at all on a public binding.
    pub metrics_token: Option<Secret>,
}

impl TelemetryConfig {
    pub(super) fn read(env: &mut Env) -> TelemetryConfig {
        let metrics_token = env.secret("SVC_METRICS_TOKEN");
        if let Some(token) = &metrics_token {
            env.report_all(rules::metrics_token(token));
        }
        TelemetryConfig { metrics_token }
    }
}
