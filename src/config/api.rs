//! `ApiConfig`: what the master API (`svc api`) reads: where it listens, who may call it from a
//! browser, how it signs tokens, the first admin, its limits and developer aids, which workers it
//! embeds. The rules it must satisfy before it starts are `rules::for_api`.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::env::Env;
use super::rules;
use crate::canary::{CanaryDns, DnsZone};
use crate::secret::Secret;
use crate::swarm::config::DISALLOW_MASTER_VAR;

/// How long a session token lasts.
const DEFAULT_JWT_EXP_MINUTES: u32 = 240;
/// The longest an open event stream goes without re-checking its session.
const MAX_SSE_RECHECK: Duration = Duration::from_secs(10);

#[derive(Clone, Debug)]
pub struct ApiConfig {
    /// `SVC_API_HOST`; loopback or not decides the public-binding rules.
    pub host: String,
    /// `SVC_API_PORT`.
    pub port: u16,
    /// `SVC_CORS_ORIGINS`; by default the dashboard on `http://localhost:$SVC_WEB_PORT`.
    pub cors_origins: Vec<String>,
    /// `SVC_JWT_SECRET`: required by the API, so `None` only until the rules refuse it.
    pub jwt_secret: Option<Secret>,
    /// `SVC_JWT_EXP_MINUTES`.
    pub jwt_exp_minutes: u32,
    /// `SVC_ADMIN_USER`.
    pub admin_user: String,
    /// `SVC_ADMIN_PASSWORD`: required by the API, like the JWT secret.
    pub admin_password: Option<Secret>,
    /// `SVC_DISALLOW_MASTER`: the API refuses to start on an agent host.
    pub disallow_master: bool,
    /// `SVC_DEVELOPER`: interactive docs and exception details in 500 bodies.
    pub developer: bool,
    /// `SVC_DEVELOPER_TRACING`: OpenTelemetry traces (`crate::traces`), in every process that reads it.
    pub developer_tracing: bool,
    /// `SVC_EMBED_PROFILER`: the attacker profiler runs inside the API.
    pub embed_profiler: bool,
    /// `SVC_EMBED_COLLECTOR`: the container-log collector runs inside the API.
    pub embed_collector: bool,
    /// `SVC_EMBED_WEBHOOK`: webhook delivery runs inside the API.
    pub embed_webhook: bool,
    /// `SVC_LIMITER_ENABLED`.
    pub limiter_enabled: bool,
    /// `SVC_CONTRACT_TEST`: the API starts no background worker.
    pub contract_test: bool,
    /// `SVC_CANARY_HTTP_BASE`: where baits call home; see [`ApiConfig::canary_callback_base`].
    pub canary_http_base: Option<String>,
    /// `SVC_CANARY_DNS_ZONE` and its listener; `None` without a zone (no DNS listener then).
    pub canary_dns: Option<CanaryDns>,
    /// `SVC_CANARY_TRIGGERS_PER_MINUTE`: the triggers one token records a minute at most.
    pub canary_triggers_per_minute: u32,
    /// `SVC_PROFILE_REQUESTS`: one flamegraph page per request, written to `profile_dir`.
    pub profile_requests: bool,
    /// `SVC_PROFILE_DIR`.
    pub profile_dir: PathBuf,
    /// Event streams one user may hold open at once (`SVC_SSE_MAX_PER_USER`).
    pub sse_max_per_user: u32,
    /// How often an open event stream re-checks its session (`SVC_SSE_RECHECK_SECS`, at most 10: the
    /// spec's bound on how long a revocation may go unseen).
    pub sse_recheck: Duration,
    /// How long the installed-unit listing behind `/workers` is reused (`SVC_UNIT_CACHE_SECS`).
    pub unit_cache: Duration,
    /// How long the body of a hot log read is shared at most (`SVC_READ_CACHE_MS`; 0
    /// turns sharing off).
    pub read_cache_reuse: Duration,
    /// Bytes of shared bodies kept at most (`SVC_READ_CACHE_BYTES`).
    pub read_cache_bytes: usize,
    /// Where to look for unit files instead of asking systemd (`SVC_UNIT_DIRS`, `:`-separated).
    pub unit_dirs: Option<Vec<PathBuf>>,
    /// How long an enrollment bundle can be fetched (`SVC_SWARM_ENROLL_TTL_S`).
    pub enroll_ttl: Duration,
    /// The svc binary enrollment bundles carry (`SVC_SWARM_BUNDLE_BIN`); unset: the running one.
    pub bundle_binary: Option<PathBuf>,
}

impl ApiConfig {
    /// Where baits call home: `SVC_CANARY_HTTP_BASE`, else this API's own address (a wildcard
    /// binding named by loopback).
    pub fn canary_callback_base(&self) -> String {
        if let Some(base) = &self.canary_http_base {
            return base.clone();
        }
        let host = match self.host.as_str() {
            "0.0.0.0" | "" => "127.0.0.1".to_string(),
            "::" => "[::1]".to_string(),
            host if host.contains(':') => format!("[{host}]"),
            host => host.to_string(),
        };
        format!("http://{host}:{}", self.port)
    }

