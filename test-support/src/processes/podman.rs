//! A container engine of the test's own: podman's Docker-compatible API service on a socket in a
//! temporary directory, with a project-local `containers.conf` (runc, cgroupfs, no default
//! ulimits, which this kernel needs). Installed when missing. Each test names its own fleet and
//! subnet, and everything labelled with that fleet is removed when the test ends.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use super::{DEADLINE, Proc, path};

pub struct Podman {
    dir: tempfile::TempDir,
    service: Option<Proc>,
    /// The fleet name (`SVC_FLEET_NAME`) whose containers and network this test owns.
    pub fleet: String,
    /// A /24 of the test's own.
    pub subnet: String,
    /// Ranges the test's topologies take their LANs from ([`Podman::owns_pool`]).
    pools: std::sync::Mutex<Vec<String>>,
}

fn install() {
    if Command::new("podman").arg("--version").env("PATH", path()).output().is_ok_and(|o| o.status.success()) {
        return;
    }
    let status = Command::new("apt-get")
        .args(["install", "-y", "-qq", "podman", "runc", "iptables"])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .env("PATH", path())
        .status()
        .expect("apt-get runs");
    assert!(status.success(), "podman could not be installed");
}

/// A file in a container, as the engine's archive API gives it.
#[derive(Debug, PartialEq, Eq)]
pub struct FileInContainer {
    pub mode: u32,
    pub uid: u64,
    pub gid: u64,
    /// Epoch seconds.
    pub mtime: u64,
    pub content: Vec<u8>,
}

