//! The forwarder on a worker host (`svc worker forwarder`, unit `svc-forwarder.service` from the
//! enrollment bundle): follows the host's ingest file (`SVC_INGEST_LOG_FILE`) with the ingester's
//! own follower (rename and copytruncate rotation, a file rewritten under its cursor) and ships its
//! lines to the master's log listener (`SVC_MASTER_HOST`:`SVC_SWARM_SYSLOG_PORT`) over mutual TLS
//! with the agent's certificate, in batches ending with the file position after them
//! (`svc::swarm::shipping`). It keeps no position of its own: each connection starts where the
//! master's record says, and a batch counts as shipped only once the master acknowledges having
//! stored it. Several batches travel unacknowledged at once; a connection that fails loses nothing,
//! the next one starts again from the last stored batch. Lag (bytes of the file not yet stored by
//! the master) is in its health (`lag_bytes`, on the bus with every heartbeat); far behind, it
//! reports a fault, and ships on: nothing is skipped.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use svc::db::IngestCursor;
use svc::roster::counters::forwarder as counter;
use svc::swarm::agent::AgentTls;
use svc::swarm::shipping::{self, Control, MAX_FRAME_BYTES};
use svc::swarm::tls::{PeerPin, client_config};
use svc::worker::{WorkerBody, WorkerContext};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_rustls::TlsConnector;

use crate::ingest::MAX_LINE_BYTES;
use crate::ingest::follow::{Follower, Line, Progress};

/// How often a caught-up forwarder looks at the file again.
const IDLE_POLL: Duration = Duration::from_millis(20);
/// Batches sent and not yet acknowledged, at most.
const WINDOW: usize = 4;
/// An empty batch goes this often when there is nothing to ship, so both ends notice a dead link.
const KEEPALIVE: Duration = Duration::from_secs(20);
/// The master acknowledges a batch within this, or the connection is taken for dead.
const ACK_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Reconnecting waits 1 s, doubling to this.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Lag over this is reported as a fault (DECNET skipped ahead past it, losing lines; we do not).
const FAR_BEHIND_BYTES: u64 = 128 * 1024 * 1024;

/// The worker an agent host runs as `svc worker forwarder`.
pub fn body() -> WorkerBody {
    WorkerBody::new("forwarder", run)
}

