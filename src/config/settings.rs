//! What `svc config` prints: every setting `Config` reads, with its section, its default and what it
//! means. The variables and their defaults are not written here: reading an empty environment notes
//! each getter's variable and default (`env.rs`), so the printout is the parser's own. Only the
//! one-line meanings live here, and a test keeps them and the variables read the same set.

use super::Config;

/// One setting as `svc config` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setting {
    /// The heading it is listed under: the part of svc that reads it.
    pub section: &'static str,
    pub var: &'static str,
    /// What an unset variable stands for; `None`: unset means off, or nothing.
    pub default: Option<String>,
    pub meaning: &'static str,
}

/// Every setting, in reading order. Defaults under the data directory read `$SVC_DATA_DIR/…`.
pub fn settings() -> Vec<Setting> {
    // The data directory stands as its own name, so the paths derived from it print as such.
    let (_, read) = Config::read_noting([("SVC_DATA_DIR".to_string(), "$SVC_DATA_DIR".to_string())]);
    read.into_iter()
        .map(|r| Setting { section: r.section, var: r.var, default: r.default, meaning: meaning(r.var).unwrap_or("") })
        .collect()
}

fn meaning(var: &str) -> Option<&'static str> {
    MEANINGS.iter().find(|(v, _)| *v == var).map(|(_, m)| *m)
}

