//! What the decoy tests share: a decky serving its services on free ports of 127.0.0.1 with its
//! lines kept in memory, stopped when the test drops it.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use svc_core::logline::{LogLine, parse};
use svc_decoy::Decky;
use svc_decoy::emit::{Emitter, Lines};
use svc_decoy::session::{Limits, Shared};
use svc_decoy::settings::{ServiceSpec, Settings};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// `service` on a free port, with these settings.
pub fn service(name: &'static str, settings: &[(&str, &str)]) -> ServiceSpec {
    let mut spec = ServiceSpec { name, port: 0, settings: Settings::default() };
    for (key, value) in settings {
        spec.settings.set(key, value);
    }
    spec
}

/// A decky serving on loopback; cancelled when dropped.
pub struct Loopback {
    pub lines: Lines,
    addresses: Vec<(&'static str, SocketAddr)>,
    cancel: CancellationToken,
    serving: Option<JoinHandle<()>>,
}

impl Loopback {
    pub async fn start(decky: &str, services: &[ServiceSpec], limits: Limits) -> Loopback {
        let (emitter, lines) = Emitter::memory(decky);
        let decky = Decky::bind(services, IpAddr::from([127, 0, 0, 1]), Shared::new(emitter, limits)).await.unwrap();
        let addresses = decky.addresses();
        let cancel = CancellationToken::new();
        let serving = Some(tokio::spawn(decky.serve(cancel.clone())));
        Loopback { lines, addresses, cancel, serving }
    }

    /// Where `service` listens.
    pub fn address(&self, service: &str) -> SocketAddr {
        self.addresses.iter().find(|(name, _)| *name == service).unwrap_or_else(|| panic!("no {service}")).1
    }

    /// Every line written so far, parsed (a line that does not parse fails the test).
    pub fn parsed(&self) -> Vec<LogLine> {
        self.lines.all().iter().map(|line| parse(line).unwrap_or_else(|err| panic!("{err}: {line}"))).collect()
    }

    /// Stops the decky and waits for every service to end, failing the test if one does not.
    #[allow(dead_code, reason = "only the HTTP tests wait for the decky to end")]
    pub async fn stop(mut self) {
        self.cancel.cancel();
        let serving = self.serving.take().unwrap();
        tokio::time::timeout(Duration::from_secs(5), serving).await.unwrap().unwrap();
    }
}

impl Drop for Loopback {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}
