//! Flat-fleet mutation: a decky gets a new set of services (1 to 3 from its archetype's, or from
//! every service, different from what it runs when that can be), its container is recreated with
//! them, and a `decky_mutated` line is appended to the ingest file, so the change reaches the
//! database like any decoy event (DECNET's went to a file nothing read). On request
//! (`POST /deckies/{name}/mutate`, trigger `operator`) or on schedule, when a decky's
//! `mutate_interval` has passed since it last changed (the mutator, trigger `scheduled`). The
//! store decides who mutates: a change is written only over the configuration it was decided on,
//! so two mutators never both mutate one decky for one interval.

use std::io::Write as _;
use std::path::PathBuf;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{DEFAULT_IMAGE, Fleet, FleetError, catalog};
use crate::bus::{Event, topics};
use crate::db::{DbError, DeckyConfig, DeckyLifecycle, LifecycleStatus};
use crate::logline::{Entry, Severity};

/// How many times a new service set is drawn to differ from the current one.
const DRAWS: usize = 20;

/// A uniform number below `n` (n > 0); fresh randomness from the system's generator.
fn below(n: usize) -> usize {
    (Uuid::new_v4().as_u128() % n as u128) as usize
}

/// 1 to 3 services from `pool`, sorted, drawn until they differ from `current` (at most 20 draws).
fn draw(pool: &[&str], current: &[String]) -> Vec<String> {
    let mut current: Vec<String> = current.to_vec();
    current.sort();
    let mut chosen = Vec::new();
    for _ in 0..DRAWS {
        let count = 1 + below(pool.len().min(3));
        let mut left: Vec<&str> = pool.to_vec();
        chosen = (0..count).map(|_| left.remove(below(left.len())).to_string()).collect();
        chosen.sort();
        if chosen != current {
            break;
        }
    }
    chosen
}

/// The interval grammar [`interval_minutes`] reads, as the API documents it.
pub const INTERVAL_PATTERN: &str = "^([1-9][0-9]{0,8}m|[1-9][0-9]{0,5}d|[1-9][0-9]{0,3}M|[1-9][0-9]{0,2}[yY])$";

/// Minutes of a `mutate_interval` as DECNET writes one: `<n>m`, `<n>d`, `<n>M` (30 days),
/// `<n>y`/`<n>Y` (365 days), n ≥ 1.
pub fn interval_minutes(text: &str) -> Option<u32> {
    let unit = text.chars().last()?;
    let digits = &text[..text.len() - unit.len_utf8()];
    if digits.is_empty() || digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // At most as many digits as keep every such interval's minutes in a u32, so that what
    // [`INTERVAL_PATTERN`] allows is exactly what is accepted.
    let (per, max_digits) = match unit {
        'm' => (1, 9),
        'd' => (1440, 6),
        'M' => (43_200, 4),
        'y' | 'Y' => (525_600, 3),
        _ => return None,
    };
    if digits.len() > max_digits {
        return None;
    }
    digits.parse::<u32>().ok()?.checked_mul(per)
}

fn epoch_seconds(at: DateTime<Utc>) -> f64 {
    at.timestamp_micros() as f64 / 1e6
}

impl Fleet {
    /// The decky as stored, or DECNET's 404 texts.
    async fn stored_decky(&self, name: &str, not_found: String) -> Result<DeckyConfig, FleetError> {
        let stored = self.db.fleet().await?;
        if stored.deckies.is_empty() {
            return Err(FleetError::NotFound("No active deployment".into()));
        }
        stored
            .deckies
            .into_iter()
            .find(|d| d.config.name == name)
            .map(|d| d.config)
            .ok_or(FleetError::NotFound(not_found))
    }

    /// Sets or clears a decky's mutation interval (minutes).
    pub async fn set_mutate_interval(&self, name: &str, minutes: Option<u32>) -> Result<(), FleetError> {
        let _deciding = self.deciding.lock().await;
        let old = self.stored_decky(name, "Decky not found".into()).await?;
        let new = DeckyConfig { mutate_interval: minutes, ..old.clone() };
        self.db.replace_decky_config(&old, &new, Utc::now()).await.map_err(|err| match err {
            DbError::Conflict => FleetError::Refused("the decky changed meanwhile; try again".into()),
            DbError::NotFound => FleetError::NotFound("Decky not found".into()),
            other => other.into(),
        })
    }

    /// Mutates a decky now: stores its new services and a lifecycle record (`mutate`), then
    /// recreates its container and writes the `decky_mutated` line in the background. The
    /// record's id; `Refused` when another mutation got there first.
    pub async fn mutate(&self, name: &str, trigger: &str, ingest: Option<PathBuf>) -> Result<Uuid, FleetError> {
        let _deciding = self.deciding.lock().await;
        let old = self.stored_decky(name, format!("Decky {name} not found")).await?;
        let pool: Vec<&str> = match old.archetype.as_deref().and_then(catalog::archetype) {
            Some(archetype) => archetype.services.to_vec(),
            None => catalog::service_names(),
        };
        if pool.is_empty() {
            return Err(FleetError::NotFound(format!("No services available to mutate {name}")));
        }
        let now = Utc::now();
        let new = DeckyConfig { services: draw(&pool, &old.services), last_mutated: epoch_seconds(now), ..old.clone() };
        match self.db.replace_decky_config(&old, &new, now).await {
            Ok(()) => {}
            Err(DbError::Conflict) => return Err(FleetError::Refused(format!("decky {name} is being mutated"))),
            Err(DbError::NotFound) => return Err(FleetError::NotFound(format!("Decky {name} not found"))),
            Err(err) => return Err(err.into()),
        }
        let record = DeckyLifecycle {
            id: Uuid::new_v4(),
            decky_name: name.to_string(),
            host_uuid: new.host_uuid.clone(),
            operation: "mutate".into(),
            status: LifecycleStatus::Running,
            error: None,
            started_at: now,
            updated_at: now,
            completed_at: None,
        };
        self.db.add_lifecycle(&record).await?;
        let (fleet, trigger) = (self.clone(), trigger.to_string());
        tokio::spawn(async move { fleet.recreate(record.id, old, new, trigger, ingest).await });
        Ok(record.id)
    }

