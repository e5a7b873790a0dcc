//! The log views through the real server: `GET /logs`, `/logs/histogram`, `/stats` and `/bounty`,
//! over rows stored the way the ingester stores them, on every backend under test.

use svc_test_support::in_process as common;

use std::collections::BTreeSet;

use common::logs::{LogWriter, at, bounty, log};
use common::{ADMIN_PASSWORD, TestApi, TestDb, user_token};
use reqwest::StatusCode;
use serde_json::{Value, json};
use svc::db::Role;
use svc::time::format_utc;

async fn viewer(api: &TestApi) -> String {
    user_token(&api.state, "watcher", Role::Viewer).await
}

const INVALID: &str = "Invalid request parameters";

#[tokio::test]
async fn logs_are_paged_newest_first_with_the_total() {
    for backend in TestDb::all() {
        let api = TestApi::start(backend.api_config(&[])).await;
        let token = viewer(&api).await;
        let empty = api.ok("/logs", &token, &[]).await;
        assert_eq!(empty, json!({"total": 0, "limit": 50, "offset": 0, "data": []}), "{}", backend.name);

        // The empty page was just served, and may be shared with the next caller: a commit makes
        // the next read see it.
        let mut writer = LogWriter::new(&api.state.db).await;
        for batch in 0..3 {
            let rows = (0..40)
                .map(|i| {
                    let n = batch * 40 + i;
                    let ip = format!("10.0.0.{}", n % 7);
                    log("ssh-01", "ssh", "login_attempt", &ip, json!({"n": n.to_string()}), at(n))
                })
                .collect();
            writer.logs(rows).await;
        }

        let first = api.ok("/logs", &token, &[]).await;
        assert_eq!(
            (first["total"].clone(), first["limit"].clone(), first["offset"].clone()),
            (json!(120), json!(50), json!(0))
        );
        let rows = first["data"].as_array().unwrap();
        assert_eq!(rows.len(), 50);
        let newest = &rows[0];
        let keys: BTreeSet<&str> = newest.as_object().unwrap().keys().map(String::as_str).collect();
        let expected: BTreeSet<&str> = [
            "id",
            "timestamp",
            "decky",
            "service",
            "event_type",
            "attacker_ip",
            "raw_line",
            "fields",
            "msg",
            "trace_id",
            "span_id",
            "host_uuid",
        ]
        .into();
        assert_eq!(keys, expected);
        assert_eq!(newest["timestamp"], format_utc(at(119)));
        assert_eq!(newest["timestamp"], "2026-11-21T15:59:00.000Z");
        // `fields` is the JSON object as text, which the dashboard decodes itself.
        let fields: Value = serde_json::from_str(newest["fields"].as_str().expect("fields is a string")).unwrap();
        assert_eq!(fields, json!({"n": "119"}));
        assert_eq!((newest["decky"].clone(), newest["attacker_ip"].clone()), (json!("ssh-01"), json!("10.0.0.0")));
        let ids: Vec<i64> = rows.iter().map(|r| r["id"].as_i64().unwrap()).collect();
        assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first: {ids:?}");

        let last = api.ok("/logs", &token, &[("limit", "50"), ("offset", "100")]).await;
        assert_eq!((last["total"].clone(), last["offset"].clone()), (json!(120), json!(100)));
        let last_rows = last["data"].as_array().unwrap();
        assert_eq!(last_rows.len(), 20);
        assert_eq!(last_rows[19]["timestamp"], format_utc(at(0)));

        let all = api.ok("/logs", &token, &[("limit", "1000")]).await;
        assert_eq!(all["data"].as_array().unwrap().len(), 120);
        let beyond = api.ok("/logs", &token, &[("offset", "2147483647")]).await;
        assert_eq!((beyond["total"].clone(), beyond["data"].clone()), (json!(120), json!([])));
        api.stop().await;
    }
}

