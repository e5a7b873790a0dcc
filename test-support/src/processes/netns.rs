//! Worker hosts as network namespaces: `svc-t-<n>` with a veth pair to this namespace, this side
//! 10.231.<n>.1/30 and the host's side 10.231.<n>.2/30, so a test runs a real `svc agent` on its
//! own address (`ip netns exec`). Everything is removed on drop. Needs root and `ip`.

use std::net::Ipv4Addr;
use std::process::Command;

/// A network namespace of the test's own with one link to this one.
pub struct NetnsHost {
    pub name: String,
    /// This side's address: where the host reaches the master.
    pub master_side: Ipv4Addr,
    /// The host's own address inside its namespace.
    pub address: Ipv4Addr,
    veth: String,
}

fn ip(args: &[&str]) -> std::process::Output {
    Command::new("ip").env("PATH", super::path()).args(args).output().expect("`ip` runs")
}

fn must(args: &[&str]) {
    let out = ip(args);
    assert!(out.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}

impl NetnsHost {
    /// Namespace `svc-t-<n>`; leftovers of the same name (a killed earlier run) are removed first.
    /// Tests running at once pick distinct `n`.
    pub fn create(n: u8) -> NetnsHost {
        let name = format!("svc-t-{n}");
        let veth = format!("svct{n}m");
        let peer = format!("svct{n}h");
        let _ = ip(&["netns", "del", &name]);
        let _ = ip(&["link", "del", &veth]);
        let host = NetnsHost {
            name: name.clone(),
            master_side: Ipv4Addr::new(10, 231, n, 1),
            address: Ipv4Addr::new(10, 231, n, 2),
            veth: veth.clone(),
        };
        must(&["netns", "add", &name]);
        must(&["link", "add", &veth, "type", "veth", "peer", "name", &peer]);
        must(&["link", "set", &peer, "netns", &name]);
        must(&["addr", "add", &format!("{}/30", host.master_side), "dev", &veth]);
        must(&["link", "set", &veth, "up"]);
        must(&["-n", &name, "addr", "add", &format!("{}/30", host.address), "dev", &peer]);
        must(&["-n", &name, "link", "set", &peer, "up"]);
        must(&["-n", &name, "link", "set", "lo", "up"]);
        host
    }

    /// Takes the host's end of the link down (a cut cable: nothing passes, no connection is told)
    /// or brings it back up.
    pub fn set_link(&self, up: bool) {
        let peer = format!("{}h", self.veth.trim_end_matches('m'));
        must(&["-n", &self.name, "link", "set", &peer, if up { "up" } else { "down" }]);
    }

    /// `command` run inside the namespace, with its arguments, environment and directory.
    pub fn wrap(&self, command: &Command) -> Command {
        let mut inside = Command::new("ip");
        inside
            .env("PATH", super::path())
            .args(["netns", "exec", &self.name])
            .arg(command.get_program())
            .args(command.get_args());
        inside.env_clear();
        for (key, value) in command.get_envs() {
            if let Some(value) = value {
                inside.env(key, value);
            }
        }
        inside.env("PATH", super::path());
        if let Some(dir) = command.get_current_dir() {
            inside.current_dir(dir);
        }
        inside
    }
}

impl Drop for NetnsHost {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.name]);
        let _ = ip(&["link", "del", &self.veth]);
    }
}
