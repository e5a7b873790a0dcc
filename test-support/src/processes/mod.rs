//! For the tests that run `svc` as processes, and the one `nats-server` helper of every test: a
//! real `nats-server` each test starts on a free port (and can stop and restart), `svc` processes
//! that are killed when the test ends, the one HTTP helper for the worker routes, and polling with
//! a deadline instead of fixed sleeps.

use std::future::Future;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};

pub mod netns;
pub mod podman;
pub mod prometheus;
pub mod swarm;

pub const JWT_SECRET: &str = "7c1e4b9f2a6d3c8e5f0a1b2c3d4e5f6a";
/// Long enough for a slow CI machine, short enough to fail a broken test quickly.
pub const DEADLINE: Duration = Duration::from_secs(30);

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `PATH` with the system directories `nats-server` and `systemd-analyze` live in.
pub fn path() -> String {
    format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", std::env::var("PATH").unwrap_or_default())
}

/// The `svc` binary cargo built for the test that runs: in the directory above the test's own
/// (`<target>/<profile>/deps/<test>`), as cargo builds a package's binaries for its integration tests.
pub fn svc_binary() -> PathBuf {
    let test = std::env::current_exe().expect("the test knows its own path");
    let profile = test.parent().and_then(Path::parent).expect("a test runs from <target>/<profile>/deps");
    let binary = profile.join("svc");
    assert!(binary.is_file(), "no svc binary at {} (only svc-cli's tests have one built)", binary.display());
    binary
}

