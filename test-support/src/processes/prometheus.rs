//! A real Prometheus (Debian's `prometheus` package) of the test's own: on a free loopback port,
//! its data in a temporary directory, scraping one target every 250 ms with a bearer token, and
//! asked through its HTTP API. Killed (and its directory removed) when the test ends.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use super::{DEADLINE, Proc, free_port, path};

pub struct Prometheus {
    pub port: u16,
    _server: Proc,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Scrapes `http://<target><metrics_path>` sending `token` as a bearer token.
    pub fn start(target: &str, metrics_path: &str, token: &str) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let config = format!(
            "global:\n  scrape_interval: 250ms\n  scrape_timeout: 200ms\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: svc\n    metrics_path: {metrics_path}\n    \
             authorization:\n      credentials: {token}\n    static_configs:\n      - targets: ['{target}']\n"
        );
        std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
        let port = free_port();
        let mut command = Command::new(binary());
        command.current_dir(dir.path()).args([
            "--config.file=prometheus.yml",
            &format!("--storage.tsdb.path={}", dir.path().join("data").display()),
            &format!("--web.listen-address=127.0.0.1:{port}"),
            "--log.level=warn",
        ]);
        let server = Proc::spawn(command);
        let deadline = Instant::now() + DEADLINE;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "prometheus did not start: {}", server.output());
            std::thread::sleep(Duration::from_millis(50));
        }
        Prometheus { port, _server: server, _dir: dir }
    }

    /// The value of an instant query that yields one sample; `None` when it yields none.
    pub async fn query(&self, expr: &str) -> Option<f64> {
        let url = format!("http://127.0.0.1:{}/api/v1/query", self.port);
        let reply: serde_json::Value =
            reqwest::Client::new().get(url).query(&[("query", expr)]).send().await.ok()?.json().await.ok()?;
        assert_eq!(reply["status"], "success", "{expr}: {reply}");
        let results = reply["data"]["result"].as_array()?;
        assert!(results.len() <= 1, "{expr} yields several series: {reply}");
        results.first()?["value"][1].as_str()?.parse().ok()
    }

    /// Why the last scrape of the target failed, if it did (Prometheus's own words).
    pub async fn last_scrape_error(&self) -> Option<String> {
        let url = format!("http://127.0.0.1:{}/api/v1/targets", self.port);
        let reply: serde_json::Value = reqwest::get(url).await.ok()?.json().await.ok()?;
        let target = &reply["data"]["activeTargets"][0];
        target["lastError"].as_str().filter(|e| !e.is_empty()).map(str::to_string)
    }
}

fn binary() -> PathBuf {
    std::env::split_paths(&path())
        .map(|dir| dir.join("prometheus"))
        .find(|p| p.is_file())
        .expect("prometheus is installed (scripts/lib.sh ensure_observability_test_tools installs it)")
}
