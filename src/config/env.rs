//! `Env`: the `SVC_*` variables of one reading, and the typed getters every section reads them with.
//! A bad value is recorded as a problem naming its variable and the default stands in for it, so the
//! rest is still read and every problem is reported in one round. Nothing outside the `SVC_`
//! namespace is ever seen, so no other variable (`CI`, `TESTING`, …) can change the configuration.
//!
//! Every getter also notes the variable it read and the default it would use, in reading order: that
//! record is how `svc config` lists each setting with its default without a second copy of either
//! (`settings.rs`). A default is therefore always passed to a getter, never supplied afterwards.

use std::collections::HashMap;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::time::Duration;

use super::ConfigProblem;
use crate::secret::Secret;

pub(super) struct Env {
    vars: HashMap<String, String>,
    problems: Vec<ConfigProblem>,
    read: Vec<ReadVar>,
    section: &'static str,
}

/// One variable as reading met it: its section, and the default it stands for when unset (`None`:
/// unset means off, or nothing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ReadVar {
    pub(super) section: &'static str,
    pub(super) var: &'static str,
    pub(super) default: Option<String>,
}

impl Env {
    pub(super) fn new(vars: impl IntoIterator<Item = (String, String)>) -> Env {
        Env {
            vars: vars.into_iter().filter(|(k, _)| k.starts_with("SVC_")).collect(),
            problems: Vec::new(),
            read: Vec::new(),
            section: "",
        }
    }

    /// The variables read from here on belong to `section` (a heading of `svc config`).
    pub(super) fn begin_section(&mut self, section: &'static str) {
        self.section = section;
    }

    /// Notes that `var` was read; a default given by a later getter of the same variable is kept.
    fn note(&mut self, var: &'static str, default: Option<String>) {
        match self.read.iter_mut().find(|r| r.var == var) {
            Some(read) => read.default = read.default.take().or(default),
            None => self.read.push(ReadVar { section: self.section, var, default }),
        }
    }

    fn value(&self, var: &str) -> Option<String> {
        self.vars.get(var).cloned()
    }

    /// Every problem found, and every variable read with its default, both in reading order.
    pub(super) fn finish(self) -> (Vec<ConfigProblem>, Vec<ReadVar>) {
        (self.problems, self.read)
    }

    /// The raw value, for a setting with no default (unset means off, or nothing).
    pub(super) fn get(&mut self, var: &'static str) -> Option<String> {
        self.note(var, None);
        self.value(var)
    }

    /// The raw value, or `default` when unset (an empty value is the caller's to judge).
    pub(super) fn get_or(&mut self, var: &'static str, default: &str) -> String {
        self.note(var, Some(default.to_string()));
        self.value(var).unwrap_or_else(|| default.to_string())
    }

    /// The trimmed value, `None` when unset or blank.
    pub(super) fn non_empty(&mut self, var: &'static str) -> Option<String> {
        self.note(var, None);
        self.value(var).map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
    }

    /// The trimmed value, or `default` when unset or blank.
    pub(super) fn non_empty_or(&mut self, var: &'static str, default: &str) -> String {
        self.note(var, Some(default.to_string()));
        self.non_empty(var).unwrap_or_else(|| default.to_string())
    }

    /// A path, or `default` when unset or blank.
    pub(super) fn path_or(&mut self, var: &'static str, default: PathBuf) -> PathBuf {
        self.note(var, Some(default.display().to_string()));
        self.non_empty(var).map_or(default, PathBuf::from)
    }

    /// Untrimmed: a secret's spaces are part of it.
    pub(super) fn secret(&mut self, var: &'static str) -> Option<Secret> {
        self.get(var).filter(|v| !v.is_empty()).map(Secret::new)
    }

    pub(super) fn report(&mut self, var: &'static str, message: impl Into<String>) {
        self.problems.push(ConfigProblem::new(var, message));
    }

    pub(super) fn report_all(&mut self, problems: impl IntoIterator<Item = ConfigProblem>) {
        self.problems.extend(problems);
    }

    pub(super) fn flag(&mut self, var: &'static str, default: bool) -> bool {
        self.note(var, Some(default.to_string()));
        let Some(value) = self.get(var) else { return default };
        match value.trim().to_ascii_lowercase().as_str() {
            "" => default,
            "1" | "true" | "yes" | "on" => true,
            "0" | "false" | "no" | "off" => false,
            _ => {
                self.report(var, "must be true or false");
                default
            }
        }
    }

    pub(super) fn port(&mut self, var: &'static str, default: u16) -> u16 {
        self.note(var, Some(default.to_string()));
        let Some(value) = self.get(var) else { return default };
        match value.trim().parse::<u32>() {
            Ok(port @ 1..=65535) => port as u16,
            _ => {
                self.report(var, "must be a port number in 1..65535");
                default
            }
        }
    }

    /// A whole number within `range`.
    pub(super) fn count(&mut self, var: &'static str, default: usize, range: RangeInclusive<usize>) -> usize {
        self.note(var, Some(default.to_string()));
        let Some(value) = self.non_empty(var) else { return default };
        match value.parse::<usize>() {
            Ok(n) if range.contains(&n) => n,
            _ => {
                self.report(var, format!("must be a whole number in {}..={}", range.start(), range.end()));
                default
            }
        }
    }

    /// A whole number of milliseconds within `range`.
    pub(super) fn millis(&mut self, var: &'static str, default: usize, range: RangeInclusive<usize>) -> Duration {
        Duration::from_millis(self.count(var, default, range) as u64)
    }

    /// A positive number of seconds, fractions allowed (tests use short windows).
    pub(super) fn seconds(&mut self, var: &'static str, default: f64) -> Duration {
        self.note(var, Some(default.to_string()));
        let Some(value) = self.non_empty(var) else { return Duration::from_secs_f64(default) };
        match value.parse::<f64>() {
            Ok(secs) if secs > 0.0 && secs <= 86_400.0 => Duration::from_secs_f64(secs),
            _ => {
                self.report(var, "must be a positive number of seconds, at most 86400");
                Duration::from_secs_f64(default)
            }
        }
    }
}
