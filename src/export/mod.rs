//! Threat-intel exports: what the profiler and the ingester know of each attacker, mapped to the
//! formats a SOC's intel platform reads. One [`AttackerRecord`] per attacker (`record`) is mapped to
//! STIX 2.1 objects (`stix`), a MISP event (`misp`), a row of DECNET's JSON export (`json`), and its
//! commands to ATT&CK techniques (`techniques`), counted over the fleet into a Navigator layer
//! (`navigator`). `fleet` writes the fleet-wide documents one page of attackers at a time, so memory
//! stays bounded whatever the fleet's size. Identifiers are deterministic (`ids`): the same attacker
//! exports to the same ids every time. No I/O here beyond the repository reads of `record`.

pub mod fleet;
pub mod ids;
pub mod json;
pub mod misp;
pub mod navigator;
pub mod record;
pub mod stix;
pub mod techniques;

pub use fleet::{FleetFormat, FleetWriter};
pub use record::{AttackerRecord, CapturedAccount, CapturedFile, Detail};
