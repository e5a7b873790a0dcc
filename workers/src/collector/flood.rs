//! The flood cap: at most `SVC_FLOOD_CAP_PER_S` lines a second per (attacker, decky), counted over
//! windows of `SVC_FLOOD_WINDOW_S` of the lines' own engine time; what is over is not written but
//! counted, and each window that dropped anything ends in one `flood_suppressed` line carrying the
//! count by event type, so the size of a flood stays visible in `/logs`. Below the free-disk
//! watermark the low-value events (connections, requests) are shed the same way, counted into a
//! `disk_low_shed` line. Lines of other attackers and deckies are never touched by one's flood.
//!
//! It lives in the collector, before the ingest file: a flood is cut where it enters, so neither
//! the ingest file nor the database grows with it (the engine's own log of the container is capped
//! by the decky's container profile).

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use svc::logline::{self, Entry, LogLine, Severity};

/// The summary of lines over the cap.
pub const FLOOD_SUPPRESSED: &str = "flood_suppressed";
/// The summary of low-value lines shed while the disk is low.
pub const DISK_LOW_SHED: &str = "disk_low_shed";
/// Sources tracked at most; past it (a flood of spoofed addresses) a new source is let through
/// uncounted until windows end, rather than memory growing without bound.
const MAX_SOURCES: usize = 100_000;

/// Why a line was not written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Reason {
    Flood,
    DiskLow,
}

/// One (attacker, decky)'s current window.
struct Source {
    /// The window's start, in nanoseconds since the epoch (engine time).
    start: i128,
    kept: u64,
    /// The service of the first line not written, for the summary's APP-NAME.
    service: String,
    suppressed: BTreeMap<(Reason, String), u64>,
}

/// The cap and the shedding, with the counts of what each window left out.
pub struct FloodCap {
    per_window: u64,
    window_nanos: i128,
    sources: HashMap<(String, String), Source>,
    /// Summaries of windows that ended as a later line of their source came, not yet taken.
    ready: Vec<String>,
    /// Lines let through untracked because `MAX_SOURCES` sources were tracked.
    pub untracked: u64,
}

impl FloodCap {
    /// `per_second` lines a second (0: no cap) counted over `window`.
    pub fn new(per_second: usize, window: std::time::Duration) -> FloodCap {
        let window_nanos = window.as_nanos().max(1_000_000) as i128;
        let per_window = (per_second as u128 * window_nanos as u128 / 1_000_000_000) as u64;
        FloodCap {
            per_window: per_window.max(u64::from(per_second > 0)),
            window_nanos,
            sources: HashMap::new(),
            ready: Vec::new(),
            untracked: 0,
        }
    }

    /// Whether `line`, stamped `ts_nanos`, is written; `shed` says the disk is low and `line` is a
    /// low-value event. A line not written is counted into its window's summary.
    pub fn admit(&mut self, line: &LogLine, ts_nanos: i128, shed: bool) -> bool {
        if self.per_window == 0 && !shed {
            return true;
        }
        let key = (line.attacker_ip.clone(), line.decky.clone());
        if !self.sources.contains_key(&key) && self.sources.len() >= MAX_SOURCES {
            self.untracked += 1;
            return true;
        }
        let window = self.window_nanos;
        let source = self.sources.entry(key.clone()).or_insert_with(|| Source {
            start: ts_nanos,
            kept: 0,
            service: String::new(),
            suppressed: BTreeMap::new(),
        });
        // A line of a later window: the ended one is summarised, and a new one starts.
        if ts_nanos >= source.start + window {
            self.ready.extend(summaries(&key.0, &key.1, source, window));
            *source = Source { start: ts_nanos, kept: 0, service: String::new(), suppressed: BTreeMap::new() };
        }
        let reason = if shed {
            Reason::DiskLow
        } else if self.per_window > 0 && source.kept >= self.per_window {
            Reason::Flood
        } else {
            source.kept += 1;
            return true;
        };
        if source.service.is_empty() {
            source.service = line.service.clone();
        }
        *source.suppressed.entry((reason, line.event_type.clone())).or_default() += 1;
        false
    }

    /// The summary lines of every window ended by `now_nanos` (every window, with `all`), each
    /// without its newline; their sources start afresh.
    pub fn due(&mut self, now_nanos: i128, all: bool) -> Vec<String> {
        let window = self.window_nanos;
        let mut lines = std::mem::take(&mut self.ready);
        self.sources.retain(|(attacker, decky), source| {
            let ended = all || now_nanos >= source.start + window;
            if ended {
                lines.extend(summaries(attacker, decky, source, window));
            }
            !ended
        });
        lines
    }
}