/// One line per variable, in no required order: what it changes, its unit and its range.
const MEANINGS: &[(&str, &str)] = &[
    ("SVC_MODE", "`master` or `agent`: the role of this host; the API refuses to run on an agent"),
    ("SVC_DATA_DIR", "where the default files below live (database, ingest log, collector state, profiles)"),
    ("SVC_LOG_FORMAT", "`text` or `json` (one JSON object per line, for journald or Loki); `RUST_LOG` filters"),
    ("SVC_TESTING", "exactly `1` relaxes secret strength and public-binding checks (tests only; nothing else does)"),
    ("SVC_DB_TYPE", "`sqlite` or `mysql` (MySQL or MariaDB)"),
    ("SVC_DB_URL", "`mysql://user:pass@host:3306/db` when `SVC_DB_TYPE=mysql`; the database is created if missing"),
    ("SVC_DB_PATH", "the sqlite file (WAL mode)"),
    (
        "SVC_DB_CACHE_MB",
        "sqlite: page cache in MiB of the one connection every batch writer commits through (2..65536)",
    ),
    (
        "SVC_NATS_URL",
        "the NATS bus (`nats://host:4222`, or a cluster's servers separated by commas); unset: no bus (`svc supervise` then starts a private one)",
    ),
    ("SVC_HEARTBEAT_SECS", "seconds between a process's heartbeats (fractions allowed)"),
    ("SVC_WORKER_STALE_SECS", "a worker not heard from for this many seconds is `stale` in `/workers`"),
    ("SVC_WEB_PORT", "the dashboard's port; only sets the default CORS origin"),
    ("SVC_CORS_ORIGINS", "comma-separated origins allowed to call the API from a browser; `*` is refused"),
    ("SVC_JWT_EXP_MINUTES", "minutes a session token lasts"),
    ("SVC_DISALLOW_MASTER", "`false` lets the API run on an agent host anyway"),
    (
        "SVC_JWT_SECRET",
        "required by the API: token signing key, 32+ characters, not a known sample (`openssl rand -hex 32`)",
    ),
    ("SVC_ADMIN_USER", "name of the first admin, created on first start"),
    (
        "SVC_ADMIN_PASSWORD",
        "required by the API: the first admin's password (must be changed at first login); known-bad values refused",
    ),
    ("SVC_API_HOST", "address the API listens on; not loopback turns on the public-binding rules"),
    ("SVC_API_PORT", "port the API listens on (1..65535)"),
    (
        "SVC_DEVELOPER",
        "serves the OpenAPI document and its viewers (`/openapi.json`, `/docs`, `/redoc`); exception details in 500 bodies",
    ),
    (
        "SVC_METRICS_TOKEN",
        "bearer token a scraper sends to `/metrics` (24+ characters); unset: `/metrics` only on a loopback binding",
    ),
    (
        "SVC_DEVELOPER_TRACING",
        "OpenTelemetry traces over OTLP, per process (api, workers, agent): requests, store verbs, bus publish and receive, collector to ingester, master to agent and back (heartbeats, shipped lines); a log line per request. Off: no span, no exporter",
    ),
    ("SVC_OTEL_PROTOCOL", "`grpc` or `http/protobuf`: how traces reach the collector"),
    (
        "SVC_OTEL_ENDPOINT",
        "the OTLP collector's base URL (`http://localhost:4318` by default with `http/protobuf`; `/v1/traces` is added)",
    ),
    ("SVC_EMBED_PROFILER", "runs the attacker profiler inside the API"),
    (
        "SVC_EMBED_COLLECTOR",
        "runs the container-log collector inside the API (not when `SVC_INGEST_LOG_FILE` is empty)",
    ),
    ("SVC_EMBED_WEBHOOK", "runs webhook delivery inside the API"),
    ("SVC_LIMITER_ENABLED", "rate limiting; off on a public binding logs a critical warning"),
    ("SVC_CONTRACT_TEST", "the API starts no background worker"),
    ("SVC_CANARY_HTTP_BASE", "canary base URL; must be `https://` (or loopback) when the API is public"),
    (
        "SVC_CANARY_DNS_ZONE",
        "the DNS zone canary baits look `{token}.{zone}` up under (delegate its NS to this host); unset: no DNS listener, `ssh_key` and `mysql_dump` refused",
    ),
    ("SVC_CANARY_DNS_LISTEN", "UDP address and port the canary DNS listener binds, when a zone is set"),
    (
        "SVC_CANARY_DNS_ANSWER",
        "IPv4 address answered (A, TTL 0) for names under the zone, so the client goes on to connect; unset: no data",
    ),
    (
        "SVC_CANARY_TRIGGERS_PER_MINUTE",
        "triggers one canary token records a minute at most; past it the callback answers as ever but nothing is recorded",
    ),
    ("SVC_PROFILE_REQUESTS", "writes one HTML flamegraph per request to `SVC_PROFILE_DIR`"),
    ("SVC_PROFILE_DIR", "where per-request flamegraphs go"),
    ("SVC_UNIT_CACHE_SECS", "seconds the installed-unit listing behind `/workers` is reused"),
    ("SVC_SWARM_ENROLL_TTL_S", "seconds an enrollment bundle (`.sh`, `.tgz`) can be fetched after it is made"),
    ("SVC_SWARM_BUNDLE_BIN", "the svc binary enrollment bundles carry; unset: the running svc"),
    (
        "SVC_UNIT_DIRS",
        "`:`-separated directories holding `svc-<worker>.service`; unset: ask systemd, else its standard directories",
    ),
    (
        "SVC_READ_CACHE_MS",
        "milliseconds identical `GET /logs` reads share one body at most (0..1000; 0 turns sharing off)",
    ),
    ("SVC_READ_CACHE_BYTES", "bytes of shared `/logs` bodies kept at most"),
    (
        "SVC_SECRETS_KEY_FILE",
        "the key (made 0600 on first need) that seals webhook signing secrets in the database; every replica of one database needs the same file",
    ),
    ("SVC_SSE_MAX_PER_USER", "event streams one user may hold open at once, per replica; one more is a 429"),
    (
        "SVC_SSE_RECHECK_SECS",
        "seconds between an open event stream's checks of its session (at most 10); a revoked, expired or changed one ends it",
    ),
    (
        "SVC_FLEET_NAME",
        "prefix of the fleet's container and network names and its `svc.fleet` label (a-z, 0-9, `-`; 1..32)",
    ),
    ("SVC_TOPOLOGY_SUBNET_POOL", "range topologies' /24 LANs are handed out from (prefix 8..24)"),
    ("SVC_MUTATOR_POLL_S", "seconds between the mutator's looks for work when nothing on the bus woke it"),
    ("SVC_MUTATOR_CLAIM_TIMEOUT_S", "seconds a mutation may stay `applying` before a dead mutator's claim is failed"),
    ("SVC_RECONCILE_S", "seconds between the API's passes bringing the engine back to the store (deckies, topologies)"),
    ("SVC_DOCKER_HOST", "the container engine's API, `unix://PATH` or `tcp://HOST:PORT` (Docker, or podman's service)"),
    ("SVC_DEPLOYMENT_LIMIT", "the most deckies the fleet may hold (1..1000)"),
    ("SVC_ARTIFACTS_DIR", "where deckies on this host keep captured files (uploads, mail), one directory each"),
    ("SVC_ARTIFACTS_QUOTA_MB", "the most captured bytes one decky keeps, in MiB; past it a file is logged, not kept"),
    ("SVC_ARTIFACTS_RETENTION_DAYS", "captured files older than this are removed by their decky (1..3650)"),
    ("SVC_DECKY_BINARY", "the svc binary the default decky image is built from; unset: the running one"),
    (
        "SVC_DECKY_HOST_ISOLATION",
        "refuse everything a decky on this host's fleet bridge sends to the host itself (replies excepted); false turns it off",
    ),
    ("SVC_INGEST_LOG_FILE", "the RFC 5424 file the collector writes and the ingester tails; empty turns ingestion off"),
    ("SVC_INGEST_BATCH_SIZE", "lines stored per transaction at most (1..100000)"),
    ("SVC_INGEST_BATCH_MAX_WAIT_MS", "milliseconds a started batch waits for more lines while the file grows"),
    (
        "SVC_INGEST_LEASE_SECS",
        "seconds a worker's lease lasts unless renewed: how long a standby waits after the holder died",
    ),
    ("SVC_DISK_MIN_FREE_MB", "free MiB below which the collector and ingester shed low-value events (0: never)"),
    ("SVC_DISK_LOW_VALUE_EVENTS", "event types shed below the free-disk watermark (connections, requests)"),
    ("SVC_RETENTION_DAYS", "days log rows are kept; older ones are pruned in the background (0: kept forever)"),
    ("SVC_RETENTION_MAX_ROWS", "log rows kept at most; the oldest beyond are pruned in the background (0: no limit)"),
    ("SVC_RETENTION_INTERVAL_S", "seconds between the pruner's looks for log rows past the retention limits"),
    (
        "SVC_PROFILER_POLL_MS",
        "milliseconds between a caught-up profiler's looks for new rows; a bus notice wakes it sooner",
    ),
    ("SVC_COLLECTOR_RECONCILE_S", "seconds between the collector's re-listings of the fleet's containers"),
    ("SVC_COLLECTOR_DROP_APPS", "comma-separated APP-NAMEs whose lines the collector drops"),
    ("SVC_COLLECTOR_RL_EVENT_TYPES", "event types kept at most once a window per attacker, decky, service and type"),
    ("SVC_COLLECTOR_RL_WINDOW_SEC", "that window, in seconds"),
    (
        "SVC_COLLECTOR_STATE_FILE",
        "how far each container's output has been written, so a restart neither repeats nor loses a line",
    ),
    ("SVC_FLOOD_CAP_PER_S", "lines kept per second per attacker and decky (0: no cap); the rest are counted"),
    ("SVC_FLOOD_WINDOW_S", "seconds the flood cap is counted over; one `flood_suppressed` line per window"),
    ("SVC_WEBHOOK_ALLOW_PRIVATE", "lets webhooks target private and loopback addresses (a warning at start)"),
    ("SVC_WEBHOOK_TIMEOUT_SECS", "seconds one delivery may take, connection to answer"),
    (
        "SVC_WEBHOOK_RETRY_BASE_MS",
        "the first retry's delay in milliseconds, doubled per further failure, at most 5 minutes",
    ),
    ("SVC_WEBHOOK_FAILURE_LIMIT", "consecutive failed deliveries that turn a webhook off"),
    ("SVC_EMBED_SNIFFER", "runs the sniffer inside the API"),
    ("SVC_SNIFFER_IFACE", "the capture interface; unset: the fleet network's host interface"),
    ("SVC_SNIFFER_FILTER", "the BPF filter of a live capture"),
    ("SVC_SNIFFER_MAX_FLOWS", "TCP flows tracked at once; more are refused and counted"),
    ("SVC_SNIFFER_FLOW_BYTES", "bytes kept from the start of each direction of a flow"),
    ("SVC_SNIFFER_FLOW_IDLE_SECS", "seconds after which an idle flow is forgotten"),
    ("SVC_SNIFFER_DEDUP_SECS", "seconds within which one event per attacker and fingerprint is written"),
    ("SVC_SNIFFER_REFRESH_SECS", "seconds between reads of the decky addresses and the fleet network"),
    ("SVC_SNIFFER_DECKIES", "`name=address,…`: decky addresses listed by hand instead of the fleet store's"),
    ("SVC_EMBED_PROBER", "runs the prober inside the API"),
    (
        "SVC_PROBER_ALLOW_PRIVATE",
        "lets the prober probe attackers at private addresses (never loopback, link-local, multicast or the fleet's own)",
    ),
    ("SVC_PROBER_POLL_SECS", "seconds between the prober's looks for new attackers and the fleet's addresses"),
    ("SVC_PROBER_INTERVAL_SECS", "seconds after which every known attacker is probed again"),
    ("SVC_PROBER_CONCURRENCY", "attackers probed at once; one attacker's probes run one after another"),
    ("SVC_PROBER_TIMEOUT_SECS", "seconds one probe connection may take, connect to answer"),
    ("SVC_PROBER_TARGET_BUDGET_SECS", "seconds all the probes of one attacker may take"),
    ("SVC_PROBER_TARGET_GAP_MS", "milliseconds between two connections to the same attacker"),
    ("SVC_PROBER_MAX_PPS", "packets per second the prober sends at most, all targets together"),
    ("SVC_PROBER_DEDUP_SECS", "seconds within which one line per attacker and fingerprint is written"),
    ("SVC_PROBER_TLS_PORTS", "ports JARM and the TLS certificate probe try (empty: none)"),
    ("SVC_PROBER_SSH_PORTS", "ports the HASSH-server probe tries (empty: none)"),
    ("SVC_PROBER_TCPFP_PORTS", "ports whose SYN-ACK gives the TCP/IP fingerprint (empty: none)"),
    ("SVC_TARPIT_POLL_SECS", "seconds between reads of the ruled deckies' connection tables"),
    (
        "SVC_SWARM_ENABLED",
        "`true`: `svc api` runs the swarm's heartbeat listener and dispatches deploys to usable hosts",
    ),
    (
        "SVC_SWARM_DIR",
        "the swarm CA (`ca/`, key 0600) and the master's certificate (`master/`); never leaves this host",
    ),
    ("SVC_SWARM_HOST", "where the heartbeat listener binds (mutual TLS, client certificate required)"),
    ("SVC_SWARM_PORT", "the heartbeat listener's port; agents post to `https://<master>:<it>/swarm/heartbeat`"),
    (
        "SVC_SWARM_SYSLOG_PORT",
        "the log listener's port (RFC 5425 over mutual TLS) on the master, and where agent hosts' forwarders ship; 0: off",
    ),
    ("SVC_VERIFY_HOSTNAME", "the master checks an agent's certificate names the address it dials (besides CA and pin)"),
    ("SVC_AGENT_CONNECT_TIMEOUT_S", "seconds the master waits to connect to an agent"),
    ("SVC_AGENT_READ_TIMEOUT_S", "seconds the master waits for an agent's answer"),
    ("SVC_AGENT_HOST", "`svc agent`: where its mutual-TLS API binds"),
    ("SVC_AGENT_PORT", "`svc agent`: its API's port"),
    ("SVC_AGENT_CERT", "`svc agent`: its certificate (PEM), issued by the master's CA at enrollment"),
    ("SVC_AGENT_KEY", "`svc agent`: its private key (PEM, 0600)"),
    ("SVC_AGENT_CA", "`svc agent`: the swarm CA's certificate; peers must present one it signed"),
    ("SVC_MASTER_HOST", "`svc agent`: the master's address for heartbeats; unset: none are sent"),
    ("SVC_HOST_UUID", "`svc agent`: the master's id for this host, sent with each heartbeat"),
    ("SVC_AGENT_HEARTBEAT_S", "`svc agent`: seconds between heartbeats (one is also sent when a deploy ends)"),
    ("SVC_INSTALL_ROOT", "`svc agent`: the root its files were installed under; self-destruct removes them there"),
    (
        "SVC_AGENT_DECKY_NET",
        "`svc agent`: the subnet (CIDR) its deckies go on, whatever a deploy's `[general] net` says",
    ),
    ("SVC_UPDATER_HOST", "`svc updater`: where its mutual-TLS API binds"),
    ("SVC_UPDATER_PORT", "`svc updater`: its API's port; the master pushes releases to this port on every host"),
    ("SVC_UPDATER_CERT", "`svc updater`: its certificate (`updater@<host>`, PEM), issued at enrollment"),
    ("SVC_UPDATER_KEY", "`svc updater`: its private key (PEM, 0600)"),
    ("SVC_UPDATER_CA", "`svc updater`: the swarm CA's certificate"),
    (
        "SVC_UPDATER_DIR",
        "`svc updater`: the release slots (`releases/`, `current`, `previous`); default under the install root",
    ),
    (
        "SVC_UPDATER_RESTART",
        "`svc updater`: `supervise` runs the agent itself; `systemd` restarts the bundle's units on a new release",
    ),
    ("SVC_UPDATER_PROBE_S", "`svc updater`: seconds the agent gets to answer `/health` on a new (or restored) release"),
    ("SVC_UPDATER_MAX_MIB", "`svc updater`: cap on a release's unpacked size, MiB"),
    ("SVC_UPDATER_READ_TIMEOUT_S", "seconds the master waits for an updater's answer (restart and probes included)"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variable_read_has_a_meaning_and_every_meaning_is_read() {
        let listed = settings();
        let unexplained: Vec<_> = listed.iter().filter(|s| s.meaning.is_empty()).map(|s| s.var).collect();
        assert!(unexplained.is_empty(), "variables read without a meaning in MEANINGS: {unexplained:?}");
        let stale: Vec<_> = MEANINGS.iter().map(|(v, _)| *v).filter(|v| !listed.iter().any(|s| s.var == *v)).collect();
        assert!(stale.is_empty(), "meanings of variables no longer read: {stale:?}");
    }

    #[test]
    fn defaults_are_the_parser_s() {
        let listed = settings();
        let default = |var: &str| listed.iter().find(|s| s.var == var).unwrap().default.clone();
        assert_eq!(default("SVC_API_PORT").as_deref(), Some("8000"));
        assert_eq!(default("SVC_DB_PATH").as_deref(), Some("$SVC_DATA_DIR/svc.db"));
        assert_eq!(default("SVC_CORS_ORIGINS").as_deref(), Some("http://localhost:8080"));
        assert_eq!(default("SVC_JWT_SECRET"), None);
        assert_eq!(default("SVC_HEARTBEAT_SECS").as_deref(), Some("30"));
        let config = Config::from_vars([]).unwrap();
        assert_eq!(config.api.port.to_string(), default("SVC_API_PORT").unwrap());
    }
}
