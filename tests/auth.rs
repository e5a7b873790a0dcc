//! Authentication, users, rate limits and the HTTP error contract, through the real server on a
//! loopback socket: what a dashboard or an attacker sees.

use svc_test_support::in_process as common;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::{ADMIN_PASSWORD, JWT_SECRET, TestApi, TestDb, user_token};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::header::{HeaderMap, RETRY_AFTER, WWW_AUTHENTICATE};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use svc::db::Role;
use svc::http::extract::STRUCTURAL_DETAIL;

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Value,
}

async fn send(request: reqwest::RequestBuilder) -> Reply {
    let response = request.send().await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Reply { status, headers, body }
}

async fn call(api: &TestApi, method: Method, path: &str, token: Option<&str>, body: Option<Value>) -> Reply {
    let mut request = api.client.request(method, api.url(path));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    send(request).await
}

async fn login(api: &TestApi, username: &str, password: &str) -> Reply {
    call(api, Method::POST, "/auth/login", None, Some(json!({"username": username, "password": password}))).await
}

fn token_of(reply: &Reply) -> String {
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    reply.body["access_token"].as_str().unwrap().to_string()
}

/// An API with the limiter off: these tests log in more often than a person would.
async fn unlimited_api(backend: &TestDb) -> TestApi {
    TestApi::start(backend.api_config(&[("SVC_LIMITER_ENABLED", "false")])).await
}

#[tokio::test]
async fn login_gives_a_token_and_failures_look_the_same_for_unknown_users_and_wrong_passwords() {
    for backend in TestDb::all() {
        let api = unlimited_api(&backend).await;
        let ok = login(&api, "admin", ADMIN_PASSWORD).await;
        assert_eq!(ok.status, StatusCode::OK, "{}", backend.name);
        assert_eq!(ok.body["token_type"], "bearer");
        assert_eq!(ok.body["must_change_password"], true, "the seeded admin must change its password");
        // Usernames are case-insensitive.
        assert_eq!(login(&api, "ADMIN", ADMIN_PASSWORD).await.status, StatusCode::OK);

        let wrong_password = login(&api, "admin", "not the password").await;
        let unknown_user = login(&api, "nobody", ADMIN_PASSWORD).await;
        for reply in [&wrong_password, &unknown_user] {
            assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
            assert_eq!(reply.body, json!({"detail": "Incorrect username or password"}));
            assert_eq!(reply.headers[WWW_AUTHENTICATE], "Bearer");
        }
        api.stop().await;
    }
}

#[tokio::test]
async fn an_unknown_user_costs_a_password_hash_like_a_known_one() {
    let backend = TestDb::sqlite();
    let api = unlimited_api(&backend).await;
    // Warm the decoy hash and the connection pool first.
    login(&api, "nobody", "warm up the decoy").await;
    login(&api, "admin", "warm up the pool").await;
    // Interleaved, so load from other tests weighs on both sides alike.
    let (mut known, mut unknown) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..6 {
        for (username, total) in [("admin", &mut known), ("nobody", &mut unknown)] {
            let start = Instant::now();
            assert_eq!(login(&api, username, "a wrong password").await.status, StatusCode::UNAUTHORIZED);
            *total += start.elapsed();
        }
    }
    let ratio = unknown.as_secs_f64() / known.as_secs_f64();
    assert!((0.5..2.0).contains(&ratio), "unknown {unknown:?} vs known {known:?}");
    api.stop().await;
}

/// A token signed with `key` and `alg` carrying `claims` as given.
fn forge(claims: &Value, alg: Algorithm, key: &[u8]) -> String {
    jsonwebtoken::encode(&Header::new(alg), claims, &EncodingKey::from_secret(key)).unwrap()
}

fn claims_for(user: &str) -> Value {
    let now = chrono::Utc::now().timestamp();
    json!({"sub": user, "jti": uuid::Uuid::new_v4().simple().to_string(), "iat": now, "exp": now + 600,
           "iss": "svc", "aud": "svc-dashboard", "typ": "access"})
}

