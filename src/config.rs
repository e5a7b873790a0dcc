//! The one typed `Config`, read once from the `SVC_*` environment, and every startup validation rule
//! of the spec. Parsing collects every problem instead of stopping at the first, so an operator fixes
//! a bad configuration in one round; no message ever contains the value of a secret.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::auth::password::{self, PolicyError};

/// The role this host plays in the fleet (`SVC_MODE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Master,
    Agent,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Master => "master",
            Mode::Agent => "agent",
        }
    }
}

/// How log lines are written (`SVC_LOG_FORMAT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    /// One JSON object per line, for journald or Loki.
    Json,
}

/// A value that must never reach a log line or an error body: `Debug` redacts it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Which repository backend to use, chosen once here (`SVC_DB_TYPE`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DatabaseConfig {
    /// A sqlite file in WAL mode (`SVC_DB_PATH`).
    Sqlite { path: PathBuf },
    /// MySQL or MariaDB (`SVC_DB_URL`, which may carry a password, hence a `Secret`).
    Mysql { url: Secret },
}

#[derive(Clone, Debug)]
pub struct Config {
    pub mode: Mode,
    pub disallow_master: bool,
    pub jwt_secret: Option<Secret>,
    pub jwt_exp_minutes: u32,
    pub admin_user: String,
    pub admin_password: Option<Secret>,
    pub cors_origins: Vec<String>,
    pub api_host: String,
    pub api_port: u16,
    pub web_port: u16,
    pub developer: bool,
    pub developer_tracing: bool,
    pub embed_collector: bool,
    pub embed_profiler: bool,
    pub embed_sniffer: bool,
    pub data_dir: PathBuf,
    /// `None` when set to the empty string: the collector then refuses to start.
    pub ingest_log_file: Option<PathBuf>,
    /// Lines the ingester stores per transaction at most (`SVC_INGEST_BATCH_SIZE`, default 20000).
    pub ingest_batch_size: usize,
    /// How long a started batch may wait for more lines while the file keeps growing
    /// (`SVC_INGEST_BATCH_MAX_WAIT_MS`, default 250).
    pub ingest_batch_wait: Duration,
    /// How long an ingester's lease on its file lasts unless renewed (`SVC_INGEST_LEASE_SECS`,
    /// default 15): the longest a standby waits after the holder died.
    pub ingest_lease: Duration,
    /// How often a caught-up profiler looks for new log rows without a bus notice
    /// (`SVC_PROFILER_POLL_MS`, default 2000); with a bus it wakes on every stored batch.
    pub profiler_poll: Duration,
    pub database: DatabaseConfig,
    pub nats_url: Option<String>,
    pub limiter_enabled: bool,
    pub contract_test: bool,
    /// `SVC_TESTING=1`: the only switch that relaxes secret strength and public-binding rules.
    pub testing: bool,
    pub webhook_allow_private: bool,
    pub verify_hostname: bool,
    pub canary_http_base: Option<String>,
    pub profile_requests: bool,
    pub profile_dir: PathBuf,
    pub log_format: LogFormat,
    /// How often a process sends its heartbeat (`SVC_HEARTBEAT_SECS`, default 30).
    pub heartbeat_interval: Duration,
    /// A worker not heard from for this long is `stale` (`SVC_WORKER_STALE_SECS`, default 90).
    pub worker_stale_after: Duration,
    /// How long the installed-unit listing is reused (`SVC_UNIT_CACHE_SECS`, default 30).
    pub unit_cache: Duration,
    /// Where to look for unit files instead of asking systemd (`SVC_UNIT_DIRS`, `:`-separated).
    pub unit_dirs: Option<Vec<PathBuf>>,
    /// Event streams one user may hold open at once (`SVC_SSE_MAX_PER_USER`, default 5).
    pub sse_max_per_user: u32,
}

/// One thing wrong with the configuration, naming the variable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigProblem {
    pub var: &'static str,
    pub message: String,
}

impl fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.var, self.message)
    }
}

/// Every problem found, reported together.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError(pub Vec<ConfigProblem>);

