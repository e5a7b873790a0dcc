//! Synthetic files: the lived-in files each decky of the fleet shows, written by the personas of the
//! global pool. DECNET's orchestrator plants them over time and records each; here they are derived,
//! the same on every request and every replica, from the decky's name, the persona and the
//! planner's weights (`weights`): for each decky and persona two to five files, a user class seven
//! picks in ten and a system class otherwise, each class by its weight. A user file is written in
//! the persona's working hours; a file may have been edited since (`edit_count`); everything is
//! dated back from the start of the current day (UTC), so the files age as days pass. Canary
//! classes are never derived here (a canary needs a live token behind it), nor mail.

use chrono::{DateTime, Duration, NaiveTime, Timelike, Utc};
use uuid::Uuid;

use super::bodies::{self, Author};
use super::draw::{Draw, digest};
use super::weights::{ClassWeight, ContentClass, RealismWeights};
use crate::topology::personas::Persona;

/// DECNET's cap on a stored body preview; the detail says when a body reached it.
pub const BODY_LIMIT: usize = 65536;

/// A decky's uuid, from its name (the fleet knows deckies by name).
pub fn decky_uuid(name: &str) -> Uuid {
    uuid_of(&["decky", name])
}

fn uuid_of(parts: &[&str]) -> Uuid {
    let bytes: [u8; 16] = digest(parts)[..16].try_into().expect("16 bytes");
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

/// One synthetic file; its body is written on demand ([`SyntheticFile::body`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticFile {
    pub uuid: Uuid,
    pub decky_uuid: Uuid,
    pub decky_name: String,
    pub path: String,
    pub persona: String,
    pub content_class: ContentClass,
    pub created_at: DateTime<Utc>,
    pub last_modified: DateTime<Utc>,
    pub edit_count: u32,
    role: String,
    signature: Option<String>,
    seed: u64,
}

impl SyntheticFile {
    pub fn body(&self) -> String {
        let author = Author {
            persona: &self.persona,
            role: &self.role,
            signature: self.signature.as_deref(),
            hostname: &self.decky_name,
            last_modified: self.last_modified,
        };
        bodies::body(self.content_class, &author, self.seed)
    }
}

/// Narrows a listing; `None` matches everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct FileFilter<'a> {
    pub decky_uuid: Option<&'a str>,
    pub persona: Option<&'a str>,
    pub content_class: Option<&'a str>,
}

impl FileFilter<'_> {
    pub fn matches(&self, file: &SyntheticFile) -> bool {
        self.decky_uuid.is_none_or(|uuid| file.decky_uuid.to_string() == uuid)
            && self.persona.is_none_or(|persona| file.persona == persona)
            && self.content_class.is_none_or(|class| file.content_class.as_str() == class)
    }
}

/// Every file of `deckies` written by `personas`, newest change first (ties by uuid), as of `now`.
pub fn grow(
    deckies: &[String],
    personas: &[Persona],
    weights: &RealismWeights,
    now: DateTime<Utc>,
) -> Vec<SyntheticFile> {
    let today = now.date_naive().and_time(NaiveTime::MIN).and_utc();
    let mut files = Vec::new();
    for decky in deckies {
        let mut paths = std::collections::HashSet::new();
        for persona in personas {
            let mut draw = Draw::of(&["synthetic files", decky, &persona.name]);
            for _ in 0..draw.within(2, 5) {
                let file = plant(&mut draw, decky, persona, weights, today);
                if let Some(file) = file.filter(|file| paths.insert(file.path.clone())) {
                    files.push(file);
                }
            }
        }
    }
    files.sort_by(|a, b| b.last_modified.cmp(&a.last_modified).then(a.uuid.cmp(&b.uuid)));
    files
}

fn plant(
    draw: &mut Draw,
    decky: &str,
    persona: &Persona,
    weights: &RealismWeights,
    today: DateTime<Utc>,
) -> Option<SyntheticFile> {
    let user = draw.chance(0.7);
    let class = pick(draw, if user { &weights.user_class_weights } else { &weights.system_class_weights })?;
    let path = bodies::path(class, &persona.name, draw)?;
    let (created_at, last_modified, edit_count) = dates(draw, class, &persona.active_hours, today);
    Some(SyntheticFile {
        uuid: uuid_of(&["synthetic file", decky, &path]),
        decky_uuid: decky_uuid(decky),
        decky_name: decky.to_string(),
        path,
        persona: persona.name.clone(),
        content_class: class,
        created_at,
        last_modified,
        edit_count,
        role: persona.role.clone(),
        signature: persona.signature.clone(),
        seed: draw.next_u64(),
    })
}

/// A class by weight; `None` when the list is empty or weighs nothing (never, once checked).
fn pick(draw: &mut Draw, list: &[ClassWeight]) -> Option<ContentClass> {
    let total: u128 = list.iter().map(|w| u128::from(w.weight)).sum();
    if total == 0 {
        return None;
    }
    let mut target = draw.below(total);
    for entry in list {
        if target < u128::from(entry.weight) {
            return Some(entry.content_class);
        }
        target -= u128::from(entry.weight);
    }
    None
}

