//! `system.bus.health`: the bus's own heartbeat, sent every heartbeat interval (30 s by default)
//! by whatever owns the bus connection in a process (the API, each worker process, `svc
//! supervise`): the round-trip time to the server measured just before (a message to ourselves
//! through it), and how many times the connection had to be made again. The registry keeps the
//! last one of each process under the `bus` row of `/workers`.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::heartbeat::HEALTH_TYPE;
use super::{Bus, Event, topics};

/// The payload of a bus heartbeat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BusHealthPayload {
    /// The connection's name (`svc-api`, `svc-worker-ingest`…): which process measured.
    pub process: String,
    pub pid: u32,
    pub host: String,
    /// The round trip through the server, in milliseconds.
    pub rtt_ms: f64,
    /// Connections made after the first one.
    pub reconnects: u64,
}

/// Beats for this process's bus connection `process` every `interval` until `cancel`, starting at
/// once. While the bus is down there is nothing to measure and nowhere to send: the beat is skipped.
pub async fn run(bus: Bus, process: String, interval: Duration, cancel: CancellationToken) {
    let host = rustix::system::uname().nodename().to_string_lossy().into_owned();
    loop {
        if let Some(payload) = measure(&bus, &process, &host).await {
            let event = Event::new(topics::BUS_HEALTH, HEALTH_TYPE, serde_json::to_value(payload).expect("serialises"));
            if let Err(err) = bus.publish(&event).await {
                tracing::debug!(error = %err, "Bus heartbeat not sent");
            }
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
    }
}

/// The round trip and reconnect count now; `None` when the bus is absent, down or not answering.
pub async fn measure(bus: &Bus, process: &str, host: &str) -> Option<BusHealthPayload> {
    let client = bus.connected().ok()?;
    let started = Instant::now();
    super::round_trip(client).await.ok()?;
    let rtt_ms = started.elapsed().as_secs_f64() * 1000.0;
    let connects = client.statistics().connects.load(std::sync::atomic::Ordering::Relaxed);
    Some(BusHealthPayload {
        process: process.to_string(),
        pid: std::process::id(),
        host: host.to_string(),
        rtt_ms,
        reconnects: connects.saturating_sub(1),
    })
}
