//! The real `svc` binary: configuration errors, serving and stopping, and the operator's commands.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const JWT_SECRET: &str = "7c1e4b9f2a6d3c8e5f0a1b2c3d4e5f6a";

/// `svc ARGS` in `dir`, with nothing of the test's environment but `PATH`.
fn svc(dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_svc"));
    command.args(args).current_dir(dir).env_clear().env("PATH", std::env::var("PATH").unwrap_or_default());
    command.env("SVC_DATA_DIR", dir.join("data")).env("SVC_LOG_FORMAT", "text").env("NO_COLOR", "1");
    command
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Runs `svc` with `stdin` fed to it; returns (exit code, stdout, stderr).
fn run(mut command: Command, stdin: &str) -> (i32, String, String) {
    let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn version_and_help_describe_the_commands() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, _) = run(svc(dir.path(), &["--version"]), "");
    assert_eq!((code, out.trim()), (0, "svc 1.0.0"));
    let (code, out, _) = run(svc(dir.path(), &["--help"]), "");
    assert_eq!(code, 0);
    for command in ["api", "migrate", "user", "worker", "supervise", "systemd"] {
        assert!(out.contains(command), "{out}");
    }
}

#[test]
fn api_without_secrets_exits_nonzero_naming_each_variable() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = svc(dir.path(), &["api"]);
    command.env("SVC_JWT_SECRET", "changeme").env("SVC_API_PORT", "70000");
    let (code, _, err) = run(command, "");
    assert_eq!(code, 78, "{err}");
    for var in ["SVC_JWT_SECRET", "SVC_ADMIN_PASSWORD", "SVC_API_PORT"] {
        assert!(err.contains(var), "{err}");
    }
    assert!(!err.contains("changeme"), "the secret was echoed: {err}");
    assert!(!dir.path().join("data").exists(), "nothing may start on a bad configuration");
}

/// `svc api` on `port` with a valid configuration.
fn api_command(dir: &Path, port: u16) -> Command {
    let mut command = svc(dir, &["api"]);
    command
        .env("SVC_JWT_SECRET", JWT_SECRET)
        .env("SVC_ADMIN_PASSWORD", "a long admin password")
        .env("SVC_API_PORT", port.to_string());
    command
}

struct RunningApi {
    child: Child,
    lines: mpsc::Receiver<String>,
    /// What it logged up to and including the `Listening` line.
    startup: Vec<String>,
}

impl RunningApi {
    /// Spawns `command` and waits for it to say it is listening.
    fn start(mut command: Command) -> RunningApi {
        let mut child = command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let (lines_tx, lines) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = lines_tx.send(line);
            }
        });
        let mut startup = Vec::new();
        while !startup.last().is_some_and(|l: &String| l.contains("Listening")) {
            match lines.recv_timeout(Duration::from_secs(60)) {
                Ok(line) => startup.push(line),
                Err(err) => panic!("svc api did not start ({err}); it said:\n{}", startup.join("\n")),
            }
        }
        RunningApi { child, lines, startup }
    }

    /// SIGTERM, then the exit code once it has logged a clean shutdown.
    fn terminate(mut self) -> Option<i32> {
        let pid = rustix::process::Pid::from_child(&self.child);
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        let mut said = Vec::new();
        while !said.last().is_some_and(|l: &String| l.contains("Shutdown complete")) {
            match self.lines.recv_timeout(Duration::from_secs(60)) {
                Ok(line) => said.push(line),
                Err(err) => panic!("svc api did not stop cleanly ({err}); it said:\n{}", said.join("\n")),
            }
        }
        self.child.wait().unwrap().code()
    }
}

#[test]
fn api_serves_health_on_loopback_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let api = RunningApi::start(api_command(dir.path(), port));

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let health = runtime.block_on(async {
        let response = reqwest::get(format!("http://127.0.0.1:{port}/api/v1/health")).await.unwrap();
        (response.status().as_u16(), response.json::<serde_json::Value>().await.unwrap())
    });
    assert_eq!(health.0, 200);
    assert_eq!(health.1["status"], "healthy");

    assert_eq!(api.terminate(), Some(0));
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err(), "still listening after exit");
}

