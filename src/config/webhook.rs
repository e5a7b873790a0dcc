//! `WebhookConfig`: what webhook delivery reads: whether destinations may be private addresses, how
//! long one delivery may take, how retries back off and when a failing webhook is turned off.

use std::time::Duration;

use super::env::Env;

#[derive(Clone, Debug)]
pub struct WebhookConfig {
    /// `SVC_WEBHOOK_ALLOW_PRIVATE=true` turns the destination address rules off (scheme, host and
    /// resolution are still checked). The API and the worker warn at start when on.
    pub allow_private: bool,
    /// One delivery, connection to answer (`SVC_WEBHOOK_TIMEOUT_SECS`, as DECNET).
    pub timeout: Duration,
    /// The first retry's delay, doubled at each further failure of the event up to
    /// [`WebhookConfig::MAX_RETRY_DELAY`] (`SVC_WEBHOOK_RETRY_BASE_MS`).
    pub retry_base: Duration,
    /// Consecutive failed deliveries after which a webhook is turned off, with the reason
    /// (`SVC_WEBHOOK_FAILURE_LIMIT`, DECNET's circuit threshold).
    pub failure_limit: u32,
}

impl WebhookConfig {
    /// Retries of one event never wait longer than this.
    pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(300);

    pub(super) fn read(env: &mut Env) -> WebhookConfig {
        WebhookConfig {
            allow_private: env.flag("SVC_WEBHOOK_ALLOW_PRIVATE", false),
            timeout: env.seconds("SVC_WEBHOOK_TIMEOUT_SECS", 10.0),
            retry_base: env.millis("SVC_WEBHOOK_RETRY_BASE_MS", 1_000, 10..=300_000),
            failure_limit: env.count("SVC_WEBHOOK_FAILURE_LIMIT", 5, 1..=1_000) as u32,
        }
    }
}
