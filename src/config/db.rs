//! The repository backend, from `SVC_DB_TYPE`, `SVC_DB_PATH` and `SVC_DB_URL`, as the db layer's own
//! [`DatabaseConfig`]: the db layer knows what to open, not where that came from.

use std::path::{Path, PathBuf};

use super::env::Env;
use super::rules;
use crate::db::DatabaseConfig;
use crate::secret::Secret;

pub(super) fn read(env: &mut Env, data_dir: &Path) -> DatabaseConfig {
    let kind = env.get("SVC_DB_TYPE").map(|v| v.trim().to_ascii_lowercase());
    match kind.as_deref() {
        None | Some("") | Some("sqlite") => DatabaseConfig::Sqlite {
            path: env.non_empty("SVC_DB_PATH").map(PathBuf::from).unwrap_or_else(|| data_dir.join("svc.db")),
        },
        Some("mysql") => {
            let url = env.non_empty("SVC_DB_URL").unwrap_or_default();
            env.report_all(rules::mysql_url(&url));
            DatabaseConfig::Mysql { url: Secret::new(url) }
        }
        Some(_) => {
            env.report("SVC_DB_TYPE", "must be `sqlite` or `mysql`");
            DatabaseConfig::Sqlite { path: data_dir.join("svc.db") }
        }
    }
}
