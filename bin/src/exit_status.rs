//! The exit statuses `svc` gives besides success and failure, written once for the commands that
//! exit with them, the supervisor that reads its children's, and the unit files'
//! `RestartPreventExitStatus=` (tested below).

/// A configuration error (sysexits EX_CONFIG): a service manager, or `svc supervise`, can tell it
/// from a crash and stop restarting, as restarting cannot fix it.
pub const EXIT_CONFIG: u8 = 78;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_service_unit_stops_restarting_on_a_configuration_error() {
        let units = svc::systemd::units::render(std::path::Path::new("/usr/bin/svc")).unwrap();
        for unit in units.iter().filter(|unit| unit.name.ends_with(".service")) {
            let line = format!("RestartPreventExitStatus={EXIT_CONFIG}\n");
            assert!(unit.text.contains(&line), "{}", unit.name);
        }
    }
}
