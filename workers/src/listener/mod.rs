//! The master's log listener (`svc worker listener`; the API embeds it when the swarm is on):
//! receives every worker host's log lines from its forwarder over mutual TLS on
//! `SVC_SWARM_SYSLOG_PORT` (the wire: `svc::swarm::shipping`) and stores them through the ingest
//! path, each row tagged with its host. Who is shipping is settled before any frame is read: the
//! client certificate must be signed by the swarm CA (the handshake), name a common name, and be
//! the very certificate enrolled for a host (its fingerprint); anything else is refused and logged.
//! Each batch is committed with the host's file position in one transaction, expecting the
//! position the previous batch left (the ingest store's check), and only then acknowledged; a new
//! connection starts where that record says. So a line is stored once whatever dies when:
//! forwarder, link, listener or master.

use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::Utc;
use svc::accept::{Drain, accept_until, client_certificate, tls_handshake};
use svc::db::{DbError, IngestCursor, SwarmHost};
use svc::swarm::master::MasterIdentity;
use svc::swarm::pki::fingerprint;
use svc::swarm::shipping::{self, Control, FrameError, MAX_FRAME_BYTES};
use svc::swarm::tls::peer_common_name;
use svc::worker::{WorkerBody, WorkerContext};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;

use crate::ingest::follow::Line;
use crate::ingest::{Pending, Writer, store};

/// A forwarder sends a batch, empty when it has nothing, at least this often; a connection silent
/// for longer is a dead link, dropped.
const SILENCE_LIMIT: Duration = Duration::from_secs(90);
/// More lines than this without the batch's end is not a forwarder speaking.
const MAX_BATCH_LINES: u64 = 200_000;
/// The holder of every host's ingest lease. One name for all the listener's connections, so a
/// new connection of a host never waits for a dead one's lease: what keeps two connections of one
/// host apart is the position each commit expects.
const HOLDER: &str = "swarm-listener";

/// The worker the API embeds when the swarm is on, and `svc worker listener` runs.
pub fn body() -> WorkerBody {
    WorkerBody::new("listener", run)
}

/// The ingest source a host's lines are stored under (its position and lease are kept by it).
pub fn source(host: uuid::Uuid) -> String {
    format!("swarm:{host}")
}

async fn run(ctx: WorkerContext) -> anyhow::Result<()> {
    let swarm = &ctx.config.swarm;
    if !swarm.enabled || swarm.syslog_port == 0 {
        tracing::info!("The swarm or SVC_SWARM_SYSLOG_PORT is off: no log listener");
        ctx.cancel.cancelled().await;
        return Ok(());
    }
    let tls = MasterIdentity::load_blocking(swarm).await?.server_config()?;
    let listener = TcpListener::bind((swarm.listen_host.as_str(), swarm.syslog_port))
        .await
        .with_context(|| format!("binding the log listener on {}:{}", swarm.listen_host, swarm.syslog_port))?;
    tracing::info!(address = ?listener.local_addr().ok(), "Log listener (RFC 5425, mutual TLS)");
    let acceptor = TlsAcceptor::from(tls);
    // Each session stores the batch it holds, then ends.
    accept_until(listener, &ctx.cancel, Drain::UntilEnded, |stream, addr| {
        session(ctx.clone(), acceptor.clone(), stream, addr)
    })
    .await;
    Ok(())
}

/// Why a peer may not ship (logged; the peer only sees the connection close).
#[derive(Debug, thiserror::Error)]
enum Refused {
    #[error("no client certificate")]
    NoCertificate,
    #[error("the certificate's common name is empty or unparseable")]
    NoCommonName,
    #[error("certificate `{0}` is not enrolled for any host (unknown or decommissioned)")]
    NotEnrolled(String),
    #[error("cannot read the swarm hosts: {0}")]
    Store(DbError),
}

/// The enrolled host `cert` belongs to, or why the peer is refused.
async fn identify(ctx: &WorkerContext, cert: Option<&[u8]>) -> Result<SwarmHost, Refused> {
    let cert = cert.ok_or(Refused::NoCertificate)?;
    let cn = peer_common_name(cert).ok_or(Refused::NoCommonName)?;
    ctx.db.swarm_host_by_fingerprint(&fingerprint(cert)).await.map_err(|err| match err {
        DbError::NotFound => Refused::NotEnrolled(cn),
        err => Refused::Store(err),
    })
}

async fn session(ctx: WorkerContext, acceptor: TlsAcceptor, stream: TcpStream, addr: std::net::SocketAddr) {
    let Some(tls) = tls_handshake(&acceptor, stream, addr, "Log shipping").await else { return };
    let cert = client_certificate(&tls);
    let host = match identify(&ctx, cert.as_deref()).await {
        Ok(host) => host,
        Err(why) => {
            tracing::warn!(peer = %addr, reason = %why, "Log shipping refused");
            return;
        }
    };
    let (uuid, name) = (host.uuid, host.name.clone());
    match receive(&ctx, tls, host).await {
        Ok(()) => tracing::info!(peer = %addr, host = %name, %uuid, "Log shipping connection ended"),
        Err(err) => {
            tracing::warn!(peer = %addr, host = %name, %uuid, error = %format!("{err:#}"), "Log shipping connection dropped")
        }
    }
}

