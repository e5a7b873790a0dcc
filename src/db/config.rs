//! `DatabaseConfig`: which repository backend [`super::connect`] opens, and where. The configuration
//! chooses it once; this layer only needs to know what it was given.

use std::path::PathBuf;

use crate::secret::Secret;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DatabaseConfig {
    /// A sqlite file in WAL mode.
    Sqlite { path: PathBuf },
    /// MySQL or MariaDB; the URL may carry a password, hence a `Secret`.
    Mysql { url: Secret },
}
