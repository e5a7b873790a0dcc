//! What every decoy connection shares, whatever its protocol: the limits that keep a flood from
//! taking the process down (connections in all and per source, idle and session time, line length),
//! the accept loop that enforces them, and the session a protocol handler logs through (with
//! `connect` / `disconnect` and the session's duration written for it).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use svc_core::logline::Severity;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::artifacts::{Artifacts, Kept};
use crate::emit::{Emitter, Fields};

/// How much one decky process lets attackers take.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Open connections across all services; more are closed at once.
    pub max_connections: usize,
    /// Open connections from one address; more are closed at once.
    pub max_per_source: usize,
    /// A session that sends nothing for this long is closed.
    pub idle: Duration,
    /// No session lasts longer.
    pub session: Duration,
    /// The longest line (or header, or request body) a protocol reads; longer input ends the session.
    pub max_line: usize,
    /// The largest upload kept as an artifact.
    pub max_upload: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 1024,
            max_per_source: 32,
            idle: Duration::from_secs(60),
            session: Duration::from_secs(600),
            max_line: 8 * 1024,
            max_upload: 1024 * 1024,
        }
    }
}

/// One protocol's answer to a connection.
#[async_trait]
pub trait Decoy: Send + Sync + 'static {
    /// Talks to one attacker until either side ends the session. Input is untrusted: every read is
    /// bounded by `session.limits`, and nothing it holds is executed or fetched.
    async fn serve(&self, stream: TcpStream, session: Session) -> anyhow::Result<()>;
}

/// One attacker's connection to one service: where it came from, and how to log what it did.
#[derive(Clone)]
pub struct Session {
    pub service: &'static str,
    pub peer: SocketAddr,
    pub limits: Limits,
    emitter: Emitter,
    artifacts: Option<Arc<Artifacts>>,
}

impl Session {
    pub fn new(service: &'static str, peer: SocketAddr, limits: Limits, emitter: Emitter) -> Session {
        Session { service, peer, limits, emitter, artifacts: None }
    }

    /// Keeps what attackers leave in `artifacts`.
    pub fn keeping(self, artifacts: Option<Arc<Artifacts>>) -> Session {
        Session { artifacts, ..self }
    }

    /// Keeps a captured file as `stored_as`; `None` when this decky keeps no files.
    pub async fn keep(&self, stored_as: &str, bytes: Vec<u8>) -> Option<Kept> {
        Some(self.artifacts.as_ref()?.keep(stored_as.to_string(), bytes).await)
    }

    /// The decky's name, as every line's HOSTNAME carries it.
    pub fn hostname(&self) -> &str {
        self.emitter.hostname()
    }

    /// Logs `event_type` with `fields`, then the attacker's `src_ip` and `src_port`.
    pub fn event(&self, event_type: &str, mut fields: Fields) {
        fields.push(("src_ip", self.peer.ip().to_canonical().to_string()));
        fields.push(("src_port", self.peer.port().to_string()));
        self.emitter.emit(Severity::Info, self.service, event_type, fields, None);
    }

    /// A command line typed into a fake shell, as DECNET's bash `PROMPT_COMMAND` logs it (APP-NAME
    /// `bash`, MSGID `command`, `CMD uid=… user=… src=… pwd=… cmd=…`), so the profiler reads it as a
    /// shell command whichever service's shell it was.
    pub fn shell_command(&self, user: &str, pwd: &str, command: &str) {
        let src = self.peer.ip().to_canonical().to_string();
        let uid = if user == "root" { 0 } else { 1000 };
        let msg = format!("CMD uid={uid} user={user} src={src} pwd={pwd} cmd={command}");
        let fields = vec![("src_ip", src), ("service", self.service.to_string())];
        self.emitter.emit(Severity::Info, "bash", "command", fields, Some(msg));
    }
}

/// Open connections, in all and per source address.
#[derive(Default)]
struct Occupancy {
    total: usize,
    by_source: HashMap<IpAddr, usize>,
}

/// What all services of one process share: the emitter, the limits, the connections open, and
/// where captured files are kept (if anywhere).
#[derive(Clone)]
pub struct Shared {
    pub emitter: Emitter,
    pub limits: Limits,
    occupancy: Arc<Mutex<Occupancy>>,
    artifacts: Option<Arc<Artifacts>>,
}

impl Shared {
    pub fn new(emitter: Emitter, limits: Limits) -> Shared {
        Shared { emitter, limits, occupancy: Arc::default(), artifacts: None }
    }

    /// Captured files are kept in `artifacts`.
    pub fn keeping(self, artifacts: Arc<Artifacts>) -> Shared {
        Shared { artifacts: Some(artifacts), ..self }
    }

    /// A place for a connection from `source`, or `None` when a limit is reached.
    fn admit(&self, source: IpAddr) -> Option<Admitted> {
        let mut occupancy = self.occupancy.lock().unwrap();
        let from_source = occupancy.by_source.get(&source).copied().unwrap_or(0);
        if occupancy.total >= self.limits.max_connections || from_source >= self.limits.max_per_source {
            return None;
        }
        occupancy.total += 1;
        *occupancy.by_source.entry(source).or_default() += 1;
        Some(Admitted { occupancy: self.occupancy.clone(), source })
    }
}

/// A connection's place, given back when it ends.
struct Admitted {
    occupancy: Arc<Mutex<Occupancy>>,
    source: IpAddr,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut occupancy = self.occupancy.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        occupancy.total -= 1;
        if let Some(n) = occupancy.by_source.get_mut(&self.source) {
            *n -= 1;
            if *n == 0 {
                occupancy.by_source.remove(&self.source);
            }
        }
    }
}

/// Accepts connections on `listener` for `service` until `cancel`, each served by `decoy` in a task
/// of its own within the limits; returns once every session has ended.
pub async fn accept_loop(
    listener: TcpListener,
    service: &'static str,
    decoy: Arc<dyn Decoy>,
    shared: Shared,
    cancel: CancellationToken,
) {
    let sessions = TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            () = cancel.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(err) => {
                // Out of descriptors, mostly: wait a moment rather than spin.
                tracing::warn!(service, error = %err, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(admitted) = shared.admit(peer.ip().to_canonical()) else {
            tracing::debug!(service, %peer, "connection refused: limit reached");
            continue;
        };
        let _ = stream.set_nodelay(true);
        let session =
            Session::new(service, peer, shared.limits, shared.emitter.clone()).keeping(shared.artifacts.clone());
        let decoy = decoy.clone();
        let cancel = cancel.clone();
        sessions.spawn(async move {
            let _admitted = admitted;
            let started = Instant::now();
            session.event("connect", vec![]);
            let outcome = tokio::select! {
                () = cancel.cancelled() => Ok(Ok(())),
                outcome = tokio::time::timeout(session.limits.session, decoy.serve(stream, session.clone())) => outcome,
            };
            if let Ok(Err(err)) = outcome {
                tracing::debug!(service, %peer, error = %format!("{err:#}"), "session ended on an error");
            }
            let duration = format!("{:.3}", started.elapsed().as_secs_f64());
            session.event("disconnect", vec![("duration_s", duration)]);
        });
    }
    sessions.close();
    sessions.wait().await;
}
