//! For the tests that run the library in their own process: a fresh database on every backend
//! under test (a sqlite file always; a uniquely named MariaDB/MySQL database when
//! `SVC_TEST_MYSQL_URL` is set, dropped afterwards), configurations that point at it, the API on a
//! loopback socket, and log capture.

pub mod logs;
pub mod proxy;
pub mod receiver;
pub mod sse;

use std::cell::RefCell;
use std::io::Write;
use std::sync::{Arc, Mutex, Once};

use sqlx::Connection;
use svc::config::Config;
use svc::db::{self, Db, DeckyLifecycle, LifecycleStatus};

pub const JWT_SECRET: &str = "4f9d2c7a1b8e6f3d0c5a9b2e7d4f1a8c";
pub const ADMIN_PASSWORD: &str = "a long admin password";

/// A database that exists only for one test.
pub struct TestDb {
    pub name: &'static str,
    vars: Vec<(String, String)>,
    mysql_url: Option<String>,
    _dir: tempfile::TempDir,
}

impl TestDb {
    pub fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("svc.db");
        TestDb {
            name: "sqlite",
            vars: vec![
                ("SVC_DB_TYPE".into(), "sqlite".into()),
                ("SVC_DB_PATH".into(), path.display().to_string()),
                ("SVC_DATA_DIR".into(), dir.path().display().to_string()),
            ],
            mysql_url: None,
            _dir: dir,
        }
    }

    /// `None` unless `SVC_TEST_MYSQL_URL` names a server.
    pub fn mysql() -> Option<TestDb> {
        let base = std::env::var("SVC_TEST_MYSQL_URL").ok().filter(|u| !u.is_empty())?;
        let server = base.rsplit_once('/').map_or(base.as_str(), |(server, _)| server);
        let url = format!("{server}/svc_test_{}", uuid::Uuid::new_v4().simple());
        let dir = tempfile::tempdir().unwrap();
        Some(TestDb {
            name: "mysql",
            vars: vec![
                ("SVC_DB_TYPE".into(), "mysql".into()),
                ("SVC_DB_URL".into(), url.clone()),
                ("SVC_DATA_DIR".into(), dir.path().display().to_string()),
            ],
            mysql_url: Some(url),
            _dir: dir,
        })
    }

    /// The server URL of a MariaDB/MySQL database, for a connection of the test's own.
    pub fn mysql_url(&self) -> Option<&str> {
        self.mysql_url.as_deref()
    }

    /// Every backend under test, each fresh.
    pub fn all() -> Vec<TestDb> {
        std::iter::once(TestDb::sqlite()).chain(TestDb::mysql()).collect()
    }

    /// The `SVC_DB_*` variables that select this database.
    pub fn vars(&self) -> Vec<(String, String)> {
        self.vars.clone()
    }

    /// A configuration for `svc api` on this database, with `extra` variables on top. Only read:
    /// the API's rules are the lifespan's to check when it starts (startup steps 2–4), so tests of
    /// those steps use it too.
    pub fn api_config(&self, extra: &[(&str, &str)]) -> Config {
        Config::from_vars(self.api_vars(extra)).expect("test configuration parses")
    }

    pub fn api_vars(&self, extra: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut vars = self.vars();
        vars.push(("SVC_JWT_SECRET".into(), JWT_SECRET.into()));
        vars.push(("SVC_ADMIN_PASSWORD".into(), ADMIN_PASSWORD.into()));
        for (key, value) in extra {
            vars.retain(|(k, _)| k != key);
            vars.push((key.to_string(), value.to_string()));
        }
        vars
    }

    /// The repository, migrated.
    pub async fn open(&self) -> Db {
        let config = Config::from_vars(self.vars()).unwrap();
        let db = db::connect(&config.db).unwrap();
        db.migrate().await.unwrap();
        db
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let Some(url) = self.mysql_url.take() else { return };
        // Drop runs inside the test's runtime, which cannot be blocked on: use a thread of our own.
        // The drop waits for the database's metadata locks, held by any transaction still open on
        // it, at most a few seconds: a leaked transaction must fail loudly, not hang the suite.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async {
                let (server, database) = url.rsplit_once('/').expect("a database URL names its database");
                let mut conn = sqlx::MySqlConnection::connect(server).await?;
                sqlx::query("set session lock_wait_timeout = 10").execute(&mut conn).await?;
                sqlx::query(&format!("drop database if exists `{database}`")).execute(&mut conn).await?;
                Ok::<_, sqlx::Error>(())
            })
        })
        .join()
        .unwrap();
        if let Err(err) = dropped
            && !std::thread::panicking()
        {
            panic!("the test database could not be dropped (a transaction left open?): {err}");
        }
    }
}

/// A deploy record on `ssh-01` in `status`, started `age` ago.
pub fn lifecycle(status: LifecycleStatus, age: chrono::Duration) -> DeckyLifecycle {
    let started = chrono::Utc::now() - age;
    DeckyLifecycle {
        id: uuid::Uuid::new_v4(),
        decky_name: "ssh-01".into(),
        host_uuid: None,
        operation: "deploy".into(),
        status,
        error: None,
        started_at: started,
        updated_at: started,
        completed_at: None,
    }
}

/// Log lines written on this thread while the guard lives (a tokio test runs its tasks on its own
/// thread). One global subscriber routes each line to the capture of the thread that wrote it:
/// per-thread subscribers would race on tracing's global per-callsite cache and lose lines.
#[derive(Clone, Default)]
pub struct LogCapture(Arc<Mutex<Vec<u8>>>);

thread_local! {
    static CURRENT: RefCell<Option<LogCapture>> = const { RefCell::new(None) };
}

