//! Folding new log rows of one address into its profile. Pure: the stored profile (with its fold
//! state), the rows and the address's evidence in, the new profile, its commands and observations
//! out. Everything a later fold needs is in the profile's `fold_state`, so folding a log in any
//! number of batches, across any number of restarts, gives the same profile as folding it at once.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use svc::db::{AttackerCommand, AttackerEvidence, AttackerProfile, LogRecord};
use svc::observation::Observation;

use super::classify::{self, BehaviorClass, Timing};
use super::shell::{self, ShellTally};

/// Event types whose rows carry a command (DECNET's list).
pub const COMMAND_TYPES: [&str; 9] =
    ["command", "exec", "query", "input", "shell_input", "execute", "run", "sql_query", "redis_command"];
/// Where a command row keeps its text, first non-empty wins (DECNET's order).
const COMMAND_FIELDS: [&str; 6] = ["command", "query", "input", "line", "sql", "cmd"];
/// Event types whose commands are shell command lines. The others (`query`, `sql_query`,
/// `redis_command`) are protocol verbs, and so are these on a non-shell service (an FTP `RETR`).
const SHELL_TYPES: [&str; 6] = ["command", "exec", "input", "shell_input", "execute", "run"];
const SHELL_SERVICES: [&str; 4] = ["ssh", "telnet", "bash", "sh"];
const RECON_TYPES: [&str; 7] = ["scan", "connection", "banner", "probe", "login_attempt", "auth", "auth_failure"];
const EXFIL_TYPES: [&str; 8] =
    ["download", "upload", "file_transfer", "data_exfil", "command", "exec", "query", "shell_input"];
const SIZE_FIELDS: [&str; 3] = ["bytes", "size", "content_length"];
const LARGE_PAYLOAD_BYTES: f64 = 1024.0 * 1024.0;

/// What the profiler keeps per address to fold the next rows in. `#[serde(default)]` throughout,
/// so a state written by an older build loads (missing parts start empty).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FoldState {
    pub timing: RunningTiming,
    pub phases: Phases,
    pub shell: ShellTally,
}

/// Welford's running count, mean and sum of squared deviations of the inter-arrival times (ms),
/// their least and greatest, and their distribution for the median.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunningTiming {
    pub count: u64,
    pub mean_ms: f64,
    pub m2: f64,
    /// The latest timestamp folded so far, epoch ms.
    pub max_ts_ms: Option<i64>,
    pub min_gap_ms: Option<u64>,
    pub max_gap_ms: Option<u64>,
    /// How many gaps fell in each [`gap_bucket`]: the median without keeping every gap.
    pub gap_histogram: BTreeMap<u64, u64>,
}

/// The bucket of a gap: exact below a second, else rounded to three significant digits (0.5% at
/// most), so a profile holds at most 900 buckets a decade of gap lengths, however many events.
fn gap_bucket(gap_ms: u64) -> u64 {
    if gap_ms < 1000 {
        return gap_ms;
    }
    let mut step = 1u64;
    while gap_ms / step >= 1000 {
        step *= 10;
    }
    (gap_ms + step / 2) / step * step
}

impl RunningTiming {
    /// Rows come in id order, which is nearly but not always time order. The gap is taken to the
    /// latest timestamp so far, so a row older than that counts as a zero gap: the gaps then sum
    /// to `last_seen` minus the first row's time, and the mean is `(last_seen - first_seen) /
    /// (n - 1)` whenever the first row folded was the earliest.
    fn add(&mut self, ts_ms: i64) {
        let Some(max) = self.max_ts_ms else {
            self.max_ts_ms = Some(ts_ms);
            return;
        };
        let gap_ms = ts_ms.saturating_sub(max).max(0) as u64;
        self.min_gap_ms = Some(self.min_gap_ms.map_or(gap_ms, |least| least.min(gap_ms)));
        self.max_gap_ms = Some(self.max_gap_ms.map_or(gap_ms, |most| most.max(gap_ms)));
        *self.gap_histogram.entry(gap_bucket(gap_ms)).or_insert(0) += 1;
        let gap = gap_ms as f64;
        self.count += 1;
        let delta = gap - self.mean_ms;
        self.mean_ms += delta / self.count as f64;
        self.m2 += delta * (gap - self.mean_ms);
        self.max_ts_ms = Some(max.max(ts_ms));
    }

