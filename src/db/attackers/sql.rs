//! The attackers' statements, written once for both backends: the profiler's reads and its one
//! commit, and the attacker views.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use chrono::Utc;
use sqlx::QueryBuilder;
use uuid::Uuid;

use super::{
    AttackerCommand, AttackerEvidence, AttackerFilter, AttackerProfile, AttackerSort, AttackerStore, AttackerWindow,
    ChangePosition, MAX_PROFILE_FINGERPRINTS, PROFILER_LEASE_SOURCE, ProfilerBatch,
};
use crate::db::codec::{
    MAX_IN_LIST, MAX_ROWS_PER_INSERT, bigint, contains_pattern, convert, count, json_text, millis, parse_uuid,
    row_sets, settle, time,
};
use crate::db::dialect::both_backends;
use crate::db::observations::ObservationColumns;
use crate::db::{DbError, DbResult, Page};

/// Rows per multi-row insert of profiles: at 18 values a row, 1024 rows stay under sqlite's 32766
/// bound variables.
const MAX_PROFILE_ROWS_PER_INSERT: usize = 1024;

/// Attackers per statement of `recent_commands`: sqlite allows at most 500 terms in a compound
/// select.
const MAX_UNION_TERMS: usize = 100;

/// The `state` key of the profiler's cursor: the decimal id of the last log row folded in.
const PROFILER_CURSOR_KEY: &str = "profiler_cursor";

/// The columns an [`AttackerRow`] reads.
const ATTACKER_COLUMNS: &str = "uuid, ip, first_seen, last_seen, event_count, services, deckies, \
     bounty_count, credential_count, fingerprints, command_count, behavior, fold_state, updated_at";

/// The profile columns a commit replaces: all but `command_count`, which the command rows keep.
const REPLACED_PROFILE_COLUMNS: &[&str] = &[
    "ip",
    "first_seen",
    "last_seen",
    "event_count",
    "service_count",
    "decky_count",
    "services",
    "deckies",
    "traversal_path",
    "is_traversal",
    "bounty_count",
    "credential_count",
    "fingerprints",
    "behavior",
    "fold_state",
    "updated_at",
];

/// What a profiler record replaces of the one it measured before, keeping its id.
const REPLACED_OBSERVATION_COLUMNS: &[&str] = &[
    "attacker_uuid",
    "identity_ref",
    "value",
    "confidence",
    "window_start",
    "window_end",
    "source",
    "envelope_v",
    "ts",
    "received_at",
];

