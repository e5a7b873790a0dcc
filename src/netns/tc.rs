//! The `tc` commands of a tarpit rule on a decky's interface, run inside its namespace. The decky
//! sends on that interface, so the rule matches its replies: TCP from the rule's ports (`sport`),
//! over IPv4 and IPv6. Everything hangs under one root of our own handle, so removing that root
//! removes exactly what the rule added and nothing else:
//!
//! ```text
//! root 7a7: htb (unmatched traffic passes untouched)
//!  └─ class 7a7:1 htb ── leaf 7a8: netem delay <ms>     ← u32 filters: ip/ip6, tcp, sport <port>
//! ```
//!
//! Where the kernel has no netem the class itself is throttled instead ([`THROTTLE_RATE`]): the
//! attacker is still slowed, but no delay is in force, and the caller says so.

use std::process::Command;

/// The root qdisc's handle: the rule's own, so removal never touches anything else.
pub const ROOT: &str = "7a7:";
/// The rule's class.
pub const CLASS: &str = "7a7:1";
/// The delay under the class.
pub const LEAF: &str = "7a8:";
/// The rate the rule's traffic is held to where the delay cannot be applied.
pub const THROTTLE_RATE: &str = "32kbit";

/// The `tc` program.
fn tc() -> Command {
    let mut command = Command::new("tc");
    // iproute2's messages in English, whatever the host's locale, for the log.
    command.env("LC_ALL", "C");
    command
}

/// `tc -batch -`: the lines on standard input, stopping at the first that fails.
pub fn batch() -> Command {
    let mut command = tc();
    command.args(["-batch", "-"]);
    command
}

/// The root, the class and the filters of a rule on `ports`, as `tc -batch` lines.
pub fn setup(iface: &str, ports: &[u16]) -> String {
    let mut lines = vec![
        format!("qdisc add dev {iface} root handle {ROOT} htb"),
        format!("class add dev {iface} parent {ROOT} classid {CLASS} htb rate 1gbit quantum 1514"),
    ];
    for port in ports {
        lines.push(format!(
            "filter add dev {iface} parent {ROOT} protocol ip prio 1 u32 match ip protocol 6 0xff match ip sport {port} 0xffff flowid {CLASS}"
        ));
        lines.push(format!(
            "filter add dev {iface} parent {ROOT} protocol ipv6 prio 2 u32 match ip6 protocol 6 0xff match ip6 sport {port} 0xffff flowid {CLASS}"
        ));
    }
    lines.join("\n") + "\n"
}

/// The delay of `delay_ms` on the rule's class.
pub fn delay(iface: &str, delay_ms: u32) -> Command {
    let mut command = tc();
    command.args(["qdisc", "add", "dev", iface, "parent", CLASS, "handle", LEAF, "netem", "delay"]);
    command.arg(format!("{delay_ms}ms")).args(["limit", "10000"]);
    command
}

/// The fallback: the rule's class held to [`THROTTLE_RATE`].
pub fn throttle(iface: &str) -> Command {
    let mut command = tc();
    command.args(["class", "change", "dev", iface, "parent", ROOT, "classid", CLASS, "htb"]);
    command.args(["rate", THROTTLE_RATE, "ceil", THROTTLE_RATE, "burst", "1600", "cburst", "1600", "quantum", "1514"]);
    command
}

/// Removes the rule's root, and with it everything under it; any other root is refused by the
/// kernel ("Invalid handle").
pub fn remove(iface: &str) -> Command {
    let mut command = tc();
    command.args(["qdisc", "del", "dev", iface, "root", "handle", ROOT]);
    command
}

/// The qdiscs of `iface`, for tests and operators.
pub fn show(iface: &str, what: &str) -> Command {
    let mut command = tc();
    command.args([what, "show", "dev", iface]);
    command
}

/// Whether a failed [`remove`] found nothing of ours to remove (the default root, or none).
pub fn nothing_to_remove(stderr: &str) -> bool {
    ["Invalid handle", "Cannot find", "No such file", "Cannot delete qdisc with handle of zero"]
        .iter()
        .any(|text| stderr.contains(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_filters_its_ports_over_both_protocols() {
        let text = setup("eth0", &[22, 8080]);
        assert!(text.starts_with("qdisc add dev eth0 root handle 7a7: htb\n"));
        assert_eq!(text.matches("protocol ip prio 1 u32").count(), 2);
        assert_eq!(text.matches("protocol ipv6 prio 2 u32").count(), 2);
        assert!(text.contains("match ip sport 8080 0xffff flowid 7a7:1"));
        assert!(text.contains("match ip6 sport 22 0xffff flowid 7a7:1"));
        let delay = delay("eth0", 1500);
        let args: Vec<_> = delay.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(args.join(" "), "qdisc add dev eth0 parent 7a7:1 handle 7a8: netem delay 1500ms limit 10000");
    }
}
