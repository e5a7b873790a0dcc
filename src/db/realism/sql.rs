//! The realism settings' statements, the same on both backends but for the upsert's clause.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{RealismSetting, RealismStore};
use crate::db::DbResult;
use crate::db::codec::millis;
use crate::db::dialect::both_backends;
use crate::secret::Secret;

both_backends! {
    #[async_trait]
    impl RealismStore for Backend {
        async fn realism_setting(&self, key: &str) -> DbResult<Option<RealismSetting>> {
            let row: Option<(String, Option<String>)> =
                sqlx::query_as("select value, secret from realism_settings where setting_key = ?")
                    .bind(key)
                    .fetch_optional(&self.pool)
                    .await?;
            let Some((value, secret)) = row else { return Ok(None) };
            let secret = secret.map(|sealed| self.seal.open(&sealed).map(Secret::new)).transpose()?;
            Ok(Some(RealismSetting { value, secret }))
        }

        async fn put_realism_setting(&self, key: &str, setting: &RealismSetting, now: DateTime<Utc>) -> DbResult<()> {
            let sealed = setting.secret.as_ref().map(|secret| self.seal.seal(secret.expose())).transpose()?;
            sqlx::query(&format!(
                "insert into realism_settings (setting_key, value, secret, updated_at) values (?, ?, ?, ?){}",
                Backend::replace("setting_key", &["value", "secret", "updated_at"])
            ))
            .bind(key)
            .bind(&setting.value)
            .bind(sealed)
            .bind(millis(now))
            .execute(&self.pool)
            .await?;
            Ok(())
        }
    }
}
