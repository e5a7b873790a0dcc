//! The security headers through the real server: `X-Content-Type-Options: nosniff` on every answer
//! (a route's, an error's, the fallback 404's), `Cache-Control: no-store` on the answers that carry
//! a credential (login, a stream ticket), a `Content-Security-Policy` on the developer-mode
//! documentation pages; and a token issued in the future or not valid yet is refused.

use svc_test_support::in_process as common;

use chrono::Utc;
use common::{ADMIN_PASSWORD, JWT_SECRET, TestApi, TestDb, user_token};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::StatusCode;
use reqwest::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, X_CONTENT_TYPE_OPTIONS};
use serde_json::json;
use svc::db::Role;

fn header(response: &reqwest::Response, name: reqwest::header::HeaderName) -> Option<String> {
    response.headers().get(name).map(|v| v.to_str().unwrap().to_string())
}

#[tokio::test]
async fn every_answer_says_nosniff_and_credentials_are_never_cached() {
    let db = TestDb::sqlite();
    let api = TestApi::start(db.api_config(&[("SVC_LIMITER_ENABLED", "false")])).await;
    let token = user_token(&api.state, "watcher", Role::Viewer).await;
    let client = &api.client;
    let answers = [
        client.get(api.url("/health")).send().await.unwrap(),
        client.get(api.url("/logs")).send().await.unwrap(),
        client.get(api.url("/logs")).bearer_auth(&token).send().await.unwrap(),
        client.get(api.url("/no-such-route")).send().await.unwrap(),
    ];
    for answer in &answers {
        assert_eq!(header(answer, X_CONTENT_TYPE_OPTIONS).as_deref(), Some("nosniff"), "{}", answer.url());
        assert_eq!(header(answer, CONTENT_SECURITY_POLICY), None, "{}: no page, no policy", answer.url());
    }
    assert_eq!(answers.map(|a| a.status().as_u16()), [200, 401, 200, 404]);

    let login = json!({"username": "watcher", "password": ADMIN_PASSWORD});
    let logged_in = client.post(api.url("/auth/login")).json(&login).send().await.unwrap();
    assert_eq!(logged_in.status(), StatusCode::OK);
    assert_eq!(header(&logged_in, CACHE_CONTROL).as_deref(), Some("no-store"));
    let ticket = client.post(api.url("/auth/sse-ticket")).bearer_auth(&token).send().await.unwrap();
    assert_eq!(ticket.status(), StatusCode::OK);
    assert_eq!(header(&ticket, CACHE_CONTROL).as_deref(), Some("no-store"));
    api.stop().await;
}

#[tokio::test]
async fn the_documentation_pages_carry_a_restrictive_content_security_policy() {
    let db = TestDb::sqlite();
    let api = TestApi::start(db.api_config(&[("SVC_DEVELOPER", "true")])).await;
    let root = api.base.trim_end_matches("/api/v1").to_string();
    for page in ["/docs/", "/redoc"] {
        let answer = api.client.get(format!("{root}{page}")).send().await.unwrap();
        assert_eq!(answer.status(), StatusCode::OK, "{page}");
        let policy = header(&answer, CONTENT_SECURITY_POLICY).unwrap_or_else(|| panic!("{page}: no policy"));
        for directive in ["default-src 'none'", "frame-ancestors 'none'", "base-uri 'none'", "connect-src 'self'"] {
            assert!(policy.contains(directive), "{page}: {directive} missing from {policy}");
        }
        assert_eq!(header(&answer, X_CONTENT_TYPE_OPTIONS).as_deref(), Some("nosniff"));
    }
    let document = api.client.get(format!("{root}/openapi.json")).send().await.unwrap();
    assert_eq!(header(&document, CONTENT_SECURITY_POLICY), None, "only the pages have a policy");
    api.stop().await;
}

#[tokio::test]
async fn a_token_issued_in_the_future_or_not_valid_yet_is_refused() {
    let db = TestDb::sqlite();
    let api = TestApi::start(db.api_config(&[])).await;
    user_token(&api.state, "watcher", Role::Viewer).await;
    let user = api.state.db.user_by_name("watcher").await.unwrap().uuid;
    let now = Utc::now().timestamp();
    let token = |iat: i64, nbf: Option<i64>| {
        let mut claims = json!({"sub": user, "jti": uuid::Uuid::new_v4().simple().to_string(), "iat": iat,
            "exp": now + 3600, "iss": "svc", "aud": "svc-dashboard", "typ": "access"});
        if let Some(nbf) = nbf {
            claims["nbf"] = json!(nbf);
        }
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &EncodingKey::from_secret(JWT_SECRET.as_bytes()))
            .unwrap()
    };
    let status = |token: String| {
        let request = api.client.get(api.url("/logs")).bearer_auth(token);
        async move { request.send().await.unwrap().status() }
    };
    assert_eq!(status(token(now, None)).await, StatusCode::OK, "the same token issued now is good");
    assert_eq!(status(token(now + 3000, None)).await, StatusCode::UNAUTHORIZED, "issued in 50 minutes");
    assert_eq!(status(token(now, Some(now + 600))).await, StatusCode::UNAUTHORIZED, "not before 10 minutes from now");
    assert_eq!(status(token(now, Some(now - 1))).await, StatusCode::OK, "a past nbf is fine");
    api.stop().await;
}
