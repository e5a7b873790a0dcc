//! Identities: attackers seen from different addresses linked into one by what a tool or a machine
//! cannot easily change (`link`), read from the fingerprints on their profiles; and campaigns,
//! identities that share a piece of it. The identities are
//! computed, not stored: every attacker's profile is walked (a page at a time) and linked, and the
//! result kept by [`Identities`] until the profiles change, so the same data always gives the same
//! identities and replicas agree without coordinating.

pub mod link;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio::sync::Mutex;
use tokio::time::Instant;
use uuid::Uuid;

pub use link::{Campaign, Identity, Link, Linked, Member, Primitive, Shared};

use crate::db::{AttackerProfile, AttackerWindow, ChangePosition, Db, DbResult};

/// The longest one computation of the identities is served.
pub const REFRESH: Duration = Duration::from_secs(300);
/// The shortest: a change of profile within it waits for the next.
pub const MIN_INTERVAL: Duration = Duration::from_secs(2);
/// Profiles read per page of the walk.
const PAGE: u32 = 2_000;

/// The linking primitives in a profile's fingerprints, each value once, in order of first sight.
pub fn primitives(profile: &AttackerProfile) -> Vec<(Primitive, String)> {
    let fingerprints: Vec<Value> = serde_json::from_str(&profile.fingerprints).unwrap_or_default();
    let mut found: Vec<(Primitive, String)> = Vec::new();
    for fingerprint in &fingerprints {
        let text = |key: &str| fingerprint.get(key).and_then(Value::as_str).filter(|v| !v.is_empty());
        let primitive = match fingerprint.get("fingerprint_type").and_then(Value::as_str) {
            Some("ja3") => text("ja3").map(|v| (Primitive::Ja3, v.to_string())),
            Some("ssh_client") => text("banner").map(|banner| {
                (Primitive::SshClient, format!("{banner} {}", text("kex").unwrap_or_default()).trim_end().to_string())
            }),
            Some("hassh_server") => text("hash").map(|v| (Primitive::HasshServer, v.to_string())),
            Some("jarm") => text("hash").map(|v| (Primitive::Jarm, v.to_string())),
            // Only a certificate the prober read off the attacker's own host: the sniffer's are
            // the deckies' own, the same for everyone who connects.
            Some("tls_certificate") if text("target_ip").is_some() => {
                text("cert_sha256").map(|v| (Primitive::Certificate, v.to_string()))
            }
            _ => None,
        };
        if let Some(primitive) = primitive
            && !found.contains(&primitive)
        {
            found.push(primitive);
        }
    }
    found
}

/// One computation: the identities, the campaigns, and where each attacker and identity is.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Newest-updated first (the newest profile change of their attackers), then by uuid.
    pub identities: Vec<Identity>,
    /// In the order of their oldest identity.
    pub campaigns: Vec<Campaign>,
    by_uuid: HashMap<Uuid, usize>,
    by_attacker: HashMap<Uuid, usize>,
    campaign_by_uuid: HashMap<Uuid, usize>,
}

impl Snapshot {
    pub fn new(Linked { mut identities, campaigns }: Linked) -> Snapshot {
        let updated = |identity: &Identity| identity.members.iter().map(|m| m.updated_at).max();
        identities.sort_by(|a, b| updated(b).cmp(&updated(a)).then(a.uuid.cmp(&b.uuid)));
        let by_uuid = identities.iter().enumerate().map(|(i, identity)| (identity.uuid, i)).collect();
        let by_attacker = identities
            .iter()
            .enumerate()
            .flat_map(|(i, identity)| identity.members.iter().map(move |m| (m.uuid, i)))
            .collect();
        let campaign_by_uuid = campaigns.iter().enumerate().map(|(i, campaign)| (campaign.uuid, i)).collect();
        Snapshot { identities, campaigns, by_uuid, by_attacker, campaign_by_uuid }
    }

