//! The API's view of the workers: last heartbeat per worker name from `system.*.health`, and which
//! workers run embedded in this process. It answers `/workers` (one row per known worker plus any
//! other name heard) and whether a worker counts as up for `/health`. When a worker it has heard
//! from changes tier (`ok` → `stale` and back) it says so on `system.<worker>.status`, which
//! webhooks selecting `system.>` forward; every API replica says it (a receiver sees one change
//! once per replica).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use futures::StreamExt;
use serde::Serialize;
use tokio_util::sync::CancellationToken;
use utoipa::ToSchema;

use super::{Bus, Counters, Event, Fault, topics};
use crate::roster::KNOWN_WORKERS;

/// The row `system.bus.health` fills: the bus itself, as every process connected to it sees it.
pub const BUS_ROW: &str = "bus";

/// How recently a worker was heard from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// A heartbeat within the stale window.
    Ok,
    /// Heard from, but not within the stale window.
    Stale,
    /// Never heard from, or the bus is down so nothing can be known.
    Unknown,
}

/// One worker as the registry knows it.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct WorkerRow {
    pub name: String,
    pub status: Tier,
    /// When its last heartbeat arrived, epoch seconds.
    pub last_heartbeat_ts: Option<f64>,
    pub seconds_since: Option<f64>,
    /// The last heartbeat's payload without `worker` and `ts`: pid, host, version, uptime, counters.
    #[schema(value_type = Object)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

struct Heard {
    /// Arrival time, epoch seconds: the API's clock, so another host's clock skew cannot make a
    /// live worker look stale.
    at: f64,
    extra: serde_json::Map<String, serde_json::Value>,
}

impl Heard {
    /// Sent by an embedded worker of this very process (the host is not checked: a pid is only
    /// compared for a name this process embeds).
    fn sent_by_this_process(&self) -> bool {
        self.extra.get("pid").and_then(serde_json::Value::as_u64) == Some(u64::from(std::process::id()))
    }
}

pub struct WorkerRegistry {
    stale_after: Duration,
    heard: Mutex<BTreeMap<String, Heard>>,
    /// The tier each worker heard from was last announced in.
    announced: Mutex<BTreeMap<String, Tier>>,
    /// Embedded worker name → whether its task is still running.
    embedded: Mutex<BTreeMap<String, bool>>,
    /// Embedded worker name → its fault, read directly rather than through the bus.
    faults: Mutex<BTreeMap<String, Fault>>,
    /// Embedded worker name → its counters, read directly rather than through the bus.
    counters: Mutex<BTreeMap<String, Counters>>,
    /// The heartbeat subscription, from [`listen`](Self::listen) until [`run`](Self::run) takes it.
    subscription: tokio::sync::Mutex<Option<async_nats::Subscriber>>,
    listening: std::sync::atomic::AtomicBool,
}