    /// The median gap in seconds (the mean of the middle two for an even count, as Python's
    /// `statistics.median`), to the histogram's precision; `None` before the second row, or for a
    /// state written before the histogram was kept.
    fn median_s(&self) -> Option<f64> {
        let total: u64 = self.gap_histogram.values().sum();
        if total == 0 {
            return None;
        }
        let at_rank = |rank: u64| {
            let mut seen = 0;
            self.gap_histogram.iter().find_map(|(&bucket, &n)| {
                seen += n;
                (seen > rank).then_some(bucket)
            })
        };
        let (low, high) = (at_rank((total - 1) / 2)?, at_rank(total / 2)?);
        Some((low + high) as f64 / 2.0 / 1000.0)
    }

    /// Mean and population standard deviation, seconds; `None` before the second row.
    fn stats_s(&self) -> Option<(f64, f64)> {
        (self.count > 0).then(|| {
            let variance = (self.m2 / self.count as f64).max(0.0);
            (self.mean_ms / 1000.0, variance.sqrt() / 1000.0)
        })
    }
}

/// The attack's phases (DECNET's `phases.py`), epoch ms.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Phases {
    /// The latest reconnaissance event.
    pub recon_end_ms: Option<i64>,
    /// The earliest exfiltration or command event.
    pub exfil_start_ms: Option<i64>,
    /// Rows that moved 1 MiB or more.
    pub large_payloads: u64,
}

/// A fold's result, to be stored in one transaction.
#[derive(Clone, Debug)]
pub struct Folded {
    pub profile: AttackerProfile,
    pub commands: Vec<AttackerCommand>,
    pub observations: Vec<Observation>,
}

/// Whether a row belongs to an attacker: rows without an address, or from no decky or service,
/// are skipped (as DECNET's engine does).
pub fn counts(row: &LogRecord) -> bool {
    !row.attacker_ip.is_empty() && row.attacker_ip != svc::logline::UNKNOWN_IP && row.decky != "-" && row.service != "-"
}

/// Folds `rows` (id ascending, all of address `ip`) into `stored`. `None` when no row counts: the
/// profile, if any, stays as it is.
pub fn fold(
    ip: &str,
    stored: Option<&AttackerProfile>,
    rows: &[&LogRecord],
    evidence: &AttackerEvidence,
    now: DateTime<Utc>,
) -> Option<Folded> {
    let mut rows = rows.iter().copied().filter(|row| counts(row)).peekable();
    let first = rows.peek()?.timestamp;
    let mut profile = stored.cloned().unwrap_or_else(|| AttackerProfile::new(ip, first, now));
    // A state that does not parse (hand-edited, or from a future build) starts over rather than
    // stopping the profiler; counts and first/last seen live in the profile itself.
    let mut state: FoldState = serde_json::from_str(&profile.fold_state).unwrap_or_default();
    let shell_before = state.shell.clone();
    let mut services: BTreeSet<String> = profile.services.iter().cloned().collect();
    let mut commands = Vec::new();

    for row in rows {
        let ts = row.timestamp.timestamp_millis();
        profile.first_seen = profile.first_seen.min(row.timestamp);
        profile.last_seen = profile.last_seen.max(row.timestamp);
        profile.event_count += 1;
        if !services.contains(&row.service) {
            services.insert(row.service.clone());
        }
        if !profile.deckies.contains(&row.decky) {
            profile.deckies.push(row.decky.clone());
        }
        state.timing.add(ts);
        let kind = row.event_type.as_str();
        if RECON_TYPES.contains(&kind) {
            state.phases.recon_end_ms = Some(state.phases.recon_end_ms.map_or(ts, |t| t.max(ts)));
        }
        if EXFIL_TYPES.contains(&kind) {
            state.phases.exfil_start_ms = Some(state.phases.exfil_start_ms.map_or(ts, |t| t.min(ts)));
        }
        let fields = Fields::new(&row.fields);
        if fields.size().is_some_and(|size| size >= LARGE_PAYLOAD_BYTES) {
            state.phases.large_payloads += 1;
        }
        if let Some((command, is_shell)) = command_of(row, &fields) {
            if is_shell {
                state.shell.add(&command, ts);
            }
            commands.push(AttackerCommand {
                log_id: row.id,
                timestamp: row.timestamp,
                service: row.service.clone(),
                decky: row.decky.clone(),
                command,
            });
        }
    }

    profile.services = services.into_iter().collect();
    profile.bounty_count = evidence.bounty_count;
    profile.credential_count = evidence.credential_count;
    profile.fingerprints = fingerprints(&evidence.fingerprints);
    profile.command_count += commands.len() as i64;
    profile.behavior = behavior(&profile, &state).to_string();
    profile.fold_state = serde_json::to_string(&state).expect("a fold state serialises");
    profile.updated_at = now;
    let now_s = now.timestamp_micros() as f64 / 1e6;
    let observations = shell::observations(&shell_before, &state.shell, profile.uuid, now_s);
    Some(Folded { profile, commands, observations })
}