/// Four rows, told apart by their minute: a=1, b=2, c=3, d=4.
async fn search_fixture(api: &TestApi) {
    let mut writer = LogWriter::new(&api.state.db).await;
    writer
        .logs(vec![
            log("ssh-01", "ssh", "login_attempt", "10.0.0.1", json!({"username": "root", "password": "toor"}), at(1)),
            log("ssh-02", "ssh", "login_attempt", "10.0.0.2", json!({"username": "admin"}), at(2)),
            log("web-01", "http", "request", "10.0.0.1", json!({"path": "/wget.sh", "method": "GET"}), at(3)),
            log("web-01", "http", "request", "10.0.0.3", json!({"path": "/", "user_agent": "curl/8.0 mozilla"}), at(4)),
        ])
        .await;
}

async fn found(api: &TestApi, token: &str, path: &str, search: &str) -> String {
    let body = api.ok(path, token, &[("search", search)]).await;
    let mut names: Vec<char> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| match row["timestamp"].as_str().unwrap() {
            "2026-11-21T14:01:00.000Z" => 'a',
            "2026-11-21T14:02:00.000Z" => 'b',
            "2026-11-21T14:03:00.000Z" => 'c',
            "2026-11-21T14:04:00.000Z" => 'd',
            other => panic!("unexpected row at {other}"),
        })
        .collect();
    names.sort();
    assert_eq!(body["total"], names.len(), "{search}");
    names.into_iter().collect()
}

#[tokio::test]
async fn the_search_grammar_works_end_to_end() {
    for backend in TestDb::all() {
        let api = TestApi::start(backend.api_config(&[])).await;
        let token = viewer(&api).await;
        search_fixture(&api).await;
        let cases = [
            // Columns, exactly.
            ("decky:ssh-01", "a"),
            ("decky:ssh", ""),
            ("service:http", "cd"),
            ("event:login_attempt", "ab"),
            ("attacker:10.0.0.1", "ac"),
            ("attacker-ip:10.0.0.1", "ac"),
            ("attacker_ip:10.0.0.3", "d"),
            // Fields of the line, exactly.
            ("username:root", "a"),
            ("username:roo", ""),
            ("path:/wget.sh", "c"),
            // Bare words: substrings of the line, decky, service or attacker address.
            ("wget", "c"),
            ("toor", "a"),
            ("10.0.0", "abcd"),
            ("web", "cd"),
            ("\"curl/8.0 mozilla\"", "d"),
            ("nowhere", ""),
            // Terms are AND-ed.
            ("service:ssh username:admin", "b"),
            ("service:http 10.0.0.3", "d"),
            ("attacker:10.0.0.1 event:request", "c"),
            ("decky:ssh-01 decky:ssh-02", ""),
            // What a dashboard sends for no search.
            ("", "abcd"),
            ("null", "abcd"),
            ("NULL", "abcd"),
            ("undefined", "abcd"),
        ];
        for (search, expected) in cases {
            assert_eq!(found(&api, &token, "/logs", search).await, expected, "{} search {search:?}", backend.name);
        }
        api.stop().await;
    }
}

#[tokio::test]
async fn time_windows_are_inclusive_utc_and_malformed_times_are_422() {
    for backend in TestDb::all() {
        let api = TestApi::start(backend.api_config(&[])).await;
        let token = viewer(&api).await;
        let mut writer = LogWriter::new(&api.state.db).await;
        let rows = [0, 10, 20, 30].map(|m| log("ssh-01", "ssh", "login_attempt", "10.0.0.1", json!({}), at(m)));
        writer.logs(rows.to_vec()).await;
        let total = |body: Value| body["total"].as_u64().unwrap();
        let cases: [(&[(&str, &str)], u64); 9] = [
            (&[("start_time", "2026-11-21 14:10:00")], 3),
            (&[("end_time", "2026-11-21T14:20:00Z")], 3),
            (&[("start_time", "2026-11-21 14:10:00"), ("end_time", "2026-11-21 14:20:00")], 2),
            // Another offset is the same instant.
            (&[("start_time", "2026-11-21T16:10:00+02:00")], 3),
            (&[("start_time", "2026-11-21T14:10:00.001Z")], 2),
            (&[("end_time", "2026-11-21T14:09:59.999Z")], 1),
            (&[("start_time", "null"), ("end_time", "undefined")], 4),
            (&[("start_time", ""), ("end_time", "NULL")], 4),
            (&[("start_time", "2026-11-22 00:00:00")], 0),
        ];
        for (query, expected) in cases {
            assert_eq!(total(api.ok("/logs", &token, query).await), expected, "{} {query:?}", backend.name);
        }
        let histogram = api.ok("/logs/histogram", &token, &[("start_time", "2026-11-21 14:10:00")]).await;
        assert_eq!(histogram.as_array().unwrap().iter().map(|b| b["count"].as_u64().unwrap()).sum::<u64>(), 3);

        for bad in ["yesterday", "2026-11-21", "1700000000", "2026-13-01 00:00:00", "21/11/2026 14:00", "14:00"] {
            for field in ["start_time", "end_time"] {
                for path in ["/logs", "/logs/histogram"] {
                    let reply = api.get(path, Some(&token), &[(field, bad)]).await;
                    assert_eq!(
                        (reply.status, reply.body),
                        (StatusCode::UNPROCESSABLE_ENTITY, json!({"detail": INVALID})),
                        "{path} {field}={bad}"
                    );
                }
            }
        }
        api.stop().await;
    }
}

