//! An open event stream ends with its session: on each of the three stream routes (`/stream`,
//! `/attackers/{uuid}/events`, `/topologies/{id}/events`), through the real server, a stream opened
//! by a bearer token or a ticket ends with a final `error` frame within 15 s of a logout, an admin's
//! password reset, the user's own password change, a role change, the user's deletion and the
//! token's expiry (with a short `SVC_SSE_RECHECK_SECS`). A ticket minted before its user's own
//! password change does not open a stream afterwards.

use svc_test_support::in_process as common;

use std::time::{Duration, Instant};

use chrono::Utc;
use common::sse::EventStream;
use common::{ADMIN_PASSWORD, JWT_SECRET, TestApi, TestDb, user_token};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use svc::auth::token::TokenKeys;
use svc::db::{AttackerProfile, Role};
use uuid::Uuid;

/// The bound: a stream ends within 15 s of its session's end.
const WITHIN: Duration = Duration::from_secs(15);
const NEW_PASSWORD: &str = "another long password";

#[derive(Clone, Copy, Debug)]
enum Route {
    Logs,
    Attacker,
    Topology,
}

const ROUTES: [Route; 3] = [Route::Logs, Route::Attacker, Route::Topology];

struct Fixture {
    api: TestApi,
    admin: String,
    attacker: Uuid,
    topology: String,
}

impl Fixture {
    async fn start(db: &TestDb) -> Fixture {
        let api = TestApi::start(db.api_config(&[
            ("SVC_SSE_RECHECK_SECS", "0.2"),
            ("SVC_LIMITER_ENABLED", "false"),
            ("SVC_DOCKER_HOST", "unix:///nonexistent/engine.sock"),
            ("SVC_TOPOLOGY_SUBNET_POOL", "10.215.0.0/16"),
        ]))
        .await;
        let admin = user_token(&api.state, "root", Role::Admin).await;
        let profile = AttackerProfile::new("10.0.0.9", Utc::now(), Utc::now());
        let attacker = profile.uuid;
        let cursor = api.state.db.profiler_cursor().await.unwrap();
        let lease = api.state.db.acquire_worker_lease("profiler", "test", Utc::now(), Duration::from_secs(60));
        assert!(lease.await.unwrap());
        let batch = svc::db::ProfilerBatch {
            last_log_id: cursor + 1,
            profiles: vec![profile],
            commands: vec![],
            observations: vec![],
        };
        api.state.db.commit_profiles("test", cursor, &batch).await.unwrap();
        let fixture = Fixture { api, admin, attacker, topology: String::new() };
        let body = json!({"name": "watched", "depth": 2, "branching_factor": 2, "deckies_per_lan_max": 2, "cross_edge_probability": 0.5, "seed": 3});
        let (status, topology) = fixture.call(&fixture.admin, Method::POST, "/topologies/", Some(body)).await;
        assert_eq!(status, StatusCode::CREATED, "{topology}");
        Fixture { topology: topology["id"].as_str().unwrap().to_string(), ..fixture }
    }