/// The command a row carries, and whether it is a shell command line. A `CMD …` line (what the
/// decoy shell's PROMPT_COMMAND logs) is a shell command whatever its event type; otherwise the
/// row must be of a command type and the text is the first non-empty command field.
fn command_of(row: &LogRecord, fields: &Fields) -> Option<(String, bool)> {
    if let Some(shell) = row.msg.as_deref().and_then(svc::logline::parse_shell_command)
        && !shell.command.trim().is_empty()
    {
        return Some((shell.command, true));
    }
    let kind = row.event_type.as_str();
    if !COMMAND_TYPES.contains(&kind) {
        return None;
    }
    let text = COMMAND_FIELDS.iter().find_map(|name| fields.text(name))?;
    let is_shell = SHELL_TYPES.contains(&kind) && SHELL_SERVICES.contains(&row.service.as_str());
    Some((text.to_string(), is_shell))
}

/// A row's `fields`, decoded only when a rule needs it: most rows have no command and no size.
struct Fields<'a> {
    text: &'a str,
    decoded: std::cell::OnceCell<Map<String, Value>>,
}

impl<'a> Fields<'a> {
    fn new(text: &'a str) -> Fields<'a> {
        Fields { text, decoded: std::cell::OnceCell::new() }
    }

    fn get(&self, name: &str) -> Option<&Value> {
        // A field's name appears in the text; a cheap test spares most rows the decoding.
        if !self.text.contains(name) {
            return None;
        }
        self.decoded.get_or_init(|| serde_json::from_str(self.text).unwrap_or_default()).get(name)
    }

    /// A non-blank string field.
    fn text(&self, name: &str) -> Option<&str> {
        self.get(name)?.as_str().filter(|s| !s.trim().is_empty())
    }

    /// The first size field that is a number (or a numeric string).
    fn size(&self) -> Option<f64> {
        SIZE_FIELDS.iter().find_map(|name| match self.get(name)? {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => s.trim().parse::<f64>().ok().filter(|n| n.is_finite()),
            _ => None,
        })
    }
}

/// The fingerprint bounties' payloads as one JSON array; a payload that is not JSON is kept as a
/// string rather than lost.
fn fingerprints(payloads: &[String]) -> String {
    let values: Vec<Value> =
        payloads.iter().map(|p| serde_json::from_str(p).unwrap_or_else(|_| Value::String(p.clone()))).collect();
    Value::Array(values).to_string()
}

/// The `behavior` object the API shows, with DECNET's field names. The sniffer-fed fields have no
/// source here yet and are null or empty, as DECNET shows them without a sniffer.
pub fn behavior(profile: &AttackerProfile, state: &FoldState) -> Value {
    let stats = state.timing.stats_s();
    let (mean_s, stdev_s) = stats.unwrap_or((0.0, 0.0));
    let timing = Timing { events: profile.event_count, services: profile.services.len(), mean_s, stdev_s };
    let class = classify::classify(&timing);
    let beaconing = class == BehaviorClass::Beaconing;
    let phases = &state.phases;
    // Negative when the first command came before reconnaissance ended: no latency to show then.
    let latency = match (phases.recon_end_ms, phases.exfil_start_ms) {
        (Some(recon), Some(exfil)) if exfil >= recon => Some((exfil - recon) as f64 / 1000.0),
        _ => None,
    };
    json!({
        "os_guess": null,
        "hop_distance": null,
        "tcp_fingerprint": {},
        "kex_order_raw": [],
        "ssh_client_banners": [],
        "retransmit_count": null,
        "behavior_class": class.as_str(),
        "beacon_interval_s": beaconing.then_some(mean_s),
        "beacon_jitter_pct": beaconing.then(|| timing.cv() * 100.0),
        "tool_guesses": [],
        "timing_stats": {
            "event_count": profile.event_count,
            "duration_s": (profile.last_seen - profile.first_seen).num_milliseconds() as f64 / 1000.0,
            "mean_iat_s": stats.map(|_| mean_s),
            "median_iat_s": state.timing.median_s(),
            "stdev_iat_s": stats.map(|_| stdev_s),
            "min_iat_s": state.timing.min_gap_ms.map(seconds),
            "max_iat_s": state.timing.max_gap_ms.map(seconds),
            "cv": stats.map(|_| timing.cv()),
        },
        "phase_sequence": {
            "recon_end_ts": phases.recon_end_ms.and_then(iso),
            "exfil_start_ts": phases.exfil_start_ms.and_then(iso),
            "exfil_latency_s": latency,
            "large_payload_count": phases.large_payloads,
        },
    })
}

fn seconds(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

fn iso(ms: i64) -> Option<String> {
    DateTime::from_timestamp_millis(ms).map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000 + secs, 0).unwrap()
    }