#[tokio::test]
async fn parameters_out_of_range_are_422() {
    let backend = TestDb::sqlite();
    let api = TestApi::start(backend.api_config(&[])).await;
    let token = viewer(&api).await;
    let (max_search, over_search) = ("a".repeat(512), "a".repeat(513));
    // Characters, not bytes.
    let (max_wide, over_wide) = ("é".repeat(512), "é".repeat(513));
    let accepted: [(&str, &str, &str); 10] = [
        ("/logs", "search", &max_search),
        ("/logs", "search", &max_wide),
        ("/logs/histogram", "search", &max_search),
        ("/bounty", "search", &max_search),
        ("/logs", "limit", "1"),
        ("/logs", "limit", "1000"),
        ("/logs", "offset", "2147483647"),
        ("/logs/histogram", "interval_minutes", "1"),
        ("/logs/histogram", "interval_minutes", "10080"),
        ("/bounty", "limit", "1000"),
    ];
    for (path, field, value) in accepted {
        let reply = api.get(path, Some(&token), &[(field, value)]).await;
        assert_eq!(reply.status, StatusCode::OK, "{path} {field}={value}: {}", reply.body);
    }
    let refused: [(&str, &str, &str); 17] = [
        ("/logs", "search", &over_search),
        ("/logs", "search", &over_wide),
        ("/logs/histogram", "search", &over_search),
        ("/bounty", "search", &over_search),
        ("/logs", "limit", "0"),
        ("/logs", "limit", "1001"),
        ("/logs", "limit", "-1"),
        ("/logs", "limit", "abc"),
        ("/logs", "limit", "1.5"),
        ("/logs", "limit", ""),
        ("/logs", "offset", "-1"),
        ("/logs", "offset", "2147483648"),
        ("/logs/histogram", "interval_minutes", "0"),
        ("/logs/histogram", "interval_minutes", "10081"),
        ("/logs/histogram", "interval_minutes", "soon"),
        ("/bounty", "limit", "0"),
        ("/bounty", "offset", "-5"),
    ];
    for (path, field, value) in refused {
        let reply = api.get(path, Some(&token), &[(field, value)]).await;
        assert_eq!(
            (reply.status, reply.body),
            (StatusCode::UNPROCESSABLE_ENTITY, json!({"detail": INVALID})),
            "{path} {field}={value}"
        );
    }
    // Authentication comes before validation.
    assert_eq!(api.get("/logs", None, &[("limit", "0")]).await.status, StatusCode::UNAUTHORIZED);
    api.stop().await;

    // Developer mode names the problem; the routes are in the OpenAPI document.
    let api = TestApi::start(backend.api_config(&[("SVC_DEVELOPER", "true")])).await;
    let token = user_token(&api.state, "watcher2", Role::Viewer).await;
    let reply = api.get("/logs", Some(&token), &[("limit", "1001"), ("offset", "-1")]).await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    let kinds: Vec<(&str, &Value)> =
        reply.body["detail"].as_array().unwrap().iter().map(|e| (e["type"].as_str().unwrap(), &e["loc"])).collect();
    assert_eq!(
        kinds,
        [("less_than_equal", &json!(["query", "limit"])), ("greater_than_equal", &json!(["query", "offset"]))]
    );
    let wrong_type = api.get("/logs", Some(&token), &[("limit", "abc")]).await;
    assert_eq!(wrong_type.body["detail"][0]["type"], "int_parsing");
    let doc = api.client.get(api.base.replace("/api/v1", "/openapi.json")).send().await.unwrap();
    let doc: Value = doc.json().await.unwrap();
    for path in ["/api/v1/logs", "/api/v1/logs/histogram", "/api/v1/stats", "/api/v1/bounty", "/api/v1/stream"] {
        assert!(doc["paths"][path]["get"]["responses"]["200"].is_object(), "{path}");
    }
    assert!(doc["paths"]["/api/v1/stream"]["get"]["responses"]["429"].is_object());
    assert!(doc["components"]["schemas"]["LogsResponse"].is_object());
    api.stop().await;
}