    pub fn identity(&self, uuid: Uuid) -> Option<&Identity> {
        self.by_uuid.get(&uuid).map(|&i| &self.identities[i])
    }

    pub fn of_attacker(&self, attacker: Uuid) -> Option<&Identity> {
        self.by_attacker.get(&attacker).map(|&i| &self.identities[i])
    }

    pub fn campaign(&self, uuid: Uuid) -> Option<&Campaign> {
        self.campaign_by_uuid.get(&uuid).map(|&i| &self.campaigns[i])
    }
}

/// The identities, recomputed when a profile changed since, but never more often than
/// [`MIN_INTERVAL`] or ten times the last computation's duration (so it takes at most a tenth of
/// the time however many attackers there are), and after [`REFRESH`] in any case (a pruned
/// attacker changes no profile). The first caller computes; the others wait and share the result.
#[derive(Default)]
pub struct Identities {
    last: Mutex<Option<Computed>>,
    /// The newest snapshot, for reads that must never wait on a computation ([`Identities::cached`]).
    latest: std::sync::Mutex<Option<Arc<Snapshot>>>,
}

struct Computed {
    at: Instant,
    took: Duration,
    /// The newest profile change the computation read.
    newest: Option<DateTime<Utc>>,
    snapshot: Arc<Snapshot>,
}

impl Identities {
    pub async fn snapshot(&self, db: &Db) -> DbResult<Arc<Snapshot>> {
        let mut last = self.last.lock().await;
        if let Some(computed) = last.as_ref() {
            let age = computed.at.elapsed();
            let current = age < MIN_INTERVAL.max(computed.took * 10)
                || (age < REFRESH && !changed_after(db, computed.newest).await?);
            if current {
                return Ok(computed.snapshot.clone());
            }
        }
        let started = Instant::now();
        let (members, newest) = members(db).await?;
        let snapshot = Arc::new(Snapshot::new(link::link(members)));
        let took = started.elapsed();
        tracing::debug!(identities = snapshot.identities.len(), took_ms = took.as_millis() as u64, "Identities linked");
        *last = Some(Computed { at: Instant::now(), took, newest, snapshot: snapshot.clone() });
        *self.latest.lock().expect("never poisoned") = Some(snapshot.clone());
        Ok(snapshot)
    }

    /// The last snapshot computed, however old, without computing one: for the attacker rows'
    /// `identity_id`, which must not make a list wait on linking every attacker. `None` until the
    /// identity routes or attribution computed one.
    pub fn cached(&self) -> Option<Arc<Snapshot>> {
        self.latest.lock().expect("never poisoned").clone()
    }
}

/// Whether a profile changed after `newest` (any profile when there was none).
async fn changed_after(db: &Db, newest: Option<DateTime<Utc>>) -> DbResult<bool> {
    let window = AttackerWindow { changed_after: newest, ..AttackerWindow::default() };
    Ok(!db.attackers_changed(&window, None, 1).await?.is_empty())
}

/// Every attacker with a linking primitive, read a page at a time, and the newest profile change.
async fn members(db: &Db) -> DbResult<(Vec<Member>, Option<DateTime<Utc>>)> {
    let mut members = Vec::new();
    let mut newest = None;
    let mut after: Option<ChangePosition> = None;
    loop {
        let page = db.attackers_changed(&AttackerWindow::default(), after, PAGE).await?;
        let Some(last) = page.last() else { break };
        after = Some(ChangePosition::of(last));
        // The walk is in change order: the last row read is the newest.
        newest = Some(last.updated_at);
        for profile in &page {
            let primitives = primitives(profile);
            if !primitives.is_empty() {
                members.push(Member {
                    uuid: profile.uuid,
                    ip: profile.ip.clone(),
                    first_seen: profile.first_seen,
                    last_seen: profile.last_seen,
                    updated_at: profile.updated_at,
                    primitives,
                });
            }
        }
        if page.len() < PAGE as usize {
            break;
        }
    }
    Ok((members, newest))
}
