//! The counters each worker reports in its heartbeat, one module per worker, as typed names: a
//! worker counts only through a [`Counter`] declared here, and `/metrics` reads the same constants
//! back, so renaming one is a compile error rather than a Prometheus series silently gone to zero.
//! The names are the wire's (heartbeat `counters`, `svc_worker_counter{counter=…}`): changing a
//! string here changes what dashboards see.

/// A counter's name in a worker's heartbeat (a running total, or a gauge a worker sets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Counter(&'static str);

impl Counter {
    /// Declares a counter; only the constants below (and a test fixture's own) should call it.
    pub const fn new(name: &'static str) -> Counter {
        Counter(name)
    }

    pub const fn name(self) -> &'static str {
        self.0
    }
}

/// The ingester's (`ingest`).
pub mod ingest {
    use super::Counter;

    /// Log lines stored.
    pub const LINES_STORED: Counter = Counter::new("lines_stored");
    /// Lines skipped for not being RFC 5424.
    pub const LINES_MALFORMED: Counter = Counter::new("lines_malformed");
    /// Lines skipped for their length.
    pub const LINES_OVERSIZED: Counter = Counter::new("lines_oversized");
    /// Low-value lines shed below the free-disk watermark.
    pub const LINES_SHED_DISK_LOW: Counter = Counter::new("lines_shed_disk_low");
    pub const BOUNTIES_NEW: Counter = Counter::new("bounties_new");
    pub const CREDENTIALS_NEW: Counter = Counter::new("credentials_new");
    /// Batches committed.
    pub const BATCHES: Counter = Counter::new("batches");
}

/// The collector's (`collector`).
pub mod collector {
    use super::Counter;

    /// Pieces of container output the engine handed over without their stamp (dropped).
    pub const LINES_UNSTAMPED: Counter = Counter::new("lines_unstamped");
    /// Lines cut at the length limit.
    pub const LINES_CUT: Counter = Counter::new("lines_cut");
    /// Lines written to the ingest file.
    pub const LINES_WRITTEN: Counter = Counter::new("lines_written");
    /// Lines already written (a follower started again sends them again), not written twice.
    pub const LINES_REPEATED_SKIPPED: Counter = Counter::new("lines_repeated_skipped");
    /// Lines dropped by the flood cap, or shed below the free-disk watermark.
    pub const LINES_SUPPRESSED: Counter = Counter::new("lines_suppressed");
    /// Flood sources past the most the cap tracks.
    pub const FLOOD_SOURCES_UNTRACKED: Counter = Counter::new("flood_sources_untracked");
}

/// The attacker profiler's (`profiler`), its bus intake of observations included.
pub mod profiler {
    use super::Counter;

    pub const ROWS_FOLDED: Counter = Counter::new("rows_folded");
    pub const ROWS_SKIPPED: Counter = Counter::new("rows_skipped");
    pub const PROFILES_UPDATED: Counter = Counter::new("profiles_updated");
    pub const COMMANDS_FOUND: Counter = Counter::new("commands_found");
    pub const OBSERVATIONS_DERIVED: Counter = Counter::new("observations_derived");
    /// Batches committed.
    pub const BATCHES: Counter = Counter::new("batches");
    /// Observations from the bus refused by the schema.
    pub const OBSERVATIONS_REJECTED: Counter = Counter::new("observations_rejected");
    pub const OBSERVATIONS_STORED: Counter = Counter::new("observations_stored");
    pub const OBSERVATIONS_DUPLICATE: Counter = Counter::new("observations_duplicate");
    /// Observations from the bus lost to a store that could not take them.
    pub const OBSERVATIONS_FAILED: Counter = Counter::new("observations_failed");
}

/// The sniffer's (`sniffer`).
pub mod sniffer {
    use super::Counter;

    pub const FRAMES: Counter = Counter::new("frames");
    pub const EVENTS: Counter = Counter::new("events");
    pub const HANDSHAKES: Counter = Counter::new("handshakes");
    /// Flows not tracked for want of room.
    pub const FLOWS_REFUSED: Counter = Counter::new("flows_refused");
    /// A gauge: frames per second over the last report.
    pub const FRAMES_PER_SEC: Counter = Counter::new("frames_per_sec");
    /// A gauge: flows tracked now.
    pub const FLOWS: Counter = Counter::new("flows");
    /// A gauge: frames the kernel dropped, as it reports them.
    pub const DROPS: Counter = Counter::new("drops");
}

