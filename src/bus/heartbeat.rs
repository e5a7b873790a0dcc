//! The heartbeat every process sends on `system.<name>.health`: who it is (pid, host, version),
//! how long it has run, its own counters and, while it cannot do its work, its fault (a generic
//! text such as "capture interface unavailable", which `/health` shows). A beat while the bus is down is skipped, not queued,
//! and one goes out as soon as the bus comes back, so the registry recovers without a full interval.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::{Bus, Event, epoch_seconds, topics};
use crate::roster::Counter;

/// The message type of a heartbeat.
pub const HEALTH_TYPE: &str = "health";
/// The bus state is looked at this often between beats, to beat again right after a reconnect.
const RECONNECT_POLL: Duration = Duration::from_millis(250);

/// A worker's own counts (lines ingested, frames captured…), reported with every heartbeat; each
/// counter is one the roster declares for its worker (`roster::counters`).
#[derive(Clone, Debug, Default)]
pub struct Counters(Arc<Mutex<BTreeMap<&'static str, u64>>>);

impl Counters {
    pub fn add(&self, counter: Counter, n: u64) {
        *self.0.lock().expect("counters lock").entry(counter.name()).or_default() += n;
    }

    /// Sets a gauge (frames per second, flows open) rather than adding to a count.
    pub fn set(&self, counter: Counter, value: u64) {
        self.0.lock().expect("counters lock").insert(counter.name(), value);
    }

    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        self.0.lock().expect("counters lock").iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }
}

/// Why a running worker cannot do its work right now, if it cannot: set and cleared by the worker,
/// sent with every heartbeat, read by `/health` (directly when the worker is embedded). The text is
/// the worker's own and generic (it may name what the worker waits for, such as an interface of
/// its configuration, never an error's raw text); raw errors go to the worker's log.
///
/// Health from facts: a worker that reports its work with [`worked`](Fault::worked) promises to do
/// so again within the interval it gives; past that it reads as failing ([`NO_PROGRESS`]) however
/// alive its task is, a worker stuck on a hung database included.
#[derive(Clone, Debug, Default)]
pub struct Fault(Arc<Mutex<FaultState>>);

#[derive(Debug, Default)]
struct FaultState {
    reason: Option<Cow<'static, str>>,
    /// When the worker's next report of work is due.
    due: Option<Instant>,
}

/// What a worker past its promised interval reads as.
pub const NO_PROGRESS: &str = "not making progress";

impl Fault {
    pub fn set(&self, detail: impl Into<Cow<'static, str>>) {
        self.0.lock().expect("fault lock").reason = Some(detail.into());
    }

    pub fn clear(&self) {
        self.0.lock().expect("fault lock").reason = None;
    }

    /// The worker just did its work (a commit, a poll that found nothing to do): any fault is
    /// over, and the next report is due within `within`. Returns the fault this cleared.
    pub fn worked(&self, within: Duration) -> Option<Cow<'static, str>> {
        let mut state = self.0.lock().expect("fault lock");
        state.due = Some(Instant::now() + within);
        state.reason.take()
    }

    pub fn get(&self) -> Option<Cow<'static, str>> {
        self.get_at(Instant::now())
    }

    /// [`get`](Self::get) as of `now`.
    pub fn get_at(&self, now: Instant) -> Option<Cow<'static, str>> {
        let state = self.0.lock().expect("fault lock");
        state.reason.clone().or_else(|| state.due.filter(|due| now > *due).map(|_| NO_PROGRESS.into()))
    }
}

/// The payload of a heartbeat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HealthPayload {
    pub worker: String,
    pub ts: f64,
    pub pid: u32,
    pub host: String,
    pub version: String,
    pub uptime_sec: f64,
    pub counters: BTreeMap<String, u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<String>,
}

/// Beats for `worker` every `interval` until `cancel`, starting at once.
pub async fn run(
    bus: Bus,
    worker: String,
    interval: Duration,
    counters: Counters,
    fault: Fault,
    cancel: CancellationToken,
) {
    let topic = match topics::worker_health(&worker) {
        Ok(topic) => topic,
        Err(err) => {
            tracing::error!(error = %err, "No heartbeat: the worker name is not a subject token");
            return;
        }
    };
    let started = Instant::now();
    let host = rustix::system::uname().nodename().to_string_lossy().into_owned();
    let mut last_beat: Option<Instant> = None;
    let mut was_connected = false;
    loop {
        let connected = bus.is_connected();
        let due = last_beat.is_none_or(|at| at.elapsed() >= interval);
        if connected && (due || !was_connected) {
            let payload = HealthPayload {
                worker: worker.clone(),
                ts: epoch_seconds(),
                pid: std::process::id(),
                host: host.clone(),
                version: env!("CARGO_PKG_VERSION").to_string(),
                uptime_sec: started.elapsed().as_secs_f64(),
                counters: counters.snapshot(),
                fault: fault.get().map(Cow::into_owned),
            };
            let event = Event::new(topic.clone(), HEALTH_TYPE, serde_json::to_value(payload).expect("serialises"));
            if let Err(err) = bus.publish(&event).await {
                tracing::debug!(error = %err, "Heartbeat not sent");
            }
            last_beat = Some(Instant::now());
        } else if !connected && due {
            // Keeps the schedule while the bus is down; the beat itself would go nowhere.
            last_beat = Some(Instant::now());
        }
        was_connected = connected;
        let next = last_beat.map_or(Duration::ZERO, |at| interval.saturating_sub(at.elapsed()));
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(next.min(RECONNECT_POLL)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_is_ok_only_while_it_reports_its_work_within_its_window() {
        let fault = Fault::default();
        assert_eq!(fault.get(), None, "a worker that promised nothing is judged by its faults only");
        fault.worked(Duration::from_secs(10));
        assert_eq!(fault.get(), None);
        let later = Instant::now() + Duration::from_secs(11);
        assert_eq!(fault.get_at(later).as_deref(), Some(NO_PROGRESS), "its task may live on; it did no work");
        fault.set("cannot store: database unavailable");
        assert_eq!(fault.get().as_deref(), Some("cannot store: database unavailable"));
        assert_eq!(fault.worked(Duration::from_secs(10)).as_deref(), Some("cannot store: database unavailable"));
        assert_eq!(fault.get(), None, "work done clears the fault");
        fault.set(format!("interface {} absent", "eth9"));
        assert_eq!(fault.get().as_deref(), Some("interface eth9 absent"), "a detail may name what it waits for");
    }
}
