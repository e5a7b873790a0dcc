//! svc's own low-interaction decoys, the services a decky runs (`svc decky`): SSH, HTTP and HTTPS,
//! telnet, FTP and SMTP, one module each, all in one process. Every attempt, credential, command
//! and connection becomes one RFC 5424 line on stdout in DECNET's shapes, so the collector and the
//! ingester read them like any other decky's. Safe by construction: nothing an attacker sends is
//! executed or fetched, every input is bounded (`session::Limits`), and no decoy connects out.

pub mod artifacts;
pub mod credential;
pub mod emit;
mod ftp;
mod http;
pub mod line;
pub mod session;
pub mod settings;
pub mod shell;
mod smtp;
mod ssh;
mod telnet;
pub mod transcript;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use anyhow::Context;
use svc_core::logline::Severity;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use session::{Decoy, Shared, accept_loop};
use settings::ServiceSpec;

/// The decoy for one service spec, built from its settings. The host name it shows attackers (shell
/// prompts, banners, certificates) is the `hostname` setting, else the decky's name.
fn build(spec: &ServiceSpec, decky: &str) -> anyhow::Result<Arc<dyn Decoy>> {
    let settings = &spec.settings;
    let hostname = settings.get("hostname").unwrap_or(decky);
    match spec.name {
        "ssh" => ssh::decoy(settings, hostname),
        "http" => http::decoy(settings, hostname, false),
        "https" => http::decoy(settings, hostname, true),
        "telnet" => telnet::decoy(settings, hostname),
        "ftp" => ftp::decoy(settings, hostname),
        "smtp" => smtp::decoy(settings, hostname),
        other => anyhow::bail!("no decoy for service `{other}`"),
    }
}

/// A decky's services, bound and ready to serve.
pub struct Decky {
    services: Vec<(&'static str, TcpListener, Arc<dyn Decoy>)>,
    shared: Shared,
}

impl Decky {
    /// Builds every service and binds its port on `ip` (port 0 picks a free one), so that a port
    /// that cannot be had fails the start, not a later connection.
    pub async fn bind(specs: &[ServiceSpec], ip: IpAddr, shared: Shared) -> anyhow::Result<Decky> {
        let mut services = Vec::new();
        for spec in specs {
            let decoy = build(spec, shared.emitter.hostname()).with_context(|| format!("setting up {}", spec.name))?;
            let listener = TcpListener::bind((ip, spec.port))
                .await
                .with_context(|| format!("{} cannot listen on {ip}:{}", spec.name, spec.port))?;
            services.push((spec.name, listener, decoy));
        }
        Ok(Decky { services, shared })
    }

    /// Where each service listens.
    pub fn addresses(&self) -> Vec<(&'static str, SocketAddr)> {
        self.services.iter().filter_map(|(name, listener, _)| Some((*name, listener.local_addr().ok()?))).collect()
    }

    /// Serves every service until `cancel`, then waits for their sessions to end.
    pub async fn serve(self, cancel: CancellationToken) {
        let mut loops = Vec::new();
        for (name, listener, decoy) in self.services {
            let port = listener.local_addr().map(|a| a.port().to_string()).unwrap_or_default();
            self.shared.emitter.emit(
                Severity::Info,
                name,
                "startup",
                vec![("port", port)],
                Some(format!("{name} decoy listening")),
            );
            loops.push(tokio::spawn(accept_loop(listener, name, decoy, self.shared.clone(), cancel.clone())));
        }
        for accept in loops {
            let _ = accept.await;
        }
    }
}
