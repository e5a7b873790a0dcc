//! `svc supervise`: the single-host default. Starts, in order, a private `nats-server` (when no
//! `SVC_NATS_URL` is configured and one is on PATH), `svc api` and the chosen workers, each a child
//! in its own process group that the kernel kills if the supervisor dies. Child output is prefixed
//! with the child's name. A crashed child is restarted with exponential backoff; one that keeps
//! crashing is logged as an error on every crash. SIGTERM or SIGINT stops the children in reverse
//! order, each with its stop signal (SIGTERM; SIGINT for nats-server) and then SIGKILL after a
//! grace period. A worker that exited cleanly (a stop intent) is started again when the API asks on
//! the bus (`POST /workers/{name}/start`).

use std::io;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rustix::process::{Pid, Signal};
use svc::bus::control::{self, StartAnswer};
use svc::config::Config;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::exit_status::EXIT_CONFIG;

const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A child up this long has recovered: its next crash starts the backoff afresh.
const HEALTHY_UPTIME: Duration = Duration::from_secs(60);
/// From this many crashes in a row, each crash is an error, not a warning.
const CRASH_LOOP: u32 = 3;
/// How long the private bus gets to accept connections before the API starts anyway.
const BUS_READY_WAIT: Duration = Duration::from_secs(5);
/// How long the API gets to listen (it migrates the database first) before the workers start
/// anyway: a worker started earlier would find a fresh database without its tables.
const API_READY_WAIT: Duration = Duration::from_secs(30);

#[derive(clap::Args)]
pub struct SuperviseArgs {
    /// Workers to run besides the API, comma-separated (e.g. `profiler,collector`); `''` for none.
    /// The default is the workers that need nothing of the host: the profiler (the API embeds the
    /// ingester itself).
    #[arg(long, env = "SVC_SUPERVISE_WORKERS", value_delimiter = ',', default_value = "profiler")]
    workers: Vec<String>,
    /// Seconds a child gets to stop after SIGTERM before it is killed.
    #[arg(long, env = "SVC_SUPERVISE_GRACE_SECS", default_value_t = 10.0)]
    grace_secs: f64,
}

/// One process the supervisor keeps running.
#[derive(Clone, Debug)]
struct ChildSpec {
    name: String,
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    /// What asks it to stop gracefully: nats-server exits 0 on SIGINT but 1 on SIGTERM.
    stop_signal: Signal,
    starts: StartRequests,
}

/// Requests to start a child again after it exited cleanly, and whether it runs now.
#[derive(Clone, Debug, Default)]
struct StartRequests {
    requested: Arc<Notify>,
    running: Arc<AtomicBool>,
}

