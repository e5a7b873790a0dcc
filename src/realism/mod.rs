//! Realism: what makes a decky look lived in, as DECNET's Realism pages tune and show it. The
//! planner's weights (`weights`), the LLM provider (`llm`), the global persona pool (the
//! fictional employees of the fleet's deckies; a topology's deckies have the topology's own), and
//! the synthetic files those personas are shown to have written (`files`, from `bodies`' templates
//! and `draw`'s seeded draws). Each setting is stored under its key (`db::realism`).

mod bodies;
mod draw;
pub mod files;
pub mod llm;
pub mod weights;

use crate::topology::personas::{self, Persona};

/// The settings' keys.
pub const WEIGHTS: &str = "weights";
pub const LLM: &str = "llm";
pub const PERSONAS: &str = "personas";

/// Where the global pool lives, for DECNET's `path` (there a file; here a row of the database).
pub const PERSONAS_LOCATION: &str = "database: realism_settings/personas";

/// The language a pool persona without one speaks (the fleet has no topology default).
pub const LANGUAGE_DEFAULT: &str = "en";

/// A change refused, with the reason the page shows (DECNET's text where DECNET has one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// A setting's stored text read back; one that no longer reads (edited by hand) gives the
/// defaults, as DECNET serves its defaults then.
pub fn stored_or_default<T: serde::de::DeserializeOwned + Default>(text: &str, what: &str) -> T {
    serde_json::from_str(text).unwrap_or_else(|err| {
        tracing::warn!(error = %err, setting = what, "A stored realism setting does not read; serving the defaults");
        T::default()
    })
}

/// The global pool as stored (a JSON list; nothing stored is an empty pool).
pub fn stored_personas(text: Option<&str>) -> Vec<Persona> {
    text.map(|text| personas::stored(text, LANGUAGE_DEFAULT)).unwrap_or_default()
}
