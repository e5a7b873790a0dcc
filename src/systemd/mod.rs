//! svc under systemd: the unit files (one template source, `systemd/` at the repository root,
//! embedded here), readiness notification for `Type=notify`, and which worker units the host's
//! service manager has installed.

pub mod installed;
pub mod notify;
pub mod units;

pub use installed::{StartError, UnitListing};

/// The unit file of `worker`.
pub fn unit_of_worker(worker: &str) -> String {
    format!("svc-{worker}.service")
}

/// The worker a unit file name is for, if it is one of ours.
pub fn worker_of_unit(unit: &str) -> Option<&str> {
    unit.strip_prefix("svc-")?.strip_suffix(".service").filter(|w| !w.is_empty())
}