pub async fn run(args: SuperviseArgs, config: Config) -> anyhow::Result<()> {
    let workers: Vec<String> = args.workers.iter().map(|w| w.trim().to_string()).filter(|w| !w.is_empty()).collect();
    for worker in &workers {
        crate::worker::find(worker)?;
    }
    let grace = Duration::try_from_secs_f64(args.grace_secs)
        .ok()
        .filter(|g| !g.is_zero())
        .context("--grace-secs must be a positive number of seconds")?;
    let shutdown = svc::signals::stop_on_signal()?;

    let svc = std::env::current_exe().context("locating the svc binary")?;
    // Each child, with the loopback port to wait for before starting the next.
    let mut children: Vec<(ChildSpec, Option<(u16, Duration)>)> = Vec::new();
    let mut env = Vec::new();
    if config.bus.nats_url.is_none() {
        match find_on_path("nats-server") {
            Some(nats) => {
                let port = free_port().context("finding a free port for the private bus")?;
                let spec = ChildSpec {
                    name: "nats".into(),
                    program: nats,
                    args: vec!["-a".into(), "127.0.0.1".into(), "-p".into(), port.to_string()],
                    env: Vec::new(),
                    stop_signal: Signal::INT,
                    starts: StartRequests::default(),
                };
                env.push(("SVC_NATS_URL".to_string(), format!("nats://127.0.0.1:{port}")));
                children.push((spec, Some((port, BUS_READY_WAIT))));
            }
            None => tracing::warn!("No SVC_NATS_URL and no nats-server on PATH: running without a bus"),
        }
    }
    children.push((child_spec("api", &svc, &["api"], &env), Some((config.api.port, API_READY_WAIT))));
    for worker in &workers {
        children.push((child_spec(worker, &svc, &["worker", worker], &env), None));
    }

    let startable: Vec<(String, StartRequests)> = children
        .iter()
        .filter(|(spec, _)| workers.contains(&spec.name))
        .map(|(spec, _)| (spec.name.clone(), spec.starts.clone()))
        .collect();
    let bus_url = env.iter().find(|(k, _)| k == "SVC_NATS_URL").map(|(_, v)| v.clone()).or(config.bus.nats_url.clone());
    let mut running: Vec<(String, CancellationToken, JoinHandle<bool>)> = Vec::new();
    for (spec, ready_port) in children {
        if shutdown.is_cancelled() {
            break;
        }
        let stop = CancellationToken::new();
        let name = spec.name.clone();
        running.push((name.clone(), stop.clone(), tokio::spawn(supervise(spec, stop, grace))));
        if let Some((port, wait)) = ready_port {
            wait_for_port(&name, port, wait, &shutdown).await;
        }
    }
    let bus = svc::bus::Bus::connect(bus_url.as_deref(), "svc-supervise").await;
    let answering = tokio::spawn(answer_start_requests(bus.clone(), startable, shutdown.clone()));
    shutdown.cancelled().await;
    let _ = answering.await;
    bus.close().await;

    let mut clean = true;
    for (name, stop, task) in running.into_iter().rev() {
        stop.cancel();
        let stopped_cleanly = task.await.unwrap_or(false);
        if !stopped_cleanly {
            tracing::warn!(child = %name, "Child did not stop cleanly");
        }
        clean &= stopped_cleanly;
    }
    if !clean {
        bail!("not every child stopped cleanly");
    }
    tracing::info!("All children stopped");
    Ok(())
}

fn child_spec(name: &str, svc: &Path, args: &[&str], env: &[(String, String)]) -> ChildSpec {
    ChildSpec {
        name: name.to_string(),
        program: svc.to_path_buf(),
        args: args.iter().map(|a| a.to_string()).collect(),
        env: env.to_vec(),
        stop_signal: Signal::TERM,
        starts: StartRequests::default(),
    }
}

/// Answers the API's requests to start a worker it supervises: one that exited cleanly is
/// started again; one running already is left as it is.
async fn answer_start_requests(bus: svc::bus::Bus, children: Vec<(String, StartRequests)>, stop: CancellationToken) {
    let decide = |worker: &str| {
        let answer = |started, detail: &str| StartAnswer { started, detail: detail.to_string() };
        match children.iter().find(|(name, _)| name == worker) {
            Some((_, starts)) if starts.running.load(Ordering::Acquire) => answer(true, "already running"),
            Some((_, starts)) => {
                tracing::info!(child = %worker, "Start requested; starting it again");
                starts.requested.notify_one();
                answer(true, "started")
            }
            None => answer(false, &format!("svc supervise does not run {worker}")),
        }
    };
    control::answer_start_requests(&bus, decide, stop).await;
}

