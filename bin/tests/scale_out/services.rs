//! The services a scale-out test puts around its replicas: a three-node NATS cluster and haproxy
//! in front of the replicas, real processes on loopback ports, killed when dropped.

use std::process::Command;

use serde_json::Value;
use svc_test_support::processes::{self as common, Proc, eventually, free_port};

/// Three `nats-server` processes clustered on loopback ports, each with its monitoring port.
pub struct NatsCluster {
    nodes: Vec<(u16, u16, Option<Proc>)>,
}

impl NatsCluster {
    pub fn start() -> NatsCluster {
        let ports: Vec<(u16, u16, u16)> = (0..3).map(|_| (free_port(), free_port(), free_port())).collect();
        let routes: Vec<String> = ports.iter().map(|(_, cluster, _)| format!("nats://127.0.0.1:{cluster}")).collect();
        let nodes = ports
            .iter()
            .enumerate()
            .map(|(i, &(client, _, monitor))| {
                let mut command = Command::new("nats-server");
                command.env("PATH", common::path()).args([
                    "-a",
                    "127.0.0.1",
                    "-p",
                    &client.to_string(),
                    "-m",
                    &monitor.to_string(),
                    "-n",
                    &format!("node-{i}"),
                    "--cluster_name",
                    "svc",
                    "--cluster",
                    &routes[i],
                    "--routes",
                    &routes.join(","),
                ]);
                (client, monitor, Some(Proc::spawn(command)))
            })
            .collect();
        NatsCluster { nodes }
    }

    pub fn url(&self, node: usize) -> String {
        format!("nats://127.0.0.1:{}", self.nodes[node].0)
    }

    /// Every node's URL, comma-separated, as `SVC_NATS_URL` takes them.
    pub fn urls(&self) -> String {
        (0..self.nodes.len()).map(|i| self.url(i)).collect::<Vec<_>>().join(",")
    }

    /// The node a client named `name` is connected to, from the nodes' monitoring.
    pub async fn node_of(&self, name: &str) -> Option<usize> {
        for (i, (_, monitor, proc)) in self.nodes.iter().enumerate() {
            if proc.is_none() {
                continue;
            }
            let Ok(response) = reqwest::get(format!("http://127.0.0.1:{monitor}/connz")).await else { continue };
            let body: Value = response.json().await.unwrap_or(Value::Null);
            let connections = body["connections"].as_array().cloned().unwrap_or_default();
            if connections.iter().any(|c| c["name"] == name) {
                return Some(i);
            }
        }
        None
    }

    pub fn kill(&mut self, node: usize) {
        let proc = self.nodes[node].2.take().expect("the node runs");
        proc.signal(rustix::process::Signal::KILL);
    }
}

/// haproxy in front of `ports` on a free loopback port; killed when dropped.
pub struct Haproxy {
    pub port: u16,
    _proc: Proc,
    _dir: tempfile::TempDir,
}

impl Haproxy {
    /// `None` when haproxy is not installed (`scripts/lib.sh` installs it).
    pub async fn start(ports: &[u16]) -> Option<Haproxy> {
        let binary = std::env::split_paths(&common::path()).map(|d| d.join("haproxy")).find(|p| p.is_file());
        let Some(binary) = binary else {
            eprintln!("haproxy is not installed: skipped");
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let config = dir.path().join("haproxy.cfg");
        std::fs::write(&config, haproxy_config(port, ports)).unwrap();
        let mut command = Command::new(binary);
        command.args(["-db", "-f", config.to_str().unwrap()]);
        let proc = Proc::spawn(command);
        let url = format!("http://127.0.0.1:{port}/api/v1/health");
        eventually("haproxy answers", || async { reqwest::get(&url).await.is_ok_and(|r| r.status().is_success()) })
            .await;
        Some(Haproxy { port, _proc: proc, _dir: dir })
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/api/v1{path}", self.port)
    }
}

/// The configuration docs/scale-out.md shows, on the given ports.
fn haproxy_config(port: u16, replicas: &[u16]) -> String {
    let servers: String = replicas
        .iter()
        .enumerate()
        .map(|(i, p)| format!("    server replica-{i} 127.0.0.1:{p} check inter 500ms fall 2 rise 2\n"))
        .collect();
    format!(
        "global\n    maxconn 2048\n\
         defaults\n    mode http\n    timeout connect 2s\n    timeout client 1h\n    timeout server 1h\n    timeout check 3s\n    retries 3\n    option redispatch 1\n    retry-on conn-failure empty-response response-timeout\n\
         frontend api\n    bind 127.0.0.1:{port}\n    default_backend replicas\n\
         backend replicas\n    balance roundrobin\n    option httpchk GET /api/v1/health\n    http-check expect status 200\n{servers}"
    )
}