#[derive(sqlx::FromRow)]
struct AttackerRow {
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

fn string_list(column: &str, text: &str) -> Result<Vec<String>, DbError> {
    serde_json::from_str(text)
        .map_err(|e| DbError::Corrupt(anyhow::anyhow!("stored {column} `{text}` is not a JSON list of strings: {e}")))
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
struct CommandRow {
    log_id: i64,
    timestamp: i64,
    service: String,
    decky: String,
    command: String,
}

/// A command with the attacker it belongs to, for reads over several attackers.
#[derive(sqlx::FromRow)]
struct RecentCommandRow {
    attacker_uuid: String,
    #[sqlx(flatten)]
    command: CommandRow,
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
fn new_command_counts(commands: &[(Uuid, AttackerCommand)], mut stored: HashSet<i64>) -> Vec<(String, i64)> {
    let mut counts = std::collections::BTreeMap::new();
    for (uuid, command) in commands {
        if stored.insert(command.log_id) {
            *counts.entry(uuid.to_string()).or_insert(0) += 1;
        }
    }
    counts.into_iter().collect()
}

fn command_size(command: &(Uuid, AttackerCommand)) -> usize {
    let (_, command) = command;
    36 + command.service.len() + command.decky.len() + command.command.len() + 6 * 16
}

/// The stored cursor value as a log id; no row is 0.
fn profiler_cursor_value(stored: Option<String>) -> DbResult<i64> {
    match stored {
        None => Ok(0),
        Some(text) => text
            .trim()
            .parse()
            .map_err(|e| DbError::Corrupt(anyhow::anyhow!("stored profiler cursor `{text}` is invalid: {e}"))),
    }
}

/// What a profile row holds beyond the profile's own fields: its lists as JSON text and the values
/// derived from them, stored so SQL can sort and filter on them.
struct ProfileColumns<'a> {
    profile: &'a AttackerProfile,
    uuid: String,
    services: String,
    deckies: String,
    traversal_path: String,
    is_traversal: bool,
}

impl<'a> ProfileColumns<'a> {
    fn new(profile: &'a AttackerProfile) -> Self {
        ProfileColumns {
            profile,
            uuid: profile.uuid.to_string(),
            services: json_text(&profile.services),
            deckies: json_text(&profile.deckies),
            traversal_path: profile.traversal_path(),
            is_traversal: profile.is_traversal(),
        }
    }

    fn size(&self) -> usize {
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
fn json_element_needles(element: &str) -> [String; 2] {
    let encoded = json_text(element);
    [format!("[{encoded}"), format!(",{encoded}")]
}

both_backends! {
    type Connection = <Sql as sqlx::Database>::Connection;

    #[async_trait]
    impl AttackerStore for Backend {
        async fn profiler_cursor(&self) -> DbResult<i64> {
            let stored: Option<(String,)> = sqlx::query_as("select value from state where `key` = ?")
                .bind(PROFILER_CURSOR_KEY)
                .fetch_optional(&self.pool)
                .await?;
            profiler_cursor_value(stored.map(|(v,)| v))
        }

        async fn attackers_by_ip(&self, ips: &[String]) -> DbResult<Vec<AttackerProfile>> {
            let mut profiles = Vec::new();
            for ips in ips.chunks(MAX_IN_LIST) {
                let mut select =
                    QueryBuilder::<Sql>::new(format!("select {ATTACKER_COLUMNS} from attackers where ip in ("));
                let mut list = select.separated(", ");
                for ip in ips {
                    list.push_bind(Backend::indexed(ip));
                }
                select.push(")");
                let rows: Vec<AttackerRow> = select.build_query_as().fetch_all(&self.pool).await?;
                profiles.extend(convert::<_, AttackerProfile>(rows)?);
            }
            Ok(profiles)
        }

        async fn attacker_evidence(&self, ips: &[String]) -> DbResult<Vec<AttackerEvidence>> {
            // Keyed by the address as the table compares it (on MySQL: cut to its column, as the
            // ingester cut it, and in any letter case, so one group may answer an address asked in
            // another case).
            let mut found: HashMap<String, AttackerEvidence> = HashMap::new();
            for chunk in ips.chunks(MAX_IN_LIST) {
                let in_list = |query: &mut QueryBuilder<'_, Sql>| {
                    query.push(" attacker_ip in (");
                    let mut list = query.separated(", ");
                    for ip in chunk {
                        list.push_bind(Backend::indexed(ip).to_string());
                    }
                    query.push(")");
                };
                // The first few of each address, without reading the rest out of the database.
                let mut fingerprints = QueryBuilder::<Sql>::new(
                    "select attacker_ip, payload from (select attacker_ip, payload, id, \
                     row_number() over (partition by attacker_ip order by id) as n \
                     from bounty where bounty_type = 'fingerprint' and",
                );
                in_list(&mut fingerprints);
                fingerprints.push(") as numbered where n <= ").push_bind(i64::from(MAX_PROFILE_FINGERPRINTS));
                fingerprints.push(" order by id");
                let rows: Vec<(String, String)> = fingerprints.build_query_as().fetch_all(&self.pool).await?;
                for (ip, payload) in rows {
                    found.entry(Backend::compared(&ip)).or_default().fingerprints.push(payload);
                }
                let mut bounties = QueryBuilder::<Sql>::new("select attacker_ip, count(*) from bounty where");
                in_list(&mut bounties);
                bounties.push(" group by attacker_ip");
                let rows: Vec<(String, i64)> = bounties.build_query_as().fetch_all(&self.pool).await?;
                for (ip, n) in rows {
                    found.entry(Backend::compared(&ip)).or_default().bounty_count = n;
                }
                let mut credentials = QueryBuilder::<Sql>::new("select attacker_ip, count(*) from credentials where");
                in_list(&mut credentials);
                credentials.push(" group by attacker_ip");
                let rows: Vec<(String, i64)> = credentials.build_query_as().fetch_all(&self.pool).await?;
                for (ip, n) in rows {
                    found.entry(Backend::compared(&ip)).or_default().credential_count = n;
                }
            }
            Ok(ips
                .iter()
                .map(|ip| AttackerEvidence {
                    ip: ip.clone(),
                    ..found.get(&Backend::compared(ip)).cloned().unwrap_or_default()
                })
                .collect())
        }

        async fn commit_profiles(&self, holder: &str, expected_cursor: i64, batch: &ProfilerBatch) -> DbResult<()> {
            let now = Utc::now();
            let profiles: Vec<ProfileColumns<'_>> = batch.profiles.iter().map(ProfileColumns::new).collect();
            let observations: Vec<ObservationColumns<'_>> =
                batch.observations.iter().map(ObservationColumns::new).collect();
            let mut ips = HashSet::new();
            if let Some(twice) = batch.profiles.iter().find(|p| !ips.insert(Backend::indexed(&p.ip))) {
                return Err(anyhow::anyhow!("two profiles of {} in one profiler batch", twice.ip).into());
            }

            let mut tx = self.begin_write().await?;
            let result: DbResult<()> = async {
                Backend::check_lease(&mut tx, PROFILER_LEASE_SOURCE, holder, now).await?;
                let stored: Option<(String,)> =
                    sqlx::query_as(&format!("select value from state where `key` = ?{}", Backend::FOR_UPDATE))
                        .bind(PROFILER_CURSOR_KEY)
                        .fetch_optional(&mut *tx)
                        .await?;
                if profiler_cursor_value(stored.map(|(v,)| v))? != expected_cursor {
                    return Err(DbError::Conflict);
                }
                check_addresses_are_ours(&mut tx, &profiles).await?;
                upsert_profiles(&mut tx, &profiles).await?;
                insert_commands(&mut tx, &batch.commands).await?;

                for rows in
                    row_sets(&observations, MAX_ROWS_PER_INSERT, Backend::MAX_BYTES_PER_INSERT, ObservationColumns::size)
                {
                    // The profiler's own records replace what they measured before, under the stored
                    // id. An id stored already for other evidence leaves that record alone (sqlite).
                    let mut upsert = Backend::insert_observations("insert", rows, now);
                    upsert.push(Backend::replace("evidence_key", REPLACED_OBSERVATION_COLUMNS));
                    upsert.push(Backend::SKIP_HELD);
                    upsert.build().execute(&mut *tx).await?;
                }

                sqlx::query(&format!(
                    "insert into state (`key`, value) values (?, ?){}",
                    Backend::replace("`key`", &["value"])
                ))
                .bind(PROFILER_CURSOR_KEY)
                .bind(batch.last_log_id.to_string())
                .execute(&mut *tx)
                .await?;
                Ok(())
            }
            .await;
            settle(tx, result).await
        }

        async fn attackers(
            &self,
            filter: &AttackerFilter,
            limit: u32,
            offset_rows: u64,
        ) -> DbResult<Page<AttackerProfile>> {
            let mut select = QueryBuilder::<Sql>::new(format!("select {ATTACKER_COLUMNS} from attackers"));
            push_attacker_filter(&mut select, filter);
            select.push(match filter.sort {
                AttackerSort::Recent => " order by last_seen desc, uuid desc",
                AttackerSort::Active => " order by event_count desc, uuid desc",
                AttackerSort::Traversals => " order by is_traversal desc, last_seen desc, uuid desc",
            });
            select.push(" limit ").push_bind(i64::from(limit));
            select.push(" offset ").push_bind(bigint(offset_rows));
            let rows: Vec<AttackerRow> = select.build_query_as().fetch_all(&self.pool).await?;

            let mut count_query = QueryBuilder::<Sql>::new("select count(*) from attackers");
            push_attacker_filter(&mut count_query, filter);
            let (total,): (i64,) = count_query.build_query_as().fetch_one(&self.pool).await?;
            Ok(Page { total: count(total), rows: convert(rows)? })
        }

        async fn attacker(&self, uuid: Uuid) -> DbResult<AttackerProfile> {
            let row: AttackerRow = sqlx::query_as(&format!("select {ATTACKER_COLUMNS} from attackers where uuid = ?"))
                .bind(uuid.to_string())
                .fetch_one(&self.pool)
                .await?;
            row.try_into()
        }

        async fn services_with_commands(&self, attacker: Uuid, services: &[String]) -> DbResult<Vec<String>> {
            let mut ran_on = Vec::new();
            // One indexed probe a service: an attacker is seen on a handful.
            for service in services {
                let ran: Option<(i64,)> =
                    sqlx::query_as("select 1 from attacker_commands where attacker_uuid = ? and service = ? limit 1")
                        .bind(attacker.to_string())
                        .bind(Backend::indexed(service))
                        .fetch_optional(&self.pool)
                        .await?;
                if ran.is_some() {
                    ran_on.push(service.clone());
                }
            }
            Ok(ran_on)
        }

        async fn attacker_commands(
            &self,
            attacker: Uuid,
            service: Option<&str>,
            limit: u32,
            offset_rows: u64,
        ) -> DbResult<Page<AttackerCommand>> {
            let filter = |query: &mut QueryBuilder<'_, Sql>| {
                query.push(" where attacker_uuid = ").push_bind(attacker.to_string());
                if let Some(service) = service {
                    query.push(" and service = ").push_bind(Backend::indexed(service).to_string());
                }
            };
            let mut select =
                QueryBuilder::<Sql>::new("select log_id, timestamp, service, decky, command from attacker_commands");
            filter(&mut select);
            select.push(" order by timestamp desc, log_id desc limit ").push_bind(i64::from(limit));
            select.push(" offset ").push_bind(bigint(offset_rows));
            let rows: Vec<CommandRow> = select.build_query_as().fetch_all(&self.pool).await?;

            let total: Option<(i64,)> = if service.is_some() {
                let mut count_query = QueryBuilder::<Sql>::new("select count(*) from attacker_commands");
                filter(&mut count_query);
                count_query.build_query_as().fetch_optional(&self.pool).await?
            } else {
                sqlx::query_as("select command_count from attackers where uuid = ?")
                    .bind(attacker.to_string())
                    .fetch_optional(&self.pool)
                    .await?
            };
            Ok(Page { total: total.map_or(0, |(total,)| count(total)), rows: convert(rows)? })
        }

        async fn recent_commands(
            &self,
            attackers: &[Uuid],
            per_attacker: u32,
            max_chars: u32,
        ) -> DbResult<HashMap<Uuid, Vec<AttackerCommand>>> {
            let mut recent: HashMap<Uuid, Vec<AttackerCommand>> = HashMap::new();
            for chunk in attackers.chunks(MAX_UNION_TERMS) {
                // A union of per-attacker limited walks: a window function over `attacker_uuid in
                // (…)` would read every command of every attacker on the page.
                let mut union = QueryBuilder::<Sql>::new("");
                for (n, attacker) in chunk.iter().enumerate() {
                    if n > 0 {
                        union.push(" union all ");
                    }
                    union
                        .push("select * from (select attacker_uuid, log_id, timestamp, service, decky, substr(command, 1, ")
                        .push_bind(i64::from(max_chars))
                        .push(") as command from attacker_commands where attacker_uuid = ")
                        .push_bind(attacker.to_string())
                        .push(" order by timestamp desc, log_id desc limit ")
                        .push_bind(i64::from(per_attacker))
                        .push(format!(") as recent_{n}"));
                }
                let rows: Vec<RecentCommandRow> = union.build_query_as().fetch_all(&self.pool).await?;
                for row in rows {
                    let attacker = parse_uuid(&row.attacker_uuid)?;
                    recent.entry(attacker).or_default().push(row.command.try_into()?);
                }
            }
            for commands in recent.values_mut() {
                commands.sort_by_key(|command| (command.timestamp, command.log_id));
            }
            Ok(recent)
        }

        async fn attackers_changed(
            &self,
            window: &AttackerWindow,
            after: Option<ChangePosition>,
            limit: u32,
        ) -> DbResult<Vec<AttackerProfile>> {
            let mut select = QueryBuilder::<Sql>::new(format!("select {ATTACKER_COLUMNS} from attackers where 1 = 1"));
            if let Some(since) = window.since {
                select.push(" and last_seen >= ").push_bind(millis(since));
            }
            if let Some(until) = window.until {
                select.push(" and first_seen <= ").push_bind(millis(until));
            }
            if let Some(changed_after) = window.changed_after {
                select.push(" and updated_at > ").push_bind(millis(changed_after));
            }
            if let Some(after) = after {
                let at = millis(after.updated_at);
                select.push(" and (updated_at > ").push_bind(at);
                select.push(" or (updated_at = ").push_bind(at).push(" and uuid > ").push_bind(after.uuid.to_string());
                select.push("))");
            }
            select.push(" order by updated_at, uuid limit ").push_bind(i64::from(limit));
            let rows: Vec<AttackerRow> = select.build_query_as().fetch_all(&self.pool).await?;
            convert(rows)
        }
    }

    /// `Conflict` when an address of `profiles` is stored under another uuid: someone else
    /// profiled it meanwhile. An upsert would not tell (MySQL's takes any unique key, so it would
    /// merge the two silently). On MySQL the rows found stay locked to the end of the transaction.
    async fn check_addresses_are_ours(tx: &mut Connection, profiles: &[ProfileColumns<'_>]) -> DbResult<()> {
        for rows in row_sets(profiles, MAX_IN_LIST, usize::MAX, |_| 0) {
            let mut select = QueryBuilder::<Sql>::new("select uuid, ip from attackers where ip in (");
            let mut list = select.separated(", ");
            for row in rows {
                list.push_bind(Backend::indexed(&row.profile.ip));
            }
            select.push(")").push(Backend::FOR_UPDATE);
            let held: Vec<(String, String)> = select.build_query_as().fetch_all(&mut *tx).await?;
            // Every row found holds one of our addresses as the column compares them, so each must
            // be the profile of that address.
            let ours: HashMap<String, &str> =
                rows.iter().map(|r| (Backend::compared(&r.profile.ip), r.uuid.as_str())).collect();
            if held.iter().any(|(uuid, ip)| ours.get(&Backend::compared(ip)) != Some(&uuid.as_str())) {
                return Err(DbError::Conflict);
            }
        }
        Ok(())
    }

    /// Inserts or replaces the profiles, by uuid; `command_count` is left to the command rows.
    async fn upsert_profiles(tx: &mut Connection, profiles: &[ProfileColumns<'_>]) -> DbResult<()> {
        for rows in row_sets(profiles, MAX_PROFILE_ROWS_PER_INSERT, Backend::MAX_BYTES_PER_INSERT, ProfileColumns::size)
        {
            let mut upsert = QueryBuilder::<Sql>::new(
                "insert into attackers (uuid, ip, first_seen, last_seen, event_count, service_count, decky_count, \
                 services, deckies, traversal_path, is_traversal, bounty_count, credential_count, fingerprints, \
                 command_count, behavior, fold_state, updated_at) ",
            );
            upsert.push_values(rows, |mut row, p| {
                row.push_bind(p.uuid.as_str())
                    .push_bind(Backend::indexed(&p.profile.ip))
                    .push_bind(millis(p.profile.first_seen))
                    .push_bind(millis(p.profile.last_seen))
                    .push_bind(p.profile.event_count)
                    .push_bind(p.profile.service_count())
                    .push_bind(p.profile.decky_count())
                    .push_bind(p.services.as_str())
                    .push_bind(p.deckies.as_str())
                    .push_bind(p.traversal_path.as_str())
                    .push_bind(p.is_traversal)
                    .push_bind(p.profile.bounty_count)
                    .push_bind(p.profile.credential_count)
                    .push_bind(p.profile.fingerprints.as_str())
                    // Counted from the rows below, whatever the caller tallied.
                    .push_bind(0)
                    .push_bind(p.profile.behavior.as_str())
                    .push_bind(p.profile.fold_state.as_str())
                    .push_bind(millis(p.profile.updated_at));
            });
            upsert.push(Backend::replace("uuid", REPLACED_PROFILE_COLUMNS));
            upsert.build().execute(&mut *tx).await?;
        }
        Ok(())
    }

    /// Inserts the commands whose log id is not stored yet, and grows each attacker's
    /// `command_count` by the rows it gained: a step costs the same however long the attacker's
    /// history, where a recount would read all of it.
    async fn insert_commands(tx: &mut Connection, commands: &[(Uuid, AttackerCommand)]) -> DbResult<()> {
        // A command's log id may be held already (rows folded again): it adds nothing to a count.
        let mut held_ids = HashSet::new();
        for commands in commands.chunks(MAX_IN_LIST) {
            let mut select = QueryBuilder::<Sql>::new("select log_id from attacker_commands where log_id in (");
            let mut list = select.separated(", ");
            for (_, command) in commands {
                list.push_bind(command.log_id);
            }
            select.push(")");
            let ids: Vec<(i64,)> = select.build_query_as().fetch_all(&mut *tx).await?;
            held_ids.extend(ids.into_iter().map(|(id,)| id));
        }
        let added = new_command_counts(commands, held_ids);

        for rows in row_sets(commands, MAX_ROWS_PER_INSERT, Backend::MAX_BYTES_PER_INSERT, command_size) {
            let mut insert = QueryBuilder::<Sql>::new(format!(
                "{} into attacker_commands (attacker_uuid, log_id, timestamp, service, decky, command) ",
                Backend::INSERT_OR_SKIP
            ));
            insert.push_values(rows, |mut row, (uuid, command)| {
                row.push_bind(uuid.to_string())
                    .push_bind(command.log_id)
                    .push_bind(millis(command.timestamp))
                    .push_bind(Backend::indexed(&command.service))
                    .push_bind(Backend::indexed(&command.decky))
                    .push_bind(command.command.as_str());
            });
            insert.push(Backend::SKIP_HELD);
            insert.build().execute(&mut *tx).await?;
        }

        for counts in added.chunks(MAX_IN_LIST) {
            let mut update =
                QueryBuilder::<Sql>::new("update attackers set command_count = command_count + case uuid");
            for (uuid, n) in counts {
                update.push(" when ").push_bind(uuid.as_str()).push(" then ").push_bind(*n);
            }
            update.push(" else 0 end where uuid in (");
            let mut list = update.separated(", ");
            for (uuid, _) in counts {
                list.push_bind(uuid.as_str());
            }
            update.push(")");
            update.build().execute(&mut *tx).await?;
        }
        Ok(())
    }

    /// Appends the `where` clause of `filter`, if it has any condition.
    fn push_attacker_filter(query: &mut QueryBuilder<'_, Sql>, filter: &AttackerFilter) {
        let mut joiner = " where ";
        if let Some(search) = &filter.search {
            query.push(joiner).push("ip like ").push_bind(contains_pattern(search)).push(Backend::LIKE_ESCAPE);
            joiner = " and ";
        }
        if let Some(service) = &filter.service {
            // `instr` compared byte for byte: exactly this service.
            let [first, later] = json_element_needles(service);
            query.push(joiner).push(format!("(instr(services{}, ", Backend::EXACT)).push_bind(first);
            query.push(format!(") > 0 or instr(services{}, ", Backend::EXACT)).push_bind(later).push(") > 0)");
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::DateTime;

    use super::*;

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
}