/// One line per reason that left lines of `source`'s window out.
fn summaries(attacker: &str, decky: &str, source: &Source, window: i128) -> Vec<String> {
    let end = source.start + window;
    let at = DateTime::<Utc>::from_timestamp_nanos(i64::try_from(end).unwrap_or(i64::MAX));
    let mut by_reason: BTreeMap<Reason, Vec<(&str, u64)>> = BTreeMap::new();
    for ((reason, event), count) in &source.suppressed {
        by_reason.entry(*reason).or_default().push((event, *count));
    }
    by_reason
        .into_iter()
        .map(|(reason, events)| {
            let total: u64 = events.iter().map(|(_, n)| n).sum();
            let events: Vec<String> = events.iter().map(|(event, n)| format!("{event}:{n}")).collect();
            let window_s = window as f64 / 1e9;
            logline::format(&Entry {
                severity: Severity::Warning,
                timestamp: at,
                hostname: decky.to_string(),
                app_name: source.service.clone(),
                msgid: match reason {
                    Reason::Flood => FLOOD_SUPPRESSED,
                    Reason::DiskLow => DISK_LOW_SHED,
                }
                .to_string(),
                fields: vec![
                    ("src_ip".into(), attacker.to_string()),
                    ("suppressed".into(), total.to_string()),
                    ("events".into(), events.join(",")),
                    ("window_start".into(), svc::time::format_utc(at - chrono::Duration::nanoseconds(window as i64))),
                    ("window_s".into(), format!("{window_s}")),
                ],
                msg: Some(format!(
                    "{total} lines from {attacker} not stored in {window_s} s ({})",
                    match reason {
                        Reason::Flood => "over the flood cap",
                        Reason::DiskLow => "disk low: low-value events shed",
                    }
                )),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: i128 = 1_000_000_000;
    const T0: i128 = 1_795_477_844 * SECOND;

    fn request(attacker: &str) -> LogLine {
        logline::parse(&format!("<134>1 2026-11-23T10:00:00Z web http - request [relay@55555 src_ip=\"{attacker}\"]"))
            .unwrap()
    }

    #[test]
    fn a_flood_of_100000_lines_keeps_the_cap_and_counts_the_rest_while_another_attacker_passes() {
        let mut cap = FloodCap::new(50, std::time::Duration::from_secs(10));
        let (flood, other) = (request("203.0.113.9"), request("198.51.100.7"));
        let (mut kept, mut other_kept, mut summaries) = (0u64, 0u64, Vec::new());
        // 100,000 lines in 4 s from one address; 100 from another (25 a second, under the cap).
        for n in 0..100_000i128 {
            let at = T0 + n * 4 * SECOND / 100_000;
            kept += u64::from(cap.admit(&flood, at, false));
            if n % 1000 == 0 {
                other_kept += u64::from(cap.admit(&other, at, false));
            }
            summaries.extend(cap.due(at, false));
        }
        assert!(summaries.is_empty(), "the window has not ended");
        summaries.extend(cap.due(T0 + 10 * SECOND, false));
        assert_eq!(kept, 500, "50 a second over a 10 s window");
        assert_eq!(other_kept, 100, "the other attacker's lines all pass");
        assert_eq!(summaries.len(), 1, "{summaries:?}");
        let summary = logline::parse(&summaries[0]).unwrap();
        assert_eq!(summary.event_type, FLOOD_SUPPRESSED);
        assert_eq!((summary.decky.as_str(), summary.service.as_str()), ("web", "http"));
        assert_eq!(summary.attacker_ip, "203.0.113.9");
        assert_eq!(summary.field("suppressed"), Some("99500"));
        assert_eq!(summary.field("events"), Some("request:99500"));
        // The next window keeps its own 500.
        assert!(cap.admit(&flood, T0 + 11 * SECOND, false));
    }

    #[test]
    fn shedding_counts_low_value_lines_apart_and_no_cap_passes_all() {
        let mut cap = FloodCap::new(0, std::time::Duration::from_secs(1));
        let line = request("203.0.113.9");
        assert!((0..1000).all(|n| cap.admit(&line, T0 + n, false)), "no cap");
        assert!(!cap.admit(&line, T0, true));
        assert!(!cap.admit(&line, T0 + 1, true));
        let lines = cap.due(T0, true);
        assert_eq!(lines.len(), 1);
        let summary = logline::parse(&lines[0]).unwrap();
        assert_eq!((summary.event_type.as_str(), summary.field("suppressed")), (DISK_LOW_SHED, Some("2")));
        assert!(cap.due(T0 + 10 * SECOND, true).is_empty(), "counted once");
    }
}
