//! The API lifespan (startup steps and shutdown) and the cross-cutting HTTP behaviour, on real
//! databases, driven through the router without a socket.

use svc_test_support::in_process as common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use axum::routing::get;
use chrono::{Duration, Utc};
use common::{LogCapture, TestDb, lifecycle};
use http_body_util::BodyExt;
use serde_json::Value;
use svc::db::{LifecycleStatus, Role, STRANDED_LIFECYCLE_ERROR};
use svc::secret::Secret;
use svc::startup::Lifespan;
use svc::worker::WorkerBody;
use tokio::sync::oneshot;
use tower::ServiceExt;
use uuid::Uuid;

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Value,
}

async fn send(app: &Router, request: Request<Body>) -> Reply {
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Reply { status, headers, body }
}

async fn get_json(app: &Router, path: &str) -> Reply {
    send(app, Request::get(path).body(Body::empty()).unwrap()).await
}

/// A viewer-gated route, called as a fresh viewer.
async fn get_as_viewer(lifespan: &Lifespan, path: &str) -> Reply {
    let token =
        common::user_token(lifespan.state(), &format!("viewer-{}", Uuid::new_v4().simple()), Role::Viewer).await;
    let request = Request::get(path).header("Authorization", format!("Bearer {token}")).body(Body::empty()).unwrap();
    send(&lifespan.router(), request).await
}

#[tokio::test]
async fn healthy_database_gives_200_with_components() {
    for backend in TestDb::all() {
        let lifespan = Lifespan::start(backend.api_config(&[]), vec![]).await.unwrap();
        let reply = get_json(&lifespan.router(), "/api/v1/health").await;
        assert_eq!(reply.status, StatusCode::OK, "{}", backend.name);
        assert_eq!(
            reply.body,
            serde_json::json!({"status": "healthy", "components": {"database": {"status": "ok", "detail": null}}})
        );
        lifespan.shutdown().await;
    }
}

#[tokio::test]
async fn mode_gate_refuses_an_agent_host_unless_allowed() {
    let backend = TestDb::sqlite();
    for mode in ["agent", "AGENT", "Agent"] {
        for disallow in [None, Some("true"), Some("TRUE")] {
            let mut extra = vec![("SVC_MODE", mode)];
            extra.extend(disallow.map(|d| ("SVC_DISALLOW_MASTER", d)));
            let err = Lifespan::start(backend.api_config(&extra), vec![]).await.err().expect("must refuse");
            assert!(err.to_string().contains("master API is master-only"), "{err}");
        }
    }
    let lifespan =
        Lifespan::start(backend.api_config(&[("SVC_MODE", "agent"), ("SVC_DISALLOW_MASTER", "False")]), vec![])
            .await
            .unwrap();
    let reply = get_as_viewer(&lifespan, "/api/v1/system/deployment-mode").await;
    assert_eq!(reply.body, serde_json::json!({"mode": "unihost", "role": "agent", "swarm_host_count": 0}));
    lifespan.shutdown().await;
}

#[tokio::test]
async fn public_binding_violation_aborts_before_the_database_is_touched() {
    let backend = TestDb::sqlite();
    let mut config = backend.api_config(&[]);
    config.api.host = "0.0.0.0".into();
    let err = Lifespan::start(config.clone(), vec![]).await.err().expect("must refuse");
    assert!(err.to_string().contains("SVC_CORS_ORIGINS"), "{err}");
    let svc::db::DatabaseConfig::Sqlite { path, .. } = &config.db else { unreachable!() };
    assert!(!path.exists(), "the database must not be created");

    config.testing = true;
    Lifespan::start(config, vec![]).await.unwrap().shutdown().await;
}

#[tokio::test]
async fn insecure_jwt_secret_fails_at_boot_without_echoing_it() {
    let backend = TestDb::sqlite();
    let mut config = backend.api_config(&[]);
    config.api.jwt_secret = Some(Secret::new("changeme"));
    let err = Lifespan::start(config, vec![]).await.err().expect("must refuse");
    let text = format!("{err:#}");
    assert!(text.contains("SVC_JWT_SECRET") && !text.contains("changeme"), "{text}");
}