impl Podman {
    /// A running service for a fleet called `name`, on subnet `10.213.<octet>.0/24`.
    pub fn start(name: &str, octet: u8) -> Podman {
        install();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("containers.conf"),
            "[containers]\ndefault_ulimits = []\n[engine]\nruntime = \"runc\"\ncgroup_manager = \"cgroupfs\"\n",
        )
        .unwrap();
        let fleet = format!("t{}-{name}", std::process::id() % 100_000);
        let subnet = format!("10.213.{octet}.0/24");
        let mut podman = Podman { dir, service: None, fleet, subnet, pools: Default::default() };
        podman.remove_all();
        podman.restart();
        podman
    }

    /// The test's topologies take their LANs from `pool` (`SVC_TOPOLOGY_SUBNET_POOL`): the host
    /// chains naming a subnet inside it are removed at the end too, even once the LAN's network is
    /// gone (a chain set again after its topology's teardown would otherwise outlive the test).
    pub fn owns_pool(&self, pool: &str) {
        self.pools.lock().unwrap().push(pool.to_string());
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("podman.sock")
    }

    /// `SVC_DOCKER_HOST` for this engine.
    pub fn host(&self) -> String {
        format!("unix://{}", self.socket().display())
    }

    /// Points `command` (`svc api`) at this engine and fleet, the decky image built from this
    /// `svc`, and events into `ingest`.
    pub fn configure<'c>(&self, command: &'c mut Command, ingest: &std::path::Path) -> &'c mut Command {
        command
            .env("SVC_DOCKER_HOST", self.host())
            .env("SVC_FLEET_NAME", &self.fleet)
            .env("SVC_DECKY_BINARY", super::svc_binary())
            .env("SVC_INGEST_LOG_FILE", ingest)
    }

    fn podman(&self) -> Command {
        let mut command = Command::new("podman");
        command.env("CONTAINERS_CONF", self.dir.path().join("containers.conf")).env("PATH", path());
        command
    }

    /// Starts the API service (again) and waits until it answers.
    pub fn restart(&mut self) {
        let _ = std::fs::remove_file(self.socket());
        let mut command = self.podman();
        command.args(["system", "service", "--time", "0", &self.host()]);
        self.service = Some(Proc::spawn(command));
        let deadline = Instant::now() + DEADLINE;
        while !self.answers() {
            assert!(Instant::now() < deadline, "podman's API service did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// How many lines the engine itself failed to read back from a container's log (podman's
    /// reader racing its log writer): what no client of its API can receive whole.
    pub fn log_lines_lost(&self) -> usize {
        self.service.as_ref().map_or(0, |service| service.output().matches("Getting new log line: unable to").count())
    }

    /// Stops the API service (the containers keep running).
    pub fn stop(&mut self) {
        self.service.take();
    }

    fn answers(&self) -> bool {
        std::os::unix::net::UnixStream::connect(self.socket()).is_ok()
    }

    /// `podman ARGS`, its standard output; panics when it fails.
    pub fn run(&self, args: &[&str]) -> String {
        let output = self.podman().args(args).output().unwrap();
        assert!(output.status.success(), "podman {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// `podman restart [OPTIONS] NAME`. svc's reconcile, woken by the stop's `die` event, may start the
    /// container before podman does; podman then fails with "already running", and the container
    /// was restarted all the same.
    pub fn restart_container(&self, options: &[&str], name: &str) {
        let output = self.podman().arg("restart").args(options).arg(name).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success() || stderr.contains("already running"), "podman restart {name}: {stderr}");
    }

    /// `podman stop [OPTIONS] NAME`. svc's reconcile, woken by the container's `die` event, may
    /// start it again before podman has finished; podman then fails with "container state
    /// improper", and the container was stopped all the same.
    pub fn stop_container(&self, options: &[&str], name: &str) {
        let output = self.podman().arg("stop").args(options).arg(name).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success() || stderr.contains("state improper"), "podman stop {name}: {stderr}");
    }

    /// The file at `path` in `container`, as the engine's archive API reads it there; `None` when
    /// there is none.
    pub fn read_file(&self, container: &str, path: &str) -> Option<FileInContainer> {
        let output = Command::new("curl")
            .args(["-sf", "--unix-socket", &self.socket().display().to_string()])
            .arg(format!("http://d/v1.41/containers/{container}/archive?path={path}"))
            .output()
            .unwrap();
        if !output.status.success() {
            return None;
        }
        let mut archive = tar::Archive::new(output.stdout.as_slice());
        let mut entry = archive.entries().unwrap().next().unwrap().unwrap();
        let header = entry.header().clone();
        let mut content = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut content).unwrap();
        Some(FileInContainer {
            mode: header.mode().unwrap() & 0o7777,
            uid: header.uid().unwrap(),
            gid: header.gid().unwrap(),
            mtime: header.mtime().unwrap(),
            content,
        })
    }

    /// When the container `name` last started (the engine's own words), to tell a restart.
    pub fn started_at(&self, name: &str) -> String {
        self.run(&["inspect", "--format", "{{.State.StartedAt}}", name]).trim().to_string()
    }

    /// The ids of this fleet's containers, running or not.
    pub fn containers(&self) -> Vec<String> {
        self.run(&["ps", "-aq", "--filter", &format!("label=svc.fleet={}", self.fleet)])
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The container `name`'s state (`running`, `exited`…), or `None` when there is none.
    pub fn state(&self, container: &str) -> Option<String> {
        let output = self.podman().args(["inspect", "--format", "{{.State.Status}}", container]).output().unwrap();
        output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
    }

    fn remove_all(&self) {
        for id in self.containers() {
            let _ = self.podman().args(["rm", "-f", &id]).output();
        }
        // A topology's networks carry the fleet's label too; their subnets name svc's host chains.
        let mut subnets = vec![self.subnet.clone()];
        for network in self.networks() {
            let format = "{{range .Subnets}}{{.Subnet}} {{end}}";
            let inspected = self.podman().args(["network", "inspect", "--format", format, &network]).output();
            let output = inspected.map(|o| o.stdout).unwrap_or_default();
            subnets.extend(String::from_utf8_lossy(&output).split_whitespace().map(str::to_string));
            let _ = self.podman().args(["network", "rm", "-f", &network]).output();
        }
        let _ = self.podman().args(["network", "rm", "-f", &format!("{}-fleet", self.fleet)]).output();
        // The route svc holds for a fleet's subnet while it exists (`fleet::host_routes`), left
        // when a test ends without tearing its fleet down.
        let _ = Command::new("ip").args(["route", "del", "unreachable", &self.subnet, "metric", "4040"]).output();
        // And the host chains of the fleet and its topologies (isolation, a topology's NAT
        // exemption), left the same way.
        let pools = self.pools.lock().unwrap().clone();
        for (table, hook) in [("filter", "INPUT"), ("nat", "POSTROUTING")] {
            for chain in chains_naming(table, &subnets, &pools) {
                remove_chain(table, hook, &chain);
            }
        }
    }

    /// Removes the chains that shield the host from the subnet (`fleet::host_isolation`), as a
    /// host before svc had them.
    pub fn remove_isolation(&self) {
        for chain in self.isolation_chains() {
            remove_chain("filter", "INPUT", &chain);
        }
    }

    /// svc's chains in the host's `filter` table (a fleet's `SVC-F…`, a topology's `SVC-T…`) holding
    /// a rule for this test's subnet.
    pub fn isolation_chains(&self) -> Vec<String> {
        chains_naming("filter", std::slice::from_ref(&self.subnet), &[])
    }

    /// The names of the networks labelled with this fleet.
    pub fn networks(&self) -> Vec<String> {
        let output = self
            .podman()
            .args(["network", "ls", "-q", "--filter", &format!("label=svc.fleet={}", self.fleet)])
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout).lines().map(str::to_string).collect()
    }
}

/// svc's chains (`SVC-…`) in the host's `table` holding a rule from one of `subnets`.
fn chains_naming(table: &str, subnets: &[String], pools: &[String]) -> Vec<String> {
    let listing =
        Command::new("iptables").args(["-w", "-t", table, "-S"]).output().map(|o| o.stdout).unwrap_or_default();
    let names = |source: &str| subnets.iter().any(|s| s == source) || pools.iter().any(|pool| within(source, pool));
    let mut chains: Vec<String> = String::from_utf8_lossy(&listing)
        .lines()
        .filter(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            words.windows(2).any(|pair| pair[0] == "-s" && names(pair[1]))
        })
        .filter_map(|line| line.strip_prefix("-A ")?.split_whitespace().next())
        .filter(|chain| chain.starts_with("SVC-"))
        .map(str::to_string)
        .collect();
    chains.dedup();
    chains
}

/// Whether IPv4 subnet `inner` (`a.b.c.d/n`) lies inside `outer`.
fn within(inner: &str, outer: &str) -> bool {
    let parse = |cidr: &str| -> Option<(u32, u32)> {
        let (addr, len) = cidr.split_once('/')?;
        Some((u32::from(addr.parse::<std::net::Ipv4Addr>().ok()?), len.parse().ok()?))
    };
    let (Some((inner, inner_len)), Some((outer, outer_len))) = (parse(inner), parse(outer)) else { return false };
    let mask = u32::MAX.checked_shl(32 - outer_len).unwrap_or(0);
    inner_len >= outer_len && inner & mask == outer & mask
}

/// Removes `chain` from the host's `table` with its jump from `hook`.
fn remove_chain(table: &str, hook: &str, chain: &str) {
    for args in [["-D", hook, "-j", chain].as_slice(), &["-F", chain], &["-X", chain]] {
        let _ = Command::new("iptables").args(["-w", "-t", table]).args(args).output();
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        self.remove_all();
        self.service.take();
    }
}