impl ConfigError {
    /// `Ok` when there is no problem, else every problem as one error.
    pub fn check(problems: Vec<ConfigProblem>) -> Result<(), ConfigError> {
        if problems.is_empty() { Ok(()) } else { Err(ConfigError(problems)) }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid configuration ({} problem", self.0.len())?;
        if self.0.len() != 1 {
            f.write_str("s")?;
        }
        f.write_str("):")?;
        for problem in &self.0 {
            write!(f, "\n  - {problem}")?;
        }
        Ok(())
    }
}

/// Secrets seen in tutorials, sample files and defaults; an attacker tries these first.
const INSECURE_JWT_SECRETS: &[&str] = &[
    "secret",
    "changeme",
    "change-me",
    "change_me",
    "changethis",
    "jwt-secret",
    "jwt_secret",
    "jwtsecret",
    "your-secret-key",
    "your_secret_key",
    "supersecret",
    "super-secret",
    "super-secret-key",
    "mysecret",
    "default",
    "password",
    "admin",
    "test",
    "testing",
    "development",
    "svc",
    "decnet",
    "please-change-me",
    "insecure",
];

/// HS256 keys shorter than this are guessable offline from a single token.
const MIN_JWT_SECRET_LEN: usize = 32;

const BAD_ADMIN_PASSWORDS: &[&str] = &[
    "admin",
    "password",
    "changeme",
    "letmein",
    "secret",
    "default",
    "administrator",
    "admin123",
    "admin12345",
    "password123",
    "password1234",
    "adminadmin",
    "adminpassword",
    "changeme123",
    "123456789012",
    "qwertyuiop12",
    "qwerty123456",
];

impl Config {
    /// Reads the process environment. Only type and range errors are problems here; what `svc api`
    /// additionally needs is checked by [`Config::for_api`].
    pub fn from_env() -> Result<Config, ConfigError> {
        Self::from_vars(std::env::vars())
    }

    /// Reads the process environment for `svc api`: everything [`Config::from_env`] checks plus the
    /// secrets, CORS and public-binding rules, all reported at once.
    pub fn for_api_from_env() -> Result<Config, ConfigError> {
        Self::for_api(std::env::vars())
    }

    pub fn from_vars(vars: impl IntoIterator<Item = (String, String)>) -> Result<Config, ConfigError> {
        let (config, problems) = parse(vars);
        ConfigError::check(problems).map(|()| config)
    }

    pub fn for_api(vars: impl IntoIterator<Item = (String, String)>) -> Result<Config, ConfigError> {
        let (config, mut problems) = parse(vars);
        problems.extend(config.api_problems());
        ConfigError::check(problems).map(|()| config)
    }

    /// Every rule the master API enforces before it starts, in the order of the startup steps.
    pub fn api_problems(&self) -> Vec<ConfigProblem> {
        let mut problems = self.public_binding_problems();
        problems.extend(self.master_mode_problems());
        problems.extend(self.jwt_secret_problems());
        problems.extend(self.admin_password_problems());
        problems
    }

    /// The master API does not run on an agent host unless `SVC_DISALLOW_MASTER=false`.
    pub fn master_mode_problems(&self) -> Vec<ConfigProblem> {
        if self.mode == Mode::Agent && self.disallow_master {
            return vec![problem(
                "SVC_MODE",
                "is `agent`, and the master API is master-only: it does not start on an agent host \
                 (SVC_DISALLOW_MASTER=false overrides)",
            )];
        }
        vec![]
    }

    /// `SVC_JWT_SECRET` is present and, unless `SVC_TESTING=1`, not guessable.
    pub fn jwt_secret_problems(&self) -> Vec<ConfigProblem> {
        let var = "SVC_JWT_SECRET";
        let Some(secret) = &self.jwt_secret else {
            return vec![problem(var, "is required (generate one with `openssl rand -hex 32`)")];
        };
        if self.testing {
            return vec![];
        }
        let value = secret.expose();
        if INSECURE_JWT_SECRETS.contains(&value.to_ascii_lowercase().as_str()) {
            return vec![problem(var, "is a known-insecure value; generate one with `openssl rand -hex 32`")];
        }
        if value.chars().count() < MIN_JWT_SECRET_LEN {
            return vec![problem(
                var,
                format!("is shorter than {MIN_JWT_SECRET_LEN} characters; generate one with `openssl rand -hex 32`"),
            )];
        }
        if value.chars().all(|c| value.starts_with(c)) {
            return vec![problem(var, "repeats a single character; generate one with `openssl rand -hex 32`")];
        }
        vec![]
    }