/// The prober's (`prober`).
pub mod prober {
    use super::Counter;

    /// A gauge: targets it knows of.
    pub const TARGETS_KNOWN: Counter = Counter::new("targets_known");
    pub const TARGETS_PROBED: Counter = Counter::new("targets_probed");
    /// Targets whose probe budget ran out.
    pub const TARGETS_OVER_BUDGET: Counter = Counter::new("targets_over_budget");
    /// Attacker addresses that do not parse.
    pub const SKIPPED_UNPARSABLE: Counter = Counter::new("skipped_unparsable");
    /// Targets never probed: loopback, link-local, multicast and the like.
    pub const SKIPPED_RESERVED: Counter = Counter::new("skipped_reserved");
    /// Targets never probed: the fleet's or this host's own.
    pub const SKIPPED_OWN: Counter = Counter::new("skipped_own");
    /// Targets not probed: private, and private ranges are not allowed.
    pub const SKIPPED_PRIVATE: Counter = Counter::new("skipped_private");
    /// ICMP probes skipped (no raw socket, nothing elicited, or an error).
    pub const ICMP_SKIPPED: Counter = Counter::new("icmp_skipped");
    /// TCP/IP fingerprints skipped for want of a raw socket.
    pub const TCPFP_SKIPPED: Counter = Counter::new("tcpfp_skipped");
    pub const CONNECTIONS: Counter = Counter::new("connections");
    /// Fingerprints already reported for the target.
    pub const DUPLICATES: Counter = Counter::new("duplicates");
    pub const FINGERPRINTS: Counter = Counter::new("fingerprints");
}

/// The tarpit watcher's (`tarpit`).
pub mod tarpit {
    use super::Counter;

    pub const POLLS: Counter = Counter::new("polls");
    /// Connections that entered the tarpit.
    pub const ENTERED: Counter = Counter::new("entered");
    pub const EXITED: Counter = Counter::new("exited");
    /// A gauge: connections held now.
    pub const CAUGHT: Counter = Counter::new("caught");
}

/// The mutator's (`mutator`).
pub mod mutator {
    use super::Counter;

    /// Scheduled mutations of deckies started.
    pub const DECKIES_MUTATED: Counter = Counter::new("deckies_mutated");
    /// Mutations a stopped mutator left applying, failed.
    pub const MUTATIONS_ABANDONED: Counter = Counter::new("mutations_abandoned");
    pub const MUTATIONS_APPLIED: Counter = Counter::new("mutations_applied");
    pub const MUTATIONS_FAILED: Counter = Counter::new("mutations_failed");
}

/// The webhook deliverer's (`webhook`), its bus intake of events included.
pub mod webhook {
    use super::Counter;

    /// Events too large to accept.
    pub const EVENTS_OVERSIZED: Counter = Counter::new("events_oversized");
    /// Bus messages that are not events.
    pub const EVENTS_MALFORMED: Counter = Counter::new("events_malformed");
    pub const DELIVERIES_QUEUED: Counter = Counter::new("deliveries_queued");
    /// Deliveries lost to a store that could not take them.
    pub const DELIVERIES_LOST: Counter = Counter::new("deliveries_lost");
    pub const DELIVERIES_OK: Counter = Counter::new("deliveries_ok");
    pub const DELIVERIES_FAILED: Counter = Counter::new("deliveries_failed");
    /// Events given up on (no retry left).
    pub const EVENTS_DROPPED: Counter = Counter::new("events_dropped");
    /// Webhooks turned off after consecutive failures.
    pub const WEBHOOKS_DISABLED: Counter = Counter::new("webhooks_disabled");
}

/// The log forwarder's (`forwarder`).
pub mod forwarder {
    use super::Counter;

    /// Lines the master acknowledged.
    pub const LINES_SHIPPED: Counter = Counter::new("lines_shipped");
    /// Batches the master acknowledged.
    pub const BATCHES: Counter = Counter::new("batches");
    /// A gauge: bytes of the file the master has not stored yet.
    pub const LAG_BYTES: Counter = Counter::new("lag_bytes");
    /// Lines not shipped for not being RFC 5424.
    pub const LINES_MALFORMED: Counter = Counter::new("lines_malformed");
    /// Lines not shipped for their length.
    pub const LINES_OVERSIZED: Counter = Counter::new("lines_oversized");
}
