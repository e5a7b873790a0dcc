//! Placeholder until the http decoy lands.

use std::sync::Arc;

use crate::session::Decoy;
use crate::settings::Settings;

pub fn decoy(_settings: &Settings, _hostname: &str, _tls: bool) -> anyhow::Result<Arc<dyn Decoy>> {
    anyhow::bail!("the http decoy is not built yet")
}