/// When a file was made and last changed, and how often it changed: a user file within the
/// persona's working hours, logs written up to this morning, scratch files never edited.
fn dates(
    draw: &mut Draw,
    class: ContentClass,
    active_hours: &str,
    today: DateTime<Utc>,
) -> (DateTime<Utc>, DateTime<Utc>, u32) {
    let days_back = draw.within(1, 14) as i64;
    let day = today - Duration::days(days_back);
    let (start, length) = working_window(active_hours);
    let at_work =
        |draw: &mut Draw, day: DateTime<Utc>| day + Duration::minutes(start + draw.within(0, length - 1) as i64);
    match class {
        ContentClass::LogCron | ContentClass::LogDaemon => {
            let created = day + Duration::minutes(draw.within(0, 1439) as i64);
            let last = today - Duration::minutes(draw.within(1, 180) as i64);
            (created, last, draw.within(1, 40) as u32)
        }
        ContentClass::CacheTmp => {
            let created = day + Duration::minutes(draw.within(0, 1439) as i64);
            (created, created, 0)
        }
        _ => {
            let created = at_work(draw, day);
            let edits = draw.within(0, 4) as u32;
            if edits == 0 || days_back == 1 {
                return (created, created, 0);
            }
            let edited_day = today - Duration::days(draw.within(1, days_back as u64 - 1) as i64);
            (created, at_work(draw, edited_day), edits)
        }
    }
}

/// A persona's `HH:MM-HH:MM` as its first minute and length in minutes; a window that ends before
/// it starts runs past midnight, one that ends where it starts (`00:00-00:00`) is the whole day,
/// and one that does not read is DECNET's default, 09:00 to 18:00.
fn working_window(active_hours: &str) -> (i64, u64) {
    let minute = |text: &str| {
        NaiveTime::parse_from_str(text.trim(), "%H:%M").ok().map(|t| i64::from(t.hour() * 60 + t.minute()))
    };
    let parsed = active_hours.split_once('-').and_then(|(from, to)| Some((minute(from)?, minute(to)?)));
    let (start, end) = parsed.unwrap_or((9 * 60, 18 * 60));
    let length = (end - start).rem_euclid(1440);
    (start, if length == 0 { 1440 } else { length as u64 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::personas;
    use serde_json::json;

    fn pool() -> Vec<Persona> {
        personas::parse(
            vec![
                json!({"name": "Ana Ruiz", "email": "ana@corp.example", "role": "CFO", "active_hours": "22:00-02:00"}),
                json!({"name": "Bob", "email": "bob@corp.example", "role": "IT"}),
            ],
            "en",
        )
    }

    #[test]
    fn the_same_fleet_and_personas_grow_the_same_files() {
        let now = "2026-12-09T15:30:00Z".parse().unwrap();
        let deckies = vec!["web-01".to_string(), "db-01".to_string()];
        let files = grow(&deckies, &pool(), &RealismWeights::default(), now);
        assert_eq!(files, grow(&deckies, &pool(), &RealismWeights::default(), now));
        assert!(files.len() >= 6, "{files:?}");
        let today: DateTime<Utc> = "2026-12-09T00:00:00Z".parse().unwrap();
        for file in &files {
            assert!(file.created_at <= file.last_modified && file.last_modified < today, "{file:?}");
            assert!(!file.body().is_empty() && file.body() == file.body());
            assert!(!file.content_class.as_str().starts_with("canary"));
            if file.path.starts_with("/home/") {
                let user = if file.persona == "Bob" { "/home/bob/" } else { "/home/anaruiz/" };
                assert!(file.path.starts_with(user), "{file:?}");
            }
            if file.persona == "Bob" && ContentClass::USER.contains(&file.content_class) {
                assert!((9..18).contains(&file.created_at.hour()), "Bob writes at work: {file:?}");
            }
        }
        let mut keys: Vec<_> = files.iter().map(|f| (f.decky_uuid, f.path.clone())).collect();
        keys.dedup();
        assert_eq!(keys.len(), files.len(), "one file per decky and path");
        assert!(grow(&deckies, &[], &RealismWeights::default(), now).is_empty(), "no personas, no files");
    }

    #[test]
    fn the_weights_decide_the_classes() {
        let weights = RealismWeights {
            user_class_weights: vec![ClassWeight { content_class: ContentClass::Todo, weight: 1 }],
            system_class_weights: vec![ClassWeight { content_class: ContentClass::CacheTmp, weight: 1 }],
            ..RealismWeights::default()
        };
        let deckies: Vec<String> = (0..20).map(|i| format!("decky-{i}")).collect();
        let files = grow(&deckies, &pool(), &weights, Utc::now());
        assert!(files.iter().all(|f| matches!(f.content_class, ContentClass::Todo | ContentClass::CacheTmp)));
        assert!(files.iter().any(|f| f.content_class == ContentClass::CacheTmp));
        assert_eq!(working_window("00:00-00:00"), (0, 1440));
        assert_eq!(working_window("22:00-02:00"), (1320, 240));
        assert_eq!(working_window("whenever"), (540, 540));
    }
}
