//! Attackers: one profile per source address as the profiler folds the logs in, the commands seen
//! from it, the evidence (bounties, credentials) read for each fold, and the attacker views. The
//! statements are written once in `sql.rs`: where the dialects differ (MySQL's indexed columns cut
//! to their width and compared in any letter case, its row locks) they differ through the
//! [`Dialect`](super::dialect::Dialect) hooks only.

mod sql;

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{DbResult, Page};
use crate::observation::Observation;

/// The worker lease source (see `IngestStore::acquire_worker_lease`) the profiler holds: only its
/// holder may commit profiles.
pub const PROFILER_LEASE_SOURCE: &str = "profiler";

/// One attacker, per source address, as the profiler has folded it so far.
#[derive(Clone, Debug, PartialEq)]
pub struct AttackerProfile {
    pub uuid: Uuid,
    pub ip: String,
    pub first_seen: DateTime<Utc>,
    pub last_seen: DateTime<Utc>,
    pub event_count: i64,
    /// Distinct services, sorted.
    pub services: Vec<String>,
    /// Distinct deckies in the order of first contact: the traversal path.
    pub deckies: Vec<String>,
    /// Bounties of any type stored for this address.
    pub bounty_count: i64,
    /// Distinct captured secrets (credential rows) for this address.
    pub credential_count: i64,
    /// A JSON array text: the payload of every `fingerprint` bounty of this address.
    pub fingerprints: String,
    /// Rows in the attacker's command list, kept by the repository (a commit ignores this value).
    pub command_count: i64,
    /// A JSON object text: the `behavior` the API shows (behaviour class, timing, phases).
    pub behavior: String,
    /// A JSON object text: what the profiler keeps to fold the next rows in (running timing sums,
    /// shell-session tallies). Never shown by the API.
    pub fold_state: String,
    pub updated_at: DateTime<Utc>,
}

impl AttackerProfile {
    /// A new attacker at `ip`, first and last seen at `first_seen`, with nothing folded in yet.
    pub fn new(ip: &str, first_seen: DateTime<Utc>, now: DateTime<Utc>) -> AttackerProfile {
        AttackerProfile {
            uuid: Uuid::new_v4(),
            ip: ip.to_string(),
            first_seen,
            last_seen: first_seen,
            event_count: 0,
            services: Vec::new(),
            deckies: Vec::new(),
            bounty_count: 0,
            credential_count: 0,
            fingerprints: "[]".into(),
            command_count: 0,
            behavior: "{}".into(),
            fold_state: "{}".into(),
            updated_at: now,
        }
    }

    pub fn service_count(&self) -> i64 {
        self.services.len() as i64
    }

    pub fn decky_count(&self) -> i64 {
        self.deckies.len() as i64
    }

    /// Deckies joined by ` → ` in the order of first contact.
    pub fn traversal_path(&self) -> String {
        self.deckies.join(" → ")
    }

    /// Two or more distinct deckies, not counting the fleet's own `decnet-` hosts.
    pub fn is_traversal(&self) -> bool {
        self.deckies.iter().filter(|decky| !decky.starts_with("decnet-")).count() >= 2
    }
}

/// One command an attacker ran, from one log row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttackerCommand {
    /// The log row it came from: a row yields at most one command.
    pub log_id: i64,
    pub timestamp: DateTime<Utc>,
    pub service: String,
    pub decky: String,
    pub command: String,
}

/// The fingerprints a profile carries at most. An attacker that varies what it sends (a new
/// User-Agent on every request) makes a new fingerprint bounty each time; without a cap its profile,
/// and every fold of it, would grow without end.
pub const MAX_PROFILE_FINGERPRINTS: u32 = 100;

/// What the bounty and credential tables hold for one address, read fresh on every fold so the
/// profile's counts are those of the database, not a running tally.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct AttackerEvidence {
    pub ip: String,
    /// Payload JSON texts of the address's first [`MAX_PROFILE_FINGERPRINTS`] `fingerprint`
    /// bounties, oldest first.
    pub fingerprints: Vec<String>,
    pub bounty_count: i64,
    pub credential_count: i64,
}

/// How `GET /attackers` orders its rows, each newest or largest first, then by uuid (descending,
/// so one index walk serves a page).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AttackerSort {
    /// `last_seen` descending.
    #[default]
    Recent,
    /// `event_count` descending.
    Active,
    /// Traversals (`is_traversal`) first, then `last_seen` descending.
    Traversals,
}

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct AttackerFilter {
    /// Substring of the address, matched literally (`%` and `_` are not wildcards).
    pub search: Option<String>,
    /// The profile's services include exactly this one.
    pub service: Option<String>,
    pub sort: AttackerSort,
}

