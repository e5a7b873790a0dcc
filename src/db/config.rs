//! `DatabaseConfig`: which repository backend [`super::connect`] opens, and where. The configuration
//! chooses it once; this layer only needs to know what it was given.

use std::path::PathBuf;

use crate::secret::Secret;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DatabaseConfig {
    /// A sqlite file in WAL mode; the page cache of the connection the batch writers commit
    /// through, in MiB.
    Sqlite { path: PathBuf, writer_cache_mib: usize, secrets_key: PathBuf },
    /// MySQL or MariaDB; the URL may carry a password, hence a `Secret`.
    Mysql { url: Secret, secrets_key: PathBuf },
}

impl DatabaseConfig {
    /// The file holding the key that seals secrets stored in the database (`seal`).
    pub fn secrets_key(&self) -> &std::path::Path {
        match self {
            DatabaseConfig::Sqlite { secrets_key, .. } | DatabaseConfig::Mysql { secrets_key, .. } => secrets_key,
        }
    }
}