    pub(super) fn read(env: &mut Env, data_dir: &Path) -> ApiConfig {
        // The dashboard's port matters only as the default CORS origin.
        let web_port = env.port("SVC_WEB_PORT", 8080);
        let cors_origins = cors_origins(env, web_port);
        let jwt_exp_minutes =
            match env.get_or("SVC_JWT_EXP_MINUTES", &DEFAULT_JWT_EXP_MINUTES.to_string()).trim().parse() {
                Ok(n) if n > 0 => n,
                _ => {
                    env.report("SVC_JWT_EXP_MINUTES", "must be a positive whole number of minutes");
                    DEFAULT_JWT_EXP_MINUTES
                }
            };
        ApiConfig {
            cors_origins,
            jwt_exp_minutes,
            disallow_master: env.flag(DISALLOW_MASTER_VAR, true),
            jwt_secret: env.secret("SVC_JWT_SECRET"),
            admin_user: env.non_empty_or("SVC_ADMIN_USER", "admin"),
            admin_password: env.secret("SVC_ADMIN_PASSWORD"),
            host: env.non_empty_or("SVC_API_HOST", "127.0.0.1"),
            port: env.port("SVC_API_PORT", 8000),
            developer: env.flag("SVC_DEVELOPER", false),
            developer_tracing: env.flag("SVC_DEVELOPER_TRACING", false),
            embed_profiler: env.flag("SVC_EMBED_PROFILER", false),
            embed_collector: env.flag("SVC_EMBED_COLLECTOR", false),
            embed_webhook: env.flag("SVC_EMBED_WEBHOOK", false),
            limiter_enabled: env.flag("SVC_LIMITER_ENABLED", true),
            contract_test: env.flag("SVC_CONTRACT_TEST", false),
            canary_http_base: env.non_empty("SVC_CANARY_HTTP_BASE"),
            canary_dns: canary_dns(env),
            canary_triggers_per_minute: env.count("SVC_CANARY_TRIGGERS_PER_MINUTE", 60, 1..=1_000_000) as u32,
            profile_requests: env.flag("SVC_PROFILE_REQUESTS", false),
            profile_dir: PathBuf::from(env.get_or("SVC_PROFILE_DIR", &data_dir.join("profiles").to_string_lossy())),
            unit_cache: env.seconds("SVC_UNIT_CACHE_SECS", 30.0),
            unit_dirs: env
                .non_empty("SVC_UNIT_DIRS")
                .map(|dirs| dirs.split(':').filter(|d| !d.is_empty()).map(PathBuf::from).collect()),
            read_cache_reuse: env.millis("SVC_READ_CACHE_MS", 500, 0..=1000),
            read_cache_bytes: env.count("SVC_READ_CACHE_BYTES", 16 << 20, 0..=1 << 30),
            sse_max_per_user: env.count("SVC_SSE_MAX_PER_USER", 5, 1..=10_000) as u32,
            enroll_ttl: env.seconds("SVC_SWARM_ENROLL_TTL_S", 300.0),
            bundle_binary: env.non_empty("SVC_SWARM_BUNDLE_BIN").map(PathBuf::from),
            sse_recheck: sse_recheck(env),
        }
    }

    pub fn binds_loopback(&self) -> bool {
        rules::is_loopback_host(&self.host)
    }
}

/// `SVC_CANARY_DNS_ZONE`, `SVC_CANARY_DNS_LISTEN` and `SVC_CANARY_DNS_ANSWER`, each read (so each is
/// listed) and judged whether or not the zone is set.
fn canary_dns(env: &mut Env) -> Option<CanaryDns> {
    let zone = env.non_empty("SVC_CANARY_DNS_ZONE");
    let listen = env.non_empty_or("SVC_CANARY_DNS_LISTEN", "0.0.0.0:53");
    let answer = env.non_empty("SVC_CANARY_DNS_ANSWER");
    let listen = listen.parse::<SocketAddr>().map_err(|_| {
        env.report("SVC_CANARY_DNS_LISTEN", format!("{listen:?} is not an address and port such as 0.0.0.0:53"));
    });
    let answer = answer.map(|text| text.parse::<Ipv4Addr>()).transpose().map_err(|_| {
        env.report("SVC_CANARY_DNS_ANSWER", "must be an IPv4 address");
    });
    let zone = DnsZone::parse(&zone?).map_err(|problem| env.report("SVC_CANARY_DNS_ZONE", problem));
    Some(CanaryDns { zone: zone.ok()?, listen: listen.ok()?, answer: answer.ok()? })
}

/// `SVC_SSE_RECHECK_SECS`: a revocation must reach open streams within about 10 seconds.
fn sse_recheck(env: &mut Env) -> Duration {
    let every = env.seconds("SVC_SSE_RECHECK_SECS", MAX_SSE_RECHECK.as_secs_f64());
    if every > MAX_SSE_RECHECK {
        env.report("SVC_SSE_RECHECK_SECS", "must be at most 10 seconds");
        return MAX_SSE_RECHECK;
    }
    every
}

/// The listed origins without a trailing `/`; a refused `*` is left out.
fn cors_origins(env: &mut Env, web_port: u16) -> Vec<String> {
    let raw = env.get_or("SVC_CORS_ORIGINS", &format!("http://localhost:{web_port}"));
    let origins: Vec<String> =
        raw.split(',').map(|o| o.trim().trim_end_matches('/').to_string()).filter(|o| !o.is_empty()).collect();
    env.report_all(rules::cors_origins(&origins));
    origins.into_iter().filter(|o| o != "*").collect()
}