/// `svc ARGS` in `dir`, with nothing of the test's environment but `PATH`, a valid API
/// configuration, and heartbeats every half second.
pub fn svc(dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(svc_binary());
    command.args(args).current_dir(dir).env_clear().env("PATH", path());
    command
        .env("SVC_DATA_DIR", dir.join("data"))
        .env("SVC_LOG_FORMAT", "text")
        .env("NO_COLOR", "1")
        .env("SVC_JWT_SECRET", JWT_SECRET)
        .env("SVC_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .env("SVC_HEARTBEAT_SECS", "0.5")
        .env("SVC_UNIT_DIRS", dir.join("units"));
    command
}

/// A child process whose output is kept, killed if the test ends first.
pub struct Proc {
    pub child: Child,
    output: Arc<Mutex<Vec<String>>>,
    /// The program and its arguments, to name it in a failed test's output.
    name: String,
}

/// How many of its last lines a process leaves in the output of a test that failed.
const LINES_ON_FAILURE: usize = 60;

impl Proc {
    pub fn spawn(mut command: Command) -> Proc {
        let name = std::iter::once(command.get_program())
            .chain(command.get_args())
            .map(|part| part.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ");
        let mut child = command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let output = Arc::new(Mutex::new(Vec::new()));
        for stream in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let output = output.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    output.lock().unwrap().push(line);
                }
            });
        }
        Proc { child, output, name }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn output(&self) -> String {
        self.output.lock().unwrap().join("\n")
    }

    pub fn signal(&self, signal: Signal) {
        rustix::process::kill_process(Pid::from_raw(self.pid()).unwrap(), signal).unwrap();
    }

    /// Its exit status, waiting at most `DEADLINE`.
    pub fn wait(&mut self) -> ExitStatus {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(status) = self.exit_status(deadline) {
                return status;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `wait` for a test whose own servers must go on answering the process while it stops (a
    /// webhook receiver, say): it yields to the test's runtime instead of blocking it.
    pub async fn exited(&mut self) -> ExitStatus {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(status) = self.exit_status(deadline) {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn exit_status(&mut self, deadline: Instant) -> Option<ExitStatus> {
        let status = self.child.try_wait().unwrap();
        assert!(status.is_some() || Instant::now() < deadline, "process did not exit; it said:\n{}", self.output());
        status
    }
}

impl Drop for Proc {
    /// Stops the process; in a test that is failing, its last lines go to the test's output, so a
    /// failure seen only in CI says what each process was doing.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let output = self.output.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let tail = &output[output.len().saturating_sub(LINES_ON_FAILURE)..];
            eprintln!("==> last {} lines of `{}`:\n{}", tail.len(), self.name, tail.join("\n"));
        }
    }
}

/// A `nats-server` of the test's own on a free loopback port.
pub struct Nats {
    pub port: u16,
    server: Option<Proc>,
}

impl Nats {
    pub fn start() -> Nats {
        let mut nats = Nats { port: free_port(), server: None };
        nats.restart();
        nats
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Starts it again on the same port.
    pub fn restart(&mut self) {
        let mut command = Command::new(nats_server());
        command.args(["-a", "127.0.0.1", "-p", &self.port.to_string()]);
        self.server = Some(Proc::spawn(command));
        let deadline = Instant::now() + DEADLINE;
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "nats-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn stop(&mut self) {
        self.server.take();
    }

    /// Sends the server `signal`: `STOP` makes it hang with its sockets open, `CONT` wakes it.
    pub fn signal(&self, signal: Signal) {
        self.server.as_ref().expect("the server runs").signal(signal);
    }
}

fn nats_server() -> PathBuf {
    std::env::split_paths(&path())
        .map(|dir| dir.join("nats-server"))
        .find(|p| p.is_file())
        .expect("nats-server is installed (scripts/lib.sh installs it)")
}

/// Spawns `svc api` and waits until it answers HTTP.
pub async fn start_api(command: Command, port: u16) -> Proc {
    let api = Proc::spawn(command);
    let url = format!("http://127.0.0.1:{port}/api/v1/health");
    eventually("the API answers", || async { reqwest::get(&url).await.is_ok() }).await;
    api
}

/// `svc api` on a free port; returns the command and its base URL.
pub fn api_command(dir: &Path, nats: Option<&Nats>) -> (Command, u16) {
    let port = free_port();
    let mut command = svc(dir, &["api"]);
    command.env("SVC_API_PORT", port.to_string());
    if let Some(nats) = nats {
        command.env("SVC_NATS_URL", nats.url());
    }
    (command, port)
}

pub use crate::in_process::ADMIN_PASSWORD;
/// What [`admin_token`] changes the seeded admin's password to, as the dashboard makes one do.
const CHANGED_ADMIN_PASSWORD: &str = "the admin's own password";

async fn post_json(port: u16, path: &str, token: Option<&str>, body: serde_json::Value) -> reqwest::Response {
    let mut request = reqwest::Client::new().post(format!("http://127.0.0.1:{port}/api/v1{path}")).json(&body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.unwrap()
}

async fn login(port: u16, password: &str) -> Option<serde_json::Value> {
    let response =
        post_json(port, "/auth/login", None, serde_json::json!({"username": "admin", "password": password})).await;
    if response.status() == reqwest::StatusCode::OK { Some(response.json().await.unwrap()) } else { None }
}

/// A token of the seeded admin of the API on `port`, its first password change done (as the
/// dashboard makes a new admin do). One per port, reused.
pub async fn admin_token(port: u16) -> String {
    static TOKENS: Mutex<Vec<(u16, String)>> = Mutex::new(Vec::new());
    if let Some((_, token)) = TOKENS.lock().unwrap().iter().find(|(p, _)| *p == port) {
        return token.clone();
    }
    if let Some(first) = login(port, ADMIN_PASSWORD).await {
        let token = first["access_token"].as_str().unwrap();
        let change = serde_json::json!({"old_password": ADMIN_PASSWORD, "new_password": CHANGED_ADMIN_PASSWORD});
        assert!(post_json(port, "/auth/change-password", Some(token), change).await.status().is_success());
    }
    let login = login(port, CHANGED_ADMIN_PASSWORD).await.expect("the admin logs in");
    let token = login["access_token"].as_str().unwrap().to_string();
    TOKENS.lock().unwrap().push((port, token.clone()));
    token
}

/// `METHOD /api/v1PATH` on the API at `port` as `token`, with a JSON body when given: (status, JSON body).
pub async fn api_call(
    port: u16,
    token: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<serde_json::Value>,
) -> (u16, serde_json::Value) {
    let url = format!("http://127.0.0.1:{port}/api/v1{path}");
    let mut request = reqwest::Client::new().request(method, url).bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(serde_json::Value::Null))
}

/// Deploys `ini` (additively) through the API at `port` and waits, until `deadline`, for every
/// lifecycle record to end; the records.
pub async fn deploy_and_wait(port: u16, token: &str, ini: &str, deadline: Duration) -> Vec<serde_json::Value> {
    let body = serde_json::json!({"ini_content": ini, "replace_fleet": false});
    let (status, body) = api_call(port, token, reqwest::Method::POST, "/deckies/deploy", Some(body)).await;
    assert_eq!(status, 202, "{body}");
    let ids: Vec<&str> = body["lifecycle_ids"].as_array().unwrap().iter().filter_map(|v| v.as_str()).collect();
    let query = ids.iter().map(|id| format!("ids={id}")).collect::<Vec<_>>().join("&");
    let until = Instant::now() + deadline;
    loop {
        let path = format!("/deckies/lifecycle?{query}");
        let (_, body) = api_call(port, token, reqwest::Method::GET, &path, None).await;
        let rows = body["rows"].as_array().cloned().unwrap_or_default();
        if rows.len() == ids.len() && rows.iter().all(|r| r["status"] == "succeeded" || r["status"] == "failed") {
            return rows;
        }
        assert!(Instant::now() < until, "the deploy did not finish: {body}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The one way these tests call the worker routes, as the admin: (status, JSON body).
pub async fn workers_api(method: reqwest::Method, port: u16, path: &str) -> (u16, serde_json::Value) {
    let url = format!("http://127.0.0.1:{port}/api/v1{path}");
    let token = admin_token(port).await;
    let response = reqwest::Client::new().request(method, url).bearer_auth(token).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(serde_json::Value::Null))
}

/// `GET /workers`.
pub async fn list_workers(port: u16) -> serde_json::Value {
    let (status, body) = workers_api(reqwest::Method::GET, port, "/workers").await;
    assert_eq!(status, 200, "{body}");
    body
}

/// The row of `name` in a `GET /workers` body.
pub fn row<'a>(body: &'a serde_json::Value, name: &str) -> Option<&'a serde_json::Value> {
    body["workers"].as_array().unwrap().iter().find(|r| r["name"] == name)
}

pub fn status_of(body: &serde_json::Value, name: &str) -> String {
    row(body, name).map_or("absent".into(), |r| r["status"].as_str().unwrap().to_string())
}

/// Polls `check` until it holds, failing after `DEADLINE`.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + DEADLINE;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether `pid` is a live process (a zombie is not).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// The live processes whose parent is `pid`.
pub fn children_of(pid: i32) -> Vec<i32> {
    let mut children = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(child) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        let Some((_, rest)) = stat.rsplit_once(')') else { continue };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(1).and_then(|p| p.parse::<i32>().ok()) == Some(pid) && fields[0] != "Z" {
            children.push(child);
        }
    }
    children
}

/// Runs `ip` with `args` (namespaces, links, addresses the test makes), failing the test with
/// `ip`'s own words when it refuses.
pub fn ip(args: &[&str]) {
    let output = Command::new("ip").args(args).env("PATH", path()).output().unwrap();
    assert!(output.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&output.stderr));
}

/// `var` parsed, or `default` when it is unset or does not parse (the benches' knobs).
pub fn env_or<T: std::str::FromStr>(var: &str, default: T) -> T {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// utime + stime of process `pid`, in clock ticks (100 a second), from `/proc/<pid>/stat`.
pub fn cpu_ticks(pid: i32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}
