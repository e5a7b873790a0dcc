//! The kernel side of the tarpit, one network namespace at a time: entering a container's
//! namespace through the host pid of its first process (`/proc/<pid>/ns/net`), which works the same
//! for bridge and macvlan deckies; telling namespaces apart across decky and host restarts
//! ([`identity`]); finding the decky's interface; the `tc` commands of a rule (`tc`); and reading
//! the namespace's TCP and TCP6 connection tables (`conntable`).
//!
//! A namespace is entered by a fresh thread of its own (`setns` moves only the calling thread),
//! so no pooled runtime thread is ever left in a decky's namespace. Needs root (CAP_SYS_ADMIN).

pub mod conntable;
pub mod tc;

use std::io::{self, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};

/// Where `/proc` is: the host's, the one the pids of the engine refer to.
const PROC: &str = "/proc";

/// The network namespace file of process `pid`.
pub fn namespace_of(pid: u32) -> PathBuf {
    Path::new(PROC).join(pid.to_string()).join("ns/net")
}

/// Runs `work` on a new thread inside the network namespace at `namespace` (a `/proc/<pid>/ns/net`
/// or `/run/netns/<name>` file) and returns what it returned. Sockets it creates, and processes it
/// starts, belong to that namespace.
pub fn enter<T: Send + 'static>(namespace: &Path, work: impl FnOnce() -> T + Send + 'static) -> io::Result<T> {
    let file = std::fs::File::open(namespace)?;
    std::thread::spawn(move || {
        move_into_link_name_space(file.as_fd(), Some(LinkNameSpaceType::Network))?;
        Ok(work())
    })
    .join()
    .map_err(|_| io::Error::other("the thread inside the namespace panicked"))?
}

/// Runs `command` inside the network namespace at `namespace`, off the async runtime, with `input`
/// on its standard input (none: it reads end of file).
pub async fn run(namespace: PathBuf, mut command: Command, input: String) -> io::Result<Output> {
    let work = move || {
        let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        stdin.write_all(input.as_bytes())?;
        drop(stdin);
        child.wait_with_output()
    };
    tokio::task::spawn_blocking(move || enter(&namespace, work))
        .await
        .map_err(|_| io::Error::other("the namespace task panicked"))??
}

/// What tells the namespace at `namespace` from every other, across decky and host restarts:
/// this boot's id and the namespace's inode (`<boot id>/<inode>`).
pub fn identity(namespace: &Path) -> io::Result<String> {
    let inode = std::fs::metadata(namespace)?.ino();
    Ok(format!("{}/{inode}", boot_id()))
}

fn boot_id() -> &'static str {
    static BOOT_ID: OnceLock<String> = OnceLock::new();
    BOOT_ID.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id").map(|id| id.trim().to_string()).unwrap_or_default()
    })
}

/// The interface process `pid`'s namespace reaches the network through: the one of its IPv4
/// default route, else its first interface other than loopback. The name comes from inside the
/// container and ends up in `tc` commands, so only a plain interface name is accepted.
pub fn interface_of(pid: u32) -> io::Result<String> {
    let net = Path::new(PROC).join(pid.to_string()).join("net");
    let routed = std::fs::read_to_string(net.join("route")).ok().and_then(|routes| default_route_interface(&routes));
    let iface = match routed {
        Some(iface) => iface,
        None => first_interface(&std::fs::read_to_string(net.join("dev"))?)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no interface but loopback"))?,
    };
    let plain = (1..=15).contains(&iface.len())
        && iface.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
        && !iface.starts_with('-');
    if plain { Ok(iface) } else { Err(io::Error::new(io::ErrorKind::InvalidData, format!("interface name {iface:?}"))) }
}

/// The interface of the default route in a `/proc/net/route` table.
fn default_route_interface(routes: &str) -> Option<String> {
    routes.lines().skip(1).find_map(|line| {
        let mut fields = line.split_ascii_whitespace();
        let (iface, destination) = (fields.next()?, fields.next()?);
        (destination == "00000000").then(|| iface.to_string())
    })
}

/// The first interface other than loopback in a `/proc/net/dev` table.
fn first_interface(devices: &str) -> Option<String> {
    devices
        .lines()
        .skip(2)
        .filter_map(|line| line.split_once(':').map(|(name, _)| name.trim()))
        .find(|name| *name != "lo" && !name.is_empty())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_route_names_the_interface() {
        let routes = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                      eth0\t0000D50A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
                      eth1\t00000000\t01D50A0A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n";
        assert_eq!(default_route_interface(routes).as_deref(), Some("eth1"));
        assert_eq!(default_route_interface("Iface\tDestination\n"), None);
    }

    #[test]
    fn without_a_default_route_the_first_interface_but_loopback() {
        let devices = "Inter-|   Receive\n face |bytes    packets\n    lo: 0 0 0\n  eth0: 1 2 3\n";
        assert_eq!(first_interface(devices).as_deref(), Some("eth0"));
        assert_eq!(first_interface("a\nb\n    lo: 0\n"), None);
    }

    #[test]
    fn a_namespace_is_told_by_boot_and_inode() {
        let mine = identity(&namespace_of(std::process::id())).unwrap();
        assert!(mine.starts_with(boot_id()) && mine.len() > boot_id().len() + 1, "{mine}");
        assert_eq!(identity(&namespace_of(std::process::id())).unwrap(), mine);
    }
}