#[tokio::test]
async fn unreachable_database_is_tried_five_times_then_the_api_serves_degraded() {
    let (logs, _guard) = LogCapture::start();
    let backend = TestDb::sqlite();
    // Port 1 on loopback: nothing listens, every connection is refused.
    let config = backend.api_config(&[("SVC_DB_TYPE", "mysql"), ("SVC_DB_URL", "mysql://root@127.0.0.1:1/svc")]);
    let lifespan = Lifespan::start(config, vec![]).await.unwrap();

    let attempts = logs.lines_containing("Database initialisation failed");
    assert_eq!(attempts.len(), 5, "{}", logs.text());
    for (n, line) in attempts.iter().enumerate() {
        assert!(line.contains(&format!("attempt={}", n + 1)), "{line}");
        // The operator sees the cause, not only that it failed.
        assert!(line.contains("Connection refused"), "{line}");
    }
    assert_eq!(logs.lines_containing("serving degraded").len(), 1);

    let app = lifespan.router();
    let health = get_json(&app, "/api/v1/health").await;
    assert_eq!(health.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(health.body["status"], "unhealthy");
    assert_eq!(health.body["components"]["database"]["status"], "failing");
    assert_eq!(health.body["components"]["database"]["detail"], "database unavailable");
    // Gated routes still turn away bad credentials.
    let token = "eyJhbGciOiJIUzI1NiJ9.e30.c2lnbmF0dXJl";
    let request = Request::get("/api/v1/config").header("Authorization", format!("Bearer {token}")).body(Body::empty());
    assert_eq!(send(&app, request.unwrap()).await.status, StatusCode::UNAUTHORIZED);
    // Shutdown also stops the background retry.
    tokio::time::timeout(std::time::Duration::from_secs(5), lifespan.shutdown()).await.expect("shutdown hangs");
}

#[tokio::test]
async fn a_database_server_that_never_answers_cannot_stall_startup_or_shutdown() {
    let (logs, _guard) = LogCapture::start();
    // Accepts TCP connections and never says a word, like a half-dead server or a tarpit.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = silent.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            held.push(stream);
        }
    });
    let backend = TestDb::sqlite();
    let url = format!("mysql://root@127.0.0.1:{port}/svc");
    let config = backend.api_config(&[("SVC_DB_TYPE", "mysql"), ("SVC_DB_URL", &url)]);
    let lifespan = tokio::time::timeout(std::time::Duration::from_secs(40), Lifespan::start(config, vec![]))
        .await
        .expect("startup stalled on a silent database")
        .unwrap();
    assert_eq!(logs.lines_containing("Database initialisation failed").len(), 5, "{}", logs.text());
    let health = get_json(&lifespan.router(), "/api/v1/health").await;
    assert_eq!(health.status, StatusCode::SERVICE_UNAVAILABLE);
    tokio::time::timeout(std::time::Duration::from_secs(10), lifespan.shutdown()).await.expect("shutdown hangs");
}

