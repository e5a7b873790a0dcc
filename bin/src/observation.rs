//! `svc observation validate|ingest FILE|-`: Observation records, one JSON object per line, checked
//! against the envelope schema and the primitive registry; `ingest` also stores the valid ones.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;
use svc::config::Config;
use svc::db::Db;
use svc::observation::{Invalid, Observation, read_records};

/// Records stored per `add_observations` call: one transaction's worth, small enough that a long
/// file never holds more than this in memory.
const CHUNK: usize = 500;

/// Exit status when the input cannot be read (as clap's usage errors), told apart from 1 = some
/// records were refused.
const EXIT_UNREADABLE: u8 = 2;

#[derive(Subcommand)]
pub enum ObservationCommand {
    /// Check a file of Observation records without storing anything; needs no database.
    ///
    /// Input is JSON Lines: one record per line, blank lines skipped, lines over 1 MiB refused.
    /// Each record must match schemas/observation/v1.json (draft 2020-12) and the primitive
    /// registry. Prints `line N: <field>: <reason>` on stdout for every bad record and
    /// `N records, M invalid` on stderr. Exits 0 when every record is valid, 1 when any is not,
    /// 2 when the input cannot be read.
    Validate {
        /// The file to read, or `-` for standard input.
        file: PathBuf,
    },
    /// Validate a file of Observation records and store the valid ones in the database.
    ///
    /// Same input and same report as `validate`; invalid records are never stored. A record
    /// already held (same `id`, or same `evidence_ref` and `primitive`) counts as a duplicate, so
    /// running it again on the same file stores nothing new, provided every record has an `id` or an
    /// `evidence_ref` (a record with neither gets a new id each time). Prints `stored S, duplicates
    /// D, rejected R` on stderr. Exits 0 when no record was rejected, 1 otherwise, 2 when the input
    /// cannot be read.
    Ingest {
        /// The file to read, or `-` for standard input.
        file: PathBuf,
    },
}

pub async fn run(command: ObservationCommand, config: Config) -> anyhow::Result<ExitCode> {
    match command {
        ObservationCommand::Validate { file } => Ok(validate(&file)),
        ObservationCommand::Ingest { file } => ingest(&file, config).await,
    }
}

/// `svc observation validate`: `main` runs it before any configuration is read, since it needs none.
pub fn validate(file: &Path) -> ExitCode {
    let input = match open(file) {
        Ok(input) => input,
        Err(err) => return unreadable(&err),
    };
    let (mut records, mut invalid) = (0u64, 0u64);
    for record in read_records(input) {
        let (line, outcome) = match record {
            Ok(record) => record,
            Err(err) => return unreadable(&anyhow::Error::new(err).context(format!("reading {}", file.display()))),
        };
        records += 1;
        if let Err(invalid_record) = outcome {
            invalid += 1;
            report(line, &invalid_record);
        }
    }
    eprintln!("{records} records, {invalid} invalid");
    if invalid == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

/// `svc observation ingest`.
async fn ingest(file: &Path, config: Config) -> anyhow::Result<ExitCode> {
    let input = match open(file) {
        Ok(input) => input,
        Err(err) => return Ok(unreadable(&err)),
    };
    let db = svc::db::connect(&config.db).context("opening the database")?;
    db.migrate().await.context("applying migrations")?;
    let result = store(&db, file, input).await;
    db.close().await;
    let Some(tally) = result? else { return Ok(ExitCode::from(EXIT_UNREADABLE)) };
    eprintln!("stored {}, duplicates {}, rejected {}", tally.stored, tally.duplicates, tally.rejected);
    Ok(if tally.rejected == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

#[derive(Default)]
struct Tally {
    stored: u64,
    duplicates: u64,
    rejected: u64,
}

/// Validates and stores every record; `None` when the input broke off (after reporting it and
/// storing what came before).
async fn store(db: &Db, file: &Path, input: impl BufRead) -> anyhow::Result<Option<Tally>> {
    let mut tally = Tally::default();
    let mut chunk: Vec<Observation> = Vec::with_capacity(CHUNK);
    let mut broken = false;
    // Reading is synchronous: this command is the only work on the runtime, and the database
    // driver runs on the runtime's worker threads, not on this one.
    for record in read_records(input) {
        let (line, outcome) = match record {
            Ok(record) => record,
            Err(err) => {
                unreadable(&anyhow::Error::new(err).context(format!("reading {}", file.display())));
                broken = true;
                break;
            }
        };
        match outcome {
            Ok(observation) => chunk.push(observation),
            Err(invalid) => {
                tally.rejected += 1;
                report(line, &invalid);
            }
        }
        if chunk.len() == CHUNK {
            flush(db, &mut chunk, &mut tally).await?;
        }
    }
    flush(db, &mut chunk, &mut tally).await?;
    Ok((!broken).then_some(tally))
}

async fn flush(db: &Db, chunk: &mut Vec<Observation>, tally: &mut Tally) -> anyhow::Result<()> {
    if chunk.is_empty() {
        return Ok(());
    }
    let outcome = db.add_observations(chunk).await.context("storing observations")?;
    tally.stored += outcome.stored;
    tally.duplicates += outcome.duplicates;
    chunk.clear();
    Ok(())
}

fn open(file: &Path) -> anyhow::Result<Box<dyn BufRead>> {
    if file.as_os_str() == "-" {
        return Ok(Box::new(io::stdin().lock()));
    }
    let opened = File::open(file).with_context(|| format!("cannot open {}", file.display()))?;
    Ok(Box::new(BufReader::with_capacity(64 * 1024, opened)))
}

fn report(line: usize, invalid: &Invalid) {
    // Not `println!`: a reader that went away (`| head`) must not turn into a panic.
    let _ = writeln!(io::stdout(), "line {line}: {invalid}");
}

fn unreadable(err: &anyhow::Error) -> ExitCode {
    eprintln!("svc: {err:#}");
    ExitCode::from(EXIT_UNREADABLE)
}