#[tokio::test]
async fn forged_and_misused_tokens_are_rejected() {
    let backend = TestDb::sqlite();
    let api = unlimited_api(&backend).await;
    let token = user_token(&api.state, "watcher", Role::Viewer).await;
    let user = api.state.db.user_by_name("watcher").await.unwrap().uuid.to_string();
    let good = claims_for(&user);
    let secret = JWT_SECRET.as_bytes();
    assert_eq!(
        call(&api, Method::GET, "/config", Some(&forge(&good, Algorithm::HS256, secret)), None).await.status,
        StatusCode::OK
    );

    let with = |key: &str, value: Value| {
        let mut claims = good.clone();
        claims[key] = value;
        claims
    };
    let without = |key: &str| {
        let mut claims = good.clone();
        claims.as_object_mut().unwrap().remove(key);
        claims
    };
    let unsigned = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#),
        URL_SAFE_NO_PAD.encode(good.to_string())
    );
    let expired = with("exp", json!(chrono::Utc::now().timestamp() - 5));
    // RFC 7519: rejected when now >= exp, with no leeway; the server's clock is at this second or later.
    let expiring_now = with("exp", json!(chrono::Utc::now().timestamp()));
    let cases = [
        ("alg none", unsigned),
        ("wrong algorithm", forge(&good, Algorithm::HS512, secret)),
        ("bad signature", forge(&good, Algorithm::HS256, b"another secret that is long enough!!")),
        ("wrong iss", forge(&with("iss", json!("decnet")), Algorithm::HS256, secret)),
        ("wrong aud", forge(&with("aud", json!("decnet-dashboard")), Algorithm::HS256, secret)),
        ("wrong typ", forge(&with("typ", json!("refresh")), Algorithm::HS256, secret)),
        ("missing jti", forge(&without("jti"), Algorithm::HS256, secret)),
        ("missing iat", forge(&without("iat"), Algorithm::HS256, secret)),
        ("missing typ", forge(&without("typ"), Algorithm::HS256, secret)),
        ("expired", forge(&expired, Algorithm::HS256, secret)),
        ("expiring this second", forge(&expiring_now, Algorithm::HS256, secret)),
        ("unknown user", forge(&with("sub", json!(uuid::Uuid::new_v4())), Algorithm::HS256, secret)),
        ("garbage", "not.a.token".to_string()),
    ];
    for (case, forged) in cases {
        let reply = call(&api, Method::GET, "/config", Some(&forged), None).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{case}");
        assert_eq!(reply.body, json!({"detail": "Could not validate credentials"}), "{case}");
        assert_eq!(reply.headers[WWW_AUTHENTICATE], "Bearer", "{case}");
    }

    // No token; the token in the query string; the wrong scheme.
    assert_eq!(call(&api, Method::GET, "/config", None, None).await.status, StatusCode::UNAUTHORIZED);
    let in_query = send(api.client.get(api.url(&format!("/config?token={token}")))).await;
    assert_eq!(in_query.status, StatusCode::UNAUTHORIZED);
    let basic = send(api.client.get(api.url("/config")).header("Authorization", format!("Basic {token}"))).await;
    assert_eq!(basic.status, StatusCode::UNAUTHORIZED);
    api.stop().await;
}

