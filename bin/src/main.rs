//! `svc`: one binary for every part of the honeypot fleet's control plane.

mod agent;
mod api;
mod config;
mod decky;
mod deploy;
mod exit_status;
mod ingest;
mod observation;
mod supervisor;
mod systemd;
mod updater;
mod user;
mod worker;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use svc::config::{Config, ConfigError};

use exit_status::EXIT_CONFIG;

/// Control plane of a honeypot fleet: the master API for the operator's dashboard, and the tools
/// that look after its database.
///
/// Configuration comes from SVC_* environment variables (`svc config` lists them all); a bad
/// configuration is reported in full, naming every variable at fault, and nothing starts.
#[derive(Parser)]
#[command(name = "svc", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the master API on SVC_API_HOST:SVC_API_PORT (default 127.0.0.1:8000).
    ///
    /// Requires SVC_JWT_SECRET and SVC_ADMIN_PASSWORD. Applies migrations, creates the admin user
    /// (SVC_ADMIN_USER, default `admin`) on first start, and stops cleanly on SIGTERM or SIGINT.
    Api,
    /// Run a worker host's agent (SVC_MODE=agent): the master's mutual-TLS control API on
    /// SVC_AGENT_PORT (default 8765) and heartbeats to SVC_MASTER_HOST, until SIGTERM or SIGINT.
    ///
    /// Needs the certificate, key and CA the enrollment bundle installed (SVC_AGENT_CERT,
    /// SVC_AGENT_KEY, SVC_AGENT_CA). Its deckies run on this host's engine, stored in its own
    /// database.
    Agent,
    /// Run a worker host's updater (SVC_MODE=agent): the master pushes releases of svc to it over
    /// mutual TLS on SVC_UPDATER_PORT (default 8766); it stages, switches, restarts the agent on
    /// the new release, probes it and rolls back when it is unhealthy.
    ///
    /// Needs the updater certificate the enrollment bundle installed (SVC_UPDATER_CERT,
    /// SVC_UPDATER_KEY, SVC_UPDATER_CA). Without systemd (SVC_UPDATER_RESTART=supervise) it runs
    /// the agent itself.
    Updater,
    /// Apply every pending database migration and exit.
    Migrate,
    /// Deploy deckies from a deployment INI on the container engine (SVC_DOCKER_HOST) and wait
    /// until each has started or failed, as `POST /deckies/deploy` does.
    Deploy(deploy::DeployArgs),
    /// Manage dashboard users directly in the database.
    #[command(subcommand)]
    User(user::UserCommand),
    /// Run one background worker as its own process until SIGTERM, SIGINT or a stop intent on the
    /// bus; it finishes its current batch and exits 0.
    Worker {
        /// The worker to run.
        name: String,
        /// The sniffer only: read this pcap or pcapng file through the same engine instead of
        /// capturing live, write its events, and exit.
        #[arg(long, value_name = "FILE")]
        read: Option<std::path::PathBuf>,
    },
    /// Ingest an existing log file of RFC 5424 lines once, to its end, and exit: how to back-fill
    /// history.
    ///
    /// Lines are stored exactly as the ingest worker stores them, with their bounties and
    /// credentials. The file's position is remembered, so running it again on the same file stores
    /// only what was appended since. Refused while another ingester is reading that file.
    IngestReplay {
        /// The file to ingest.
        file: std::path::PathBuf,
    },
    /// Check or store Observation records (one JSON object per line) from a file or stdin.
    #[command(subcommand)]
    Observation(observation::ObservationCommand),
    /// Run everything on this host: a private nats-server (when SVC_NATS_URL is unset), the API and
    /// the chosen workers, restarting any that crash. Stops them all on SIGTERM or SIGINT.
    Supervise(supervisor::SuperviseArgs),
    /// Run a decky's decoy services (SSH, HTTP, HTTPS, telnet, FTP, SMTP) in this process, each
    /// logging every connection, credential and command as an RFC 5424 line on stdout.
    ///
    /// Needs no configuration, database or bus: this is what runs inside a decky's container.
    Decky(decky::DeckyArgs),
    /// Inside a decky's container, for a file drop: `check` whether PATH may be written (no
    /// symlink above it, not a directory) or `remove` it. Exits 3 when the path is refused.
    #[command(hide = true)]
    DeckyFile {
        #[arg(value_parser = ["check", "remove"])]
        action: String,
        path: String,
    },
    /// Install svc as systemd units.
    #[command(subcommand)]
    Systemd(systemd::SystemdCommand),
    /// List every setting svc reads (SVC_* variable, default, meaning), or check the current ones.
    ///
    /// The list is printed from the code that reads the settings, so it is always this build's.
    /// `--markdown` prints docs/configuration.md; `--check` validates the environment as `svc api`
    /// would and reports every problem at once, never a secret's value.
    Config(config::ConfigArgs),
}

