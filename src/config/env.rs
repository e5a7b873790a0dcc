//! `Env`: the `SVC_*` variables of one reading, and the typed getters every section reads them with.
//! A bad value is recorded as a problem naming its variable and the default stands in for it, so the
//! rest is still read and every problem is reported in one round. Nothing outside the `SVC_`
//! namespace is ever seen, so no other variable (`CI`, `TESTING`, …) can change the configuration.

use std::collections::HashMap;
use std::ops::RangeInclusive;
use std::time::Duration;

use super::ConfigProblem;
use crate::secret::Secret;

pub(super) struct Env {
    vars: HashMap<String, String>,
    problems: Vec<ConfigProblem>,
}

impl Env {
    pub(super) fn new(vars: impl IntoIterator<Item = (String, String)>) -> Env {
        Env { vars: vars.into_iter().filter(|(k, _)| k.starts_with("SVC_")).collect(), problems: Vec::new() }
    }

    /// Every problem found, in the order the variables were read.
    pub(super) fn into_problems(self) -> Vec<ConfigProblem> {
        self.problems
    }

    pub(super) fn get(&self, var: &str) -> Option<String> {
        self.vars.get(var).cloned()
    }

    pub(super) fn non_empty(&self, var: &str) -> Option<String> {
        self.get(var).map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
    }

    /// Untrimmed: a secret's spaces are part of it.
    pub(super) fn secret(&self, var: &str) -> Option<Secret> {
        self.get(var).filter(|v| !v.is_empty()).map(Secret::new)
    }

    pub(super) fn report(&mut self, var: &'static str, message: impl Into<String>) {
        self.problems.push(ConfigProblem::new(var, message));
    }

    pub(super) fn report_all(&mut self, problems: impl IntoIterator<Item = ConfigProblem>) {
        self.problems.extend(problems);
    }

    pub(super) fn flag(&mut self, var: &'static str, default: bool) -> bool {
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
