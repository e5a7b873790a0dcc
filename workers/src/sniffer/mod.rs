//! The sniffer worker: watches the fleet's network (or replays a capture file through the same
//! code) and turns attackers' handshakes into fingerprints that identify their tools across
//! addresses: `tls_client_hello` (JA3, JA4), `tls_session` (JA3S, JA4S with the client's
//! fingerprints), `ssh_client_banner`, `tcp_syn_fingerprint`, with JA4L where the TCP handshake
//! was seen. Each event is an RFC 5424 line (APP-NAME `sniffer`, HOSTNAME the decky) appended to
//! the ingest file and a message on `decky.<decky>.traffic`.
//!
//! The parts: `packet` (frames → TCP segments), `reassembly` (a direction's first bytes in order),
//! `tls` (hellos, parsed by `tls-parser`), `fingerprint` (JA3/JA3S/JA4/JA4S/JA4L), `syn` (SYN
//! fingerprints), `engine` (flows → events, bounded), `events` (lines, bus messages, dedup),
//! `deckies` (address → decky, followed while running), `interface` (where a live capture
//! listens, followed the same way), `capture` (libpcap, live or file).
//! DECNET's sniffer read only handshakes that fit one segment and wrote a non-standard JA4; this one
//! reassembles and follows FoxIO (`../shared/CONTRACT.md`).

mod capture;
pub mod deckies;
pub mod engine;
pub mod events;
pub mod fingerprint;
pub mod interface;
pub mod packet;
pub mod reassembly;
pub mod samples;
mod syn;
#[cfg(test)]
mod tests;
pub mod tls;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use svc::bus::Bus;
use svc::config::SnifferConfig;
use svc::worker::{WorkerBody, WorkerContext};
use tokio::sync::{Notify, mpsc, watch};
use tokio_util::sync::CancellationToken;

pub use capture::NO_INTERFACE;
use deckies::{Decky, DeckyDirectory, DeckyMap, FleetDeckies, StaticDeckies};
use engine::Limits;
use events::SnifferEvent;
use interface::Interfaces;

/// The worker's name.
pub const NAME: &str = "sniffer";
/// Batches of events waiting for the writer at most; the capture thread waits beyond that.
const EVENT_QUEUE: usize = 64;

/// What the sniffer reads.
pub enum Source {
    /// A live capture on the interface these name.
    Live(Interfaces),
    /// A pcap or pcapng file, read once.
    File(PathBuf),
}

/// The worker `svc worker sniffer` runs, and `svc api` embeds with `SVC_EMBED_SNIFFER`: a live
/// capture on `SVC_SNIFFER_IFACE`, by default on the fleet network's interface, followed
/// ([`interface`]).
pub fn body() -> WorkerBody {
    WorkerBody::new(NAME, |ctx: WorkerContext| async move {
        let interfaces = match &ctx.config.sniffer.iface {
            Some(iface) => Interfaces::Fixed(iface.clone()),
            None => Interfaces::Fleet(ctx.db.clone()),
        };
        let directory = directory(&ctx);
        run(ctx, Source::Live(interfaces), directory).await
    })
}

/// `svc worker sniffer --read FILE`: the file's frames through the same engine, then exit.
pub fn replay_body(file: PathBuf) -> WorkerBody {
    WorkerBody::new(NAME, move |ctx: WorkerContext| async move {
        let directory = directory(&ctx);
        run(ctx, Source::File(file), directory).await
    })
}

/// Captures `source` until it ends or the worker is stopped, with deckies from `directory`.
pub async fn run(ctx: WorkerContext, source: Source, directory: Arc<dyn DeckyDirectory>) -> anyhow::Result<()> {
    let config = &ctx.config.sniffer;
    // The first map before the first frame, so a replay attributes from its first packet.
    let first = directory.deckies().await.unwrap_or_else(|err| {
        tracing::warn!(error = %format!("{err:#}"), "Cannot list the deckies yet");
        Vec::new()
    });
    let (maps_tx, maps) = watch::channel(Arc::new(DeckyMap::new(first)));
    let helpers = CancellationToken::new();
    // A new interface to capture on means the fleet changed: its addresses are read at once.
    let fleet_changed = Arc::new(Notify::new());
    let follower =
        tokio::spawn(deckies::follow(directory, config.refresh, fleet_changed.clone(), maps_tx, helpers.clone()));
    let (input, interface_follower) = match source {
        Source::File(path) => (capture::Input::File(path), None),
        Source::Live(interfaces) => {
            let (targets_tx, targets) = watch::channel(interface::first(&interfaces).await);
            let follower = interface::follow(interfaces, config.refresh, targets_tx, fleet_changed, helpers.clone());
            (capture::Input::Live { targets, filter: config.filter.clone() }, Some(tokio::spawn(follower)))
        }
    };

    let (events, queue) = mpsc::channel(EVENT_QUEUE);
    let writer = tokio::spawn(write_events(queue, ctx.config.ingest.log_file.clone(), ctx.bus.clone()));
    let outlets = capture::Outlets {
        maps,
        events,
        counters: ctx.counters.clone(),
        fault: ctx.fault.clone(),
        cancel: ctx.cancel.clone(),
        runtime: tokio::runtime::Handle::current(),
    };
    let limits = limits(config);
    let captured = tokio::task::spawn_blocking(move || capture::run(input, limits, outlets))
        .await
        .context("the capture thread panicked")?;
    // The capture dropped its sender: the writer drains what is left and ends.
    helpers.cancel();
    let _ = follower.await;
    if let Some(follower) = interface_follower {
        let _ = follower.await;
    }
    writer.await.context("the event writer panicked")?;
    captured
}

pub fn limits(config: &SnifferConfig) -> Limits {
    Limits {
        max_flows: config.max_flows,
        flow_bytes: config.flow_bytes,
        flow_idle_us: config.flow_idle.as_micros() as i64,
        dedup_window_us: config.dedup_window.as_micros() as i64,
    }
}

/// Where the deckies' addresses come from: the fleet store, or `SVC_SNIFFER_DECKIES` when set.
fn directory(ctx: &WorkerContext) -> Arc<dyn DeckyDirectory> {
    let listed = &ctx.config.sniffer.deckies;
    if listed.is_empty() {
        return Arc::new(FleetDeckies(ctx.db.clone()));
    }
    Arc::new(StaticDeckies::new(listed.iter().map(|(name, ip)| Decky { name: name.clone(), ip: *ip }).collect()))
}

/// Appends each batch's lines to the ingest file and publishes each event, until the capture ends.
async fn write_events(mut queue: mpsc::Receiver<Vec<SnifferEvent>>, log_file: Option<PathBuf>, bus: Bus) {
    if log_file.is_none() {
        tracing::warn!("SVC_INGEST_LOG_FILE is empty: sniffer events go to the bus only");
    }
    while let Some(batch) = queue.recv().await {
        if let Some(path) = &log_file {
            let text: String = batch.iter().map(|e| e.line() + "\n").collect();
            if let Err(err) = svc::logline::append(path, text.as_bytes()).await {
                tracing::error!(path = %path.display(), error = %err, "Cannot write sniffer events to the ingest file");
            }
        }
        for event in &batch {
            match event.bus_event() {
                Ok(message) => {
                    if let Err(err) = bus.publish(&message).await {
                        tracing::debug!(error = %err, "Traffic event not published");
                    }
                }
                Err(err) => tracing::warn!(error = %err, "A decky name that cannot be a subject token"),
            }
        }
    }
}