#[tokio::test]
async fn the_histogram_counts_rows_per_epoch_aligned_bucket() {
    for backend in TestDb::all() {
        let api = TestApi::start(backend.api_config(&[])).await;
        let token = viewer(&api).await;
        assert_eq!(api.ok("/logs/histogram", &token, &[]).await, json!([]));
        let mut writer = LogWriter::new(&api.state.db).await;
        let rows = [(0, "ssh"), (5, "ssh"), (14, "http"), (15, "ssh"), (31, "http"), (95, "ssh")]
            .map(|(m, service)| log("d-01", service, "e", "10.0.0.1", json!({}), at(m)));
        writer.logs(rows.to_vec()).await;

        let default = api.ok("/logs/histogram", &token, &[]).await;
        assert_eq!(
            default,
            json!([
                {"time": "2026-11-21T14:00:00.000Z", "count": 3},
                {"time": "2026-11-21T14:15:00.000Z", "count": 1},
                {"time": "2026-11-21T14:30:00.000Z", "count": 1},
                {"time": "2026-11-21T15:30:00.000Z", "count": 1},
            ]),
            "{}",
            backend.name
        );
        let hourly = api.ok("/logs/histogram", &token, &[("interval_minutes", "60")]).await;
        assert_eq!(
            hourly,
            json!([{"time": "2026-11-21T14:00:00.000Z", "count": 5}, {"time": "2026-11-21T15:00:00.000Z", "count": 1}])
        );
        let ssh = api.ok("/logs/histogram", &token, &[("search", "service:ssh"), ("interval_minutes", "30")]).await;
        assert_eq!(
            ssh,
            json!([
                {"time": "2026-11-21T14:00:00.000Z", "count": 3},
                {"time": "2026-11-21T15:30:00.000Z", "count": 1},
            ])
        );
        api.stop().await;
    }
}

#[tokio::test]
async fn stats_count_logs_and_distinct_attackers() {
    for backend in TestDb::all() {
        let api = TestApi::start(backend.api_config(&[])).await;
        let token = viewer(&api).await;
        let zero = json!({"total_logs": 0, "unique_attackers": 0, "active_deckies": 0, "deployed_deckies": 0});
        assert_eq!(api.ok("/stats", &token, &[]).await, zero, "{}", backend.name);
        let mut writer = LogWriter::new(&api.state.db).await;
        let rows = ["10.0.0.1", "10.0.0.2", "10.0.0.1", "2001:db8::1", "10.0.0.2"]
            .iter()
            .enumerate()
            .map(|(i, ip)| log("d-01", "ssh", "e", ip, json!({}), at(i as i64)))
            .collect();
        writer.logs(rows).await;
        assert_eq!(
            api.ok("/stats", &token, &[]).await,
            json!({"total_logs": 5, "unique_attackers": 3, "active_deckies": 0, "deployed_deckies": 0})
        );
        api.stop().await;
    }
}

