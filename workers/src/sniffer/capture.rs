//! Frames from libpcap into the engine, on a thread of their own: a live interface (AF_PACKET with
//! a BPF filter; needs `CAP_NET_RAW`) or a pcap/pcapng file, read by the same loop. A live capture
//! follows the interface it is told of (`interface`): while there is none it waits, its fault the
//! reason; when the interface changes it reopens on the new one. An interface that cannot be
//! opened or goes away marks the worker's fault ("capture interface unavailable") and is reopened
//! every second until it is back, changes, or the worker stops; a file is read to its end once.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use pcap::{Activated, Capture};
use svc::bus::{Counters, Fault};
use svc::roster::counters::sniffer as counter;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::deckies::DeckyMap;
use super::engine::{Limits, Sniffer};
use super::events::SnifferEvent;
use super::interface::Target;
use super::packet::LinkType;

/// The health detail while an interface to capture on cannot be opened; generic, like every
/// health detail.
pub const NO_INTERFACE: &str = "capture interface unavailable";
/// How long a live read waits for a frame before looking at the cancellation token.
const READ_TIMEOUT_MS: i32 = 200;
const REOPEN_PAUSE: Duration = Duration::from_secs(1);
/// How often a pause looks for a stop or a new interface.
const PAUSE_STEP: Duration = Duration::from_millis(100);
/// Largest frame read whole; ClientHellos fit many times over.
const SNAPLEN: i32 = 65_535;

/// What the capture thread reads.
pub enum Input {
    /// The interface `targets` names, followed, through a BPF `filter`.
    Live {
        targets: watch::Receiver<Target>,
        filter: String,
    },
    File(PathBuf),
}

/// Where the capture thread reports to.
pub struct Outlets {
    pub maps: watch::Receiver<Arc<DeckyMap>>,
    pub events: mpsc::Sender<Vec<SnifferEvent>>,
    pub counters: Counters,
    pub fault: Fault,
    pub cancel: CancellationToken,
    /// Where the task that interrupts a blocked read on cancellation runs.
    pub runtime: tokio::runtime::Handle,
}

/// Reads `input` until it ends (a file) or `cancel` (either). Blocking: run it on its own thread.
pub fn run(input: Input, limits: Limits, mut out: Outlets) -> anyhow::Result<()> {
    let mut sniffer = Sniffer::new(limits, out.maps.borrow_and_update().clone());
    let mut meter = Meter::new(out.counters.clone());
    match input {
        Input::File(path) => {
            let capture = Capture::from_file(&path).with_context(|| format!("cannot read {}", path.display()))?;
            read(capture, &mut sniffer, &mut meter, &mut out, None)
                .with_context(|| format!("reading {}", path.display()))
        }
        Input::Live { mut targets, filter } => {
            // What was last said in the log, so a state lasting many retries is logged once.
            let mut reported: Option<Target> = None;
            while !out.cancel.is_cancelled() {
                let target = targets.borrow_and_update().clone();
                match &target {
                    Target::Waiting(detail) => {
                        out.fault.set(detail.clone());
                        if reported.as_ref() != Some(&target) {
                            tracing::info!(%detail, "Not capturing yet");
                        }
                    }
                    Target::Interface(iface) => match open_live(iface, &filter) {
                        Ok(capture) => {
                            tracing::info!(%iface, %filter, "Capturing");
                            out.fault.clear();
                            let read = read(capture, &mut sniffer, &mut meter, &mut out, Some(&mut targets));
                            if let Err(err) = read {
                                tracing::warn!(%iface, error = %err, "Capture stopped; reopening");
                                out.fault.set(NO_INTERFACE);
                            }
                            // Logged again if it fails from now on.
                            reported = None;
                            pause(&mut targets, &out.cancel);
                            continue;
                        }
                        Err(err) => {
                            out.fault.set(NO_INTERFACE);
                            if reported.as_ref() != Some(&target) {
                                tracing::warn!(%iface, error = %err, "Cannot capture; retrying every second");
                            }
                        }
                    },
                }
                reported = Some(target);
                pause(&mut targets, &out.cancel);
            }
            Ok(())
        }
    }
}

/// Waits a second, or less when the worker stops or the interface to capture on changes.
fn pause(targets: &mut watch::Receiver<Target>, cancel: &CancellationToken) {
    let until = Instant::now() + REOPEN_PAUSE;
    while Instant::now() < until && !cancel.is_cancelled() && !targets.has_changed().unwrap_or(false) {
        std::thread::sleep(PAUSE_STEP);
    }
}

