//! The one typed `Config`, read once from the `SVC_*` environment (`env.rs`): a few settings every
//! process shares, then a section per part that reads its own variables (`api`, `db`, `bus`,
//! `fleet`, `ingest`, `profiler`, `collector`, `webhook`, `sniffer`, `prober`, `tarpit`). A new worker adds its section here, named after it, as the ingester and
//! the profiler did. Reading collects every problem instead of stopping at the first, so an operator
//! fixes a bad configuration in one round; every rule beyond a value's type is in `rules.rs`, and no
//! message ever contains the value of a secret. Reading also notes each variable and its default,
//! which is what `svc config` prints (`settings.rs`): a default is written once, in its getter call
//! (the field docs name the variable, not its default).

mod api;
mod bus;
mod db;
mod env;
mod fleet;
mod ingest;
mod prober;
mod profiler;
mod rules;
mod settings;
mod sniffer;
mod swarm;
mod tarpit;
mod telemetry;
mod webhook;
mod worker;

use std::fmt;
use std::path::PathBuf;

pub use crate::fleet::FleetConfig;
pub use crate::swarm::config::SwarmConfig;
pub use crate::traces::OtlpProtocol;
pub use api::ApiConfig;
pub use bus::BusConfig;
pub use fleet::{CollectorConfig, DEFAULT_DOCKER_HOST};
pub use ingest::IngestConfig;
pub use prober::ProberConfig;
pub use profiler::ProfilerConfig;
pub use settings::{Setting, settings};
pub use sniffer::{FLEET_INTERFACES, SnifferConfig};
pub use tarpit::TarpitConfig;
pub use telemetry::TelemetryConfig;
pub use webhook::WebhookConfig;
pub use worker::WorkerConfig;

