//! Webhook signing secrets are sealed at rest: through the real server, a created or changed
//! webhook's secret is not in the database file, the key is a 0600 file in the data directory, the
//! sender still reads the secret whole, and a plaintext secret an earlier version stored is sealed
//! when the API starts.

use svc_test_support::in_process as common;

use std::os::unix::fs::PermissionsExt;

use common::{TestApi, TestDb, user_token};
use reqwest::StatusCode;
use serde_json::json;
use svc::db::Role;
use uuid::Uuid;

const SECRET: &str = "a-signing-secret-of-some-length";
const CHANGED: &str = "another-signing-secret-entirely";

/// The secret column of every webhook, as stored.
fn stored_secrets(db_file: &std::path::Path) -> Vec<String> {
    let connection = rusqlite::Connection::open(db_file).unwrap();
    let mut statement = connection.prepare("select secret from webhook_subscriptions order by created_at").unwrap();
    statement.query_map([], |row| row.get(0)).unwrap().map(Result::unwrap).collect()
}

#[tokio::test]
async fn signing_secrets_are_sealed_in_the_database_and_plaintext_ones_are_sealed_on_start() {
    let db = TestDb::sqlite();
    let config = db.api_config(&[]);
    let db_file = config.data_dir.join("svc.db");
    let key_file = config.data_dir.join("secrets.key");
    let api = TestApi::start(config.clone()).await;
    let admin = user_token(&api.state, "root", Role::Admin).await;
    let body = json!({"name": "siem", "url": "https://8.8.8.8/hook", "secret": SECRET, "topic_patterns": ["a.b"]});
    let created = api.client.post(api.url("/webhooks/")).bearer_auth(&admin).json(&body).send().await.unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    let uuid: Uuid = created.json::<serde_json::Value>().await.unwrap()["uuid"].as_str().unwrap().parse().unwrap();

    let stored = stored_secrets(&db_file);
    assert!(stored[0].starts_with("sealed:v1:") && !stored[0].contains(SECRET), "{stored:?}");
    assert_eq!(api.state.db.webhook(uuid).await.unwrap().secret.expose(), SECRET, "the sender reads it whole");
    assert_eq!(std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777, 0o600);

    let path = format!("/webhooks/{uuid}");
    let change = json!({"secret": CHANGED});
    let changed = api.client.patch(api.url(&path)).bearer_auth(&admin).json(&change).send().await.unwrap();
    assert_eq!(changed.status(), StatusCode::OK);
    assert!(!stored_secrets(&db_file)[0].contains(CHANGED));
    assert_eq!(api.state.db.webhook(uuid).await.unwrap().secret.expose(), CHANGED);
    api.stop().await;

    // An earlier version's plaintext row is read as it is, and sealed on the next start.
    let connection = rusqlite::Connection::open(&db_file).unwrap();
    connection.execute("update webhook_subscriptions set secret = ?1", [SECRET]).unwrap();
    drop(connection);
    let api = TestApi::start(config).await;
    let stored = stored_secrets(&db_file);
    assert!(stored[0].starts_with("sealed:v1:") && !stored[0].contains(SECRET), "{stored:?}");
    assert_eq!(api.state.db.webhook(uuid).await.unwrap().secret.expose(), SECRET);
    api.stop().await;
}