#[tokio::test]
async fn the_api_heals_when_the_database_comes_back_and_then_sweeps() {
    let dir = tempfile::tempdir().unwrap();
    let (db_dir, parked) = (dir.path().join("db"), dir.path().join("parked"));
    let db_path = db_dir.join("svc.db").display().to_string();
    let backend = TestDb::sqlite();
    let config = backend.api_config(&[("SVC_DB_PATH", &db_path)]);

    // A database holding a record stranded by a previous master…
    let db = svc::db::connect(&config.db).unwrap();
    db.migrate().await.unwrap();
    let stale = lifecycle(LifecycleStatus::Running, Duration::hours(2));
    db.add_lifecycle(&stale).await.unwrap();
    db.close().await;
    // …that is out of reach at startup: its directory is moved away and a file blocks the path.
    std::fs::rename(&db_dir, &parked).unwrap();
    std::fs::write(&db_dir, "not a directory").unwrap();

    let lifespan = Lifespan::start(config.clone(), vec![]).await.unwrap();
    let app = lifespan.router();
    assert_eq!(get_json(&app, "/api/v1/health").await.status, StatusCode::SERVICE_UNAVAILABLE);

    std::fs::remove_file(&db_dir).unwrap();
    std::fs::rename(&parked, &db_dir).unwrap();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let health = get_json(&app, "/api/v1/health").await;
        if health.status == StatusCode::OK {
            assert_eq!(health.body["status"], "healthy");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the database never recovered: {:?}", health.body);
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    lifespan.shutdown().await;

    // Recovery ran what startup could not: the admin, and the sweep.
    let db = svc::db::connect(&config.db).unwrap();
    assert!(db.user_by_name("admin").await.unwrap().must_change_password);
    let swept = &db.lifecycles(&[stale.id]).await.unwrap()[0];
    assert_eq!((swept.status, swept.error.as_deref()), (LifecycleStatus::Failed, Some(STRANDED_LIFECYCLE_ERROR)));
    db.close().await;
}

#[tokio::test]
async fn startup_sweeps_stranded_lifecycles_even_in_contract_test_mode() {
    let (logs, _guard) = LogCapture::start();
    let backends = TestDb::all();
    let swept_starts = backends.len();
    for backend in backends {
        let db = backend.open().await;
        let stale = lifecycle(LifecycleStatus::Running, Duration::minutes(90));
        let fresh = lifecycle(LifecycleStatus::Pending, Duration::minutes(10));
        db.add_lifecycle(&stale).await.unwrap();
        db.add_lifecycle(&fresh).await.unwrap();

        let lifespan = Lifespan::start(backend.api_config(&[("SVC_CONTRACT_TEST", "true")]), vec![]).await.unwrap();
        lifespan.shutdown().await;

        let rows = db.lifecycles(&[stale.id, fresh.id]).await.unwrap();
        let by_id = |id| rows.iter().find(|r| r.id == id).unwrap();
        assert_eq!(by_id(stale.id).status, LifecycleStatus::Failed, "{}", backend.name);
        assert_eq!(by_id(stale.id).error.as_deref(), Some(STRANDED_LIFECYCLE_ERROR));
        assert_eq!(by_id(fresh.id).status, LifecycleStatus::Pending);
        assert_eq!(by_id(fresh.id).error, None);

        // A second start changes nothing and logs no count.
        let swept_before = logs.lines_containing("Marked stranded lifecycle records as failed").len();
        Lifespan::start(backend.api_config(&[]), vec![]).await.unwrap().shutdown().await;
        assert_eq!(logs.lines_containing("Marked stranded lifecycle records as failed").len(), swept_before);
        assert_eq!(db.lifecycles(&[fresh.id]).await.unwrap()[0].status, LifecycleStatus::Pending);
        db.close().await;
    }
    // One warning per backend's first start: an empty list (the warning never logged) fails too.
    let counted = logs.lines_containing("Marked stranded lifecycle records as failed");
    assert_eq!(counted.len(), swept_starts, "{counted:?}");
    assert!(counted.iter().all(|l| l.contains("WARN") && l.contains("count=1")), "{counted:?}");
}

/// A worker that reports when it starts, then waits for cancellation and reports when it stopped.
fn probe_worker() -> (WorkerBody, oneshot::Receiver<()>, Arc<AtomicBool>) {
    let (started_tx, started_rx) = oneshot::channel();
    let stopped = Arc::new(AtomicBool::new(false));
    let flag = stopped.clone();
    let worker = WorkerBody::new("probe", move |ctx| async move {
        let _ = started_tx.send(());
        ctx.cancel.cancelled().await;
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        flag.store(true, Ordering::SeqCst);
        Ok(())
    });
    (worker, started_rx, stopped)
}

#[tokio::test]
async fn embedded_workers_start_and_shutdown_awaits_them() {
    let backend = TestDb::sqlite();
    let (worker, started, stopped) = probe_worker();
    let lifespan = Lifespan::start(backend.api_config(&[]), vec![worker]).await.unwrap();
    started.await.expect("worker started");
    assert!(!stopped.load(Ordering::SeqCst));
    lifespan.shutdown().await;
    assert!(stopped.load(Ordering::SeqCst), "shutdown returned before the worker finished");
}

#[tokio::test]
async fn contract_test_mode_starts_no_worker() {
    let backend = TestDb::sqlite();
    let (worker, started, _) = probe_worker();
    let lifespan = Lifespan::start(backend.api_config(&[("SVC_CONTRACT_TEST", "true")]), vec![worker]).await.unwrap();
    lifespan.shutdown().await;
    assert!(started.await.is_err(), "the worker must never have run");
}

#[tokio::test]
async fn failing_worker_is_logged_and_does_not_stop_the_api() {
    let (logs, _guard) = LogCapture::start();
    let backend = TestDb::sqlite();
    let worker = WorkerBody::new("flaky", |_| async { anyhow::bail!("disk on fire") });
    let lifespan = Lifespan::start(backend.api_config(&[]), vec![worker]).await.unwrap();
    assert_eq!(get_json(&lifespan.router(), "/api/v1/health").await.status, StatusCode::OK);
    lifespan.shutdown().await;
    let failed = logs.lines_containing("Embedded worker failed");
    assert!(failed.len() == 1 && failed[0].contains("flaky") && failed[0].contains("disk on fire"), "{failed:?}");
}

#[tokio::test]
async fn docs_exist_only_in_developer_mode() {
    let backend = TestDb::sqlite();
    for (developer, expected) in [("false", StatusCode::NOT_FOUND), ("true", StatusCode::OK)] {
        let lifespan = Lifespan::start(backend.api_config(&[("SVC_DEVELOPER", developer)]), vec![]).await.unwrap();
        let app = lifespan.router();
        for path in ["/docs/", "/redoc", "/openapi.json"] {
            assert_eq!(get_json(&app, path).await.status, expected, "{path} with SVC_DEVELOPER={developer}");
        }
        if developer == "true" {
            let doc = get_json(&app, "/openapi.json").await.body;
            assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
            for path in ["/api/v1/health", "/api/v1/system/deployment-mode"] {
                assert!(doc["paths"][path]["get"].is_object(), "{path} missing from the OpenAPI document");
            }
            assert!(doc["paths"]["/api/v1/health"]["get"]["responses"]["503"].is_object());
        }
        lifespan.shutdown().await;
    }
}

fn preflight(origin: &str) -> Request<Body> {
    Request::builder()
        .method(Method::OPTIONS)
        .uri("/api/v1/health")
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "authorization,content-type,last-event-id")
        .body(Body::empty())
        .unwrap()
}