type Stream = tokio_rustls::server::TlsStream<TcpStream>;

/// Tells the forwarder where to start, then reads its batches while the last one read is stored.
async fn receive(ctx: &WorkerContext, tls: Stream, host: SwarmHost) -> anyhow::Result<()> {
    let source = source(host.uuid);
    take_lease(ctx, &source).await?;
    let resume = ctx.db.ingest_cursor(&source).await.context("reading the host's position")?;
    let (reader, mut writer) = tokio::io::split(tls);
    let mut opening = Vec::new();
    shipping::encode_control(&Control::Resume { cursor: resume.clone() }, &mut opening);
    writer.write_all(&opening).await?;
    writer.flush().await?;
    tracing::info!(host = %host.name, uuid = %host.uuid, offset = resume.as_ref().map_or(0, |c| c.offset), "A host's forwarder connected");

    // One batch waits while one is stored: parsing and the database work at once.
    let (batches, to_store) = mpsc::channel(1);
    let storing = tokio::spawn(store_batches(ctx.clone(), source, host.uuid, resume, to_store, writer));
    let read = read_batches(ctx, reader, batches).await;
    let stored = storing.await.context("the storing task panicked")?;
    read.and(stored)
}

/// Reads frames into batches and hands each finished one on, until the forwarder stops, the
/// listener is stopped, or the storing side gives up.
async fn read_batches(
    ctx: &WorkerContext,
    reader: tokio::io::ReadHalf<Stream>,
    batches: mpsc::Sender<(Pending, IngestCursor)>,
) -> anyhow::Result<()> {
    let mut reader = BufReader::with_capacity(256 * 1024, reader);
    let mut frame = Vec::with_capacity(4096);
    let mut pending = Pending::default();
    let mut now = Utc::now();
    loop {
        let read = tokio::select! {
            () = ctx.cancel.cancelled() => return Ok(()),
            () = batches.closed() => return Ok(()),
            read = tokio::time::timeout(SILENCE_LIMIT, shipping::read_frame(&mut reader, &mut frame, MAX_FRAME_BYTES)) => read,
        };
        let more = match read {
            Ok(Ok(more)) => more,
            Ok(Err(FrameError::Io(err))) => return Err(err.into()),
            Ok(Err(err)) => anyhow::bail!("refused: {err}"),
            Err(_) => anyhow::bail!("silent for {} s", SILENCE_LIMIT.as_secs()),
        };
        if !more {
            return Ok(());
        }
        match shipping::control(&frame) {
            None if frame.is_empty() => {}
            None => {
                if pending.tally.lines() == 0 {
                    now = Utc::now();
                }
                pending.add(Line::Text(&frame), now);
                anyhow::ensure!(
                    pending.tally.lines() <= MAX_BATCH_LINES,
                    "refused: a batch over {MAX_BATCH_LINES} lines"
                );
            }
            Some(Ok(Control::Batch { cursor })) => {
                if batches.send((std::mem::take(&mut pending), cursor)).await.is_err() {
                    return Ok(());
                }
            }
            Some(Ok(other)) => anyhow::bail!("refused: unexpected {other:?}"),
            Some(Err(err)) => anyhow::bail!("refused: {err}"),
        }
    }
}

/// Stores each batch with its position, expecting the position the last one left, and
/// acknowledges it. Ends at the first batch it cannot store (the forwarder reconnects and resumes
/// from the stored position).
async fn store_batches(
    ctx: WorkerContext,
    source: String,
    host: uuid::Uuid,
    mut expected: Option<IngestCursor>,
    mut batches: mpsc::Receiver<(Pending, IngestCursor)>,
    mut writer: tokio::io::WriteHalf<Stream>,
) -> anyhow::Result<()> {
    let writer_id = Writer { component: "listener", source: &source, holder: HOLDER };
    let mut leased_at = Instant::now();
    let mut ack = Vec::new();
    while let Some((pending, cursor)) = batches.recv().await {
        let Pending { mut batch, tally, sample, .. } = pending;
        let unchanged = tally.lines() == 0 && expected.as_ref() == Some(&cursor);
        if !unchanged {
            if leased_at.elapsed() >= ctx.config.worker.lease / 3 {
                take_lease(&ctx, &source).await?;
                leased_at = Instant::now();
            }
            batch.cursor = Some(cursor.clone());
            batch.host_uuid = Some(host);
            let stored = store(&ctx, &writer_id, expected.as_ref(), &batch, &tally, sample.as_deref())
                .await
                .context("storing a batch")?;
            anyhow::ensure!(stored, "the host's stored position moved (another connection of it stored first)");
            expected = Some(cursor.clone());
        }
        ack.clear();
        shipping::encode_control(&Control::Ack { cursor }, &mut ack);
        writer.write_all(&ack).await?;
        writer.flush().await?;
    }
    let _ = writer.shutdown().await;
    Ok(())
}

async fn take_lease(ctx: &WorkerContext, source: &str) -> anyhow::Result<()> {
    let held = ctx.db.acquire_worker_lease(source, HOLDER, Utc::now(), ctx.config.worker.lease).await?;
    anyhow::ensure!(held, "the host's ingest lease is held by another holder");
    Ok(())
}