impl WorkerRegistry {
    pub fn new(stale_after: Duration) -> WorkerRegistry {
        WorkerRegistry {
            stale_after,
            heard: Mutex::default(),
            announced: Mutex::default(),
            embedded: Mutex::default(),
            faults: Mutex::default(),
            counters: Mutex::default(),
            subscription: tokio::sync::Mutex::default(),
            listening: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Subscribes to every heartbeat (once; the server has it on return when the bus is up), so
    /// heartbeats sent from now on are heard when [`run`](Self::run) starts.
    pub async fn listen(&self, bus: &Bus) {
        let mut subscription = self.subscription.lock().await;
        if self.listening.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return;
        }
        *subscription = bus.subscribe(topics::ALL_WORKER_HEALTH.to_string()).await;
    }

    /// Listens to every heartbeat until `cancel`. Without a bus there is nothing to hear; the
    /// subscription itself survives the bus going away and coming back.
    pub async fn run(&self, bus: &Bus, cancel: CancellationToken) {
        self.listen(bus).await;
        let Some(mut heartbeats) = self.subscription.lock().await.take() else {
            return;
        };
        // A worker goes stale without a message: look that often, a small part of the window.
        let mut check =
            tokio::time::interval((self.stale_after / 9).clamp(Duration::from_millis(100), Duration::from_secs(10)));
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = check.tick() => {}
                message = heartbeats.next() => match message {
                    Some(message) => {
                        let _handling = super::received(&message).entered();
                        self.record(&message.subject, &message.payload, super::epoch_seconds());
                    }
                    None => return,
                },
            }
            if bus.is_connected() {
                for event in self.tier_changes(super::epoch_seconds()) {
                    if let Err(err) = bus.publish(&event).await {
                        tracing::debug!(error = %err, topic = %event.topic, "Worker status not published");
                    }
                }
            }
        }
    }

    /// `system.<worker>.status` for every worker heard from whose tier is not the one last
    /// announced (the first heartbeat announces `ok`), with the bus connected.
    pub fn tier_changes(&self, now: f64) -> Vec<Event> {
        let heard = self.heard.lock().expect("registry lock");
        let mut announced = self.announced.lock().expect("registry lock");
        let mut events = Vec::new();
        for (name, h) in heard.iter() {
            let tier = self.tier(h, true, now);
            let previous = announced.insert(name.clone(), tier);
            if previous == Some(tier) {
                continue;
            }
            let Ok(topic) = topics::worker_status(name) else { continue };
            let payload = serde_json::json!({
                "worker": name,
                "status": tier,
                "previous_status": previous.unwrap_or(Tier::Unknown),
                "last_heartbeat_ts": h.at,
            });
            events.push(Event::new(topic, "status", payload));
        }
        events
    }

    /// Notes a heartbeat that arrived on `subject` at `now`.
    pub fn record(&self, subject: &str, body: &[u8], now: f64) {
        let Some(worker) = topics::worker_of_health(subject) else { return };
        let extra = match serde_json::from_slice::<Event>(body).map(|event| event.payload) {
            Ok(serde_json::Value::Object(mut payload)) => {
                payload.remove("worker");
                payload.remove("ts");
                payload
            }
            Ok(_) => serde_json::Map::new(),
            Err(err) => {
                tracing::debug!(%subject, error = %err, "Ignoring a heartbeat that is not an event");
                return;
            }
        };
        let mut heard = self.heard.lock().expect("registry lock");
        let extra = if worker == BUS_ROW { self.merge_bus_beat(heard.remove(BUS_ROW), extra, now) } else { extra };
        heard.insert(worker.to_string(), Heard { at: now, extra });
    }

    /// Every process sends its own `system.bus.health`: the `bus` row keeps the newest beat of each
    /// under `processes` (by connection name, with `seconds_since`), forgetting a process once its
    /// beat is stale, and the slowest round trip of those at the top as `rtt_ms`.
    fn merge_bus_beat(
        &self,
        before: Option<Heard>,
        beat: serde_json::Map<String, serde_json::Value>,
        now: f64,
    ) -> serde_json::Map<String, serde_json::Value> {
        use serde_json::Value;
        let mut processes =
            before.and_then(|h| h.extra.get("processes").and_then(Value::as_object).cloned()).unwrap_or_default();
        let process = beat.get("process").and_then(Value::as_str).unwrap_or("unnamed").to_string();
        let mut entry = beat;
        entry.insert("at".into(), now.into());
        processes.insert(process, Value::Object(entry));
        let stale_after = self.stale_after.as_secs_f64();
        processes.retain(|_, p| p.get("at").and_then(Value::as_f64).is_some_and(|at| now - at < stale_after));
        for process in processes.values_mut() {
            let at = process.get("at").and_then(Value::as_f64).unwrap_or(now);
            process["seconds_since"] = (now - at).max(0.0).into();
        }
        let slowest = processes.values().filter_map(|p| p.get("rtt_ms").and_then(Value::as_f64)).fold(0.0, f64::max);
        let reconnects: u64 = processes.values().filter_map(|p| p.get("reconnects").and_then(Value::as_u64)).sum();
        let mut extra = serde_json::Map::new();
        extra.insert("rtt_ms".into(), slowest.into());
        extra.insert("reconnects".into(), reconnects.into());
        extra.insert("processes".into(), Value::Object(processes));
        extra
    }

    /// Records whether the embedded worker `name` is running.
    pub fn set_embedded(&self, name: &str, running: bool) {
        self.embedded.lock().expect("registry lock").insert(name.to_string(), running);
    }

    /// Reads the embedded worker `name`'s fault from `fault`.
    pub fn embed_fault(&self, name: &str, fault: Fault) {
        self.faults.lock().expect("registry lock").insert(name.to_string(), fault);
    }

    /// Reads the embedded worker `name`'s counters from `counters`.
    pub fn embed_counters(&self, name: &str, counters: Counters) {
        self.counters.lock().expect("registry lock").insert(name.to_string(), counters);
    }

    /// A worker's own counts: an embedded worker's as they are now, else those its last heartbeat
    /// carried (empty when never heard from).
    pub fn counters_of(&self, name: &str) -> BTreeMap<String, u64> {
        if self.embedded.lock().expect("registry lock").get(name) == Some(&true)
            && let Some(counters) = self.counters.lock().expect("registry lock").get(name)
        {
            return counters.snapshot();
        }
        let heard = self.heard.lock().expect("registry lock");
        let Some(counters) = heard.get(name).and_then(|h| h.extra.get("counters")).and_then(|c| c.as_object()) else {
            return BTreeMap::new();
        };
        counters.iter().filter_map(|(k, v)| Some((k.clone(), v.as_u64()?))).collect()
    }

    /// Why a worker that is up cannot do its work: an embedded worker's own fault, else the one its
    /// last fresh heartbeat carried (printable, at most 64 characters, as it reaches `/health`).
    pub fn fault(&self, name: &str, bus_connected: bool, now: f64) -> Option<String> {
        if self.embedded.lock().expect("registry lock").get(name) == Some(&true) {
            let faults = self.faults.lock().expect("registry lock");
            return faults.get(name).and_then(Fault::get).map(std::borrow::Cow::into_owned);
        }
        let heard = self.heard.lock().expect("registry lock");
        let heard = heard.get(name).filter(|h| self.tier(h, bus_connected, now) == Tier::Ok)?;
        let fault = heard.extra.get("fault")?.as_str()?;
        Some(crate::text::prefix_chars(&crate::text::printable(fault.as_bytes()), 64).to_string())
    }

    /// A known worker, or one that has been heard from.
    pub fn is_known(&self, name: &str) -> bool {
        KNOWN_WORKERS.contains(&name) || self.heard.lock().expect("registry lock").contains_key(name)
    }

    /// Embedded here, or heard from at least once: a worker this deployment runs.
    pub fn is_deployed(&self, name: &str) -> bool {
        self.embedded.lock().expect("registry lock").contains_key(name)
            || self.heard.lock().expect("registry lock").contains_key(name)
    }

    /// Up when embedded and running, or when its heartbeat is fresh; the heartbeat of an embedded
    /// worker that stopped (sent from this process) does not count.
    pub fn is_up(&self, name: &str, bus_connected: bool, now: f64) -> bool {
        let embedded = self.embedded.lock().expect("registry lock").get(name).copied();
        if embedded == Some(true) {
            return true;
        }
        let heard = self.heard.lock().expect("registry lock");
        heard
            .get(name)
            .filter(|h| embedded.is_none() || !h.sent_by_this_process())
            .is_some_and(|h| self.tier(h, bus_connected, now) == Tier::Ok)
    }

    /// One row per known worker, then every other worker heard from, by name.
    pub fn rows(&self, bus_connected: bool, now: f64) -> Vec<WorkerRow> {
        let heard = self.heard.lock().expect("registry lock");
        let mut names: Vec<&str> = KNOWN_WORKERS.to_vec();
        names.extend(heard.keys().map(String::as_str).filter(|n| !KNOWN_WORKERS.contains(n)));
        names
            .into_iter()
            .map(|name| match heard.get(name) {
                Some(h) => WorkerRow {
                    name: name.to_string(),
                    status: self.tier(h, bus_connected, now),
                    last_heartbeat_ts: Some(h.at),
                    seconds_since: Some((now - h.at).max(0.0)),
                    extra: h.extra.clone(),
                },
                None => WorkerRow {
                    name: name.to_string(),
                    status: Tier::Unknown,
                    last_heartbeat_ts: None,
                    seconds_since: None,
                    extra: serde_json::Map::new(),
                },
            })
            .collect()
    }

    /// With the bus down nothing can be known, however recent the last beat.
    fn tier(&self, heard: &Heard, bus_connected: bool, now: f64) -> Tier {
        if !bus_connected {
            Tier::Unknown
        } else if now - heard.at < self.stale_after.as_secs_f64() {
            Tier::Ok
        } else {
            Tier::Stale
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn beat(registry: &WorkerRegistry, worker: &str, at: f64) {
        let event = Event::new(
            topics::worker_health(worker).unwrap(),
            "health",
            serde_json::json!({"worker": worker, "ts": at, "pid": 7}),
        );
        registry.record(&event.topic, &serde_json::to_vec(&event).unwrap(), at);
    }

    #[test]
    fn tiers_follow_the_stale_window_and_the_bus() {
        let registry = WorkerRegistry::new(Duration::from_secs(90));
        beat(&registry, "collector", 1000.0);
        let row = |rows: Vec<WorkerRow>, name: &str| rows.into_iter().find(|r| r.name == name).unwrap();
        let fresh = row(registry.rows(true, 1089.0), "collector");
        assert_eq!((fresh.status, fresh.seconds_since), (Tier::Ok, Some(89.0)));
        assert_eq!(fresh.extra, serde_json::json!({"pid": 7}).as_object().unwrap().clone());
        assert_eq!(row(registry.rows(true, 1090.0), "collector").status, Tier::Stale);
        assert_eq!(row(registry.rows(false, 1001.0), "collector").status, Tier::Unknown);
        assert_eq!(row(registry.rows(true, 1001.0), "sniffer").status, Tier::Unknown);
    }

    #[test]
    fn tier_changes_are_announced_once_each() {
        let registry = WorkerRegistry::new(Duration::from_secs(90));
        assert!(registry.tier_changes(1000.0).is_empty());
        beat(&registry, "profiler", 1000.0);
        let first = registry.tier_changes(1001.0);
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].topic, "system.profiler.status");
        assert_eq!(
            (&first[0].payload["status"], &first[0].payload["previous_status"]),
            (&json!("ok"), &json!("unknown"))
        );
        assert!(registry.tier_changes(1050.0).is_empty(), "still ok: nothing to say");
        let stale = registry.tier_changes(1091.0);
        assert_eq!(
            (&stale[0].payload["status"], &stale[0].payload["previous_status"]),
            (&json!("stale"), &json!("ok"))
        );
        beat(&registry, "profiler", 1100.0);
        assert_eq!(registry.tier_changes(1100.0)[0].payload["status"], "ok");
    }

    #[test]
    fn every_known_worker_has_a_row_and_strangers_get_one_when_heard() {
        let registry = WorkerRegistry::new(Duration::from_secs(90));
        assert!(!registry.is_known("reconciler"));
        beat(&registry, "reconciler", 1.0);
        let names: Vec<String> = registry.rows(true, 2.0).into_iter().map(|r| r.name).collect();
        let expected: Vec<&str> = KNOWN_WORKERS.into_iter().chain(["reconciler"]).collect();
        assert_eq!(names, expected);
        assert!(registry.is_known("reconciler") && registry.is_known("tarpit"));
    }

    #[test]
    fn the_webhook_worker_is_known_before_it_is_heard_from() {
        let registry = WorkerRegistry::new(Duration::from_secs(90));
        assert!(registry.is_known("webhook"), "so /workers/webhook/start is not a 404");
        assert!(registry.rows(true, 1.0).iter().any(|row| row.name == "webhook" && row.status == Tier::Unknown));
    }

    #[test]
    fn a_fault_comes_from_the_embedded_worker_or_its_fresh_heartbeat() {
        let registry = WorkerRegistry::new(Duration::from_secs(90));
        let event = Event::new(
            topics::worker_health("sniffer").unwrap(),
            "health",
            serde_json::json!({"worker": "sniffer", "ts": 1.0, "fault": "capture interface unavailable\n"}),
        );
        registry.record(&event.topic, &serde_json::to_vec(&event).unwrap(), 1000.0);
        assert_eq!(registry.fault("sniffer", true, 1001.0).as_deref(), Some("capture interface unavailable?"));
        assert_eq!(registry.fault("sniffer", true, 1100.0), None, "a stale beat says nothing");
        let fault = Fault::default();
        registry.set_embedded("sniffer", true);
        registry.embed_fault("sniffer", fault.clone());
        assert_eq!(registry.fault("sniffer", true, 1001.0), None);
        fault.set("capture interface unavailable");
        assert_eq!(registry.fault("sniffer", true, 1001.0).as_deref(), Some("capture interface unavailable"));
    }

    #[test]
    fn the_bus_row_keeps_each_process_beat_and_forgets_stale_ones() {
        let registry = WorkerRegistry::new(Duration::from_secs(90));
        let bus_beat = |process: &str, rtt: f64, reconnects: u64, at: f64| {
            let payload = json!({"process": process, "pid": 1, "host": "h", "rtt_ms": rtt, "reconnects": reconnects});
            let event = Event::new(topics::BUS_HEALTH, "health", payload);
            registry.record(&event.topic, &serde_json::to_vec(&event).unwrap(), at);
        };
        bus_beat("svc-api", 0.5, 0, 1000.0);
        bus_beat("svc-worker-collector", 2.5, 3, 1010.0);
        let row = registry.rows(true, 1011.0).into_iter().find(|r| r.name == BUS_ROW).unwrap();
        assert_eq!(row.status, Tier::Ok);
        assert_eq!((&row.extra["rtt_ms"], &row.extra["reconnects"]), (&json!(2.5), &json!(3)));
        assert_eq!(row.extra["processes"]["svc-api"]["rtt_ms"], json!(0.5));
        assert_eq!(row.extra["processes"]["svc-api"]["seconds_since"], json!(10.0));
        bus_beat("svc-worker-collector", 1.0, 3, 1095.0);
        let row = registry.rows(true, 1095.0).into_iter().find(|r| r.name == BUS_ROW).unwrap();
        let processes: Vec<&String> = row.extra["processes"].as_object().unwrap().keys().collect();
        assert_eq!(processes, ["svc-worker-collector"], "the API's beat is past the stale window");
    }

    #[test]
    fn an_embedded_running_worker_is_up_without_a_heartbeat() {
        let registry = WorkerRegistry::new(Duration::from_secs(90));
        assert!(!registry.is_up("ingest", true, 0.0));
        registry.set_embedded("ingest", true);
        assert!(registry.is_up("ingest", false, 0.0));
        registry.set_embedded("ingest", false);
        assert!(!registry.is_up("ingest", true, 0.0));
        assert!(registry.is_deployed("ingest"));
    }
}