/// `command` run through a shell that first sets the soft open-file limit to `limit`.
fn with_open_file_limit(command: &Command, limit: u32) -> Command {
    let mut limited = Command::new("sh");
    limited
        .args(["-c", &format!("ulimit -S -n {limit} && exec \"$0\" \"$@\"")])
        .arg(command.get_program())
        .args(command.get_args())
        .env_clear();
    if let Some(dir) = command.get_current_dir() {
        limited.current_dir(dir);
    }
    for (key, value) in command.get_envs() {
        if let Some(value) = value {
            limited.env(key, value);
        }
    }
    limited
}

#[test]
fn json_logs_are_one_object_per_line_and_warn_of_a_low_open_file_limit() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = api_command(dir.path(), free_port());
    command.env("SVC_LOG_FORMAT", "json");
    let api = RunningApi::start(with_open_file_limit(&command, 1024));

    let events: Vec<serde_json::Value> =
        api.startup.iter().map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l}"))).collect();
    let warning = events
        .iter()
        .find(|e| e["message"].as_str().is_some_and(|m| m.contains("Open-file limit is low")))
        .expect("no open-file warning");
    assert_eq!(warning["level"], "WARN");
    assert_eq!(warning["soft_limit"], 1024);
    assert_eq!(warning["recommended"], 4096);
    assert_eq!(api.terminate(), Some(0));
}

#[test]
fn no_open_file_warning_at_or_above_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let api = RunningApi::start(with_open_file_limit(&api_command(dir.path(), free_port()), 4096));
    assert!(!api.startup.iter().any(|l| l.contains("Open-file limit")), "{:?}", api.startup);
    assert_eq!(api.terminate(), Some(0));
}

#[test]
fn api_refuses_to_start_on_an_agent_host() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = svc(dir.path(), &["api"]);
    command
        .env("SVC_JWT_SECRET", JWT_SECRET)
        .env("SVC_ADMIN_PASSWORD", "a long admin password")
        .env("SVC_MODE", "agent");
    let (code, _, err) = run(command, "");
    assert_ne!(code, 0);
    assert!(err.contains("master-only"), "{err}");
}

#[test]
fn migrate_and_user_commands_work_on_the_database_directly() {
    let dir = tempfile::tempdir().unwrap();
    let command = |args: &[&str]| svc(dir.path(), args);

    let (code, out, err) = run(command(&["migrate"]), "");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("migrations applied"));
    assert!(dir.path().join("data/svc.db").exists());

    let (code, out, err) = run(command(&["user", "add", "alice", "--role", "admin"]), "alice's long password\n");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("created alice (admin)"), "{out}");

    let (code, _, err) = run(command(&["user", "add", "ALICE"]), "another long password\n");
    assert_ne!(code, 0);
    assert!(err.contains("already exists"), "{err}");

    for bad in [" bob", "bob\u{7}", &"b".repeat(65)] {
        let (code, _, err) = run(command(&["user", "add", bad]), "a long enough password\n");
        assert_ne!(code, 0, "{bad:?}");
        assert!(err.contains("a username is 1 to 64 characters"), "{err}");
    }

    let (code, _, err) = run(command(&["user", "add", "bob"]), "short\n");
    assert_ne!(code, 0);
    assert!(err.contains("at least 12 characters"), "{err}");
    let (code, _, err) = run(command(&["user", "add", "bob"]), &format!("{}\n", "x".repeat(73)));
    assert_ne!(code, 0);
    assert!(err.contains("at most 72 bytes"), "{err}");

    let (code, _, err) = run(command(&["user", "passwd", "nobody"]), "a brand new password\n");
    assert_ne!(code, 0);
    assert!(err.contains("no user named nobody"), "{err}");

    let (code, _, err) = run(command(&["user", "passwd", "alice", "--must-change-password"]), "a brand new password\n");
    assert_eq!(code, 0, "{err}");

    let (code, out, _) = run(command(&["user", "list"]), "");
    assert_eq!(code, 0);
    let rows: Vec<Vec<&str>> = out.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(rows.len(), 1, "{out}");
    assert_eq!((rows[0][0], rows[0][1], rows[0][3]), ("alice", "admin", "must-change-password"));

    // The stored hash is for the new password, read from stdin and never from argv.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let config = svc::config::Config::from_vars([(
            "SVC_DB_PATH".to_string(),
            dir.path().join("data/svc.db").display().to_string(),
        )])
        .unwrap();
        let db = svc::db::connect(&config.db).unwrap();
        let alice = db.user_by_name("alice").await.unwrap();
        assert!(svc::auth::password::verify("a brand new password", &alice.password_hash));
        assert!(alice.tokens_valid_from.is_some());
        db.close().await;
    });
}