async fn run(ctx: WorkerContext) -> anyhow::Result<()> {
    let settings = &ctx.config.swarm;
    let (Some(path), Some(master)) = (ctx.config.ingest.log_file.clone(), settings.agent.master_host.clone()) else {
        tracing::warn!("SVC_INGEST_LOG_FILE or SVC_MASTER_HOST is empty: nothing is forwarded");
        ctx.cancel.cancelled().await;
        return Ok(());
    };
    if settings.syslog_port == 0 {
        tracing::warn!("SVC_SWARM_SYSLOG_PORT is 0: nothing is forwarded");
        ctx.cancel.cancelled().await;
        return Ok(());
    }
    let agent = AgentTls::read(&settings.agent)?;
    // The master is known by the swarm CA, as the agent's heartbeats know it.
    let tls = client_config(&agent.identity, &agent.ca_pem, PeerPin::CaSigned, false)?;
    let master = Master { host: master.trim_matches(['[', ']']).to_string(), port: settings.syslog_port, tls };
    tracing::info!(path = %path.display(), master = %master.host, port = master.port, "Forwarding the log file");
    let mut backoff = Duration::from_secs(1);
    while !ctx.cancel.is_cancelled() {
        let started = Instant::now();
        match ship(&ctx, &master, &path).await {
            Ok(()) => {}
            Err(err) => {
                ctx.fault.set("cannot ship to the master");
                tracing::warn!(error = %format!("{err:#}"), retry_in_s = backoff.as_secs(), "Log shipping interrupted");
            }
        }
        if started.elapsed() > MAX_BACKOFF {
            backoff = Duration::from_secs(1);
        }
        tokio::select! {
            () = ctx.cancel.cancelled() => {}
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
    Ok(())
}

struct Master {
    host: String,
    port: u16,
    tls: Arc<ClientConfig>,
}

/// A batch on its way: where it ends and how many lines it holds.
struct InFlight {
    cursor: IngestCursor,
    lines: u64,
}

/// One connection: from the master's record, ship until cancelled (then wait, briefly, for what is
/// in flight to be acknowledged) or until the connection fails.
async fn ship(ctx: &WorkerContext, master: &Master, path: &Path) -> anyhow::Result<()> {
    let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect((master.host.as_str(), master.port)))
        .await
        .context("connecting timed out")?
        .context("connecting")?;
    tcp.set_nodelay(true)?;
    let name = ServerName::try_from(master.host.clone()).context("the master's name")?;
    let tls = tokio::time::timeout(CONNECT_TIMEOUT, TlsConnector::from(master.tls.clone()).connect(name, tcp))
        .await
        .context("TLS handshake timed out")?
        .context("TLS handshake")?;
    let (reader, mut writer) = tokio::io::split(tls);
    let mut reader = BufReader::new(reader);
    let mut frame = Vec::new();
    let resume = match tokio::time::timeout(ACK_TIMEOUT, shipping::read_frame(&mut reader, &mut frame, MAX_FRAME_BYTES))
        .await
        .context("the master said nothing")??
    {
        false => anyhow::bail!("the master closed the connection (refused?)"),
        true => match shipping::control(&frame) {
            Some(Ok(Control::Resume { cursor })) => cursor,
            _ => anyhow::bail!("the master did not open with a resume position"),
        },
    };
    tracing::info!(offset = resume.as_ref().map_or(0, |c| c.offset), "Connected to the master's log listener");
    ctx.fault.clear();

    let (acks_in, mut acks) = mpsc::unbounded_channel();
    let ack_reader = tokio::spawn(async move {
        let mut frame = Vec::new();
        loop {
            match shipping::read_frame(&mut reader, &mut frame, MAX_FRAME_BYTES).await {
                Ok(true) => match shipping::control(&frame) {
                    Some(Ok(Control::Ack { cursor })) => {
                        if acks_in.send(cursor).is_err() {
                            return;
                        }
                    }
                    _ => return,
                },
                _ => return,
            }
        }
    });
    let _stop_reader = AbortOnDrop(ack_reader);

    let mut follower = Some(Follower::new(path.to_path_buf(), resume.clone(), MAX_LINE_BYTES));
    let mut acked = resume.clone();
    let mut sent = resume;
    let mut in_flight: VecDeque<InFlight> = VecDeque::new();
    let mut last_sent_at = Instant::now();
    let mut out = Vec::with_capacity(1024 * 1024);
    let batch_size = ctx.config.ingest.batch_size;
    report_lag(ctx, path, acked.as_ref());
    loop {
        if ctx.cancel.is_cancelled() {
            return drain(ctx, &mut acks, &mut in_flight, path, &mut acked).await;
        }
        if in_flight.len() >= WINDOW {
            let cursor = tokio::select! {
                () = ctx.cancel.cancelled() => continue,
                cursor = tokio::time::timeout(ACK_TIMEOUT, acks.recv()) => cursor,
            };
            let cursor = cursor.context("no acknowledgement in time")?.context("the master closed the connection")?;
            acknowledged(ctx, &mut in_flight, cursor, path, &mut acked)?;
            continue;
        }
        while let Ok(cursor) = acks.try_recv() {
            acknowledged(ctx, &mut in_flight, cursor, path, &mut acked)?;
        }
        out.clear();
        let (lines, cursor, progress) = read_batch(&mut follower, batch_size, &mut out, ctx).await?;
        let Some(cursor) = cursor else {
            idle(ctx, &mut acks, &mut in_flight, path, &mut acked).await?;
            continue;
        };
        let keepalive = in_flight.is_empty() && last_sent_at.elapsed() >= KEEPALIVE;
        if lines == 0 && Some(&cursor) == sent.as_ref() && !keepalive {
            if progress != Progress::More {
                idle(ctx, &mut acks, &mut in_flight, path, &mut acked).await?;
            }
            continue;
        }
        shipping::encode_control(&Control::Batch { cursor: cursor.clone() }, &mut out);
        writer.write_all(&out).await.context("sending a batch")?;
        writer.flush().await.context("sending a batch")?;
        last_sent_at = Instant::now();
        in_flight.push_back(InFlight { cursor: cursor.clone(), lines });
        sent = Some(cursor);
    }
}

/// Waits a poll interval, taking any acknowledgement that arrives meanwhile; fails when what is
/// in flight has waited too long.
async fn idle(
    ctx: &WorkerContext,
    acks: &mut mpsc::UnboundedReceiver<IngestCursor>,
    in_flight: &mut VecDeque<InFlight>,
    path: &Path,
    acked: &mut Option<IngestCursor>,
) -> anyhow::Result<()> {
    tokio::select! {
        () = ctx.cancel.cancelled() => {}
        () = tokio::time::sleep(IDLE_POLL) => {}
        cursor = acks.recv() => {
            let cursor = cursor.context("the master closed the connection")?;
            acknowledged(ctx, in_flight, cursor, path, acked)?;
        }
    }
    Ok(())
}

/// On a stop: what is in flight gets a moment to be acknowledged (not needed for correctness: the
/// next start resumes from what the master stored).
async fn drain(
    ctx: &WorkerContext,
    acks: &mut mpsc::UnboundedReceiver<IngestCursor>,
    in_flight: &mut VecDeque<InFlight>,
    path: &Path,
    acked: &mut Option<IngestCursor>,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while !in_flight.is_empty() {
        match tokio::time::timeout_at(deadline, acks.recv()).await {
            Ok(Some(cursor)) => acknowledged(ctx, in_flight, cursor, path, acked)?,
            _ => break,
        }
    }
    Ok(())
}

/// The master stored the oldest batch in flight: it must be the one acknowledged.
fn acknowledged(
    ctx: &WorkerContext,
    in_flight: &mut VecDeque<InFlight>,
    cursor: IngestCursor,
    path: &Path,
    acked: &mut Option<IngestCursor>,
) -> anyhow::Result<()> {
    let Some(oldest) = in_flight.pop_front() else { anyhow::bail!("an acknowledgement of nothing sent") };
    anyhow::ensure!(oldest.cursor == cursor, "the master acknowledged another position than the one sent");
    ctx.counters.add(counter::LINES_SHIPPED, oldest.lines);
    ctx.counters.add(counter::BATCHES, 1);
    *acked = Some(cursor);
    report_lag(ctx, path, acked.as_ref());
    Ok(())
}

/// Bytes of the file past what the master has stored (the whole current file when the stored
/// position is in a rotated one).
fn report_lag(ctx: &WorkerContext, path: &Path, acked: Option<&IngestCursor>) {
    let Ok(meta) = std::fs::metadata(path) else { return };
    use std::os::unix::fs::MetadataExt;
    let same_file = acked.is_some_and(|c| c.file_id == format!("{}:{}", meta.dev(), meta.ino()));
    let lag = if same_file { meta.len().saturating_sub(acked.map_or(0, |c| c.offset)) } else { meta.len() };
    ctx.counters.set(counter::LAG_BYTES, lag);
    if lag > FAR_BEHIND_BYTES {
        ctx.fault.set(format!("far behind: {} MiB not yet shipped", lag / (1024 * 1024)));
    } else if ctx.fault.get().is_some_and(|fault| fault.starts_with("far behind")) {
        ctx.fault.clear();
    }
}

/// Reads up to `max` lines into `out` as frames (on the blocking pool); returns how many, the
/// position after them (`None` before the file exists) and where the read stopped.
async fn read_batch(
    follower: &mut Option<Follower>,
    max: usize,
    out: &mut Vec<u8>,
    ctx: &WorkerContext,
) -> anyhow::Result<(u64, Option<IngestCursor>, Progress)> {
    let mut reader = follower.take().expect("an open follower");
    let mut frames = std::mem::take(out);
    let counters = ctx.counters.clone();
    let (reader, frames, result) = tokio::task::spawn_blocking(move || {
        let mut lines = 0;
        let (mut skipped, mut oversized) = (0, 0);
        let progress = reader.read(max, false, &mut |line| match line {
            Line::Text(text) if shipping::shippable(text) => {
                shipping::encode(text, &mut frames);
                lines += 1;
            }
            Line::Text(text) if text.iter().all(u8::is_ascii_whitespace) => {}
            Line::Text(_) => skipped += 1,
            Line::Oversized(_) => oversized += 1,
        });
        counters.add(counter::LINES_MALFORMED, skipped);
        counters.add(counter::LINES_OVERSIZED, oversized);
        let cursor = reader.cursor();
        (reader, frames, progress.map(|progress| (lines, cursor, progress)))
    })
    .await
    .context("the reader panicked")?;
    let path = reader.path().display().to_string();
    *follower = Some(reader);
    *out = frames;
    result.with_context(|| format!("reading {path}"))
}

/// Stops the acknowledgement reader with the connection.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