use crate::db::DatabaseConfig;
use crate::swarm::config::MODE_VAR;
use env::Env;

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

    fn read(env: &mut Env) -> Mode {
        match env.get_or(MODE_VAR, Mode::Master.as_str()).trim().to_ascii_lowercase().as_str() {
            "master" => Mode::Master,
            "agent" => Mode::Agent,
            _ => {
                env.report(MODE_VAR, "must be `master` or `agent`");
                Mode::Master
            }
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

impl LogFormat {
    fn read(env: &mut Env) -> LogFormat {
        match env.get_or("SVC_LOG_FORMAT", "text").trim().to_ascii_lowercase().as_str() {
            "text" => LogFormat::Text,
            "json" => LogFormat::Json,
            _ => {
                env.report("SVC_LOG_FORMAT", "must be `text` or `json`");
                LogFormat::Text
            }
        }
    }
}

#[derive(Clone, Debug)]
pub struct Config {
    pub mode: Mode,
    /// `SVC_DATA_DIR`: where the default paths of the sections live.
    pub data_dir: PathBuf,
    pub log_format: LogFormat,
    /// `SVC_TESTING=1`: the only switch that relaxes secret strength and public-binding rules.
    pub testing: bool,
    pub db: DatabaseConfig,
    pub bus: BusConfig,
    pub api: ApiConfig,
    pub fleet: FleetConfig,
    pub telemetry: TelemetryConfig,
    /// What every worker reads alike; one section per worker from here on.
    pub worker: WorkerConfig,
    pub ingest: IngestConfig,
    pub profiler: ProfilerConfig,
    pub collector: CollectorConfig,
    pub webhook: WebhookConfig,
    pub sniffer: SnifferConfig,
    pub prober: ProberConfig,
    pub tarpit: TarpitConfig,
    pub swarm: SwarmConfig,
}

/// The environment as read, before anything is refused: the `Config`, with the default standing in
/// wherever a value was bad, and every problem reading found. `svc api` hands it to the lifespan,
/// which reports these problems together with the API's own rules.
#[derive(Clone, Debug)]
pub struct Reading {
    pub config: Config,
    pub problems: Vec<ConfigProblem>,
}

impl Reading {
    /// What every command requires: `Ok` when reading found no problem.
    pub fn check(&self) -> Result<(), ConfigError> {
        ConfigError::check(self.problems.clone())
    }

    /// What the master API requires: reading's problems, then every rule the API enforces before
    /// it starts (`rules::for_api`), all as one error.
    pub fn check_for_api(&self) -> Result<(), ConfigError> {
        let mut problems = self.problems.clone();
        problems.extend(rules::for_api(&self.config));
        ConfigError::check(problems)
    }
}

/// A configuration built in code (tests) has nothing left over from reading.
impl From<Config> for Reading {
    fn from(config: Config) -> Reading {
        Reading { config, problems: Vec::new() }
    }
}

impl Config {
    /// The free-disk watermark over the ingest file and the sqlite database (a MySQL database's
    /// disk is its server's).
    pub fn disk_watermark(&self) -> crate::disk_watermark::DiskWatermark {
        let mut watched: Vec<std::path::PathBuf> = self.ingest.log_file.iter().cloned().collect();
        if let DatabaseConfig::Sqlite { path, .. } = &self.db {
            watched.push(path.clone());
        }
        let ingest = &self.ingest;
        crate::disk_watermark::DiskWatermark::new(watched, ingest.disk_min_free_bytes, ingest.low_value_events.clone())
    }

    /// How long log rows are kept, and how often the pruner looks.
    pub fn retention(&self) -> crate::retention::Retention {
        let ingest = &self.ingest;
        crate::retention::Retention {
            max_age: (ingest.retention_days > 0).then(|| chrono::Duration::days(ingest.retention_days as i64)),
            max_rows: (ingest.retention_max_rows > 0).then_some(ingest.retention_max_rows),
            interval: ingest.retention_interval,
        }
    }

    /// Reads the process environment without refusing anything yet: `svc` decides, per command,
    /// whether [`Reading::check`] or [`Reading::check_for_api`] applies.
    pub fn read_env() -> Reading {
        Self::read(std::env::vars())
    }

    /// Reads `vars` and refuses what every command refuses; the master API's rules are
    /// [`Reading::check_for_api`].
    pub fn from_vars(vars: impl IntoIterator<Item = (String, String)>) -> Result<Config, ConfigError> {
        let reading = Self::read(vars);
        reading.check().map(|()| reading.config)
    }

    /// Reads every variable, the shared settings first and then section by section, so problems
    /// are reported in that order.
    pub fn read(vars: impl IntoIterator<Item = (String, String)>) -> Reading {
        let (reading, _) = Self::read_noting(vars);
        reading
    }

    /// [`Config::read`], also returning every variable read with its section and default (what
    /// `svc config` prints). Each `begin_section` names the heading the next variables stand under.
    fn read_noting(vars: impl IntoIterator<Item = (String, String)>) -> (Reading, Vec<env::ReadVar>) {
        let mut env = Env::new(vars);
        env.begin_section("Every process");
        let mode = Mode::read(&mut env);
        let data_dir = PathBuf::from(env.get_or("SVC_DATA_DIR", "data"));
        let log_format = LogFormat::read(&mut env);
        // Exactly `1`: no other spelling and no other variable may relax validation.
        let testing = env.get("SVC_TESTING").is_some_and(|v| v.trim() == "1");
        env.begin_section("Database");
        let db = db::read(&mut env, &data_dir);
        env.begin_section("Bus");
        let bus = BusConfig::read(&mut env);
        env.begin_section("API (`svc api`)");
        let api = ApiConfig::read(&mut env, &data_dir);
        env.begin_section("Fleet, topologies and the mutator");
        let fleet = FleetConfig::read(&mut env, &data_dir);
        env.begin_section("Observability (`/metrics`, traces)");
        let telemetry = TelemetryConfig::read(&mut env);
        env.begin_section("Every worker");
        let worker = WorkerConfig::read(&mut env);
        env.begin_section("Ingest worker");
        let ingest = IngestConfig::read(&mut env, &data_dir);
        env.begin_section("Profiler worker");
        let profiler = ProfilerConfig::read(&mut env);
        env.begin_section("Collector worker");
        let collector = CollectorConfig::read(&mut env, &data_dir);
        env.begin_section("Webhook worker");
        let webhook = WebhookConfig::read(&mut env);
        env.begin_section("Sniffer worker");
        let sniffer = SnifferConfig::read(&mut env);
        env.begin_section("Prober worker");
        let prober = ProberConfig::read(&mut env);
        env.begin_section("Tarpit watcher");
        let tarpit = TarpitConfig::read(&mut env);
        env.begin_section("Swarm (`svc agent`, the master's heartbeat listener)");
        let swarm = SwarmConfig::read(&mut env, &data_dir);
        let config = Config {
            mode,
            log_format,
            testing,
            db,
            bus,
            api,
            fleet,
            telemetry,
            worker,
            ingest,
            profiler,
            collector,
            webhook,
            sniffer,
            prober,
            tarpit,
            swarm,
            data_dir,
        };
        let (problems, read) = env.finish();
        (Reading { config, problems }, read)
    }
}

/// One thing wrong with the configuration, naming the variable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigProblem {
    pub var: &'static str,
    pub message: String,
}

impl ConfigProblem {
    pub fn new(var: &'static str, message: impl Into<String>) -> ConfigProblem {
        ConfigProblem { var, message: message.into() }
    }
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

#[cfg(test)]
mod tests;