    async fn recreate(&self, id: Uuid, old: DeckyConfig, new: DeckyConfig, trigger: String, ingest: Option<PathBuf>) {
        let image = if new.base_image == DEFAULT_IMAGE { self.default_image().await.map(Some) } else { Ok(None) };
        let started = match image {
            Ok(image) => self.start_decky(&new, &image).await,
            Err(reason) => Err(reason),
        };
        let (status, error) = match started {
            Ok(()) => (LifecycleStatus::Succeeded, None),
            Err(reason) => (LifecycleStatus::Failed, Some(reason.to_string())),
        };
        if let Err(err) = self.db.set_lifecycle_status(id, status, error.as_deref(), Utc::now()).await {
            tracing::error!(lifecycle = %id, error = %err, "Could not update a lifecycle record");
        }
        if status != LifecycleStatus::Succeeded {
            // Reconcile left the decky to the mutation (its open record), which may have left it
            // without a container: a pass now that the record has ended.
            self.observed.want_reconcile();
            return;
        }
        let payload = serde_json::json!({
            "decky": new.name, "old_services": old.services, "new_services": new.services, "trigger": trigger,
        });
        if let Ok(topic) = topics::decky_mutation(&new.name)
            && let Err(err) = self.bus.publish(&Event::new(topic, "mutation", payload)).await
        {
            tracing::debug!(error = %err, "Mutation event not published");
        }
        if let Some(path) = ingest
            && let Err(err) = append_line(&path, &mutated_line(&old, &new, &trigger))
        {
            tracing::error!(file = %path.display(), error = %err, "Could not write the decky_mutated line");
        }
        tracing::info!(decky = %new.name, services = %new.services.join(","), %trigger, "Decky mutated");
    }

    /// Mutates every decky whose interval has passed since it last changed (`scheduled`); the
    /// names it mutated.
    pub async fn mutate_due(&self, now: DateTime<Utc>, ingest: Option<PathBuf>) -> Vec<String> {
        let stored = match self.db.fleet().await {
            Ok(stored) => stored,
            Err(err) => {
                tracing::warn!(error = %err, "Cannot read the fleet for scheduled mutations");
                return Vec::new();
            }
        };
        let mut mutated = Vec::new();
        for decky in stored.deckies {
            let Some(minutes) = decky.config.mutate_interval else { continue };
            if epoch_seconds(now) - decky.config.last_mutated < f64::from(minutes) * 60.0 {
                continue;
            }
            match self.mutate(&decky.config.name, "scheduled", ingest.clone()).await {
                Ok(_) => mutated.push(decky.config.name),
                // Another mutator took it this round.
                Err(FleetError::Refused(_)) => {}
                Err(err) => tracing::warn!(decky = %decky.config.name, error = %err, "Scheduled mutation failed"),
            }
        }
        mutated
    }
}

/// The reference `decky_mutated` line: APP `mutator`, HOSTNAME the decky.
fn mutated_line(old: &DeckyConfig, new: &DeckyConfig, trigger: &str) -> String {
    crate::logline::format(&Entry {
        severity: Severity::Info,
        timestamp: Utc::now(),
        hostname: new.name.clone(),
        app_name: "mutator".into(),
        msgid: "decky_mutated".into(),
        fields: vec![
            ("decky".into(), new.name.clone()),
            ("old_services".into(), old.services.join(",")),
            ("new_services".into(), new.services.join(",")),
            ("trigger".into(), trigger.into()),
        ],
        msg: None,
    })
}

/// One line in one append, so it never interleaves with other writers' lines.
fn append_line(path: &std::path::Path, line: &str) -> std::io::Result<()> {
    let mut file = crate::file_modes::open_append(path)?;
    file.write_all(format!("{line}\n").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_read_as_decnet_writes_them() {
        assert_eq!(interval_minutes("5m"), Some(5));
        assert_eq!(interval_minutes("2d"), Some(2880));
        assert_eq!(interval_minutes("1M"), Some(43_200));
        assert_eq!(interval_minutes("1y"), Some(525_600));
        assert_eq!(interval_minutes("1Y"), Some(525_600));
        assert_eq!(interval_minutes("999y"), Some(525_074_400));
        assert_eq!(interval_minutes("999999999m"), Some(999_999_999));
        for bad in ["", "m", "0m", "05m", "5", "5h", "-5m", "5 m", "1000y", "99999M", "9999999d", "5mé", "٥m"] {
            assert_eq!(interval_minutes(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_draw_differs_from_the_current_set_when_it_can() {
        let pool = ["ssh", "http", "ftp"];
        for _ in 0..50 {
            let drawn = draw(&pool, &["ssh".to_string()]);
            assert!((1..=3).contains(&drawn.len()) && drawn != ["ssh"], "{drawn:?}");
        }
        assert_eq!(draw(&["ssh"], &["ssh".to_string()]), ["ssh"], "a pool of one cannot differ");
    }
}