#[tokio::test]
async fn cors_preflight_allows_listed_origins_only() {
    let backend = TestDb::sqlite();
    let config = backend.api_config(&[("SVC_CORS_ORIGINS", "https://dash.example, http://localhost:3000")]);
    let lifespan = Lifespan::start(config, vec![]).await.unwrap();
    let app = lifespan.router();

    let allowed = send(&app, preflight("https://dash.example")).await;
    assert!(allowed.status.is_success());
    assert_eq!(allowed.headers["access-control-allow-origin"], "https://dash.example");
    let methods = allowed.headers["access-control-allow-methods"].to_str().unwrap().to_string();
    for method in ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] {
        assert!(methods.contains(method), "{methods}");
    }
    let headers = allowed.headers["access-control-allow-headers"].to_str().unwrap().to_ascii_lowercase();
    for header in ["authorization", "content-type", "last-event-id"] {
        assert!(headers.contains(header), "{headers}");
    }
    assert!(!allowed.headers.contains_key("access-control-allow-credentials"));

    for origin in ["https://evil.example", "https://dash.example.evil", "null"] {
        let denied = send(&app, preflight(origin)).await;
        assert!(!denied.headers.contains_key("access-control-allow-origin"), "{origin} was allowed");
    }
    lifespan.shutdown().await;
}

fn panicking_app(lifespan: &Lifespan) -> Router {
    let routes = Router::new().route(
        "/api/v1/boom",
        get(|| async {
            panic!("kaboom: secret-internal-detail");
            #[allow(unreachable_code)]
            ""
        }),
    );
    svc::http::with_layers(routes, lifespan.state().clone())
}