fn open_live(iface: &str, filter: &str) -> Result<Capture<pcap::Active>, pcap::Error> {
    let mut capture = Capture::from_device(iface)?
        .promisc(true)
        .snaplen(SNAPLEN)
        .timeout(READ_TIMEOUT_MS)
        .immediate_mode(true)
        .open()?;
    capture.filter(filter, true)?;
    Ok(capture)
}

/// Feeds every frame to the engine until the capture ends or fails (`Err`), `cancel`, or (a live
/// capture, following `targets`) the interface to capture on changes. A file (no `targets`) is
/// read to its end even when cancelled.
fn read<T: Activated + ?Sized>(
    mut capture: Capture<T>,
    sniffer: &mut Sniffer,
    meter: &mut Meter,
    out: &mut Outlets,
    targets: Option<&mut watch::Receiver<Target>>,
) -> Result<(), pcap::Error> {
    let dlt = capture.get_datalink();
    let Some(link) = LinkType::from_dlt(dlt.0) else {
        tracing::error!(datalink = dlt.0, "Unsupported link type; nothing will be read");
        return Ok(());
    };
    // libpcap keeps polling through its read timeout, so a stop must break its loop.
    let interrupt = capture.breakloop_handle();
    let cancel = out.cancel.clone();
    let waker = out.runtime.spawn(async move {
        cancel.cancelled().await;
        interrupt.breakloop();
    });
    let result = read_frames(&mut capture, link, sniffer, meter, out, targets);
    waker.abort();
    result
}

fn read_frames<T: Activated + ?Sized>(
    capture: &mut Capture<T>,
    link: LinkType,
    sniffer: &mut Sniffer,
    meter: &mut Meter,
    out: &mut Outlets,
    mut targets: Option<&mut watch::Receiver<Target>>,
) -> Result<(), pcap::Error> {
    let mut batch = Vec::new();
    loop {
        if let Some(targets) = targets.as_mut()
            && (out.cancel.is_cancelled() || targets.has_changed().unwrap_or(false))
        {
            return Ok(());
        }
        if out.maps.has_changed().unwrap_or(false) {
            sniffer.set_deckies(out.maps.borrow_and_update().clone());
        }
        match capture.next_packet() {
            Ok(packet) => {
                let at_us = packet.header.ts.tv_sec * 1_000_000 + packet.header.ts.tv_usec;
                sniffer.on_frame(at_us, link, packet.data, &mut batch);
            }
            Err(pcap::Error::TimeoutExpired) => {}
            // The end of a file, or a live read broken by a stop.
            Err(pcap::Error::NoMorePackets) => {
                meter.flush(sniffer, None);
                return send(out, &mut batch);
            }
            Err(err) => return Err(err),
        }
        send(out, &mut batch)?;
        if meter.due() {
            let drops = capture.stats().ok().map(|s| u64::from(s.dropped) + u64::from(s.if_dropped));
            meter.flush(sniffer, drops);
        }
    }
}

/// Hands the events found to the writer; waits when it lags (a file read is not lossy).
fn send(out: &Outlets, batch: &mut Vec<SnifferEvent>) -> Result<(), pcap::Error> {
    if batch.is_empty() {
        return Ok(());
    }
    // The writer only goes away when the worker stops; nothing is left to write to then.
    let _ = out.events.blocking_send(std::mem::take(batch));
    Ok(())
}

/// The heartbeat's view of the capture, refreshed about once a second.
struct Meter {
    counters: Counters,
    since: Instant,
    reported: super::engine::Stats,
}

impl Meter {
    fn new(counters: Counters) -> Meter {
        Meter { counters, since: Instant::now(), reported: Default::default() }
    }

    fn due(&self) -> bool {
        self.since.elapsed() >= Duration::from_secs(1)
    }

    fn flush(&mut self, sniffer: &Sniffer, kernel_drops: Option<u64>) {
        let stats = sniffer.stats();
        let frames = stats.frames - self.reported.frames;
        let per_sec = frames as f64 / self.since.elapsed().as_secs_f64().max(1e-3);
        self.counters.add(counter::FRAMES, frames);
        self.counters.add(counter::EVENTS, stats.events - self.reported.events);
        self.counters.add(counter::HANDSHAKES, stats.handshakes - self.reported.handshakes);
        self.counters.add(counter::FLOWS_REFUSED, stats.flows_refused - self.reported.flows_refused);
        self.counters.set(counter::FRAMES_PER_SEC, per_sec.round() as u64);
        self.counters.set(counter::FLOWS, sniffer.flows() as u64);
        if let Some(drops) = kernel_drops {
            self.counters.set(counter::DROPS, drops);
        }
        self.reported = stats;
        self.since = Instant::now();
    }
}
