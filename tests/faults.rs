//! Honest under faults (issue 21), the API side: each fault made for real, and what the operator
//! sees during it (HTTP status, health) and after it (everything back by itself).

use svc_test_support::in_process as common;

use std::time::{Duration, Instant};

use common::proxy::DbProxy;
use common::{ADMIN_PASSWORD, TestApi, TestDb};
use reqwest::StatusCode;
use serde_json::{Value, json};

async fn login(api: &TestApi) -> (StatusCode, Value) {
    let reply = api
        .client
        .post(api.url("/auth/login"))
        .json(&json!({"username": "admin", "password": ADMIN_PASSWORD}))
        .send()
        .await
        .unwrap();
    let status = reply.status();
    (status, reply.json().await.unwrap_or(Value::Null))
}

/// Repeats `check` (at most `within`) until it holds; what it last saw when it never does.
async fn eventually<F, Fut>(within: Duration, mut check: F) -> Result<(), String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let deadline = Instant::now() + within;
    loop {
        let seen = check().await;
        if seen.is_ok() || Instant::now() > deadline {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn login_while_the_database_is_unreachable_is_a_generic_503_and_heals_by_itself() {
    let Some(backend) = TestDb::mysql() else {
        eprintln!("SVC_TEST_MYSQL_URL unset: the unreachable server needs MariaDB (sqlite has no server to lose)");
        return;
    };
    backend.open().await.close().await;
    let (mut proxy, via_proxy) = DbProxy::start(backend.mysql_url().unwrap()).await;
    let api = TestApi::start(backend.api_config(&[("SVC_DB_URL", &via_proxy), ("SVC_LIMITER_ENABLED", "false")])).await;
    assert_eq!(login(&api).await.0, StatusCode::OK);

    proxy.down().await;
    let started = Instant::now();
    let (status, body) = login(&api).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body, json!({"detail": "database unavailable"}), "generic words, nothing of the driver's");
    assert!(started.elapsed() < Duration::from_secs(10), "answered within the pool's acquire timeout");
    let health = api.get("/health", None, &[]).await;
    assert_eq!(health.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(health.body["components"]["database"]["detail"], "database unavailable");

    proxy.up().await;
    eventually(Duration::from_secs(15), || async {
        match login(&api).await {
            (StatusCode::OK, _) => Ok(()),
            (status, body) => Err(format!("{status} {body}")),
        }
    })
    .await
    .unwrap();
    api.stop().await;
}