#[tokio::test]
async fn a_panicking_handler_gives_an_opaque_500_whose_id_is_logged() {
    let (logs, _guard) = LogCapture::start();
    let backend = TestDb::sqlite();
    let lifespan = Lifespan::start(backend.api_config(&[]), vec![]).await.unwrap();
    let reply = get_json(&panicking_app(&lifespan), "/api/v1/boom").await;

    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    let body = reply.body.as_object().unwrap();
    assert_eq!(body.len(), 2, "{body:?}");
    assert_eq!(body["detail"], "Internal Server Error");
    let error_id = body["error_id"].as_str().unwrap();
    assert!(error_id.len() == 32 && error_id.chars().all(|c| c.is_ascii_hexdigit()), "{error_id}");
    assert_eq!(Uuid::parse_str(error_id).unwrap().get_version_num(), 4);
    assert!(!reply.body.to_string().contains("kaboom"));

    let logged = logs.lines_containing(error_id);
    assert_eq!(logged.len(), 1, "{}", logs.text());
    assert!(logged[0].contains("ERROR") && logged[0].contains("kaboom: secret-internal-detail"), "{}", logged[0]);

    // The API goes on serving after the panic.
    assert_eq!(get_json(&lifespan.router(), "/api/v1/health").await.status, StatusCode::OK);
    lifespan.shutdown().await;
}

#[tokio::test]
async fn developer_mode_adds_the_exception_to_the_500_body() {
    let backend = TestDb::sqlite();
    let lifespan = Lifespan::start(backend.api_config(&[("SVC_DEVELOPER", "true")]), vec![]).await.unwrap();
    let reply = get_json(&panicking_app(&lifespan), "/api/v1/boom").await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(reply.body["detail"], "Internal Server Error");
    assert_eq!(reply.body["error_id"].as_str().unwrap().len(), 32);
    assert_eq!(reply.body["exception_type"], "panic");
    assert!(reply.body["traceback"].as_str().unwrap().contains("kaboom"));
    lifespan.shutdown().await;
}

#[tokio::test]
async fn unknown_routes_answer_404_json() {
    let backend = TestDb::sqlite();
    let lifespan = Lifespan::start(backend.api_config(&[]), vec![]).await.unwrap();
    let reply = get_json(&lifespan.router(), "/api/v1/no-such-route").await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    assert_eq!(reply.body, serde_json::json!({"detail": "Not Found"}));
    lifespan.shutdown().await;
}

#[tokio::test]
async fn admin_is_created_flagged_and_follows_the_env_password_until_changed() {
    for backend in TestDb::all() {
        Lifespan::start(backend.api_config(&[("SVC_ADMIN_USER", "root-op")]), vec![]).await.unwrap().shutdown().await;
        let db = backend.open().await;
        let admin = db.user_by_name("root-op").await.unwrap();
        assert_eq!(admin.role, svc::db::Role::Admin);
        assert!(admin.must_change_password);
        assert!(svc::auth::password::verify(common::ADMIN_PASSWORD, &admin.password_hash));

        // Still flagged: a new SVC_ADMIN_PASSWORD replaces the old one.
        let renewed = "another long admin password";
        let config = backend.api_config(&[("SVC_ADMIN_USER", "root-op"), ("SVC_ADMIN_PASSWORD", renewed)]);
        Lifespan::start(config, vec![]).await.unwrap().shutdown().await;
        let admin = db.user_by_name("root-op").await.unwrap();
        assert!(svc::auth::password::verify(renewed, &admin.password_hash), "{}", backend.name);
        assert_eq!(db.list_users().await.unwrap().len(), 1);

        // Once the admin chose a password, the environment no longer overrides it.
        let chosen = svc::auth::password::hash("the admin's own choice").unwrap();
        db.set_password(admin.uuid, &chosen, false, Utc::now()).await.unwrap();
        Lifespan::start(backend.api_config(&[("SVC_ADMIN_USER", "root-op")]), vec![]).await.unwrap().shutdown().await;
        assert_eq!(db.user_by_name("root-op").await.unwrap().password_hash, chosen);
        db.close().await;
    }
}

#[tokio::test]
async fn profiled_requests_each_write_a_flamegraph_page() {
    let backend = TestDb::sqlite();
    let dir = tempfile::tempdir().unwrap();
    let profiles = dir.path().join("profiles");
    let profile_dir = profiles.display().to_string();
    let config = backend.api_config(&[("SVC_PROFILE_REQUESTS", "true"), ("SVC_PROFILE_DIR", &profile_dir)]);
    let lifespan = Lifespan::start(config, vec![]).await.unwrap();
    let before = Utc::now().timestamp_millis();
    assert_eq!(get_json(&lifespan.router(), "/api/v1/health").await.status, StatusCode::OK);
    lifespan.shutdown().await;

    let names: Vec<String> =
        std::fs::read_dir(&profiles).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert_eq!(names.len(), 1, "{names:?}");
    let (stamp, rest) = names[0].split_once('-').unwrap();
    assert!(stamp.parse::<i64>().unwrap() >= before);
    assert_eq!(rest, "GET-api_v1_health.html");
    let page = std::fs::read_to_string(profiles.join(&names[0])).unwrap();
    assert!(page.starts_with("<!doctype html>") && (page.contains("<svg") || page.contains("No samples")));
}