pub struct CaptureGuard;

impl Drop for CaptureGuard {
    fn drop(&mut self) {
        CURRENT.with(|current| current.borrow_mut().take());
    }
}

struct ThreadWriter;

impl Write for ThreadWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        CURRENT.with(|current| {
            if let Some(capture) = &*current.borrow() {
                capture.0.lock().unwrap().extend_from_slice(buf);
            }
        });
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl LogCapture {
    pub fn start() -> (LogCapture, CaptureGuard) {
        static INSTALL: Once = Once::new();
        INSTALL.call_once(|| {
            tracing_subscriber::fmt()
                .with_env_filter("debug,sqlx=warn")
                .with_ansi(false)
                .with_writer(|| ThreadWriter)
                .init();
        });
        let capture = LogCapture::default();
        CURRENT.with(|current| *current.borrow_mut() = Some(capture.clone()));
        (capture, CaptureGuard)
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    pub fn lines_containing(&self, needle: &str) -> Vec<String> {
        self.text().lines().filter(|l| l.contains(needle)).map(str::to_string).collect()
    }
}

/// A user that may use every gated route of its role (no password change pending), and a token
/// minted for it directly: for tests of other routes than login.
pub async fn user_token(state: &svc::http::AppState, name: &str, role: svc::db::Role) -> String {
    let new = svc::db::NewUser {
        username: name.into(),
        password_hash: svc::auth::password::hash(ADMIN_PASSWORD).unwrap(),
        role,
        must_change_password: false,
    };
    let user = state.db.add_user(new, chrono::Utc::now()).await.unwrap();
    state.sessions.mint(&user).unwrap()
}

/// The two users most route tests act as, each with a token minted as [`user_token`] mints one:
/// an admin, `root`, and a viewer, `watcher`.
pub struct RoleTokens {
    pub admin: String,
    pub viewer: String,
}

/// An answer of the API under test.
pub struct Reply {
    pub status: reqwest::StatusCode,
    pub body: serde_json::Value,
    pub www_authenticate: Option<String>,
}

impl Reply {
    /// The body decoded from JSON (its text as a JSON string when it is not JSON).
    async fn of(response: reqwest::Response) -> Reply {
        let status = response.status();
        let www_authenticate =
            response.headers().get(reqwest::header::WWW_AUTHENTICATE).map(|v| v.to_str().unwrap().to_string());
        let text = response.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
        Reply { status, body, www_authenticate }
    }
}

/// A fleet decky of `name` at `ip` running SSH, as a deploy would store it.
pub fn decky_config(name: &str, ip: &str) -> svc::db::DeckyConfig {
    svc::db::DeckyConfig {
        name: name.into(),
        ip: ip.into(),
        services: vec!["ssh".into()],
        distro: "debian".into(),
        base_image: "svc-decky".into(),
        build_base: "debian:bookworm-slim".into(),
        hostname: name.into(),
        archetype: None,
        service_config: Default::default(),
        nmap_os: "linux".into(),
        mutate_interval: None,
        last_mutated: 0.0,
        last_login_attempt: 0.0,
        host_uuid: None,
    }
}

/// The API on a real loopback socket (login needs the peer address), with a client for it.
pub struct TestApi {
    pub base: String,
    pub client: reqwest::Client,
    pub state: svc::http::AppState,
    shutdown: tokio_util::sync::CancellationToken,
    serving: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl TestApi {
    pub async fn start(config: Config) -> TestApi {
        TestApi::start_with(config, vec![]).await
    }

    /// The API with an admin and a viewer ready to call it.
    pub async fn start_with_users(config: Config) -> (TestApi, RoleTokens) {
        let api = TestApi::start(config).await;
        let admin = user_token(&api.state, "root", svc::db::Role::Admin).await;
        let viewer = user_token(&api.state, "watcher", svc::db::Role::Viewer).await;
        (api, RoleTokens { admin, viewer })
    }

    /// The API with `workers` embedded, as `svc api` embeds the ingester.
    pub async fn start_with(config: Config, workers: Vec<svc::worker::WorkerBody>) -> TestApi {
        let lifespan = svc::startup::Lifespan::start(config, workers).await.unwrap();
        let state = lifespan.state().clone();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}/api/v1", listener.local_addr().unwrap());
        let shutdown = tokio_util::sync::CancellationToken::new();
        let serving = tokio::spawn(lifespan.serve(listener, shutdown.clone()));
        TestApi { base, client: reqwest::Client::new(), state, shutdown, serving }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `GET path?query`, with a bearer token when one is given; the body decoded from JSON (its
    /// text as a JSON string when it is not JSON).
    pub async fn get(&self, path: &str, token: Option<&str>, query: &[(&str, &str)]) -> Reply {
        let mut request = self.client.get(self.url(path)).query(query);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        Reply::of(request.send().await.unwrap()).await
    }

    /// `method path` with a bearer token and, when given, a JSON body; decoded as [`TestApi::get`].
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        body: Option<serde_json::Value>,
    ) -> Reply {
        let mut request = self.client.request(method, self.url(path)).bearer_auth(token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        Reply::of(request.send().await.unwrap()).await
    }

    /// The body of a 200 answer to `GET path?query`.
    pub async fn ok(&self, path: &str, token: &str, query: &[(&str, &str)]) -> serde_json::Value {
        let reply = self.get(path, Some(token), query).await;
        assert_eq!(reply.status, reqwest::StatusCode::OK, "{path} {query:?}: {}", reply.body);
        reply.body
    }

    pub async fn stop(self) {
        self.shutdown.cancel();
        self.serving.await.unwrap().unwrap();
    }
}