/// Which profiles a walk in change order ([`AttackerStore::attackers_changed`]) reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AttackerWindow {
    /// Only attackers last seen at or after this.
    pub since: Option<DateTime<Utc>>,
    /// Only attackers first seen at or before this.
    pub until: Option<DateTime<Utc>>,
    /// Only profiles changed (`updated_at`) strictly after this.
    pub changed_after: Option<DateTime<Utc>>,
}

/// Where a walk in change order stands: the last profile read, by (`updated_at`, `uuid`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChangePosition {
    pub updated_at: DateTime<Utc>,
    pub uuid: Uuid,
}

impl ChangePosition {
    pub fn of(profile: &AttackerProfile) -> ChangePosition {
        ChangePosition { updated_at: profile.updated_at, uuid: profile.uuid }
    }
}

/// One profiler step, stored in one transaction: the profiles it touched (inserted or replaced
/// whole), the commands it found and the observations it derived, and the log cursor after them.
#[derive(Clone, Debug, Default)]
pub struct ProfilerBatch {
    /// The highest log id folded in.
    pub last_log_id: i64,
    pub profiles: Vec<AttackerProfile>,
    /// Each with the uuid of its attacker's profile. A command whose log row is stored already is
    /// skipped.
    pub commands: Vec<(Uuid, AttackerCommand)>,
    /// The profiler's own observations, each with an `evidence_ref`: they replace the stored
    /// observation with the same (`evidence_ref`, `primitive`), keeping its id.
    pub observations: Vec<Observation>,
}

#[async_trait]
pub trait AttackerStore {
    /// The highest log id the profiler has folded in, 0 before its first batch.
    async fn profiler_cursor(&self) -> DbResult<i64>;

    /// The stored profiles of these addresses; addresses without one are left out.
    async fn attackers_by_ip(&self, ips: &[String]) -> DbResult<Vec<AttackerProfile>>;

    /// Bounty and credential tallies of these addresses, one entry per address asked for (zero
    /// counts and no fingerprints when nothing is stored).
    async fn attacker_evidence(&self, ips: &[String]) -> DbResult<Vec<AttackerEvidence>>;

    /// In one transaction: checks that `holder` holds the lease `profiler` (the worker lease table,
    /// source [`PROFILER_LEASE_SOURCE`]) and that the profiler cursor is still `expected_cursor`, then
    /// upserts the profiles by uuid (every column but `command_count` replaced), inserts the commands
    /// (skipping log ids stored already), adds to each attacker's `command_count` the rows it gained
    /// (the caller's tally is ignored, so the count is always the rows'),
    /// upserts the observations by (`evidence_ref`, `primitive`) and moves the cursor to
    /// `batch.last_log_id`. `Conflict`, with nothing stored, when the lease or the cursor moved
    /// meanwhile, or when a profile's address is stored under another uuid (someone else profiled
    /// it meanwhile: read `attackers_by_ip` again). Two profiles of one address in a batch are an
    /// error.
    async fn commit_profiles(&self, holder: &str, expected_cursor: i64, batch: &ProfilerBatch) -> DbResult<()>;

    /// One page of profiles in the filter's order, with the total that match.
    async fn attackers(&self, filter: &AttackerFilter, limit: u32, offset: u64) -> DbResult<Page<AttackerProfile>>;

    /// `NotFound` when no profile has this uuid.
    async fn attacker(&self, uuid: Uuid) -> DbResult<AttackerProfile>;

    /// Those of `services` the attacker ran commands on, in the order given.
    async fn services_with_commands(&self, attacker: Uuid, services: &[String]) -> DbResult<Vec<String>>;

    /// The attacker's commands, newest first (timestamp, then log id, descending), optionally of
    /// one service, with the total that match. Paged in SQL; the total of all of them is the
    /// profile's `command_count`, which every commit keeps exact, so no count walks the list.
    async fn attacker_commands(
        &self,
        attacker: Uuid,
        service: Option<&str>,
        limit: u32,
        offset: u64,
    ) -> DbResult<Page<AttackerCommand>>;

    /// Profiles in the window, in the order they last changed (`updated_at`, then uuid), after
    /// `after` (from the start when `None`), at most `limit`: a keyset walk down one index, so a
    /// fleet-wide reader holds one page at a time, however many attackers there are.
    async fn attackers_changed(
        &self,
        window: &AttackerWindow,
        after: Option<ChangePosition>,
        limit: u32,
    ) -> DbResult<Vec<AttackerProfile>>;

    /// The newest `per_attacker` commands of each of `attackers`, each attacker's oldest first (the
    /// order DECNET keeps a list in, so the last is the newest), texts cut to `max_chars`
    /// characters. One statement of one bounded index walk per attacker, however many commands
    /// an attacker has; attackers without commands are left out.
    async fn recent_commands(
        &self,
        attackers: &[Uuid],
        per_attacker: u32,
        max_chars: u32,
    ) -> DbResult<HashMap<Uuid, Vec<AttackerCommand>>>;
}