    /// `SVC_ADMIN_PASSWORD` is present, within the password limits and, unless `SVC_TESTING=1`,
    /// not a password attackers try first.
    pub fn admin_password_problems(&self) -> Vec<ConfigProblem> {
        let var = "SVC_ADMIN_PASSWORD";
        let Some(secret) = &self.admin_password else {
            return vec![problem(var, "is required")];
        };
        let value = secret.expose();
        match password::check_policy(value) {
            // Never relaxed: a longer password cannot be hashed without truncating it.
            Err(err @ PolicyError::TooLong) => return vec![problem(var, format!("is invalid: {err}"))],
            _ if self.testing => return vec![],
            Err(err) => return vec![problem(var, format!("is invalid: {err}"))],
            Ok(()) => {}
        }
        if BAD_ADMIN_PASSWORDS.contains(&value.to_lowercase().as_str()) {
            return vec![problem(var, "is a known-bad password; choose another")];
        }
        vec![]
    }

    /// The rules for an API reachable from other hosts; relaxed only by `SVC_TESTING=1`.
    pub fn public_binding_problems(&self) -> Vec<ConfigProblem> {
        if self.testing || self.binds_loopback() {
            return vec![];
        }
        let mut problems = Vec::new();
        for origin in &self.cors_origins {
            if origin_host(origin).is_some_and(is_loopback_host) {
                problems.push(problem(
                    "SVC_CORS_ORIGINS",
                    format!("contains the loopback origin {origin} while SVC_API_HOST is not loopback"),
                ));
            }
        }
        if let Some(base) = &self.canary_http_base
            && base.to_ascii_lowercase().starts_with("http://")
            && !origin_host(base).is_some_and(is_loopback_host)
        {
            problems.push(problem(
                "SVC_CANARY_HTTP_BASE",
                "is plaintext http:// to a non-loopback host while SVC_API_HOST is not loopback; use https://",
            ));
        }
        problems
    }

    pub fn binds_loopback(&self) -> bool {
        is_loopback_host(&self.api_host)
    }
}

fn problem(var: &'static str, message: impl Into<String>) -> ConfigProblem {
    ConfigProblem { var, message: message.into() }
}

/// Parses every variable, falling back to the default where a value is bad so that the remaining
/// rules can still be checked and reported.
fn parse(vars: impl IntoIterator<Item = (String, String)>) -> (Config, Vec<ConfigProblem>) {
    let mut env = Env { vars: vars.into_iter().filter(|(k, _)| k.starts_with("SVC_")).collect(), problems: Vec::new() };

    let mode = match env.get("SVC_MODE").map(|v| v.trim().to_ascii_lowercase()) {
        None => Mode::Master,
        Some(v) if v == "master" => Mode::Master,
        Some(v) if v == "agent" => Mode::Agent,
        Some(_) => {
            env.report("SVC_MODE", "must be `master` or `agent`");
            Mode::Master
        }
    };
    let web_port = env.port("SVC_WEB_PORT", 8080);
    let cors_origins = env.cors_origins(web_port);
    let data_dir = PathBuf::from(env.get("SVC_DATA_DIR").unwrap_or_else(|| "data".into()));
    let database = env.database(&data_dir);
    let ingest_log_file = match env.get("SVC_INGEST_LOG_FILE") {
        None => Some(data_dir.join("ingest.log")),
        Some(v) if v.trim().is_empty() => None,
        Some(v) => Some(PathBuf::from(v)),
    };
    let jwt_exp_minutes = match env.get("SVC_JWT_EXP_MINUTES") {
        None => 240,
        Some(v) => match v.trim().parse::<u32>() {
            Ok(n) if n > 0 => n,
            _ => {
                env.report("SVC_JWT_EXP_MINUTES", "must be a positive whole number of minutes");
                240
            }
        },
    };
    let log_format = match env.get("SVC_LOG_FORMAT").map(|v| v.trim().to_ascii_lowercase()) {
        None => LogFormat::Text,
        Some(v) if v == "text" => LogFormat::Text,
        Some(v) if v == "json" => LogFormat::Json,
        Some(_) => {
            env.report("SVC_LOG_FORMAT", "must be `text` or `json`");
            LogFormat::Text
        }
    };

    let config = Config {
        mode,
        disallow_master: env.flag("SVC_DISALLOW_MASTER", true),
        jwt_secret: env.secret("SVC_JWT_SECRET"),
        jwt_exp_minutes,
        admin_user: env.non_empty("SVC_ADMIN_USER").unwrap_or_else(|| "admin".into()),
        admin_password: env.secret("SVC_ADMIN_PASSWORD"),
        cors_origins,
        api_host: env.non_empty("SVC_API_HOST").unwrap_or_else(|| "127.0.0.1".into()),
        api_port: env.port("SVC_API_PORT", 8000),
        web_port,
        developer: env.flag("SVC_DEVELOPER", false),
        developer_tracing: env.flag("SVC_DEVELOPER_TRACING", false),
        embed_collector: env.flag("SVC_EMBED_COLLECTOR", false),
        embed_profiler: env.flag("SVC_EMBED_PROFILER", false),
        embed_sniffer: env.flag("SVC_EMBED_SNIFFER", false),
        ingest_log_file,
        database,
        nats_url: env.non_empty("SVC_NATS_URL"),
        limiter_enabled: env.flag("SVC_LIMITER_ENABLED", true),
        contract_test: env.flag("SVC_CONTRACT_TEST", false),
        // Exactly `1`: no other spelling and no other variable may relax validation.
        testing: env.get("SVC_TESTING").is_some_and(|v| v.trim() == "1"),
        webhook_allow_private: env.flag("SVC_WEBHOOK_ALLOW_PRIVATE", false),
        verify_hostname: env.flag("SVC_VERIFY_HOSTNAME", true),
        canary_http_base: env.non_empty("SVC_CANARY_HTTP_BASE"),
        profile_requests: env.flag("SVC_PROFILE_REQUESTS", false),
        profile_dir: env.get("SVC_PROFILE_DIR").map(PathBuf::from).unwrap_or_else(|| data_dir.join("profiles")),
        log_format,
        ingest_batch_size: env.count("SVC_INGEST_BATCH_SIZE", 20_000, 1..=100_000),
        ingest_batch_wait: Duration::from_millis(env.count("SVC_INGEST_BATCH_MAX_WAIT_MS", 250, 1..=60_000) as u64),
        ingest_lease: env.seconds("SVC_INGEST_LEASE_SECS", 15.0),
        profiler_poll: Duration::from_millis(env.count("SVC_PROFILER_POLL_MS", 2_000, 10..=600_000) as u64),
        heartbeat_interval: env.seconds("SVC_HEARTBEAT_SECS", 30.0),
        worker_stale_after: env.seconds("SVC_WORKER_STALE_SECS", 90.0),
        unit_cache: env.seconds("SVC_UNIT_CACHE_SECS", 30.0),
        unit_dirs: env
            .non_empty("SVC_UNIT_DIRS")
            .map(|dirs| dirs.split(':').filter(|d| !d.is_empty()).map(PathBuf::from).collect()),
        sse_max_per_user: env.count("SVC_SSE_MAX_PER_USER", 5, 1..=10_000) as u32,
        data_dir,
    };
    (config, env.problems)
}

struct Env {
    vars: HashMap<String, String>,
    problems: Vec<ConfigProblem>,
}

impl Env {
    fn get(&self, var: &str) -> Option<String> {
        self.vars.get(var).cloned()
    }