#[tokio::test]
async fn requests_are_not_profiled_by_default() {
    let backend = TestDb::sqlite();
    let config = backend.api_config(&[]);
    let profiles = config.api.profile_dir.clone();
    let lifespan = Lifespan::start(config, vec![]).await.unwrap();
    assert_eq!(get_json(&lifespan.router(), "/api/v1/health").await.status, StatusCode::OK);
    lifespan.shutdown().await;
    assert!(!profiles.exists());
}

#[tokio::test]
async fn a_store_error_reaches_the_log_but_never_the_client() {
    let (logs, _guard) = LogCapture::start();
    let backend = TestDb::sqlite();
    let lifespan = Lifespan::start(backend.api_config(&[]), vec![]).await.unwrap();
    let routes = Router::new().route(
        "/api/v1/store",
        get(|| async {
            let err = anyhow::anyhow!("Access denied for user 'svc'@'10.0.0.9' (using password: YES)");
            Err::<(), _>(svc::http::ApiError::Internal(err.context("loading rows")))
        }),
    );
    let reply = get_json(&svc::http::with_layers(routes, lifespan.state().clone()), "/api/v1/store").await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(reply.headers["content-type"], "application/json");
    assert_eq!(reply.body.as_object().unwrap().len(), 2);
    assert!(!reply.body.to_string().contains("Access denied"));
    let error_id = reply.body["error_id"].as_str().unwrap();
    let logged = logs.lines_containing(error_id);
    assert!(logged.len() == 1 && logged[0].contains("Access denied for user"), "{}", logs.text());
    lifespan.shutdown().await;
}

#[tokio::test]
async fn disabling_the_limiter_on_a_public_binding_logs_a_critical_warning() {
    let (logs, _guard) = LogCapture::start();
    let backend = TestDb::sqlite();
    let public = [("SVC_API_HOST", "0.0.0.0"), ("SVC_CORS_ORIGINS", "https://dash.example")];
    for (host_pairs, limiter, expected) in
        [(&public[..], "false", 1), (&public[..], "true", 0), (&[("SVC_API_HOST", "127.0.0.1")][..], "false", 0)]
    {
        let mut extra = host_pairs.to_vec();
        extra.push(("SVC_LIMITER_ENABLED", limiter));
        let before = logs.lines_containing("Rate limiting is disabled on a public binding").len();
        Lifespan::start(backend.api_config(&extra), vec![]).await.unwrap().shutdown().await;
        let lines = logs.lines_containing("Rate limiting is disabled on a public binding");
        assert_eq!(lines.len() - before, expected, "{extra:?}");
        assert!(lines.iter().all(|l| l.contains("ERROR") && l.contains("severity=\"critical\"")), "{lines:?}");
    }
}

#[tokio::test]
async fn developer_tracing_logs_every_request_and_is_absent_otherwise() {
    let (logs, _guard) = LogCapture::start();
    let backend = TestDb::sqlite();
    for (tracing_on, expected) in [("false", 0), ("true", 1)] {
        let lifespan =
            Lifespan::start(backend.api_config(&[("SVC_DEVELOPER_TRACING", tracing_on)]), vec![]).await.unwrap();
        let before = logs.lines_containing("finished processing request").len();
        get_as_viewer(&lifespan, "/api/v1/system/deployment-mode").await;
        let traced = logs.lines_containing("finished processing request");
        assert_eq!(traced.len() - before, expected, "SVC_DEVELOPER_TRACING={tracing_on}");
        if let Some(line) = traced.last() {
            assert!(
                line.contains("INFO") && line.contains("/api/v1/system/deployment-mode") && line.contains("status=200"),
                "{line}"
            );
        }
        lifespan.shutdown().await;
    }
}