    async fn call(&self, token: &str, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut request = self.api.client.request(method, self.api.url(path)).bearer_auth(token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        (response.status(), response.json().await.unwrap_or(Value::Null))
    }

    fn path(&self, route: Route) -> String {
        match route {
            Route::Logs => "/stream".into(),
            Route::Attacker => format!("/attackers/{}/events", self.attacker),
            Route::Topology => format!("/topologies/{}/events", self.topology),
        }
    }

    async fn request(&self, route: Route, bearer: Option<&str>, ticket: Option<&str>) -> reqwest::Response {
        let mut request = self.api.client.get(self.api.url(&self.path(route)));
        if let Some(token) = bearer {
            request = request.bearer_auth(token);
        }
        if let Some(ticket) = ticket {
            request = request.query(&[("ticket", ticket)]);
        }
        request.send().await.unwrap()
    }

    /// An open stream whose first frame arrived.
    async fn open(&self, route: Route, bearer: Option<&str>, ticket: Option<&str>) -> EventStream {
        let response = self.request(route, bearer, ticket).await;
        assert_eq!(response.status(), StatusCode::OK, "{route:?}");
        let mut stream = EventStream::new(response);
        let first = stream.next_event(WITHIN).await;
        assert!(first.is_some_and(|f| f.event.as_deref() != Some("error")), "{route:?} opens");
        stream
    }

    async fn ticket(&self, token: &str) -> String {
        let (status, body) = self.call(token, Method::POST, "/auth/sse-ticket", None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["ticket"].as_str().unwrap().to_string()
    }

    async fn user(&self, name: &str) -> (Uuid, String) {
        let token = user_token(&self.api.state, name, Role::Viewer).await;
        (self.api.state.db.user_by_name(name).await.unwrap().uuid, token)
    }
}

/// Reads on until the stream's final `error` frame, which must come within [`WITHIN`], and then
/// the end of the stream.
async fn ends_with_session(mut stream: EventStream, what: &str) {
    let started = Instant::now();
    loop {
        let left = WITHIN.saturating_sub(started.elapsed());
        let frame = stream.next_within(left).await.unwrap_or_else(|| panic!("{what}: ended without an error frame"));
        if frame.event.as_deref() == Some("error") {
            assert_eq!(frame.json(), json!({"type": "error", "message": "Session expired or revoked"}), "{what}");
            break;
        }
    }
    assert!(stream.next_within(WITHIN).await.is_none(), "{what}: the stream ends after its error frame");
}

#[derive(Clone, Copy, Debug)]
enum Revocation {
    Logout,
    AdminReset,
    OwnPasswordChange,
    RoleChange,
    Deletion,
}

async fn revoke(fixture: &Fixture, how: Revocation, user: Uuid, token: &str) {
    let (status, body) = match how {
        Revocation::Logout => fixture.call(token, Method::POST, "/auth/logout", None).await,
        Revocation::AdminReset => {
            let path = format!("/config/users/{user}/reset-password");
            fixture.call(&fixture.admin, Method::PUT, &path, Some(json!({"new_password": NEW_PASSWORD}))).await
        }
        Revocation::OwnPasswordChange => {
            let body = json!({"old_password": ADMIN_PASSWORD, "new_password": NEW_PASSWORD});
            fixture.call(token, Method::POST, "/auth/change-password", Some(body)).await
        }
        Revocation::RoleChange => {
            let path = format!("/config/users/{user}/role");
            fixture.call(&fixture.admin, Method::PUT, &path, Some(json!({"role": "admin"}))).await
        }
        Revocation::Deletion => {
            fixture.call(&fixture.admin, Method::DELETE, &format!("/config/users/{user}"), None).await
        }
    };
    assert_eq!(status, StatusCode::OK, "{how:?}: {body}");
}

#[tokio::test]
async fn every_stream_ends_within_seconds_of_its_sessions_revocation() {
    let db = TestDb::sqlite();
    let fixture = Fixture::start(&db).await;
    let cases = [
        Revocation::Logout,
        Revocation::AdminReset,
        Revocation::OwnPasswordChange,
        Revocation::RoleChange,
        Revocation::Deletion,
    ];
    // Another user's streams, open throughout, are not touched by the revocations.
    let (bystander, bystander_token) = fixture.user("bystander").await;
    let mut untouched = Vec::new();
    for route in ROUTES {
        untouched.push(fixture.open(route, Some(&bystander_token), None).await);
    }
    for (n, how) in cases.into_iter().enumerate() {
        for route in ROUTES {
            let (user, token) = fixture.user(&format!("viewer-{n}-{route:?}")).await;
            let by_header = fixture.open(route, Some(&token), None).await;
            let ticket = fixture.ticket(&token).await;
            let by_ticket = fixture.open(route, None, Some(&ticket)).await;

            revoke(&fixture, how, user, &token).await;
            ends_with_session(by_header, &format!("{how:?} on {route:?} (bearer)")).await;
            ends_with_session(by_ticket, &format!("{how:?} on {route:?} (ticket)")).await;
            assert_eq!(fixture.api.state.sse.open(user), 0, "the ended streams' slots are free");
        }
    }
    assert_eq!(fixture.api.state.sse.open(bystander), 3, "the bystander's streams are still open");
    drop(untouched);
    fixture.api.stop().await;
}

#[tokio::test]
async fn every_stream_ends_when_its_token_expires() {
    let db = TestDb::sqlite();
    let fixture = Fixture::start(&db).await;
    let keys = TokenKeys::new(JWT_SECRET.as_bytes(), chrono::Duration::seconds(3));
    for route in ROUTES {
        let (user, _) = fixture.user(&format!("brief-{route:?}")).await;
        let short = keys.mint(user, None, Utc::now()).unwrap();
        let by_header = fixture.open(route, Some(&short), None).await;
        let ticket = fixture.ticket(&short).await;
        let by_ticket = fixture.open(route, None, Some(&ticket)).await;
        ends_with_session(by_header, &format!("expiry on {route:?} (bearer)")).await;
        ends_with_session(by_ticket, &format!("expiry on {route:?} (ticket)")).await;
    }
    fixture.api.stop().await;
}

#[tokio::test]
async fn a_ticket_minted_before_its_users_own_password_change_opens_nothing_after_it() {
    let db = TestDb::sqlite();
    let fixture = Fixture::start(&db).await;
    for route in ROUTES {
        let (user, token) = fixture.user(&format!("changer-{route:?}")).await;
        let ticket = fixture.ticket(&token).await;
        revoke(&fixture, Revocation::OwnPasswordChange, user, &token).await;
        let refused = fixture.request(route, None, Some(&ticket)).await;
        assert_eq!(refused.status(), StatusCode::UNAUTHORIZED, "{route:?}");

        // A ticket minted with a token since logged out opens nothing either.
        let login = json!({"username": format!("changer-{route:?}"), "password": NEW_PASSWORD});
        let response = fixture.api.client.post(fixture.api.url("/auth/login")).json(&login).send().await.unwrap();
        let fresh = response.json::<Value>().await.unwrap()["access_token"].as_str().unwrap().to_string();
        let ticket = fixture.ticket(&fresh).await;
        let (status, _) = fixture.call(&fresh, Method::POST, "/auth/logout", None).await;
        assert_eq!(status, StatusCode::OK);
        let refused = fixture.request(route, None, Some(&ticket)).await;
        assert_eq!(refused.status(), StatusCode::UNAUTHORIZED, "{route:?}: logged-out token's ticket");
    }
    fixture.api.stop().await;
}
