//! The repository backend, from `SVC_DB_TYPE`, `SVC_DB_PATH` and `SVC_DB_URL`, as the db layer's own
//! [`DatabaseConfig`]: the db layer knows what to open, not where that came from.

use std::path::Path;

use super::env::Env;
use super::rules;
use crate::db::DatabaseConfig;
use crate::secret::Secret;

/// The sqlite writer's page cache: the log indexes of a few million rows stay cached (1M lines
/// back-filled in 22 s instead of 33 s with 64 MiB, when the cache was last sized).
pub(super) const DEFAULT_WRITER_CACHE_MIB: usize = 256;

pub(super) fn read(env: &mut Env, data_dir: &Path) -> DatabaseConfig {
    let kind = env.get_or("SVC_DB_TYPE", "sqlite").trim().to_ascii_lowercase();
    // Read whichever backend is chosen, so that `svc config` lists the other's variable too.
    let url = env.non_empty("SVC_DB_URL");
    let secrets_key = env.path_or("SVC_SECRETS_KEY_FILE", data_dir.join("secrets.key"));
    match kind.as_str() {
        "" | "sqlite" => DatabaseConfig::Sqlite {
            path: env.path_or("SVC_DB_PATH", data_dir.join("svc.db")),
            writer_cache_mib: env.count("SVC_DB_CACHE_MB", DEFAULT_WRITER_CACHE_MIB, 2..=65_536),
            secrets_key,
        },
        "mysql" => {
            let url = url.unwrap_or_default();
            env.report_all(rules::mysql_url(&url));
            DatabaseConfig::Mysql { url: Secret::new(url), secrets_key }
        }
        _ => {
            env.report("SVC_DB_TYPE", "must be `sqlite` or `mysql`");
            let (path, writer_cache_mib) = (data_dir.join("svc.db"), DEFAULT_WRITER_CACHE_MIB);
            DatabaseConfig::Sqlite { path, writer_cache_mib, secrets_key }
        }
    }
}