#[tokio::test]
async fn bounties_filter_by_type_and_search_with_decoded_payloads() {
    for backend in TestDb::all() {
        let api = TestApi::start(backend.api_config(&[])).await;
        let token = viewer(&api).await;
        let mut writer = LogWriter::new(&api.state.db).await;
        let bounties = vec![
            bounty("credential", "10.0.0.1", r#"{"username": "root", "password": "toor"}"#, at(1)),
            bounty("credential", "10.0.0.2", r#"{"username": "admin", "password": "hunter2"}"#, at(2)),
            bounty("fingerprint", "10.0.0.1", r#"{"ja3": "769,47-53,0-10,23,0"}"#, at(3)),
            bounty("artifact", "10.0.0.3", "not json at all", at(4)),
        ];
        writer.commit(vec![], bounties).await;

        let all = api.ok("/bounty", &token, &[]).await;
        assert_eq!(
            (all["total"].clone(), all["limit"].clone(), all["offset"].clone()),
            (json!(4), json!(50), json!(0))
        );
        let rows = all["data"].as_array().unwrap();
        let types: Vec<&str> = rows.iter().map(|r| r["bounty_type"].as_str().unwrap()).collect();
        assert_eq!(types, ["artifact", "fingerprint", "credential", "credential"], "newest first");
        let keys: BTreeSet<&str> = rows[0].as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["id", "timestamp", "decky", "service", "attacker_ip", "bounty_type", "payload"].into(),
            "{}",
            backend.name
        );
        assert_eq!(rows[0]["payload"], "not json at all", "an undecodable payload stays text");
        assert_eq!(rows[0]["timestamp"], "2026-11-21T14:04:00.000Z");
        assert_eq!(rows[3]["payload"], json!({"username": "root", "password": "toor"}));

        let total = |body: Value| body["total"].as_u64().unwrap();
        let cases: [(&[(&str, &str)], u64); 8] = [
            (&[("bounty_type", "credential")], 2),
            (&[("bounty_type", "cred")], 0),
            (&[("bounty_type", "null")], 4),
            (&[("search", "toor")], 1),
            (&[("search", "10.0.0.1")], 2),
            (&[("search", "web-01")], 4),
            (&[("bounty_type", "credential"), ("search", "10.0.0.1")], 1),
            (&[("search", "undefined")], 4),
        ];
        for (query, expected) in cases {
            assert_eq!(total(api.ok("/bounty", &token, query).await), expected, "{} {query:?}", backend.name);
        }
        let fingerprint = api.ok("/bounty", &token, &[("bounty_type", "fingerprint")]).await;
        assert_eq!(fingerprint["data"][0]["payload"]["ja3"], "769,47-53,0-10,23,0");
        let page = api.ok("/bounty", &token, &[("limit", "1"), ("offset", "1")]).await;
        assert_eq!((total(page.clone()), page["data"][0]["bounty_type"].clone()), (4, json!("fingerprint")));
        api.stop().await;
    }
}

#[tokio::test]
async fn the_log_views_need_a_viewer_with_a_changed_password() {
    let backend = TestDb::sqlite();
    let api = TestApi::start(backend.api_config(&[])).await;
    let new = svc::db::NewUser {
        username: "fresh".into(),
        password_hash: svc::auth::password::hash(ADMIN_PASSWORD).unwrap(),
        role: Role::Viewer,
        must_change_password: true,
    };
    let fresh = api.state.db.add_user(new, chrono::Utc::now()).await.unwrap();
    let must_change = api.state.sessions.mint(&fresh).unwrap();
    let admin = user_token(&api.state, "root", Role::Admin).await;
    for path in ["/logs", "/logs/histogram", "/stats", "/bounty"] {
        let anonymous = api.get(path, None, &[]).await;
        assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED, "{path}");
        assert_eq!(anonymous.body, json!({"detail": "Could not validate credentials"}));
        assert_eq!(anonymous.www_authenticate.as_deref(), Some("Bearer"));
        let forged = api.get(path, Some("not-a-token"), &[]).await;
        assert_eq!(forged.status, StatusCode::UNAUTHORIZED, "{path}");
        let blocked = api.get(path, Some(&must_change), &[]).await;
        assert_eq!(
            (blocked.status, blocked.body),
            (StatusCode::FORBIDDEN, json!({"detail": "Password change required before accessing this resource"})),
            "{path}"
        );
        assert_eq!(api.get(path, Some(&admin), &[]).await.status, StatusCode::OK, "admins may view: {path}");
    }
    api.stop().await;
}