    fn non_empty(&self, var: &str) -> Option<String> {
        self.get(var).map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
    }

    fn secret(&self, var: &str) -> Option<Secret> {
        self.get(var).filter(|v| !v.is_empty()).map(Secret)
    }

    fn report(&mut self, var: &'static str, message: impl Into<String>) {
        self.problems.push(problem(var, message));
    }

    fn flag(&mut self, var: &'static str, default: bool) -> bool {
        let Some(value) = self.get(var) else { return default };
        match value.trim().to_ascii_lowercase().as_str() {
            "" => default,
            "1" | "true" | "yes" | "on" => true,
            "0" | "false" | "no" | "off" => false,
            _ => {
                self.report(var, "must be true or false");
                default
            }
        }
    }

    fn port(&mut self, var: &'static str, default: u16) -> u16 {
        let Some(value) = self.get(var) else { return default };
        match value.trim().parse::<u32>() {
            Ok(port @ 1..=65535) => port as u16,
            _ => {
                self.report(var, "must be a port number in 1..65535");
                default
            }
        }
    }

    /// A whole number within `range`.
    fn count(&mut self, var: &'static str, default: usize, range: std::ops::RangeInclusive<usize>) -> usize {
        let Some(value) = self.non_empty(var) else { return default };
        match value.parse::<usize>() {
            Ok(n) if range.contains(&n) => n,
            _ => {
                self.report(var, format!("must be a whole number in {}..={}", range.start(), range.end()));
                default
            }
        }
    }