/// The workspace's root, where `docs/` and every crate's sources are.
fn workspace_root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

#[test]
fn configuration_doc_is_what_svc_config_prints() {
    let dir = tempfile::tempdir().unwrap();
    let (code, printed, err) = run(svc(dir.path(), &["config", "--markdown"]), "");
    assert_eq!(code, 0, "{err}");
    let doc = std::fs::read_to_string(workspace_root().join("docs/configuration.md")).unwrap();
    assert!(
        doc == printed,
        "docs/configuration.md differs from `svc config --markdown`; regenerate it with\n  \
         cargo run -q -p svc-cli -- config --markdown > docs/configuration.md"
    );
}

/// Every `"SVC_…"` literal in the sources of the crates the service is built from (tests, benches
/// and their own variables left out) must be listed by `svc config`, whichever code reads it.
#[test]
fn svc_config_lists_every_variable_the_code_reads() {
    fn sources(dir: &Path, found: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !name.starts_with('.') && !["target", "tests", "benches", "test-support"].contains(&name.as_str()) {
                    sources(&path, found);
                }
            } else if name.ends_with(".rs") && name != "tests.rs" {
                found.push(path);
            }
        }
    }
    let mut files = Vec::new();
    sources(&workspace_root(), &mut files);
    let mut read = std::collections::BTreeSet::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (at, _) in text.match_indices("\"SVC_") {
            let name: String = text[at + 1..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            // `"SVC_"` alone is the namespace itself (env.rs).
            if name.len() > 4 && !name.starts_with("SVC_TEST_") && !name.starts_with("SVC_BENCH_") {
                read.insert(name);
            }
        }
    }
    assert!(read.len() > 50, "the scan found too little: {read:?}");
    let dir = tempfile::tempdir().unwrap();
    let (code, printed, err) = run(svc(dir.path(), &["config"]), "");
    assert_eq!(code, 0, "{err}");
    let listed: std::collections::BTreeSet<String> =
        printed.lines().filter_map(|line| line.split_whitespace().next()).map(str::to_string).collect();
    let missing: Vec<_> = read.iter().filter(|var| !listed.contains(*var)).collect();
    assert!(missing.is_empty(), "read by the code but not listed by `svc config`: {missing:?}\n{printed}");
}

#[test]
fn svc_config_check_reports_every_problem_without_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = svc(dir.path(), &["config", "--check"]);
    command.env("SVC_JWT_SECRET", "changeme").env("SVC_API_PORT", "70000").env("SVC_DB_TYPE", "oracle");
    let (code, _, err) = run(command, "");
    assert_eq!(code, 78, "{err}");
    for var in ["SVC_JWT_SECRET", "SVC_ADMIN_PASSWORD", "SVC_API_PORT", "SVC_DB_TYPE"] {
        assert!(err.contains(var), "{err}");
    }
    assert!(!err.contains("changeme"), "the secret was echoed: {err}");
    assert!(!dir.path().join("data").exists(), "checking starts nothing");

    let mut command = svc(dir.path(), &["config", "--check"]);
    command.env("SVC_JWT_SECRET", JWT_SECRET).env("SVC_ADMIN_PASSWORD", "a-long-enough-Passw0rd");
    let (code, out, err) = run(command, "");
    assert_eq!((code, out.trim()), (0, "configuration ok"), "{err}");
}
