//! What a log line is worth beyond the row: captured credentials (`secret_b64`) and bounties
//! (fingerprints such as `ja3` with their `fingerprint_type`, artifacts), by the rules of
//! `reference/decnet-workers.md` §2.

use chrono::{DateTime, Utc};
use svc::db::{NewBounty, NewCredential};
use svc::logline::LogLine;

/// The bounties and the credential one line yields.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Derived {
    pub bounties: Vec<NewBounty>,
    pub credential: Option<NewCredential>,
}

/// Everything `line`, stored with `timestamp`, yields.
pub fn derive(line: &LogLine, timestamp: DateTime<Utc>) -> Derived {
    let _ = (line, timestamp);
    Derived::default()
}
