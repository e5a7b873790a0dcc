//! Temporary: replaced by the config tree.
pub use crate::config::DatabaseConfig;
