//! The workers this project runs, written once with the facts the rest of svc derives from them:
//! the `/workers` rows and `start-all` order ([`KNOWN_WORKERS`]), the systemd units `svc systemd
//! install` writes, the `/health` components, which of them `svc api` embeds ([`Embedding`]), and
//! the counters each reports in its heartbeat ([`counters`]). `svc-workers` has a body for each
//! (tested there). Facts and nothing else: the roster reads no other module of svc, so every layer,
//! the bus's registry included, may read it.

pub mod counters;

pub use counters::Counter;

/// The API process: it heartbeats under this worker name and has a unit, but is not a worker body.
pub const API: &str = "api";

/// The `/health` component a worker stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthComponent {
    /// The component's name in `/health` (DECNET's).
    pub name: &'static str,
    /// A failing required component makes the whole service unhealthy.
    pub required: bool,
}

/// A worker this project runs (`svc worker <name>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownWorker {
    pub name: &'static str,
    /// Its unit file's template, `systemd/svc-<name>.service`, naming the binary `@SVC_BIN@`.
    pub unit_template: &'static str,
    /// The `/health` component it stands for, if health counts it (then once it runs: embedded
    /// here or heard from).
    pub health: Option<HealthComponent>,
    /// Whether `svc api` runs it in its own process.
    pub embedding: Embedding,
}

/// Whether `svc api` runs a worker inside its own process (spec, startup step 8) besides, or
/// instead of, `svc worker <name>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Embedding {
    /// Always: the API does not work without it.
    Always,
    /// When the setting named is on (`worker::embedded_in_api` reads it).
    Switched(EmbedSwitch),
    /// Never: only ever a process of its own.
    Never,
}

/// A setting that has `svc api` embed one worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbedSwitch {
    /// `SVC_EMBED_PROFILER`.
    Profiler,
    /// `SVC_EMBED_COLLECTOR`, with an ingest file to write to.
    Collector,
    /// `SVC_EMBED_WEBHOOK`.
    Webhook,
    /// `SVC_EMBED_SNIFFER`: a sniffer that cannot capture keeps retrying and reports its fault.
    Sniffer,
    /// `SVC_EMBED_PROBER`.
    Prober,
    /// The swarm on with a log port (`SVC_SWARM_ENABLED`, `SVC_SWARM_SYSLOG_PORT` not 0): like
    /// ingestion, every host's lines come in through it.
    SwarmLogs,
}

/// Every worker this project runs, in the order `/workers` lists and `start-all` starts them.
pub const WORKERS: [KnownWorker; 10] = [
    KnownWorker {
        name: "ingest",
        unit_template: include_str!("../../systemd/svc-ingest.service"),
        health: Some(HealthComponent { name: "ingestion_worker", required: true }),
        embedding: Embedding::Always,
    },
    KnownWorker {
        name: "collector",
        unit_template: include_str!("../../systemd/svc-collector.service"),
        health: Some(HealthComponent { name: "collector_worker", required: false }),
        embedding: Embedding::Switched(EmbedSwitch::Collector),
    },
    KnownWorker {
        name: "profiler",
        unit_template: include_str!("../../systemd/svc-profiler.service"),
        health: Some(HealthComponent { name: "attacker_worker", required: false }),
        embedding: Embedding::Switched(EmbedSwitch::Profiler),
    },
    KnownWorker {
        name: "sniffer",
        unit_template: include_str!("../../systemd/svc-sniffer.service"),
        health: Some(HealthComponent { name: "sniffer_worker", required: false }),
        embedding: Embedding::Switched(EmbedSwitch::Sniffer),
    },
    KnownWorker {
        name: "prober",
        unit_template: include_str!("../../systemd/svc-prober.service"),
        health: Some(HealthComponent { name: "prober_worker", required: false }),
        embedding: Embedding::Switched(EmbedSwitch::Prober),
    },
    KnownWorker {
        name: "tarpit",
        unit_template: include_str!("../../systemd/svc-tarpit.service"),
        health: Some(HealthComponent { name: "tarpit_watcher", required: false }),
        embedding: Embedding::Always,
    },
    KnownWorker {
        name: "mutator",
        unit_template: include_str!("../../systemd/svc-mutator.service"),
        health: None,
        embedding: Embedding::Never,
    },
    KnownWorker {
        name: "webhook",
        unit_template: include_str!("../../systemd/svc-webhook.service"),
        health: None,
        embedding: Embedding::Switched(EmbedSwitch::Webhook),
    },
    // The swarm's log shipping: the listener on the master, the forwarder on each worker host.
    KnownWorker {
        name: "listener",
        unit_template: include_str!("../../systemd/svc-listener.service"),
        health: None,
        embedding: Embedding::Switched(EmbedSwitch::SwarmLogs),
    },
    KnownWorker {
        name: "forwarder",
        unit_template: include_str!("../../systemd/svc-forwarder.service"),
        health: None,
        embedding: Embedding::Never,
    },
];

/// The names `/workers` always has a row for: the API, then every worker.
pub const KNOWN_WORKERS: [&str; WORKERS.len() + 1] = {
    let mut names = [API; WORKERS.len() + 1];
    let mut i = 0;
    while i < WORKERS.len() {
        names[i + 1] = WORKERS[i].name;
        i += 1;
    }
    names
};

/// Whether a swarm worker host runs `worker` beside its agent, as a single host runs it: the
/// collector writes the host's deckies' lines to its ingest file, the forwarder ships that file to
/// the master. Every other worker runs on the master only.
pub fn runs_on_worker_hosts(worker: &KnownWorker) -> bool {
    matches!(worker.name, "collector" | "forwarder")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_known_names_are_the_api_then_every_worker_once() {
        assert_eq!(
            KNOWN_WORKERS,
            [
                "api",
                "ingest",
                "collector",
                "profiler",
                "sniffer",
                "prober",
                "tarpit",
                "mutator",
                "webhook",
                "listener",
                "forwarder"
            ]
        );
        let mut names = KNOWN_WORKERS.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), KNOWN_WORKERS.len());
    }

    #[test]
    fn each_unit_template_runs_its_own_worker() {
        for worker in WORKERS {
            let exec = format!("ExecStart=@SVC_BIN@ worker {}\n", worker.name);
            assert!(worker.unit_template.contains(&exec), "{}", worker.name);
        }
    }
}