#[tokio::test]
async fn logout_password_change_and_deletion_end_tokens() {
    for backend in TestDb::all() {
        let api = unlimited_api(&backend).await;
        let admin = user_token(&api.state, "root", Role::Admin).await;
        let password = "viewer password 1";
        let created = call(
            &api,
            Method::POST,
            "/config/users",
            Some(&admin),
            Some(json!({"username": "eve", "password": password, "role": "viewer"})),
        )
        .await;
        assert_eq!(created.status, StatusCode::OK, "{}", created.body);
        assert_eq!(created.body["must_change_password"], true);
        let uuid = created.body["uuid"].as_str().unwrap().to_string();

        // Logout: the token dies, a second logout with it is refused.
        let first = token_of(&login(&api, "eve", password).await);
        assert_eq!(
            call(&api, Method::POST, "/auth/logout", Some(&first), None).await.body,
            json!({"message": "Logged out"})
        );
        assert_eq!(call(&api, Method::POST, "/auth/logout", Some(&first), None).await.status, StatusCode::UNAUTHORIZED);

        // A password change ends the token that made it and every other one.
        let a = token_of(&login(&api, "eve", password).await);
        let b = token_of(&login(&api, "eve", password).await);
        let new_password = "a better password";
        let changed = call(
            &api,
            Method::POST,
            "/auth/change-password",
            Some(&a),
            Some(json!({"old_password": password, "new_password": new_password})),
        )
        .await;
        assert_eq!(changed.body, json!({"message": "Password updated successfully"}), "{}", backend.name);
        for old in [&a, &b] {
            assert_eq!(call(&api, Method::GET, "/config", Some(old), None).await.status, StatusCode::UNAUTHORIZED);
        }
        // Logging in again at once works, even within the same second as the change.
        let fresh = token_of(&login(&api, "eve", new_password).await);
        assert_eq!(call(&api, Method::GET, "/config", Some(&fresh), None).await.status, StatusCode::OK);
        assert_eq!(login(&api, "eve", password).await.status, StatusCode::UNAUTHORIZED);

        // A role change ends the user's sessions too.
        let role = call(
            &api,
            Method::PUT,
            &format!("/config/users/{uuid}/role"),
            Some(&admin),
            Some(json!({"role": "admin"})),
        )
        .await;
        assert_eq!(role.body, json!({"message": "User role updated"}));
        assert_eq!(call(&api, Method::GET, "/config", Some(&fresh), None).await.status, StatusCode::UNAUTHORIZED);
        let as_admin = token_of(&login(&api, "eve", new_password).await);
        assert_eq!(call(&api, Method::GET, "/config", Some(&as_admin), None).await.body["role"], "admin");

        // A deleted user's token is dead.
        let deleted = call(&api, Method::DELETE, &format!("/config/users/{uuid}"), Some(&admin), None).await;
        assert_eq!(deleted.body, json!({"message": "User deleted"}));
        assert_eq!(call(&api, Method::GET, "/config", Some(&as_admin), None).await.status, StatusCode::UNAUTHORIZED);
        api.stop().await;
    }
}