/// Keeps `spec` running until `stop`; true when its last run ended cleanly.
async fn supervise(spec: ChildSpec, stop: CancellationToken, grace: Duration) -> bool {
    let mut backoff = FIRST_BACKOFF;
    let mut crashes = 0u32;
    loop {
        let started = Instant::now();
        let failure = match spawn(&spec) {
            Ok(mut child) => {
                tracing::info!(child = %spec.name, pid = child.id(), "Child started");
                spec.starts.running.store(true, Ordering::Release);
                let status = tokio::select! {
                    status = child.wait() => status,
                    () = stop.cancelled() => return terminate(&spec, child, grace).await,
                };
                spec.starts.running.store(false, Ordering::Release);
                match status {
                    Ok(status) if status.success() => {
                        // Asked to stop (a stop intent, or a signal sent to it directly): as under
                        // systemd's Restart=on-failure, a clean exit is not restarted, until the
                        // API asks for it (`POST /workers/{name}/start`).
                        tracing::info!(child = %spec.name, "Child exited cleanly; not restarting it");
                        tokio::select! {
                            () = stop.cancelled() => return true,
                            () = spec.starts.requested.notified() => continue,
                        }
                    }
                    // A configuration error: restarting cannot help, so it is reported and left stopped.
                    Ok(status) if status.code() == Some(i32::from(EXIT_CONFIG)) => {
                        tracing::error!(child = %spec.name, "Child has a configuration error; not restarting it");
                        stop.cancelled().await;
                        return false;
                    }
                    Ok(status) => describe(status),
                    Err(err) => format!("cannot wait for it: {err}"),
                }
            }
            Err(err) => format!("cannot start: {err}"),
        };
        let uptime = started.elapsed();
        if uptime >= HEALTHY_UPTIME {
            backoff = FIRST_BACKOFF;
            crashes = 0;
        }
        crashes += 1;
        let (child, up_secs, retry_secs) = (&spec.name, uptime.as_secs_f64(), backoff.as_secs_f64());
        if crashes >= CRASH_LOOP {
            tracing::error!(%child, crashes, up_secs, retry_secs, reason = %failure, "Child keeps crashing; restarting after backoff");
        } else {
            tracing::warn!(%child, crashes, up_secs, retry_secs, reason = %failure, "Child crashed; restarting after backoff");
        }
        tokio::select! {
            () = stop.cancelled() => return false,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        _ => status.to_string(),
    }
}

/// The stop signal to the child's process group, SIGKILL after `grace`. True when it stopped
/// when asked.
async fn terminate(spec: &ChildSpec, mut child: Child, grace: Duration) -> bool {
    let name = &spec.name;
    let Some(pgid) = child.id().and_then(|id| Pid::from_raw(id as i32)) else { return true };
    let _ = rustix::process::kill_process_group(pgid, spec.stop_signal);
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(Ok(status)) => {
            use std::os::unix::process::ExitStatusExt;
            let clean = status.success() || status.signal() == Some(spec.stop_signal.as_raw());
            tracing::info!(child = %name, status = %describe(status), "Child stopped");
            clean
        }
        Ok(Err(err)) => {
            tracing::warn!(child = %name, error = %err, "Cannot wait for child");
            false
        }
        Err(_) => {
            tracing::warn!(child = %name, grace_secs = grace.as_secs_f64(), "Child ignored its stop signal; killing it");
            let _ = rustix::process::kill_process_group(pgid, Signal::KILL);
            let _ = child.wait().await;
            false
        }
    }
}

fn spawn(spec: &ChildSpec) -> io::Result<Child> {
    let mut command = Command::new(&spec.program);
    command
        .args(&spec.args)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group, so a signal meant for it reaches whatever it started, and a Ctrl-C at the
        // terminal reaches only the supervisor, which then stops children in order.
        .process_group(0)
        .kill_on_drop(true);
    svc::signals::die_with_parent(&mut command);
    let mut child = command.spawn()?;
    if let Some(out) = child.stdout.take() {
        tokio::spawn(forward(spec.name.clone(), out, false));
    }
    if let Some(err) = child.stderr.take() {
        tokio::spawn(forward(spec.name.clone(), err, true));
    }
    Ok(child)
}

/// Copies a child's output line by line, each prefixed with its name.
async fn forward(name: String, stream: impl AsyncRead + Unpin, to_stderr: bool) {
    let mut lines = BufReader::new(stream).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if to_stderr {
            eprintln!("{name:>9} | {line}");
        } else {
            println!("{name:>9} | {line}");
        }
    }
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// A loopback port nothing listens on now. Another process could take it before the bus binds;
/// the bus then fails to start and is restarted like any crashed child.
fn free_port() -> io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

async fn wait_for_port(child: &str, port: u16, wait: Duration, shutdown: &CancellationToken) {
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline && !shutdown.is_cancelled() {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tracing::warn!(child, port, "Not accepting connections yet; starting the next children anyway");
}