    /// A positive number of seconds, fractions allowed (tests use short windows).
    fn seconds(&mut self, var: &'static str, default: f64) -> Duration {
        let Some(value) = self.non_empty(var) else { return Duration::from_secs_f64(default) };
        match value.parse::<f64>() {
            Ok(secs) if secs > 0.0 && secs <= 86_400.0 => Duration::from_secs_f64(secs),
            _ => {
                self.report(var, "must be a positive number of seconds, at most 86400");
                Duration::from_secs_f64(default)
            }
        }
    }

    fn cors_origins(&mut self, web_port: u16) -> Vec<String> {
        let Some(raw) = self.get("SVC_CORS_ORIGINS") else {
            return vec![format!("http://localhost:{web_port}")];
        };
        let origins: Vec<String> =
            raw.split(',').map(|o| o.trim().trim_end_matches('/').to_string()).filter(|o| !o.is_empty()).collect();
        if origins.iter().any(|o| o == "*") {
            self.report("SVC_CORS_ORIGINS", "must list origins explicitly; the wildcard `*` is not allowed");
        }
        for origin in origins.iter().filter(|o| *o != "*") {
            if origin_host(origin).is_none() || origin.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
            {
                self.report(
                    "SVC_CORS_ORIGINS",
                    format!("`{origin}` is not an origin like https://dashboard.example:8443"),
                );
            }
        }
        origins.into_iter().filter(|o| o != "*").collect()
    }