/// `svc decky-file check|remove PATH`: exit 0 done, 3 refused, 1 failed.
fn decky_file(action: &str, path: &str) -> ExitCode {
    use svc::fleet::file_drop::{REFUSED_EXIT, check_in_place, remove_in_place};
    let parsed = match check_in_place(path) {
        Ok(parsed) => parsed,
        Err(why) => {
            eprintln!("svc: {why}");
            return ExitCode::from(REFUSED_EXIT as u8);
        }
    };
    if action == "remove"
        && let Err(err) = remove_in_place(&parsed)
    {
        eprintln!("svc: {}: {err}", parsed.full());
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Checking records needs no configuration, database or secrets.
    if let Command::Observation(observation::ObservationCommand::Validate { file }) = &cli.command {
        return observation::validate(file);
    }
    // A decky's file-drop helper needs nothing either: it runs in the decky's container.
    if let Command::DeckyFile { action, path } = &cli.command {
        return decky_file(action, path);
    }
    let reading = Config::read_env();
    let checked = match &cli.command {
        // The API's lifespan checks its rules itself (startup steps 2–4), reporting what reading
        // found with them.
        Command::Api => Ok(()),
        // A decky needs nothing of the configuration: it runs alone in its container.
        Command::Decky(_) | Command::DeckyFile { .. } => Ok(()),
        // Listing or checking the configuration must work when it is bad.
        Command::Config(_) => Ok(()),
        // The supervisor checks the API's configuration up front rather than restart a child that
        // cannot start.
        Command::Supervise(_) => reading.check_for_api(),
        Command::Migrate
        | Command::Agent
        | Command::Updater
        | Command::Deploy(_)
        | Command::User(_)
        | Command::Worker { .. }
        | Command::IngestReplay { .. }
        | Command::Observation(_)
        | Command::Systemd(_) => reading.check(),
    };
    if let Err(err) = checked {
        return config_error(err);
    }
    let runtime = tokio::runtime::Runtime::new().expect("cannot start the async runtime");
    // Inside the runtime: the trace exporter's channel lives on it.
    let (traces, trace_layer) = {
        let _inside = runtime.enter();
        svc::logging::traces(&reading.config, &service_name(&cli.command))
    };
    svc::logging::init(reading.config.log_format, trace_layer);
    let result = runtime.block_on(async move {
        let done = match cli.command {
            Command::Observation(command) => return observation::run(command, reading.config).await,
            Command::Api => api::run(reading).await,
            Command::Agent => agent::run(reading.config).await,
            Command::Updater => updater::run(reading.config).await,
            Command::Migrate => user::migrate(&reading.config).await,
            Command::Deploy(args) => deploy::run(args, reading.config).await,
            Command::User(command) => user::run(command, &reading.config).await,
            Command::Worker { name, read } => worker::run(&name, read, reading.config).await,
            Command::IngestReplay { file } => ingest::replay(&file, reading.config).await,
            Command::Supervise(args) => supervisor::run(args, reading.config).await,
            Command::Systemd(command) => systemd::run(command),
            Command::Decky(args) => decky::run(args).await,
            Command::DeckyFile { .. } => unreachable!("handled before the configuration"),
            Command::Config(args) => return Ok(config::run(args)),
        };
        done.map(|()| ExitCode::SUCCESS)
    });
    // After the work, with the runtime still up: what is buffered is exported, then the provider goes.
    traces.shutdown();
    match result {
        Ok(code) => code,
        Err(err) => match err.downcast::<ConfigError>() {
            // `svc api`'s lifespan refused its configuration: the same report and status as above.
            Ok(err) => config_error(err),
            Err(err) => {
                eprintln!("svc: {err:#}");
                ExitCode::FAILURE
            }
        },
    }
}

/// The `service.name` this process's traces carry: the name it has on the bus.
fn service_name(command: &Command) -> String {
    match command {
        Command::Api => "svc-api".into(),
        Command::Worker { name, .. } => format!("svc-worker-{name}"),
        Command::Agent => "svc-agent".into(),
        Command::Supervise(_) => "svc-supervise".into(),
        _ => "svc".into(),
    }
}

fn config_error(err: ConfigError) -> ExitCode {
    eprintln!("svc: {err}");
    ExitCode::from(EXIT_CONFIG)
}