#[tokio::test]
async fn a_logout_on_one_replica_is_honoured_by_another_within_ten_seconds() {
    let backend = TestDb::sqlite();
    let (one, two) = (unlimited_api(&backend).await, unlimited_api(&backend).await);
    let token = user_token(&one.state, "shared", Role::Viewer).await;
    // The second replica has seen the token live, so its caches hold it.
    assert_eq!(call(&two, Method::GET, "/config", Some(&token), None).await.status, StatusCode::OK);
    assert_eq!(call(&one, Method::POST, "/auth/logout", Some(&token), None).await.status, StatusCode::OK);
    assert_eq!(call(&one, Method::GET, "/config", Some(&token), None).await.status, StatusCode::UNAUTHORIZED);
    let logged_out = Instant::now();
    while call(&two, Method::GET, "/config", Some(&token), None).await.status != StatusCode::UNAUTHORIZED {
        assert!(logged_out.elapsed() < Duration::from_secs(11), "the other replica still accepts the token");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    one.stop().await;
    two.stop().await;
}

#[tokio::test]
async fn must_change_password_blocks_gated_routes_until_changed() {
    let backend = TestDb::sqlite();
    let api = unlimited_api(&backend).await;
    let flagged = token_of(&login(&api, "admin", ADMIN_PASSWORD).await);
    let blocked =
        [(Method::GET, "/config"), (Method::GET, "/system/deployment-mode"), (Method::POST, "/auth/sse-ticket")];
    for (method, path) in blocked.clone() {
        let reply = call(&api, method, path, Some(&flagged), None).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{path}");
        assert_eq!(reply.body, json!({"detail": "Password change required before accessing this resource"}));
    }
    let create = call(
        &api,
        Method::POST,
        "/config/users",
        Some(&flagged),
        Some(json!({"username": "x", "password": "twelve chars"})),
    )
    .await;
    assert_eq!(create.status, StatusCode::FORBIDDEN);

    // The flag stays until the change; the change is allowed; the old token then dies.
    let wrong_old = call(
        &api,
        Method::POST,
        "/auth/change-password",
        Some(&flagged),
        Some(json!({"old_password": "not it at all", "new_password": "the new admin password"})),
    )
    .await;
    assert_eq!(
        (wrong_old.status, wrong_old.body.clone()),
        (StatusCode::UNAUTHORIZED, json!({"detail": "Incorrect old password"}))
    );
    let changed = call(
        &api,
        Method::POST,
        "/auth/change-password",
        Some(&flagged),
        Some(json!({"old_password": ADMIN_PASSWORD, "new_password": "the new admin password"})),
    )
    .await;
    assert_eq!(changed.status, StatusCode::OK);
    assert_eq!(call(&api, Method::GET, "/config", Some(&flagged), None).await.status, StatusCode::UNAUTHORIZED);

    let relogin = login(&api, "admin", "the new admin password").await;
    assert_eq!(relogin.body["must_change_password"], false);
    let token = token_of(&relogin);
    for (method, path) in blocked {
        assert_eq!(call(&api, method, path, Some(&token), None).await.status, StatusCode::OK, "{path}");
    }
    let config = call(&api, Method::GET, "/config", Some(&token), None).await.body;
    assert_eq!(config["role"], "admin");
    assert_eq!(config["users"][0]["username"], "admin");
    assert!(config["users"][0].get("password_hash").is_none());
    api.stop().await;
}

#[tokio::test]
async fn roles_gate_admin_routes_and_admins_cannot_lock_themselves_out() {
    let backend = TestDb::sqlite();
    let api = unlimited_api(&backend).await;
    let admin = user_token(&api.state, "root", Role::Admin).await;
    let viewer = user_token(&api.state, "watcher", Role::Viewer).await;
    let root = api.state.db.user_by_name("root").await.unwrap().uuid;
    let watcher = api.state.db.user_by_name("watcher").await.unwrap().uuid;

    let config = call(&api, Method::GET, "/config", Some(&viewer), None).await.body;
    assert_eq!(config, json!({"role": "viewer", "deployment_limit": 10, "global_mutation_interval": "30m"}));
    let denied = call(
        &api,
        Method::POST,
        "/config/users",
        Some(&viewer),
        Some(json!({"username": "x", "password": "twelve chars"})),
    )
    .await;
    assert_eq!((denied.status, denied.body), (StatusCode::FORBIDDEN, json!({"detail": "Insufficient permissions"})));
    let denied = call(&api, Method::DELETE, &format!("/config/users/{root}"), Some(&viewer), None).await;
    assert_eq!(denied.status, StatusCode::FORBIDDEN);

    let own_delete = call(&api, Method::DELETE, &format!("/config/users/{root}"), Some(&admin), None).await;
    assert_eq!(own_delete.body, json!({"detail": "Cannot delete your own account"}));
    let own_role =
        call(&api, Method::PUT, &format!("/config/users/{root}/role"), Some(&admin), Some(json!({"role": "viewer"})))
            .await;
    assert_eq!(
        (own_role.status, own_role.body),
        (StatusCode::FORBIDDEN, json!({"detail": "Cannot change your own role"}))
    );

    let missing = uuid::Uuid::new_v4();
    for (method, path, body) in [
        (Method::DELETE, format!("/config/users/{missing}"), None),
        (Method::PUT, format!("/config/users/{missing}/role"), Some(json!({"role": "admin"}))),
        (Method::PUT, format!("/config/users/{missing}/reset-password"), Some(json!({"new_password": "twelve chars"}))),
    ] {
        let reply = call(&api, method, &path, Some(&admin), body).await;
        assert_eq!((reply.status, reply.body), (StatusCode::NOT_FOUND, json!({"detail": "User not found"})), "{path}");
    }
    let taken = call(
        &api,
        Method::POST,
        "/config/users",
        Some(&admin),
        Some(json!({"username": "WATCHER", "password": "twelve chars"})),
    )
    .await;
    assert_eq!((taken.status, taken.body), (StatusCode::CONFLICT, json!({"detail": "Username already exists"})));

    // A reset ends the user's sessions and makes them change the password.
    let reset = call(
        &api,
        Method::PUT,
        &format!("/config/users/{watcher}/reset-password"),
        Some(&admin),
        Some(json!({"new_password": "reset by the admin"})),
    )
    .await;
    assert_eq!(reset.body, json!({"message": "Password reset successfully"}));
    assert_eq!(call(&api, Method::GET, "/config", Some(&viewer), None).await.status, StatusCode::UNAUTHORIZED);
    let relogin = login(&api, "watcher", "reset by the admin").await;
    assert_eq!(relogin.body["must_change_password"], true);
    let flagged = token_of(&relogin);
    assert_eq!(call(&api, Method::GET, "/config", Some(&flagged), None).await.status, StatusCode::FORBIDDEN);
    api.stop().await;
}

#[tokio::test]
async fn password_length_boundaries_hold_on_every_route_that_sets_one() {
    let backend = TestDb::sqlite();
    let api = unlimited_api(&backend).await;
    let admin = user_token(&api.state, "root", Role::Admin).await;
    user_token(&api.state, "target", Role::Viewer).await;
    // Changes its own password; each change ends its sessions, so it is not the admin above.
    user_token(&api.state, "changer", Role::Viewer).await;
    let target_uuid = api.state.db.user_by_name("target").await.unwrap().uuid;
    let cases = [
        ("11 characters", "elevenchars".to_string(), StatusCode::BAD_REQUEST),
        ("12 characters", "twelve chars".to_string(), StatusCode::OK),
        ("72 bytes of 3-byte characters", "€".repeat(24), StatusCode::OK),
        ("73 bytes", format!("{}x", "€".repeat(24)), StatusCode::UNPROCESSABLE_ENTITY),
    ];
    let mut current = ADMIN_PASSWORD.to_string();
    for (i, (case, password, expected)) in cases.into_iter().enumerate() {
        let create = call(
            &api,
            Method::POST,
            "/config/users",
            Some(&admin),
            Some(json!({"username": format!("user{i}"), "password": password})),
        )
        .await;
        assert_eq!(create.status, expected, "create-user, {case}");
        let reset = call(
            &api,
            Method::PUT,
            &format!("/config/users/{target_uuid}/reset-password"),
            Some(&admin),
            Some(json!({"new_password": password})),
        )
        .await;
        assert_eq!(reset.status, expected, "reset-password, {case}");

        // Change-password: each success ends the session, so log in again for the next case.
        let token = token_of(&login(&api, "changer", &current).await);
        let change = call(
            &api,
            Method::POST,
            "/auth/change-password",
            Some(&token),
            Some(json!({"old_password": current, "new_password": password})),
        )
        .await;
        assert_eq!(change.status, expected, "change-password, {case}");
        if expected == StatusCode::OK {
            current = password.clone();
            assert_eq!(login(&api, "changer", &password).await.status, StatusCode::OK, "{case}");
        }
        let body = &change.body;
        match expected {
            StatusCode::BAD_REQUEST => assert_eq!(body, &json!({"detail": STRUCTURAL_DETAIL})),
            StatusCode::UNPROCESSABLE_ENTITY => assert_eq!(body, &json!({"detail": "Invalid request parameters"})),
            _ => {}
        }
    }
    // The password is now the 72-byte one: a login that truncated the 73-byte one would let it in.
    let longer = format!("{}x", "€".repeat(24));
    assert_eq!(login(&api, "changer", &longer).await.status, StatusCode::UNPROCESSABLE_ENTITY);
    api.stop().await;
}

/// A client whose connections come from `source` (any 127.0.0.0/8 address reaches the server).
fn client_from(source: &str) -> reqwest::Client {
    reqwest::Client::builder().local_address(source.parse::<IpAddr>().unwrap()).build().unwrap()
}

async fn login_from(api: &TestApi, client: &reqwest::Client, username: &str, forwarded: Option<&str>) -> Reply {
    let mut request =
        client.post(api.url("/auth/login")).json(&json!({"username": username, "password": "wrong password!"}));
    if let Some(forwarded) = forwarded {
        request = request.header("X-Forwarded-For", forwarded);
    }
    send(request).await
}

fn assert_rate_limited(reply: &Reply, limit: &str) {
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(reply.body["error"], format!("Rate limit exceeded: {limit}"));
    assert!(reply.body["detail"].is_string());
    let retry_after: u64 = reply.headers[RETRY_AFTER].to_str().unwrap().parse().unwrap();
    assert!((1..=300).contains(&retry_after), "{retry_after}");
}

#[tokio::test]
async fn the_eleventh_login_from_one_address_is_refused_whatever_x_forwarded_for_says() {
    let backend = TestDb::sqlite();
    let api = TestApi::start(backend.api_config(&[])).await;
    let client = client_from("127.0.0.1");
    for i in 0..10 {
        // A different username and forwarded address each time: neither is the client.
        let reply = login_from(&api, &client, &format!("user{i}"), Some(&format!("10.0.0.{i}"))).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "attempt {}", i + 1);
    }
    let eleventh = login_from(&api, &client, "user10", Some("10.9.9.9")).await;
    assert_rate_limited(&eleventh, "10 per 5 minute");
    // Even the right password is refused now, and another address is not.
    let admin =
        send(client.post(api.url("/auth/login")).json(&json!({"username": "admin", "password": ADMIN_PASSWORD}))).await;
    assert_eq!(admin.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(login_from(&api, &client_from("127.0.0.2"), "user11", None).await.status, StatusCode::UNAUTHORIZED);
    api.stop().await;
}

#[tokio::test]
async fn the_eleventh_login_for_one_username_is_refused_from_any_address() {
    let backend = TestDb::sqlite();
    let api = TestApi::start(backend.api_config(&[])).await;
    for i in 0..10 {
        let reply = login_from(&api, &client_from(&format!("127.0.1.{}", i + 1)), "admin", None).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "attempt {}", i + 1);
    }
    // The bucket is the username in any letter case.
    let eleventh = login_from(&api, &client_from("127.0.1.11"), "Admin", None).await;
    assert_rate_limited(&eleventh, "10 per 5 minute");
    assert_eq!(
        login_from(&api, &client_from("127.0.1.12"), "someone-else", None).await.status,
        StatusCode::UNAUTHORIZED
    );
    api.stop().await;
}