    fn database(&mut self, data_dir: &std::path::Path) -> DatabaseConfig {
        let kind = self.get("SVC_DB_TYPE").map(|v| v.trim().to_ascii_lowercase());
        match kind.as_deref() {
            None | Some("") | Some("sqlite") => DatabaseConfig::Sqlite {
                path: self.non_empty("SVC_DB_PATH").map(PathBuf::from).unwrap_or_else(|| data_dir.join("svc.db")),
            },
            Some("mysql") => {
                let url = self.non_empty("SVC_DB_URL").unwrap_or_default();
                if url.is_empty() {
                    self.report(
                        "SVC_DB_URL",
                        "is required when SVC_DB_TYPE=mysql (mysql://user:password@host:3306/db)",
                    );
                } else if !url.starts_with("mysql://") && !url.starts_with("mariadb://") {
                    self.report("SVC_DB_URL", "must start with mysql:// when SVC_DB_TYPE=mysql");
                } else if mysql_database_name(&url).is_none() {
                    self.report("SVC_DB_URL", "must name a database (mysql://user:password@host:3306/svc)");
                }
                DatabaseConfig::Mysql { url: Secret(url) }
            }
            Some(_) => {
                self.report("SVC_DB_TYPE", "must be `sqlite` or `mysql`");
                DatabaseConfig::Sqlite { path: data_dir.join("svc.db") }
            }
        }
    }
}

/// The database of `mysql://[user[:password]@]host[:port]/database[?options]`.
fn mysql_database_name(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let path = rest.split_once('/')?.1;
    let name = path.split(['?', '#']).next()?;
    (!name.is_empty() && !name.contains('/')).then_some(name)
}

/// The host of `scheme://host[:port][/path]`, without brackets around an IPv6 literal.
fn origin_host(origin: &str) -> Option<&str> {
    let (scheme, rest) = origin.split_once("://")?;
    if scheme.is_empty() || !scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let host =
        if let Some(v6) = authority.strip_prefix('[') { v6.split_once(']')?.0 } else { authority.split(':').next()? };
    (!host.is_empty()).then_some(host)
}

pub fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.eq_ignore_ascii_case("localhost") || host.to_ascii_lowercase().ends_with(".localhost") {
        return true;
    }
    host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD_SECRET: &str = "b1f9c0e4d2a7c3e8f5a6b9d0c1e2f3a4";
    const GOOD_PASSWORD: &str = "correct horse battery";

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut all = vec![
            ("SVC_JWT_SECRET".to_string(), GOOD_SECRET.to_string()),
            ("SVC_ADMIN_PASSWORD".to_string(), GOOD_PASSWORD.to_string()),
        ];
        for (k, v) in pairs {
            all.retain(|(key, _)| key != k);
            all.push((k.to_string(), v.to_string()));
        }
        all
    }

    fn api_problems(pairs: &[(&str, &str)]) -> Vec<ConfigProblem> {
        match Config::for_api(vars(pairs)) {
            Ok(_) => vec![],
            Err(ConfigError(problems)) => problems,
        }
    }

    fn vars_named(problems: &[ConfigProblem]) -> Vec<&'static str> {
        problems.iter().map(|p| p.var).collect()
    }

    #[test]
    fn defaults_are_the_spec_defaults() {
        let config = Config::for_api(vars(&[])).unwrap();
        assert_eq!(config.mode, Mode::Master);
        assert!(config.disallow_master);
        assert_eq!(config.jwt_exp_minutes, 240);
        assert_eq!(config.cors_origins, vec!["http://localhost:8080"]);
        assert_eq!(config.admin_user, "admin");
        assert!(!config.embed_collector && !config.embed_profiler && !config.embed_sniffer);
        assert!(config.limiter_enabled && config.verify_hostname);
        assert!(!config.contract_test && !config.testing && !config.developer);
        assert_eq!(config.database, DatabaseConfig::Sqlite { path: PathBuf::from("data/svc.db") });
        assert_eq!(config.log_format, LogFormat::Text);
    }

    #[test]
    fn missing_secrets_are_each_named() {
        let problems = Config::for_api(Vec::new()).unwrap_err().0;
        assert_eq!(vars_named(&problems), vec!["SVC_JWT_SECRET", "SVC_ADMIN_PASSWORD"]);
    }

    #[test]
    fn insecure_jwt_secrets_are_rejected_without_echoing_them() {
        for bad in ["secret", "CHANGEME", "your-secret-key", "short-but-random-x9", &"a".repeat(40)] {
            let problems = api_problems(&[("SVC_JWT_SECRET", bad)]);
            assert_eq!(vars_named(&problems), vec!["SVC_JWT_SECRET"], "{bad}");
            let text = ConfigError(problems).to_string();
            assert!(!text.contains(bad), "message echoes the secret: {text}");
        }
    }

    #[test]
    fn known_bad_admin_passwords_are_rejected_without_echoing_them() {
        for bad in ["admin", "Password", "password123", "tiny-pw", "Password1234", "ADMINPASSWORD"] {
            let problems = api_problems(&[("SVC_ADMIN_PASSWORD", bad)]);
            assert_eq!(vars_named(&problems), vec!["SVC_ADMIN_PASSWORD"], "{bad}");
            assert!(!ConfigError(problems).to_string().contains(bad));
        }
        let long = "x".repeat(password::MAX_BYTES + 1);
        assert_eq!(vars_named(&api_problems(&[("SVC_ADMIN_PASSWORD", &long)])), vec!["SVC_ADMIN_PASSWORD"]);
    }

    #[test]
    fn wildcard_cors_origin_is_rejected() {
        let problems = api_problems(&[("SVC_CORS_ORIGINS", "https://a.example, *")]);
        assert_eq!(vars_named(&problems), vec!["SVC_CORS_ORIGINS"]);
        assert!(problems[0].message.contains('*'));
    }

    #[test]
    fn malformed_cors_origin_is_rejected() {
        assert_eq!(vars_named(&api_problems(&[("SVC_CORS_ORIGINS", "dashboard.example")])), vec!["SVC_CORS_ORIGINS"]);
    }

    #[test]
    fn ports_must_be_in_range() {
        for bad in ["0", "65536", "-1", "http", ""] {
            let problems = api_problems(&[("SVC_API_PORT", bad), ("SVC_WEB_PORT", bad)]);
            assert_eq!(vars_named(&problems), vec!["SVC_WEB_PORT", "SVC_API_PORT"], "{bad:?}");
        }
        let config = Config::for_api(vars(&[("SVC_API_PORT", "1"), ("SVC_WEB_PORT", "65535")])).unwrap();
        assert_eq!((config.api_port, config.web_port), (1, 65535));
    }

    #[test]
    fn jwt_lifetime_must_be_positive() {
        for bad in ["0", "-5", "ten", "1.5"] {
            assert_eq!(vars_named(&api_problems(&[("SVC_JWT_EXP_MINUTES", bad)])), vec!["SVC_JWT_EXP_MINUTES"]);
        }
        assert_eq!(Config::for_api(vars(&[("SVC_JWT_EXP_MINUTES", "15")])).unwrap().jwt_exp_minutes, 15);
    }

    #[test]
    fn public_binding_refuses_loopback_cors_origin() {
        for origin in ["http://localhost:8080", "http://127.0.0.1:3000", "http://[::1]:8080"] {
            let problems = api_problems(&[("SVC_API_HOST", "0.0.0.0"), ("SVC_CORS_ORIGINS", origin)]);
            assert_eq!(vars_named(&problems), vec!["SVC_CORS_ORIGINS"], "{origin}");
        }
        let ok = [("SVC_API_HOST", "0.0.0.0"), ("SVC_CORS_ORIGINS", "https://dash.example")];
        assert!(api_problems(&ok).is_empty());
    }

    #[test]
    fn loopback_binding_allows_loopback_cors_origin() {
        for host in ["127.0.0.1", "localhost", "::1"] {
            assert!(api_problems(&[("SVC_API_HOST", host)]).is_empty(), "{host}");
        }
    }

    #[test]
    fn public_binding_refuses_plaintext_remote_canary_base() {
        let public = [("SVC_API_HOST", "10.0.0.5"), ("SVC_CORS_ORIGINS", "https://dash.example")];
        let with = |canary: &'static str| {
            let mut pairs = public.to_vec();
            pairs.push(("SVC_CANARY_HTTP_BASE", canary));
            api_problems(&pairs)
        };
        assert_eq!(vars_named(&with("http://canary.example")), vec!["SVC_CANARY_HTTP_BASE"]);
        assert_eq!(vars_named(&with("HTTP://canary.example:80/x")), vec!["SVC_CANARY_HTTP_BASE"]);
        assert!(with("https://canary.example").is_empty());
        assert!(with("http://127.0.0.1:9000").is_empty());
    }

    #[test]
    fn only_svc_testing_1_relaxes_validation() {
        let weak = [
            ("SVC_JWT_SECRET", "secret"),
            ("SVC_ADMIN_PASSWORD", "admin"),
            ("SVC_API_HOST", "0.0.0.0"),
            ("SVC_CANARY_HTTP_BASE", "http://canary.example"),
        ];
        let expected = vec!["SVC_CORS_ORIGINS", "SVC_CANARY_HTTP_BASE", "SVC_JWT_SECRET", "SVC_ADMIN_PASSWORD"];
        assert_eq!(vars_named(&api_problems(&weak)), expected);

        let mut relaxed = weak.to_vec();
        relaxed.push(("SVC_TESTING", "1"));
        assert!(api_problems(&relaxed).is_empty());

        for marker in
            [("SVC_TESTING", "true"), ("SVC_TESTING", "yes"), ("SVC_DEVELOPER", "true"), ("SVC_CONTRACT_TEST", "true")]
        {
            let mut pairs = weak.to_vec();
            pairs.push(marker);
            assert_eq!(vars_named(&api_problems(&pairs)), expected, "{marker:?} must not relax validation");
        }
        // Variables outside the SVC_ namespace (CI, PYTEST_CURRENT_TEST, …) are never read.
        let mut pairs = vars(&weak);
        pairs.push(("CI".into(), "true".into()));
        pairs.push(("TESTING".into(), "1".into()));
        assert_eq!(vars_named(&Config::for_api(pairs).unwrap_err().0), expected);
    }

    #[test]
    fn svc_testing_still_requires_the_secrets() {
        let problems = Config::for_api(vec![("SVC_TESTING".to_string(), "1".to_string())]).unwrap_err().0;
        assert_eq!(vars_named(&problems), vec!["SVC_JWT_SECRET", "SVC_ADMIN_PASSWORD"]);
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let problems = api_problems(&[
            ("SVC_JWT_SECRET", "changeme"),
            ("SVC_API_PORT", "99999"),
            ("SVC_CORS_ORIGINS", "*"),
            ("SVC_JWT_EXP_MINUTES", "0"),
            ("SVC_DB_TYPE", "postgres"),
            ("SVC_MODE", "replica"),
            ("SVC_DEVELOPER", "maybe"),
        ]);
        let mut named = vars_named(&problems);
        named.sort();
        assert_eq!(
            named,
            vec![
                "SVC_API_PORT",
                "SVC_CORS_ORIGINS",
                "SVC_DB_TYPE",
                "SVC_DEVELOPER",
                "SVC_JWT_EXP_MINUTES",
                "SVC_JWT_SECRET",
                "SVC_MODE"
            ]
        );
    }

    #[test]
    fn mysql_needs_a_url_and_keeps_it_secret() {
        assert_eq!(vars_named(&api_problems(&[("SVC_DB_TYPE", "mysql")])), vec!["SVC_DB_URL"]);
        for bad in ["postgres://h/db", "mysql://root@db:3306", "mysql://root@db:3306/", "mysql://db/?ssl-mode=required"]
        {
            let problems = api_problems(&[("SVC_DB_TYPE", "mysql"), ("SVC_DB_URL", bad)]);
            assert_eq!(vars_named(&problems), vec!["SVC_DB_URL"], "{bad}");
        }
        let good =
            Config::for_api(vars(&[("SVC_DB_TYPE", "mysql"), ("SVC_DB_URL", "mysql://db/svc?ssl-mode=required")]));
        assert!(good.is_ok());
        let config =
            Config::for_api(vars(&[("SVC_DB_TYPE", "MySQL"), ("SVC_DB_URL", "mysql://root:hunter2@db:3306/svc")]))
                .unwrap();
        assert!(matches!(config.database, DatabaseConfig::Mysql { .. }));
        assert!(!format!("{config:?}").contains("hunter2"));
        assert!(!format!("{config:?}").contains(GOOD_SECRET));
    }

    #[test]
    fn an_agent_host_is_refused_unless_allowed() {
        for (mode, disallow) in [("agent", None), ("Agent", Some("TRUE")), ("AGENT", Some("true"))] {
            let mut pairs = vec![("SVC_MODE", mode)];
            pairs.extend(disallow.map(|d| ("SVC_DISALLOW_MASTER", d)));
            let problems = api_problems(&pairs);
            assert_eq!(vars_named(&problems), vec!["SVC_MODE"]);
            assert!(problems[0].message.contains("master-only"));
        }
        assert!(api_problems(&[("SVC_MODE", "agent"), ("SVC_DISALLOW_MASTER", "false")]).is_empty());
        assert!(api_problems(&[("SVC_MODE", "master")]).is_empty());
    }

    #[test]
    fn mode_and_flags_are_case_insensitive() {
        let config = Config::for_api(vars(&[("SVC_MODE", "AGENT"), ("SVC_DISALLOW_MASTER", "False")])).unwrap();
        assert_eq!(config.mode, Mode::Agent);
        assert!(!config.disallow_master);
    }

    #[test]
    fn other_commands_do_not_need_the_api_secrets() {
        assert!(Config::from_vars(Vec::new()).is_ok());
    }

    #[test]
    fn empty_ingest_log_file_means_none() {
        assert_eq!(Config::for_api(vars(&[("SVC_INGEST_LOG_FILE", "")])).unwrap().ingest_log_file, None);
    }

    #[test]
    fn profiler_poll_is_in_milliseconds() {
        assert_eq!(Config::from_vars(Vec::new()).unwrap().profiler_poll, Duration::from_secs(2));
        let config = Config::from_vars(vars(&[("SVC_PROFILER_POLL_MS", "50")])).unwrap();
        assert_eq!(config.profiler_poll, Duration::from_millis(50));
        let err = Config::from_vars(vars(&[("SVC_PROFILER_POLL_MS", "0")])).unwrap_err();
        assert_eq!(err.0[0].var, "SVC_PROFILER_POLL_MS");
    }

    #[test]
    fn worker_windows_default_to_the_spec_and_accept_fractions() {
        let config = Config::from_vars(Vec::new()).unwrap();
        assert_eq!(
            (config.heartbeat_interval, config.worker_stale_after, config.unit_cache, config.unit_dirs),
            (Duration::from_secs(30), Duration::from_secs(90), Duration::from_secs(30), None)
        );
        let config = Config::from_vars(vars(&[("SVC_HEARTBEAT_SECS", "0.5"), ("SVC_UNIT_DIRS", "/a::/b")])).unwrap();
        assert_eq!(config.heartbeat_interval, Duration::from_millis(500));
        assert_eq!(config.unit_dirs, Some(vec![PathBuf::from("/a"), PathBuf::from("/b")]));
        let err =
            Config::from_vars(vars(&[("SVC_WORKER_STALE_SECS", "0"), ("SVC_UNIT_CACHE_SECS", "soon")])).unwrap_err();
        let vars: Vec<&str> = err.0.iter().map(|p| p.var).collect();
        assert_eq!(vars, ["SVC_WORKER_STALE_SECS", "SVC_UNIT_CACHE_SECS"]);
    }

    #[test]
    fn the_stream_cap_defaults_to_five_and_must_be_at_least_one() {
        assert_eq!(Config::from_vars(Vec::new()).unwrap().sse_max_per_user, 5);
        assert_eq!(Config::from_vars(vars(&[("SVC_SSE_MAX_PER_USER", " 12 ")])).unwrap().sse_max_per_user, 12);
        for bad in ["0", "-1", "two", "1.5"] {
            let err = Config::from_vars(vars(&[("SVC_SSE_MAX_PER_USER", bad)])).unwrap_err();
            assert_eq!(vars_named(&err.0), ["SVC_SSE_MAX_PER_USER"], "{bad}");
        }
    }
}
