//! `svc`: one binary for every part of the honeypot fleet's control plane.

mod api;
mod user;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use svc::config::{Config, ConfigError};

/// Control plane of a honeypot fleet: the master API for the operator's dashboard, and the tools
/// that look after its database.
///
/// Configuration comes from SVC_* environment variables (see the README); a bad configuration is
/// reported in full, naming every variable at fault, and nothing starts.
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
    /// Apply every pending database migration and exit.
    Migrate,
    /// Manage dashboard users directly in the database.
    #[command(subcommand)]
    User(user::UserCommand),
}

/// Exit status for a configuration error (sysexits EX_CONFIG), so a service manager can tell it
/// from a crash and stop restarting.
const EXIT_CONFIG: u8 = 78;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let config = match &cli.command {
        Command::Api => Config::for_api_from_env(),
        Command::Migrate | Command::User(_) => Config::from_env(),
    };
    let config = match config {
        Ok(config) => config,
        Err(err) => return config_error(err),
    };
    svc::logging::init(config.log_format);
    let runtime = tokio::runtime::Runtime::new().expect("cannot start the async runtime");
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Api => api::run(config).await,
            Command::Migrate => user::migrate(&config).await,
            Command::User(command) => user::run(command, &config).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("svc: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn config_error(err: ConfigError) -> ExitCode {
    eprintln!("svc: {err}");
    ExitCode::from(EXIT_CONFIG)
}