#[tokio::test]
async fn change_password_is_limited_to_five_a_minute_and_the_limiter_can_be_turned_off() {
    let backend = TestDb::sqlite();
    let api = TestApi::start(backend.api_config(&[])).await;
    let token = user_token(&api.state, "root", Role::Admin).await;
    let attempt = || {
        call(
            &api,
            Method::POST,
            "/auth/change-password",
            Some(&token),
            Some(json!({"old_password": "wrong old password", "new_password": "a new password!"})),
        )
    };
    for _ in 0..5 {
        assert_eq!(attempt().await.status, StatusCode::UNAUTHORIZED);
    }
    assert_rate_limited(&attempt().await, "5 per 1 minute");
    api.stop().await;

    let backend = TestDb::sqlite();
    let api = unlimited_api(&backend).await;
    let client = client_from("127.0.0.1");
    for _ in 0..15 {
        assert_eq!(login_from(&api, &client, "admin", None).await.status, StatusCode::UNAUTHORIZED);
    }
    api.stop().await;
}

#[tokio::test]
async fn sse_tickets_are_single_use_and_expire() {
    let backend = TestDb::sqlite();
    let api = unlimited_api(&backend).await;
    let token = user_token(&api.state, "watcher", Role::Viewer).await;
    let minted = call(&api, Method::POST, "/auth/sse-ticket", Some(&token), None).await;
    assert_eq!(minted.status, StatusCode::OK);
    assert_eq!(minted.body["expires_in"], 60);
    let ticket = minted.body["ticket"].as_str().unwrap().to_string();
    let other = call(&api, Method::POST, "/auth/sse-ticket", Some(&token), None).await.body["ticket"].clone();
    assert_ne!(json!(ticket), other);

    let sessions = &api.state.sessions;
    assert_eq!(sessions.redeem_ticket(&ticket).await.unwrap().user.username, "watcher");
    assert!(sessions.redeem_ticket(&ticket).await.is_err(), "a ticket opens one stream");
    assert!(sessions.redeem_ticket("made-up").await.is_err());

    let (user, expired) = (api.state.db.user_by_name("watcher").await.unwrap().uuid, svc::auth::ticket::new_ticket());
    let ago = |minutes| chrono::Utc::now() - chrono::Duration::minutes(minutes);
    let stale = svc::db::SseTicket { user, issued_at: ago(2), expires_at: ago(1), token: None };
    api.state.db.add_sse_ticket(&svc::auth::ticket::ticket_hash(&expired), &stale).await.unwrap();
    assert!(sessions.redeem_ticket(&expired).await.is_err(), "an expired ticket is refused");

    assert_eq!(call(&api, Method::POST, "/auth/sse-ticket", None, None).await.status, StatusCode::UNAUTHORIZED);
    api.stop().await;
}