    fn row(id: i64, secs: i64, ip: &str, decky: &str, service: &str, kind: &str, fields: &str) -> LogRecord {
        LogRecord {
            id,
            timestamp: at(secs),
            decky: decky.into(),
            service: service.into(),
            event_type: kind.into(),
            attacker_ip: ip.into(),
            raw_line: String::new(),
            fields: fields.into(),
            msg: None,
            trace_id: None,
            span_id: None,
            host_uuid: None,
        }
    }

    fn cmd_line(id: i64, secs: i64, ip: &str, command: &str) -> LogRecord {
        LogRecord {
            msg: Some(format!("CMD uid=0 user=root src={ip} pwd=/root cmd={command}")),
            ..row(id, secs, ip, "decky-02", "bash", "command", "{}")
        }
    }

    fn evidence(ip: &str) -> AttackerEvidence {
        AttackerEvidence {
            ip: ip.into(),
            fingerprints: vec![r#"{"ja3":"abc"}"#.into(), "not json".into()],
            bounty_count: 5,
            credential_count: 2,
        }
    }

    fn fold_all(stored: Option<&AttackerProfile>, rows: &[LogRecord], now: DateTime<Utc>) -> Option<Folded> {
        let rows: Vec<&LogRecord> = rows.iter().collect();
        fold("1.2.3.4", stored, &rows, &evidence("1.2.3.4"), now)
    }

    fn state(profile: &AttackerProfile) -> FoldState {
        serde_json::from_str(&profile.fold_state).unwrap()
    }

    fn behavior_of(profile: &AttackerProfile) -> Value {
        serde_json::from_str(&profile.behavior).unwrap()
    }

    const IP: &str = "1.2.3.4";

    fn sequence() -> Vec<LogRecord> {
        vec![
            row(10, 0, IP, "decky-01", "ssh", "connection", "{}"),
            row(11, 10, IP, "decky-01", "ssh", "login_attempt", r#"{"username":"root"}"#),
            row(12, 20, IP, "decky-03", "http", "request", r#"{"size":"2097152"}"#),
            // Out of time order: counts as a zero gap.
            row(13, 15, IP, "decky-01", "ssh", "auth_failure", "{}"),
            cmd_line(14, 40, IP, "cat /etc/passwd | grep root"),
            row(15, 50, IP, "decky-03", "mysql", "sql_query", r#"{"sql":"select 1","bytes":1048576}"#),
        ]
    }

    #[test]
    fn a_new_profile_gets_every_field() {
        let now = at(1000);
        let folded = fold_all(None, &sequence(), now).unwrap();
        let p = &folded.profile;
        assert_eq!(p.uuid.get_version_num(), 4);
        assert_eq!(p.ip, IP);
        assert_eq!((p.first_seen, p.last_seen), (at(0), at(50)));
        assert_eq!(p.event_count, 6);
        assert_eq!(p.services, ["bash", "http", "mysql", "ssh"]);
        assert_eq!(p.deckies, ["decky-01", "decky-03", "decky-02"], "first contact order");
        assert_eq!((p.bounty_count, p.credential_count), (5, 2));
        assert_eq!(p.fingerprints, r#"[{"ja3":"abc"},"not json"]"#);
        assert_eq!(p.command_count, 2);
        assert_eq!(p.updated_at, now);

        let s = state(p);
        // Gaps 10, 10, 0 (15 after 20), 20, 10: mean 10 s = (50 - 0) / 5.
        assert_eq!(s.timing.count, 5);
        assert_eq!(s.timing.mean_ms, 10_000.0);
        assert_eq!(s.timing.max_ts_ms, Some(at(50).timestamp_millis()));
        assert_eq!(s.phases.recon_end_ms, Some(at(15).timestamp_millis()));
        assert_eq!(s.phases.exfil_start_ms, Some(at(40).timestamp_millis()));
        assert_eq!(s.phases.large_payloads, 2);
        assert_eq!(s.shell.commands, 1, "the SQL query is not a shell command");

        let b = behavior_of(p);
        // 4 services, mean 10, n 6: slow_scan.
        assert_eq!(b["behavior_class"], "slow_scan");
        assert_eq!(b["beacon_interval_s"], Value::Null);
        assert_eq!(b["beacon_jitter_pct"], Value::Null);
        assert_eq!(b["timing_stats"]["event_count"], 6);
        assert_eq!(b["timing_stats"]["mean_iat_s"], 10.0);
        // Gaps 0, 10, 10, 10, 20 sorted.
        assert_eq!(
            (&b["timing_stats"]["duration_s"], &b["timing_stats"]["median_iat_s"]),
            (&json!(50.0), &json!(10.0))
        );
        assert_eq!((&b["timing_stats"]["min_iat_s"], &b["timing_stats"]["max_iat_s"]), (&json!(0.0), &json!(20.0)));
        // Gaps 10, 10, 0, 20, 10 around 10: population variance (0+0+100+100+0)/5 = 40.
        let sd = b["timing_stats"]["stdev_iat_s"].as_f64().unwrap();
        assert!((sd - 40f64.sqrt()).abs() < 1e-9, "{sd}");
        assert!((b["timing_stats"]["cv"].as_f64().unwrap() - sd / 10.0).abs() < 1e-12);
        assert_eq!(b["phase_sequence"]["recon_end_ts"], "2027-01-15T08:00:15.000Z");
        assert_eq!(b["phase_sequence"]["exfil_start_ts"], "2027-01-15T08:00:40.000Z");
        assert_eq!(b["phase_sequence"]["exfil_latency_s"], 25.0);
        assert_eq!(b["phase_sequence"]["large_payload_count"], 2);
        for (key, empty) in [
            ("os_guess", json!(null)),
            ("hop_distance", json!(null)),
            ("retransmit_count", json!(null)),
            ("tcp_fingerprint", json!({})),
            ("kex_order_raw", json!([])),
            ("ssh_client_banners", json!([])),
            ("tool_guesses", json!([])),
        ] {
            assert_eq!(b[key], empty, "{key}");
        }

        assert_eq!(
            folded.commands,
            [
                AttackerCommand {
                    log_id: 14,
                    timestamp: at(40),
                    service: "bash".into(),
                    decky: "decky-02".into(),
                    command: "cat /etc/passwd | grep root".into(),
                },
                AttackerCommand {
                    log_id: 15,
                    timestamp: at(50),
                    service: "mysql".into(),
                    decky: "decky-03".into(),
                    command: "select 1".into(),
                },
            ]
        );
        assert!(folded.observations.is_empty(), "one shell command supports no reading yet");
    }

    #[test]
    fn folding_in_batches_equals_folding_at_once() {
        let rows = sequence();
        let once = fold_all(None, &rows, at(1000)).unwrap();
        for split in 1..rows.len() {
            let first = fold_all(None, &rows[..split], at(900)).unwrap();
            let second = fold_all(Some(&first.profile), &rows[split..], at(1000)).unwrap();
            let mut expected = once.profile.clone();
            expected.uuid = first.profile.uuid;
            assert_eq!(second.profile, expected, "split at {split}");
            let commands: Vec<_> = first.commands.iter().chain(&second.commands).cloned().collect();
            assert_eq!(commands, once.commands);
        }
    }

    #[test]
    fn skipped_rows() {
        let rows = [
            row(1, 0, svc::logline::UNKNOWN_IP, "d", "ssh", "connection", "{}"),
            row(2, 0, "", "d", "ssh", "connection", "{}"),
            row(3, 0, IP, "-", "ssh", "connection", "{}"),
            row(4, 0, IP, "d", "-", "connection", "{}"),
        ];
        assert!(rows.iter().all(|r| !counts(r)));
        assert!(fold_all(None, &rows, at(0)).is_none());
        let stored = fold_all(None, &sequence(), at(0)).unwrap().profile;
        assert!(fold_all(Some(&stored), &rows, at(0)).is_none(), "nothing to change");
        let mixed = [rows[0].clone(), row(5, 60, IP, "decky-09", "ssh", "x", "{}"), rows[3].clone()];
        let folded = fold_all(Some(&stored), &mixed, at(1)).unwrap().profile;
        assert_eq!(folded.event_count, stored.event_count + 1);
        assert_eq!(folded.deckies.last().unwrap(), "decky-09");
    }

    #[test]
    fn commands_come_from_every_type_and_field() {
        for (i, kind) in COMMAND_TYPES.iter().enumerate() {
            for (j, field) in COMMAND_FIELDS.iter().enumerate() {
                let fields = json!({ *field: format!("text {i} {j}") }).to_string();
                let folded = fold_all(None, &[row(1, 0, IP, "d", "svc", kind, &fields)], at(0)).unwrap();
                assert_eq!(folded.commands.len(), 1, "{kind} {field}");
                assert_eq!(folded.commands[0].command, format!("text {i} {j}"));
            }
        }
        // The first non-empty field in DECNET's order.
        let fields = r#"{"cmd":"last","input":"  ","query":"second","command":""}"#;
        let folded = fold_all(None, &[row(1, 0, IP, "d", "svc", "exec", fields)], at(0)).unwrap();
        assert_eq!(folded.commands[0].command, "second");
        // Not a command type, no text, a number, or undecodable fields: no command.
        for (kind, fields) in [
            ("request", r#"{"command":"GET /"}"#),
            ("command", r#"{"other":"x"}"#),
            ("command", r#"{"command":12}"#),
            ("command", "{not json command"),
            ("command", ""),
        ] {
            let folded = fold_all(None, &[row(1, 0, IP, "d", "svc", kind, fields)], at(0)).unwrap();
            assert!(folded.commands.is_empty(), "{kind} {fields}");
            assert_eq!(folded.profile.command_count, 0);
        }
    }

    #[test]
    fn cmd_lines_give_their_command() {
        let mut line = cmd_line(7, 3, IP, "ls -la /var/www html");
        line.event_type = "-".into();
        let folded = fold_all(None, &[line], at(0)).unwrap();
        assert_eq!(folded.commands[0].command, "ls -la /var/www html");
        assert_eq!(state(&folded.profile).shell.commands, 1);
        let mut empty = cmd_line(8, 3, IP, "  ");
        empty.fields = r#"{"command":"from fields"}"#.into();
        let folded = fold_all(None, &[empty], at(0)).unwrap();
        assert_eq!(folded.commands[0].command, "from fields", "an empty CMD falls back to the fields");
    }

    #[test]
    fn shell_commands_are_those_of_shell_services() {
        let rows = [
            row(1, 0, IP, "d", "ssh", "shell_input", r#"{"input":"id"}"#),
            row(2, 1, IP, "d", "telnet", "command", r#"{"command":"uname -a"}"#),
            row(3, 2, IP, "d", "ftp", "command", r#"{"command":"RETR x"}"#),
            row(4, 3, IP, "d", "ssh", "query", r#"{"query":"x"}"#),
            row(5, 4, IP, "d", "redis", "redis_command", r#"{"command":"GET k"}"#),
        ];
        let folded = fold_all(None, &rows, at(0)).unwrap();
        assert_eq!(folded.commands.len(), 5);
        let shell = state(&folded.profile).shell;
        assert_eq!(shell.commands, 2);
        assert_eq!(shell.programs.into_iter().collect::<Vec<_>>(), ["id", "uname"]);
    }

    #[test]
    fn beaconing_shows_interval_and_jitter() {
        let rows: Vec<LogRecord> =
            (0..6).map(|i| row(i, i * 60 + (i % 2) * 3, IP, "d", "http", "request", "{}")).collect();
        let b = behavior_of(&fold_all(None, &rows, at(0)).unwrap().profile);
        assert_eq!(b["behavior_class"], "beaconing");
        // Gaps 63, 57, 63, 57, 63: mean 60.6, population sd 2.939.
        let interval = b["beacon_interval_s"].as_f64().unwrap();
        assert!((interval - 60.6).abs() < 1e-9, "{interval}");
        let jitter = b["beacon_jitter_pct"].as_f64().unwrap();
        let sd = (3.0 * 2.4f64.powi(2) + 2.0 * 3.6f64.powi(2)) / 5.0;
        assert!((jitter - sd.sqrt() / 60.6 * 100.0).abs() < 1e-6, "{jitter}");
    }

    #[test]
    fn one_row_has_no_timing_yet() {
        let b = behavior_of(&fold_all(None, &sequence()[..1], at(0)).unwrap().profile);
        assert_eq!(b["behavior_class"], "unknown");
        assert_eq!(
            b["timing_stats"],
            json!({
                "event_count": 1, "duration_s": 0.0, "mean_iat_s": null, "median_iat_s": null, "stdev_iat_s": null,
                "min_iat_s": null, "max_iat_s": null, "cv": null,
            })
        );
        assert_eq!(
            b["phase_sequence"],
            json!({"recon_end_ts": "2027-01-15T08:00:00.000Z", "exfil_start_ts": null, "exfil_latency_s": null, "large_payload_count": 0})
        );
    }

    #[test]
    fn the_median_is_kept_across_folds_within_half_a_percent() {
        // Gaps 1.5 s, 2 s, 3.25 s, then 1234.567 s and 7 s: folded in two batches.
        let times = [0, 1_500, 3_500, 6_750, 1_241_317, 1_248_317];
        let rows: Vec<LogRecord> = times
            .iter()
            .enumerate()
            .map(|(n, &ms)| LogRecord {
                timestamp: DateTime::from_timestamp_millis(at(0).timestamp_millis() + ms).unwrap(),
                ..row(n as i64, 0, IP, "decky-01", "ssh", "connection", "{}")
            })
            .collect();
        let first = fold_all(None, &rows[..3], at(0)).unwrap().profile;
        assert_eq!(behavior_of(&first)["timing_stats"]["median_iat_s"], 1.75, "the mean of the middle two");
        let b = behavior_of(&fold_all(Some(&first), &rows[3..], at(0)).unwrap().profile);
        assert_eq!(b["timing_stats"]["median_iat_s"], 3.25);
        assert_eq!((&b["timing_stats"]["min_iat_s"], &b["timing_stats"]["max_iat_s"]), (&json!(1.5), &json!(1234.567)));
        assert_eq!(b["timing_stats"]["duration_s"], 1248.317);
        assert_eq!((gap_bucket(999), gap_bucket(1_234_567), gap_bucket(1_235_500)), (999, 1_230_000, 1_240_000));
    }

    #[test]
    fn older_or_broken_states_load() {
        let mut stored = fold_all(None, &sequence()[..2], at(0)).unwrap().profile;
        for old in [r#"{"timing":{"count":1,"mean_ms":10000.0,"m2":0.0,"max_ts_ms":1800000010000}}"#, "{}", "garbage"] {
            stored.fold_state = old.into();
            let folded = fold_all(Some(&stored), &sequence()[2..], at(0)).unwrap().profile;
            assert_eq!(folded.event_count, 6, "{old}");
            assert!(serde_json::from_str::<FoldState>(&folded.fold_state).is_ok());
        }
        let partial: FoldState = serde_json::from_str(r#"{"shell":{"commands":3}}"#).unwrap();
        assert_eq!(partial.shell.commands, 3);
        assert_eq!(partial.timing, RunningTiming::default());
    }

    #[test]
    fn shell_observations_follow_the_fold() {
        let rows: Vec<LogRecord> = (0..10).map(|i| cmd_line(i, i * 5, IP, "ls /tmp")).collect();
        let first = fold_all(None, &rows[..9], at(0)).unwrap();
        let primitives = |f: &Folded| f.observations.iter().map(|o| o.primitive.clone()).collect::<Vec<_>>();
        assert_eq!(primitives(&first), ["motor.shell_mastery.pipe_chaining_depth"]);
        let second = fold_all(Some(&first.profile), &rows[9..], at(0)).unwrap();
        assert_eq!(
            primitives(&second),
            [
                "motor.shell_mastery.pipe_chaining_depth",
                "cognitive.error_resilience.fallback_to_man",
                "cognitive.tool_vocabulary",
                "operational.cleanup_behavior",
            ]
        );
        let o = &second.observations[0];
        assert_eq!(o.identity_ref, Some(first.profile.uuid.to_string()));
        assert_eq!((o.window.start_ts, o.window.end_ts), (at(0).timestamp() as f64, at(45).timestamp() as f64));
    }
}
