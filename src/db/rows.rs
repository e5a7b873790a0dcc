//! Row shapes shared by both backends (their column types decode alike) and their conversion into
//! domain types. Times are stored as epoch milliseconds.

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::{
    AttackerCommand, AttackerProfile, BountyRecord, CredentialRecord, DbError, DeckyLifecycle, IngestCursor, LogRecord,
    NewBounty, NewCredential, NewLog, User,
};
use crate::observation::{Observation, Window};

pub(super) fn millis(at: DateTime<Utc>) -> i64 {
    at.timestamp_millis()
}

/// What usernames are unique by and looked up by: case does not make a different user.
pub(super) fn username_key(username: &str) -> String {
    username.to_lowercase()
}

pub(super) fn time(ms: i64) -> Result<DateTime<Utc>, DbError> {
    DateTime::from_timestamp_millis(ms).ok_or_else(|| DbError::Other(anyhow::anyhow!("timestamp out of range: {ms}")))
}

/// An update or delete that matched no row was aimed at something that does not exist.
pub(super) fn found(rows_affected: u64) -> Result<(), DbError> {
    if rows_affected == 0 { Err(DbError::NotFound) } else { Ok(()) }
}

pub(super) fn parse_uuid(text: &str) -> Result<Uuid, DbError> {
    text.parse().map_err(|e| DbError::Other(anyhow::anyhow!("stored uuid `{text}` is invalid: {e}")))
}

#[derive(sqlx::FromRow)]
pub(super) struct UserRow {
    uuid: String,
    username: String,
    password_hash: String,
    role: String,
    must_change_password: bool,
    tokens_valid_from: Option<i64>,
    created_at: i64,
}

impl TryFrom<UserRow> for User {
    type Error = DbError;