#[tokio::test]
async fn request_errors_follow_the_contract() {
    let backend = TestDb::sqlite();
    let api = unlimited_api(&backend).await;
    let admin = user_token(&api.state, "root", Role::Admin).await;
    let create = |body: &str, content_type: &'static str| {
        api.client
            .post(api.url("/config/users"))
            .bearer_auth(&admin)
            .header("Content-Type", content_type)
            .body(body.to_string())
    };
    let structural = json!({"detail": STRUCTURAL_DETAIL});
    let invalid = json!({"detail": "Invalid request parameters"});
    let cases = [
        (
            "unknown field",
            r#"{"username": "a", "password": "twelve chars", "admin": true}"#,
            StatusCode::BAD_REQUEST,
            &structural,
        ),
        ("missing field", r#"{"username": "a"}"#, StatusCode::BAD_REQUEST, &structural),
        ("wrong type", r#"{"username": 7, "password": "twelve chars"}"#, StatusCode::BAD_REQUEST, &structural),
        ("string too short", r#"{"username": "", "password": "twelve chars"}"#, StatusCode::BAD_REQUEST, &structural),
        // The same username rule as `svc user add`.
        (
            "surrounding spaces",
            r#"{"username": " padded", "password": "twelve chars"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            &invalid,
        ),
        ("empty body", "", StatusCode::BAD_REQUEST, &structural),
        (
            "unknown role",
            r#"{"username": "a", "password": "twelve chars", "role": "root"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            &invalid,
        ),
        (
            "string too long",
            &format!(r#"{{"username": "{}", "password": "twelve chars"}}"#, "u".repeat(65)),
            StatusCode::UNPROCESSABLE_ENTITY,
            &invalid,
        ),
        ("malformed JSON", r#"{"username": "a", "#, StatusCode::UNPROCESSABLE_ENTITY, &invalid),
    ];
    for (case, body, status, expected) in cases {
        let reply = send(create(body, "application/json")).await;
        assert_eq!((reply.status, &reply.body), (status, expected), "{case}");
    }
    // Structural errors win when a request has several problems.
    let mixed =
        send(create(&format!(r#"{{"username": "", "password": "{}"}}"#, "x".repeat(73)), "application/json")).await;
    assert_eq!(mixed.status, StatusCode::BAD_REQUEST);

    // 415 for a body that is not declared JSON; a charset parameter is fine; a bodiless POST passes.
    let not_json = send(create(r#"{"username": "a", "password": "twelve chars"}"#, "text/plain")).await;
    assert_eq!(not_json.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let form =
        send(api.client.post(api.url("/auth/login")).form(&[("username", "admin"), ("password", ADMIN_PASSWORD)]))
            .await;
    assert_eq!(form.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let charset =
        send(create(r#"{"username": "b", "password": "twelve chars"}"#, "Application/JSON; charset=utf-8")).await;
    assert_eq!(charset.status, StatusCode::OK);
    assert_eq!(call(&api, Method::POST, "/auth/sse-ticket", Some(&admin), None).await.status, StatusCode::OK);

    // A path parameter that is not a uuid.
    let bad_path = call(&api, Method::DELETE, "/config/users/not-a-uuid", Some(&admin), None).await;
    assert_eq!((bad_path.status, bad_path.body), (StatusCode::UNPROCESSABLE_ENTITY, invalid.clone()));
    // Authentication is checked before the body.
    let anonymous =
        send(api.client.post(api.url("/config/users")).header("Content-Type", "application/json").body("{")).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    api.stop().await;

    // Developer mode shows the validation errors instead, without echoing the input.
    let api = TestApi::start(backend.api_config(&[("SVC_DEVELOPER", "true"), ("SVC_LIMITER_ENABLED", "false")])).await;
    let admin = user_token(&api.state, "root2", Role::Admin).await;
    let reply = call(
        &api,
        Method::POST,
        "/config/users",
        Some(&admin),
        Some(json!({"username": "a", "password": format!("{}x", "€".repeat(24))})),
    )
    .await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(reply.body["detail"][0]["type"], "string_too_long");
    assert_eq!(reply.body["detail"][0]["loc"], json!(["body", "password"]));
    assert!(!reply.body.to_string().contains('€'));
    let doc = send(api.client.get(api.base.replace("/api/v1", "/openapi.json"))).await.body;
    assert!(doc["paths"]["/api/v1/auth/login"]["post"]["responses"]["429"].is_object());
    for path in [
        "/api/v1/auth/login",
        "/api/v1/auth/logout",
        "/api/v1/auth/change-password",
        "/api/v1/auth/sse-ticket",
        "/api/v1/config/users",
    ] {
        assert!(doc["paths"][path]["post"].is_object(), "{path}");
    }
    assert!(doc["paths"]["/api/v1/config"]["get"]["responses"]["403"].is_object());
    assert!(doc["paths"]["/api/v1/config/users/{uuid}"]["delete"]["responses"]["404"].is_object());
    assert!(doc["paths"]["/api/v1/config/users/{uuid}/role"]["put"]["requestBody"].is_object());
    assert!(doc["paths"]["/api/v1/config/users/{uuid}/reset-password"]["put"]["responses"]["422"].is_object());
    assert!(doc["components"]["schemas"]["CreateUserRequest"].is_object());
    assert!(doc["components"]["securitySchemes"]["bearer"].is_object());
    api.stop().await;
}

#[tokio::test]
async fn stored_data_that_fails_validation_is_a_422_without_the_cause() {
    use axum::Router;
    use axum::routing::get;
    use tower::ServiceExt;

    let backend = TestDb::sqlite();
    let api = unlimited_api(&backend).await;
    let failing =
        || async { Err::<(), _>(svc::http::ApiError::DataConsistency(anyhow::anyhow!("stored row 7 has no name"))) };
    let app = svc::http::with_layers(Router::new().route("/api/v1/probe", get(failing)), api.state.clone());
    let request = axum::http::Request::get("/api/v1/probe").body(axum::body::Body::empty()).unwrap();
    let response = app.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let body = http_body_util::BodyExt::collect(response.into_body()).await.unwrap().to_bytes();
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body, json!({"detail": "Internal data consistency error", "type": "internal_validation_error"}));
    api.stop().await;
}
