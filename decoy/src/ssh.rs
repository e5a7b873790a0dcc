//! Placeholder until the ssh decoy lands.

use std::sync::Arc;

use crate::session::Decoy;
use crate::settings::Settings;

pub fn decoy(_settings: &Settings, _hostname: &str) -> anyhow::Result<Arc<dyn Decoy>> {
    anyhow::bail!("the ssh decoy is not built yet")
}
