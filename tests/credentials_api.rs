//! The credential views through the real server on every backend under test: `/credentials` rows
//! with `fields` as a JSON object (DECNET's repository decodes it; its dashboard reads the keys),
//! and a credential-reuse finding read alone by the id the list gives it, as DECNET's Credentials
//! page does from its `×N` badge.

use svc_test_support::in_process as common;

use common::logs::{LogWriter, at};
use common::{TestApi, TestDb, user_token};
use reqwest::StatusCode;
use serde_json::json;
use svc::db::{NewCredential, Role};

fn credential(ip: &str, decky: &str, service: &str, principal: &str, secret: &str) -> NewCredential {
    NewCredential {
        seen_at: at(1),
        attacker_ip: ip.into(),
        decky: decky.into(),
        service: service.into(),
        secret_kind: "plaintext".into(),
        secret_sha256: format!("{secret:0>64}"),
        principal: Some(principal.into()),
        secret_printable: secret.into(),
        secret_b64: "eA==".into(),
        outcome: None,
    }
}

#[tokio::test]
async fn a_reuse_finding_is_read_by_its_id_and_credential_fields_are_an_object() {
    for backend in TestDb::all() {
        let api = TestApi::start(backend.api_config(&[])).await;
        let token = user_token(&api.state, "watcher", Role::Viewer).await;
        let mut writer = LogWriter::new(&api.state.db).await;
        writer
            .commit_with_credentials(
                vec![],
                vec![],
                vec![
                    // `toor` for root on three targets from two addresses: a finding.
                    credential("10.0.0.1", "ssh-01", "ssh", "root", "toor"),
                    credential("10.0.0.1", "web-01", "http", "root", "toor"),
                    credential("10.0.0.2", "ssh-02", "ssh", "root", "toor"),
                    // `hunter2` on one target only: not a finding.
                    credential("10.0.0.3", "ssh-01", "ssh", "admin", "hunter2"),
                    // `toor` for another principal on two targets: a finding of its own.
                    credential("10.0.0.4", "ssh-01", "ssh", "admin", "toor"),
                    credential("10.0.0.4", "ssh-02", "ssh", "admin", "toor"),
                ],
            )
            .await;

        let credentials = api.ok("/credentials", &token, &[]).await;
        assert_eq!(credentials["total"], 6, "{}: {credentials}", backend.name);
        for row in credentials["data"].as_array().unwrap() {
            assert_eq!(row["fields"], json!({}), "{}: an object, not its text: {row}", backend.name);
        }

        let list = api.ok("/credential-reuse", &token, &[]).await;
        assert_eq!(list["total"], 2, "{}: {list}", backend.name);
        for finding in list["data"].as_array().unwrap() {
            let id = finding["id"].as_str().unwrap();
            let alone = api.ok(&format!("/credential-reuse/{id}"), &token, &[]).await;
            assert_eq!(&alone, finding, "{}: the detail is the list's row", backend.name);
        }
        let root = &list["data"][0];
        assert_eq!(
            (&root["principal"], &root["target_count"], &root["attacker_ips"]),
            (&json!("root"), &json!(3), &json!(["10.0.0.1", "10.0.0.2"])),
            "{}",
            backend.name
        );

        // An id no finding has (a secret on one target, or nothing at all) and a bad id: 404.
        for id in ["0".repeat(32), "not-an-id".to_string(), "f".repeat(300)] {
            let missing = api.get(&format!("/credential-reuse/{id}"), Some(&token), &[]).await;
            assert_eq!(
                (missing.status, missing.body),
                (StatusCode::NOT_FOUND, json!({"detail": "credential_reuse not found"})),
                "{}: {id}",
                backend.name
            );
        }
        let anonymous = api.get(&format!("/credential-reuse/{}", root["id"].as_str().unwrap()), None, &[]).await;
        assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED, "{}", backend.name);
        api.stop().await;
    }
}
