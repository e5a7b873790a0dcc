//! Viewers never read the admin-only fields of a log row (mail recipients, subjects, bodies): a
//! matrix of every route that returns log rows or bounties, each read as a viewer and as an admin
//! through the real server, over rows stored the way the ingester stores them. The rule itself is
//! `http::redact`'s.

use svc_test_support::in_process as common;

use std::time::Duration;

use chrono::Utc;
use common::logs::{LogWriter, at, bounty, log};
use common::sse::EventStream;
use common::{RoleTokens, TestApi, TestDb};
use reqwest::StatusCode;
use serde_json::json;
use svc::db::{AttackerProfile, ProfilerBatch};

const ATTACKER: &str = "10.0.0.7";
/// What only an admin may read, each stored in a row the routes return.
const SECRETS: [&str; 4] = ["ceo@victim.example", "cfo@victim.example", "Wire the funds", "boss@victim.example"];

/// A route, its query, and whether a viewer may call it at all.
type Route<'a> = (&'a str, &'a [(&'a str, &'a str)], bool);

/// Where a route's rows show up as text, for one reader: `None` when refused.
async fn read(api: &TestApi, token: &str, path: &str, query: &[(&str, &str)]) -> Option<String> {
    if path == "/stream" {
        let response =
            api.client.get(api.url(path)).bearer_auth(token).header("Last-Event-ID", "0").send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let mut stream = EventStream::new(response);
        loop {
            let frame = stream.next_event(Duration::from_secs(10)).await.expect("the stream is open");
            if frame.json()["type"] == "logs" {
                return Some(frame.data);
            }
        }
    }
    let reply = api.get(path, Some(token), query).await;
    match reply.status {
        StatusCode::OK => Some(reply.body.to_string()),
        StatusCode::FORBIDDEN => None,
        other => panic!("{path}: {other} {}", reply.body),
    }
}

#[tokio::test]
async fn viewers_read_every_log_row_route_without_the_admin_only_fields_and_admins_read_them_whole() {
    for backend in TestDb::all() {
        let (api, RoleTokens { admin, viewer }) =
            TestApi::start_with_users(backend.api_config(&[("SVC_LIMITER_ENABLED", "false")])).await;
        let mut writer = LogWriter::new(&api.state.db).await;
        let mail = json!({"mail_from": "x@evil.test", "rcpt_to": "ceo@victim.example,cfo@victim.example", "subject": "Wire the funds", "queue_id": "Q1"});
        let logs = vec![
            log("mail-01", "smtp", "rcpt_denied", ATTACKER, json!({"value": "boss@victim.example"}), at(1)),
            log("mail-01", "smtp", "message_accepted", ATTACKER, mail, at(2)),
            log(
                "mail-01",
                "smtp",
                "message_stored",
                ATTACKER,
                json!({"stored_as": "m1.eml", "subject": "Wire the funds"}),
                at(3),
            ),
            log(
                "mail-01",
                "smtp",
                "file_captured",
                ATTACKER,
                json!({"stored_as": "a.pdf", "subject": "Wire the funds"}),
                at(4),
            ),
        ];
        let payload = json!({"kind": "mail", "stored_as": "m1.eml", "rcpt_to": "ceo@victim.example", "subject": "Wire the funds"});
        writer.commit(logs, vec![bounty("artifact", ATTACKER, &payload.to_string(), at(3))]).await;
        let profile = AttackerProfile::new(ATTACKER, at(0), at(4));
        let uuid = profile.uuid;
        let lease = api.state.db.acquire_worker_lease("profiler", "test", Utc::now(), Duration::from_secs(60));
        assert!(lease.await.unwrap());
        let cursor = api.state.db.profiler_cursor().await.unwrap();
        let batch =
            ProfilerBatch { last_log_id: cursor + 1, profiles: vec![profile], commands: vec![], observations: vec![] };
        api.state.db.commit_profiles("test", cursor, &batch).await.unwrap();

        let artifacts = format!("/attackers/{uuid}/artifacts");
        let mail = format!("/attackers/{uuid}/mail");
        let routes: [Route; 6] = [
            ("/logs", &[], true),
            ("/logs", &[("search", "event:message_accepted")], true),
            ("/stream", &[], true),
            (&artifacts, &[], true),
            (&mail, &[], false),
            ("/bounty", &[], true),
        ];
        for (path, query, viewers_may) in routes {
            let what = format!("{path} {query:?} ({})", backend.name);
            // The viewer first, then the admin, then the viewer again: a body shared between
            // readers (the hot-read cache) is never shared across roles.
            for (reader, token) in [("viewer", &viewer), ("admin", &admin), ("viewer again", &viewer)] {
                let body = read(&api, token, path, query).await;
                if reader == "admin" {
                    let body = body.unwrap_or_else(|| panic!("{what}: the admin is refused"));
                    assert!(SECRETS.iter().any(|s| body.contains(s)), "{what}: the admin reads the row whole: {body}");
                    continue;
                }
                match body {
                    None => assert!(!viewers_may, "{what}: the viewer is refused"),
                    Some(body) => {
                        assert!(viewers_may, "{what}: admin only, yet the viewer got {body}");
                        for secret in SECRETS {
                            assert!(!body.contains(secret), "{what}: the {reader} read {secret:?}: {body}");
                        }
                        assert!(body.contains("[redacted]"), "{what}: {body}");
                        assert!(body.contains("x@evil.test") || !path.starts_with("/logs"), "{what}: the sender stays");
                    }
                }
            }
        }
        // Searching cannot probe what is hidden: a viewer's answer is the same whether the probe
        // is right or wrong, while an admin's search finds the row.
        let probes = [
            ("rcpt_to:ceo@victim.example,cfo@victim.example", "rcpt_to:nobody@else.example"),
            ("subject:'Wire the funds'", "subject:'Pay nobody'"),
            ("value:boss@victim.example", "value:nobody@else.example"),
            ("ceo@victim", "nobody@else"),
            ("'Wire the funds'", "'Pay nobody'"),
            ("event:message_accepted victim.example", "event:message_accepted else.example"),
        ];
        let total = |body: Option<String>| -> u64 {
            let body: serde_json::Value = serde_json::from_str(&body.expect("/logs answers")).unwrap();
            body["total"].as_u64().unwrap_or_else(|| panic!("a total: {body}"))
        };
        for (right, wrong) in probes {
            let what = format!("search {right:?} ({})", backend.name);
            let admin_finds = total(read(&api, &admin, "/logs", &[("search", right)]).await);
            assert!(admin_finds >= 1, "{what}: the admin's search finds the row");
            for path in ["/logs", "/logs/histogram"] {
                let seen = read(&api, &viewer, path, &[("search", right)]).await.unwrap();
                let unseen = read(&api, &viewer, path, &[("search", wrong)]).await.unwrap();
                assert_eq!(seen, unseen, "{what} on {path}: the viewer's answer depends on the hidden value");
                for secret in SECRETS {
                    assert!(!seen.contains(secret), "{what} on {path}: {seen}");
                }
            }
        }
        api.stop().await;
    }
}