    fn try_from(row: UserRow) -> Result<Self, DbError> {
        Ok(User {
            uuid: parse_uuid(&row.uuid)?,
            username: row.username,
            password_hash: row.password_hash,
            role: row.role.parse()?,
            must_change_password: row.must_change_password,
            tokens_valid_from: row.tokens_valid_from.map(time).transpose()?,
            created_at: time(row.created_at)?,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct LifecycleRow {
    id: String,
    decky_name: String,
    host_uuid: Option<String>,
    operation: String,
    status: String,
    error: Option<String>,
    started_at: i64,
    updated_at: i64,
    completed_at: Option<i64>,
}

impl TryFrom<LifecycleRow> for DeckyLifecycle {
    type Error = DbError;

    fn try_from(row: LifecycleRow) -> Result<Self, DbError> {
        Ok(DeckyLifecycle {
            id: parse_uuid(&row.id)?,
            decky_name: row.decky_name,
            host_uuid: row.host_uuid,
            operation: row.operation,
            status: row.status.parse()?,
            error: row.error,
            started_at: time(row.started_at)?,
            updated_at: time(row.updated_at)?,
            completed_at: row.completed_at.map(time).transpose()?,
        })
    }
}

/// Converts every row, failing on the first that does not hold a valid domain value.
pub(super) fn convert<R, T: TryFrom<R, Error = DbError>>(rows: Vec<R>) -> Result<Vec<T>, DbError> {
    rows.into_iter().map(T::try_from).collect()
}

#[derive(sqlx::FromRow)]
pub(super) struct LogRow {
    id: i64,
    timestamp: i64,
    decky: String,
    service: String,
    event_type: String,
    attacker_ip: String,
    raw_line: String,
    fields: String,
    msg: Option<String>,
    trace_id: Option<String>,
    span_id: Option<String>,
}

impl TryFrom<LogRow> for LogRecord {
    type Error = DbError;

    fn try_from(row: LogRow) -> Result<Self, DbError> {
        Ok(LogRecord {
            id: row.id,
            timestamp: time(row.timestamp)?,
            decky: row.decky,
            service: row.service,
            event_type: row.event_type,
            attacker_ip: row.attacker_ip,
            raw_line: row.raw_line,
            fields: row.fields,
            msg: row.msg,
            trace_id: row.trace_id,
            span_id: row.span_id,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct BountyRow {
    id: i64,
    timestamp: i64,
    decky: String,
    service: String,
    attacker_ip: String,
    bounty_type: String,
    payload: String,
}

impl TryFrom<BountyRow> for BountyRecord {
    type Error = DbError;

    fn try_from(row: BountyRow) -> Result<Self, DbError> {
        Ok(BountyRecord {
            id: row.id,
            timestamp: time(row.timestamp)?,
            decky: row.decky,
            service: row.service,
            attacker_ip: row.attacker_ip,
            bounty_type: row.bounty_type,
            payload: row.payload,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct CredentialRow {
    id: i64,
    attacker_ip: String,
    decky: String,
    service: String,
    secret_kind: String,
    secret_sha256: String,
    principal: Option<String>,
    secret_printable: String,
    secret_b64: String,
    outcome: Option<String>,
    attempt_count: i64,
    first_seen: i64,
    last_seen: i64,
}

impl TryFrom<CredentialRow> for CredentialRecord {
    type Error = DbError;

    fn try_from(row: CredentialRow) -> Result<Self, DbError> {
        Ok(CredentialRecord {
            id: row.id,
            attacker_ip: row.attacker_ip,
            decky: row.decky,
            service: row.service,
            secret_kind: row.secret_kind,
            secret_sha256: row.secret_sha256,
            principal: row.principal,
            secret_printable: row.secret_printable,
            secret_b64: row.secret_b64,
            outcome: row.outcome,
            attempt_count: u64::try_from(row.attempt_count)
                .map_err(|_| DbError::Other(anyhow::anyhow!("negative attempt count {}", row.attempt_count)))?,
            first_seen: time(row.first_seen)?,
            last_seen: time(row.last_seen)?,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct CursorRow {
    file_id: String,
    byte_offset: i64,
}

impl TryFrom<CursorRow> for IngestCursor {
    type Error = DbError;

    fn try_from(row: CursorRow) -> Result<Self, DbError> {
        let offset = u64::try_from(row.byte_offset)
            .map_err(|_| DbError::Other(anyhow::anyhow!("negative ingest offset {}", row.byte_offset)))?;
        Ok(IngestCursor { file_id: row.file_id, offset })
    }
}

/// A cursor offset as the BIGINT column holds it.
pub(super) fn stored_offset(cursor: &IngestCursor) -> Result<i64, DbError> {
    i64::try_from(cursor.offset)
        .map_err(|_| DbError::Other(anyhow::anyhow!("ingest offset {} too large", cursor.offset)))
}

/// The NUL-joined parts, hashed: a fixed-width unique key for values too long to index together.
fn dedup_key(parts: &[&str]) -> String {
    let mut hash = Sha256::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            hash.update([0]);
        }
        hash.update(part.as_bytes());
    }
    format!("{:x}", hash.finalize())
}

/// What makes a bounty the same bounty: its type, its attacker and its payload.
pub(super) fn bounty_key(bounty: &NewBounty) -> String {
    dedup_key(&[&bounty.bounty_type, &bounty.attacker_ip, &bounty.payload])
}

/// The principal as the unique key sees it: none is the empty principal.
pub(super) fn principal_key(credential: &NewCredential) -> &str {
    credential.principal.as_deref().unwrap_or("")
}

/// What makes a credential the same credential: who tried which secret, for whom, where.
pub(super) fn credential_key(credential: &NewCredential) -> String {
    dedup_key(&[
        &credential.attacker_ip,
        &credential.decky,
        &credential.service,
        &credential.secret_kind,
        &credential.secret_sha256,
        principal_key(credential),
    ])
}

/// A `LIKE` pattern matching `text` anywhere, its wildcards (`%`, `_`) and the escape character
/// (`\`) taken literally: use it with `escape '\'`.
pub(super) fn contains_pattern(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 2);
    pattern.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// Bytes a log row sends to the server, roughly: its text plus a little per column.
pub(super) fn log_size(log: &NewLog) -> usize {
    const PER_COLUMN: usize = 16;
    log.decky.len()
        + log.service.len()
        + log.event_type.len()
        + log.attacker_ip.len()
        + log.raw_line.len()
        + log.fields.len()
        + log.msg.as_ref().map_or(0, String::len)
        + 8 * PER_COLUMN
}

pub(super) fn bounty_size(bounty: &NewBounty) -> usize {
    bounty.decky.len()
        + bounty.service.len()
        + bounty.attacker_ip.len()
        + bounty.bounty_type.len()
        + bounty.payload.len()
        + 64
        + 7 * 16
}

pub(super) fn credential_size(credential: &NewCredential) -> usize {
    credential.attacker_ip.len()
        + credential.decky.len()
        + credential.service.len()
        + credential.secret_kind.len()
        + credential.secret_sha256.len()
        + 2 * credential.principal.as_ref().map_or(0, String::len)
        + credential.secret_printable.len()
        + credential.secret_b64.len()
        + credential.outcome.as_ref().map_or(0, String::len)
        + 64
        + 13 * 16
}

/// The logs counted per minute (epoch milliseconds of the minute's start), oldest first.
pub(super) fn per_minute(logs: &[NewLog]) -> Vec<(i64, i64)> {
    let mut minutes = std::collections::BTreeMap::new();
    for log in logs {
        let at = millis(log.timestamp);
        *minutes.entry(at - at.rem_euclid(60_000)).or_insert(0) += 1;
    }
    minutes.into_iter().collect()
}

/// Splits `items` into the row sets of multi-row statements: none over `max_rows` rows or over
/// `max_bytes` (by `size`; a single larger row goes alone). Every set holds a power of two rows, so
/// a backend prepares at most one statement per power of two and its statement cache stays small
/// whatever the batch sizes.
pub(super) fn row_sets<T>(items: &[T], max_rows: usize, max_bytes: usize, size: impl Fn(&T) -> usize) -> Vec<&[T]> {
    let max_rows = prev_power_of_two(max_rows.max(1));
    let mut sets = Vec::new();
    let mut rest = items;
    while !rest.is_empty() {
        let mut rows = 0;
        let mut bytes = 0;
        while rows < rest.len() && rows < max_rows {
            let next = size(&rest[rows]);
            if rows > 0 && bytes + next > max_bytes {
                break;
            }
            bytes += next;
            rows += 1;
        }
        let rows = prev_power_of_two(rows);
        let (set, tail) = rest.split_at(rows);
        sets.push(set);
        rest = tail;
    }
    sets
}

fn prev_power_of_two(n: usize) -> usize {
    if n.is_power_of_two() { n } else { n.next_power_of_two() / 2 }
}

/// The `state` key of the profiler's cursor: the decimal id of the last log row folded in.
pub(super) const PROFILER_CURSOR_KEY: &str = "profiler_cursor";

/// The ingest lease source the profiler holds while it commits.
pub(super) const PROFILER_LEASE_SOURCE: &str = super::attackers::PROFILER_LEASE_SOURCE;

/// The stored cursor value as a log id; no row is 0.
pub(super) fn profiler_cursor_value(stored: Option<String>) -> Result<i64, DbError> {
    match stored {
        None => Ok(0),
        Some(text) => text
            .trim()
            .parse()
            .map_err(|e| DbError::Other(anyhow::anyhow!("stored profiler cursor `{text}` is invalid: {e}"))),
    }
}

fn json_text<T: serde::Serialize + ?Sized>(value: &T) -> String {
    // Strings, lists of strings and `serde_json::Value`s always serialise.
    serde_json::to_string(value).expect("JSON values serialise")
}

/// What a profile row holds beyond the profile's own fields: its lists as JSON text and the values
/// derived from them, stored so SQL can sort and filter on them.
pub(super) struct ProfileColumns<'a> {
    pub profile: &'a AttackerProfile,
    pub uuid: String,
    pub services: String,
    pub deckies: String,
    pub traversal_path: String,
    pub is_traversal: bool,
}

impl<'a> ProfileColumns<'a> {
    pub fn new(profile: &'a AttackerProfile) -> Self {
        ProfileColumns {
            profile,
            uuid: profile.uuid.to_string(),
            services: json_text(&profile.services),
            deckies: json_text(&profile.deckies),
            traversal_path: profile.traversal_path(),
            is_traversal: profile.is_traversal(),
        }
    }

    pub fn size(&self) -> usize {
        self.uuid.len()
            + self.profile.ip.len()
            + self.services.len()
            + self.deckies.len()
            + self.traversal_path.len()
            + self.profile.fingerprints.len()
            + self.profile.behavior.len()
            + self.profile.fold_state.len()
            + 18 * 16
    }
}

/// The two texts of which one occurs in a JSON array of strings (as `serde_json` writes it) exactly
/// when the array holds `element`: its encoding after the `[` or the `,` that opens an element. An
/// encoded string cannot hold `["` or `,"` (a quote inside it is escaped), so neither text can match
/// inside another element, nor a prefix or suffix of one.
pub(super) fn json_element_needles(element: &str) -> [String; 2] {
    let encoded = json_text(element);
    [format!("[{encoded}"), format!(",{encoded}")]
}

#[derive(sqlx::FromRow)]
pub(super) struct AttackerRow {
    uuid: String,
    ip: String,
    first_seen: i64,
    last_seen: i64,
    event_count: i64,
    services: String,
    deckies: String,
    bounty_count: i64,
    credential_count: i64,
    fingerprints: String,
    command_count: i64,
    behavior: String,
    fold_state: String,
    updated_at: i64,
}

/// The columns an [`AttackerRow`] reads.
pub(super) const ATTACKER_COLUMNS: &str = "uuid, ip, first_seen, last_seen, event_count, services, deckies, \
     bounty_count, credential_count, fingerprints, command_count, behavior, fold_state, updated_at";

fn string_list(column: &str, text: &str) -> Result<Vec<String>, DbError> {
    serde_json::from_str(text)
        .map_err(|e| DbError::Other(anyhow::anyhow!("stored {column} `{text}` is not a JSON list of strings: {e}")))
}

impl TryFrom<AttackerRow> for AttackerProfile {
    type Error = DbError;

    fn try_from(row: AttackerRow) -> Result<Self, DbError> {
        Ok(AttackerProfile {
            uuid: parse_uuid(&row.uuid)?,
            ip: row.ip,
            first_seen: time(row.first_seen)?,
            last_seen: time(row.last_seen)?,
            event_count: row.event_count,
            services: string_list("services", &row.services)?,
            deckies: string_list("deckies", &row.deckies)?,
            bounty_count: row.bounty_count,
            credential_count: row.credential_count,
            fingerprints: row.fingerprints,
            command_count: row.command_count,
            behavior: row.behavior,
            fold_state: row.fold_state,
            updated_at: time(row.updated_at)?,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct CommandRow {
    log_id: i64,
    timestamp: i64,
    service: String,
    decky: String,
    command: String,
}

impl TryFrom<CommandRow> for AttackerCommand {
    type Error = DbError;

    fn try_from(row: CommandRow) -> Result<Self, DbError> {
        Ok(AttackerCommand {
            log_id: row.log_id,
            timestamp: time(row.timestamp)?,
            service: row.service,
            decky: row.decky,
            command: row.command,
        })
    }
}

/// How many rows each attacker's command list gains from `commands`: those whose log id is neither
/// in `stored` nor earlier in the batch, as the insert keeps them. Keyed by uuid text, sorted.
pub(super) fn new_command_counts(
    commands: &[(Uuid, AttackerCommand)],
    mut stored: std::collections::HashSet<i64>,
) -> Vec<(String, i64)> {
    let mut counts = std::collections::BTreeMap::new();
    for (uuid, command) in commands {
        if stored.insert(command.log_id) {
            *counts.entry(uuid.to_string()).or_insert(0) += 1;
        }
    }
    counts.into_iter().collect()
}

pub(super) fn command_size(command: &(Uuid, AttackerCommand)) -> usize {
    let (_, command) = command;
    36 + command.service.len() + command.decky.len() + command.command.len() + 6 * 16
}

/// An observation as its row stores it: its id (a new one when it has none), the attacker it is
/// attributed to, its value as JSON text and its evidence key.
pub(super) struct ObservationColumns<'a> {
    pub observation: &'a Observation,
    pub id: String,
    pub attacker_uuid: Option<String>,
    pub value: String,
    pub evidence_key: Option<String>,
}

impl<'a> ObservationColumns<'a> {
    pub fn new(observation: &'a Observation) -> Self {
        ObservationColumns {
            observation,
            id: observation.id.clone().unwrap_or_else(|| Uuid::new_v4().to_string()),
            attacker_uuid: observation
                .identity_ref
                .as_deref()
                .and_then(|r| r.trim().parse::<Uuid>().ok())
                .map(|u| u.to_string()),
            value: json_text(&observation.value),
            evidence_key: observation.evidence_ref.as_deref().map(|r| dedup_key(&[r, &observation.primitive])),
        }
    }

    pub fn size(&self) -> usize {
        let o = self.observation;
        self.id.len()
            + o.identity_ref.as_ref().map_or(0, String::len)
            + o.primitive.len()
            + self.value.len()
            + o.source.len()
            + o.evidence_ref.as_ref().map_or(0, String::len)
            + 64
            + 36
            + 15 * 16
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct ObservationRow {
    id: String,
    identity_ref: Option<String>,
    primitive: String,
    value: String,
    confidence: f64,
    window_start: f64,
    window_end: f64,
    source: String,
    evidence_ref: Option<String>,
    envelope_v: i64,
    ts: Option<f64>,
}

/// The columns an [`ObservationRow`] reads.
pub(super) const OBSERVATION_COLUMNS: &str = "id, identity_ref, primitive, value, confidence, window_start, \
     window_end, source, evidence_ref, envelope_v, ts";

impl TryFrom<ObservationRow> for Observation {
    type Error = DbError;

    fn try_from(row: ObservationRow) -> Result<Self, DbError> {
        let value = serde_json::from_str(&row.value)
            .map_err(|e| DbError::Other(anyhow::anyhow!("stored value of observation {} is not JSON: {e}", row.id)))?;
        Ok(Observation {
            primitive: row.primitive,
            value,
            confidence: row.confidence,
            window: Window { start_ts: row.window_start, end_ts: row.window_end },
            source: row.source,
            id: Some(row.id),
            identity_ref: row.identity_ref,
            evidence_ref: row.evidence_ref,
            ts: row.ts,
            v: row.envelope_v,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_sets_are_powers_of_two_within_both_limits() {
        let items: Vec<usize> = vec![10; 1000];
        let sets = row_sets(&items, 300, usize::MAX, |n| *n);
        let lens: Vec<usize> = sets.iter().map(|s| s.len()).collect();
        assert_eq!(lens, [256, 256, 256, 128, 64, 32, 8]);
        assert_eq!(lens.iter().sum::<usize>(), 1000);

        let sets = row_sets(&items, 4096, 95, |n| *n);
        assert!(sets.iter().all(|s| s.len() == 8));
        assert_eq!(sets.len(), 125);

        // A row over the byte budget goes alone; the others still share statements.
        let items = [1, 1, 500, 1, 1, 1];
        let lens: Vec<usize> = row_sets(&items, 64, 100, |n| *n).iter().map(|s| s.len()).collect();
        assert_eq!(lens, [2, 1, 2, 1]);
        assert!(row_sets::<usize>(&[], 64, 100, |n| *n).is_empty());
    }

    #[test]
    fn like_patterns_take_wildcards_literally() {
        assert_eq!(contains_pattern("a%b_c\\d"), "%a\\%b\\_c\\\\d%");
        assert_eq!(contains_pattern(""), "%%");
    }

    #[test]
    fn json_element_needles_match_whole_elements_only() {
        let holds = |list: &[&str], element: &str| {
            let text = json_text(list);
            json_element_needles(element).iter().any(|needle| text.contains(needle.as_str()))
        };
        assert!(holds(&["ssh"], "ssh"));
        assert!(holds(&["http", "ssh"], "ssh"));
        assert!(!holds(&["ssh-alt"], "ssh"));
        assert!(!holds(&["ssh"], "ss"));
        assert!(!holds(&["xssh"], "ssh"));
        assert!(!holds(&["a\"ssh"], "ssh"), "an escaped quote does not open an element");
        assert!(!holds(&["a,\"ssh\""], "ssh"));
        assert!(holds(&["a\"ssh"], "a\"ssh"));
        assert!(holds(&["ssh\\"], "ssh\\"));
        assert!(!holds(&["ssh\\"], "ssh"));
        assert!(holds(&["ü \"q\""], "ü \"q\""));
        assert!(!holds(&[], "ssh"));
    }

    #[test]
    fn only_commands_new_to_the_store_and_the_batch_are_counted() {
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let command = |log_id| AttackerCommand {
            log_id,
            timestamp: DateTime::UNIX_EPOCH,
            service: "ssh".into(),
            decky: "ssh-01".into(),
            command: "id".into(),
        };
        let batch = [(a, command(1)), (a, command(2)), (b, command(3)), (b, command(2)), (a, command(3))];
        let counts = new_command_counts(&batch, [1].into());
        assert_eq!(counts, [(a.to_string(), 1), (b.to_string(), 1)]);
    }

    #[test]
    fn profiler_cursor_is_zero_until_stored() {
        assert_eq!(profiler_cursor_value(None).unwrap(), 0);
        assert_eq!(profiler_cursor_value(Some("1234".into())).unwrap(), 1234);
        assert!(profiler_cursor_value(Some("x".into())).is_err());
    }

    #[test]
    fn observation_columns_attribute_and_key_the_record() {
        let uuid = Uuid::new_v4();
        let record = Observation {
            primitive: "motor.keystroke_cadence".into(),
            value: serde_json::json!({"a": [1, 2]}),
            confidence: 1.0,
            window: Window { start_ts: 1.0, end_ts: 2.0 },
            source: "s".into(),
            id: None,
            identity_ref: Some(uuid.to_string().to_uppercase()),
            evidence_ref: None,
            ts: None,
            v: 1,
        };
        let columns = ObservationColumns::new(&record);
        assert!(columns.id.parse::<Uuid>().is_ok(), "a record without an id gets a UUID");
        assert_eq!(columns.attacker_uuid, Some(uuid.to_string()));
        assert_eq!(columns.value, r#"{"a":[1,2]}"#);
        assert_eq!(columns.evidence_key, None, "no evidence, no key: such records never collide");

        let other = Observation { identity_ref: Some("someone".into()), evidence_ref: Some("e".into()), ..record };
        let columns = ObservationColumns::new(&other);
        assert_eq!(columns.attacker_uuid, None);
        assert_eq!(columns.evidence_key, Some(dedup_key(&["e", "motor.keystroke_cadence"])));
        let key = columns.evidence_key.clone();
        let shifted =
            Observation { evidence_ref: Some("em".into()), primitive: "otor.keystroke_cadence".into(), ..other };
        assert_ne!(ObservationColumns::new(&shifted).evidence_key, key);
    }

    #[test]
    fn dedup_keys_separate_their_parts() {
        let bounty = |t: &str, ip: &str, p: &str| NewBounty {
            timestamp: Utc::now(),
            decky: "d".into(),
            service: "s".into(),
            attacker_ip: ip.into(),
            bounty_type: t.into(),
            payload: p.into(),
        };
        assert_eq!(bounty_key(&bounty("a", "b", "c")).len(), 64);
        assert_ne!(bounty_key(&bounty("a", "bc", "")), bounty_key(&bounty("ab", "c", "")));
        // Only type, attacker and payload count.
        let mut other = bounty("a", "b", "c");
        other.decky = "elsewhere".into();
        assert_eq!(bounty_key(&bounty("a", "b", "c")), bounty_key(&other));
    }
}
