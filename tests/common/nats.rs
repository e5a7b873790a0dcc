//! A `nats-server` of the test's own, for the tests of event streams.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `nats-server` of the test's own on a free loopback port, stopped when dropped.
pub struct Nats {
    port: u16,
    child: Option<Child>,
}

impl Nats {
    pub fn start() -> Nats {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut nats = Nats { port, child: None };
        nats.restart();
        nats
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Starts it (again) on the same port.
    pub fn restart(&mut self) {
        let binary = ["/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"]
            .into_iter()
            .find(|p| std::path::Path::new(p).is_file())
            .expect("nats-server is installed");
        let child = Command::new(binary)
            .args(["-a", "127.0.0.1", "-p", &self.port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(started.elapsed() < Duration::from_secs(10), "nats-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        self.stop();
    }
}
