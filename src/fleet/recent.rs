//! [`Recent`]: what the fleet found out lately (the engine's health, the decky counts), believed for
//! a while so that polls do not ask the store and the engine each, and forgotten when the fleet
//! changes here.

use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
pub(super) struct Recent<T> {
    state: Mutex<State<T>>,
}

#[derive(Debug, Default)]
struct State<T> {
    found: Option<(Instant, T)>,
    /// How often the value was forgotten: one found before the last forget is not kept.
    forgets: u64,
}

/// What [`Recent::found`] needs to keep a fresh value: when its finding began.
pub(super) struct Finding {
    forgets: u64,
}

impl<T: Copy> Recent<T> {
    /// The value found within `within`, or what to keep a fresh one with.
    pub fn get(&self, within: Duration) -> Result<T, Finding> {
        let state = self.state.lock().expect("the recent lock is never poisoned");
        match state.found {
            Some((at, value)) if at.elapsed() < within => Ok(value),
            _ => Err(Finding { forgets: state.forgets }),
        }
    }

    /// Keeps `value` unless it was forgotten since its finding began (it may describe the fleet
    /// before the change).
    pub fn found(&self, finding: Finding, value: T) {
        let mut state = self.state.lock().expect("the recent lock is never poisoned");
        if state.forgets == finding.forgets {
            state.found = Some((Instant::now(), value));
        }
    }

    pub fn forget(&self) {
        let mut state = self.state.lock().expect("the recent lock is never poisoned");
        state.found = None;
        state.forgets += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A_WHILE: Duration = Duration::from_secs(60);

    #[test]
    fn a_value_is_believed_for_a_while_and_forgotten_on_a_change() {
        let recent = Recent::<u32>::default();
        let finding = recent.get(A_WHILE).unwrap_err();
        recent.found(finding, 7);
        assert_eq!(recent.get(A_WHILE).ok(), Some(7));
        assert!(recent.get(Duration::ZERO).is_err(), "older than the while");
        recent.forget();
        assert!(recent.get(A_WHILE).is_err());
    }

    #[test]
    fn a_value_found_across_a_change_is_not_kept() {
        let recent = Recent::<u32>::default();
        let finding = recent.get(A_WHILE).unwrap_err();
        recent.forget();
        recent.found(finding, 7);
        assert!(recent.get(A_WHILE).is_err(), "the value may describe the fleet before the change");
    }
}
