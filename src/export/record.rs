//! What one attacker contributes to an export, read through the repository's verbs: its profile,
//! its newest commands, and for a single attacker's export also the files it dropped and the
//! accounts it tried. Fleet-wide exports read pages of [`FLEET_PAGE`] profiles in change order
//! ([`AttackerStore::attackers_changed`](crate::db::AttackerStore::attackers_changed)) and their
//! commands in one statement a page, as DECNET's fleet export leaves files and accounts to the
//! single-attacker export.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::techniques::{Technique, technique_of_login, techniques_of};
use crate::db::{AttackerCommand, AttackerProfile, CredentialFilter, Db, DbResult, LogColumn, LogFilter, SearchTerm};

/// Profiles a fleet-wide export reads at a time.
pub const FLEET_PAGE: u32 = 500;
/// The newest commands an attacker contributes to a fleet-wide export.
pub const FLEET_COMMANDS: u32 = 50;
/// The newest commands, files and accounts a single attacker's export carries.
pub const DETAIL_ROWS: u32 = 1000;
/// Characters of each command carried (a command line longer than this is cut).
pub const COMMAND_CHARS: u32 = 4096;

/// How much of an attacker an export carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detail {
    /// Profile and newest commands.
    Fleet,
    /// Also files and accounts; `secrets`: the plaintext of each captured secret too.
    Attacker { secrets: bool },
}

/// A file the attacker dropped (a `file_captured` row).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapturedFile {
    /// Lowercase hex.
    pub sha256: String,
    /// Where the attacker put it.
    pub path: Option<String>,
    pub size: Option<u64>,
    pub seen_at: DateTime<Utc>,
}

/// An account the attacker tried: a principal with one secret, on one service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapturedAccount {
    pub principal: Option<String>,
    pub service: String,
    pub decky: String,
    pub secret_sha256: String,
    /// Only when the operator asked for secrets.
    pub secret: Option<String>,
    /// `success` or `failure`, when the decoy said.
    pub outcome: Option<String>,
    pub attempts: u64,
    pub first_seen: DateTime<Utc>,
    pub last_seen: DateTime<Utc>,
}

#[derive(Clone, Debug)]
pub struct AttackerRecord {
    pub profile: AttackerProfile,
    /// Oldest first.
    pub commands: Vec<AttackerCommand>,
    pub files: Vec<CapturedFile>,
    pub accounts: Vec<CapturedAccount>,
}

impl AttackerRecord {
    /// The techniques its commands and the logins it tried show, each once.
    pub fn techniques(&self) -> BTreeSet<Technique> {
        let logins = self.accounts.iter().filter_map(|a| technique_of_login(a.outcome.as_deref()));
        self.commands.iter().flat_map(|c| techniques_of(&c.command)).chain(logins).collect()
    }

    /// The payload of each fingerprint bounty (JA3, JA4, HASSH…), as stored.
    pub fn fingerprints(&self) -> Vec<Value> {
        serde_json::from_str(&self.profile.fingerprints).unwrap_or_default()
    }
}

/// One attacker, as its own export carries it.
pub async fn attacker_record(db: &Db, profile: AttackerProfile, secrets: bool) -> DbResult<AttackerRecord> {
    let mut commands = db.attacker_commands(profile.uuid, None, DETAIL_ROWS, 0).await?.rows;
    commands.reverse();
    let filter = LogFilter {
        terms: vec![
            SearchTerm::Column(LogColumn::AttackerIp, profile.ip.clone()),
            SearchTerm::Column(LogColumn::EventType, "file_captured".into()),
        ],
        ..LogFilter::default()
    };
    let files = db.logs(&filter, DETAIL_ROWS, 0).await?.rows.iter().filter_map(captured_file).collect();
    let credentials = CredentialFilter { attacker_ip: Some(profile.ip.clone()), ..CredentialFilter::default() };
    let accounts = db
        .credentials(&credentials, DETAIL_ROWS, 0)
        .await?
        .rows
        .into_iter()
        .map(|c| CapturedAccount {
            principal: c.principal.filter(|p| !p.is_empty()),
            service: c.service,
            decky: c.decky,
            secret_sha256: c.secret_sha256,
            secret: secrets.then_some(c.secret_printable),
            outcome: c.outcome,
            attempts: c.attempt_count,
            first_seen: c.first_seen,
            last_seen: c.last_seen,
        })
        .collect();
    Ok(AttackerRecord { profile, commands, files, accounts })
}

/// A page of profiles with their newest commands, for a fleet-wide export.
pub async fn fleet_records(db: &Db, profiles: Vec<AttackerProfile>) -> DbResult<Vec<AttackerRecord>> {
    let uuids: Vec<_> = profiles.iter().filter(|p| p.command_count > 0).map(|p| p.uuid).collect();
    let mut commands = db.recent_commands(&uuids, FLEET_COMMANDS, COMMAND_CHARS).await?;
    Ok(profiles
        .into_iter()
        .map(|profile| AttackerRecord {
            commands: commands.remove(&profile.uuid).unwrap_or_default(),
            files: Vec::new(),
            accounts: Vec::new(),
            profile,
        })
        .collect())
}

/// A `file_captured` row's file, when it names a well-formed SHA-256.
fn captured_file(row: &crate::db::LogRecord) -> Option<CapturedFile> {
    let fields: serde_json::Map<String, Value> = serde_json::from_str(&row.fields).ok()?;
    let text = |name: &str| fields.get(name).and_then(Value::as_str).map(str::to_string);
    let sha256 = text("sha256").or_else(|| text("hash"))?.to_ascii_lowercase();
    if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let path = text("orig_path").or_else(|| text("filename")).filter(|p| !p.is_empty());
    let size = text("size").and_then(|s| s.parse().ok());
    Some(CapturedFile { sha256, path, size, seen_at: row.timestamp })
}
