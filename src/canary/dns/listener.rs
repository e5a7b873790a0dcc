//! The canary's DNS listener (UDP, `SVC_CANARY_DNS_LISTEN`), the channel of baits that reach a
//! host rather than a URL (`ssh_key`, `mysql_dump`): a lookup of a name under `SVC_CANARY_DNS_ZONE`
//! carrying a known token is a trigger, recorded by the same [`TriggerRecorder`] as the HTTP
//! callback's (method `DNS`, the name, the resolver's address). Names under the zone with no known
//! token get NXDOMAIN, names outside it REFUSED; reading and answering are the parent module's. Each datagram is answered by a
//! task of its own, at most [`MAX_IN_FLIGHT`] at once; past that, datagrams are dropped (resolvers
//! ask again).

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::UdpSocket;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{DnsZone, Packet, Place, Rcode};
use crate::canary::{Call, Heard, TriggerRecorder};

/// Datagrams answered at once at most.
const MAX_IN_FLIGHT: usize = 64;
/// A datagram read: a question is far smaller, the rest (EDNS options) is ignored.
const MAX_DATAGRAM: usize = 4096;
/// The pause after a failed receive, so a lasting socket error cannot spin.
const RECEIVE_PAUSE: Duration = Duration::from_millis(50);

/// The canary's DNS zone, where it listens and what it answers (`SVC_CANARY_DNS_*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CanaryDns {
    pub zone: DnsZone,
    pub listen: SocketAddr,
    /// The A record answered for names under the zone; `None`: no data.
    pub answer: Option<Ipv4Addr>,
}

/// A bound canary DNS socket and what it answers.
pub struct DnsListener {
    socket: Arc<UdpSocket>,
    zone: Arc<DnsZone>,
    answer: Option<Ipv4Addr>,
}

impl DnsListener {
    /// Binds `SVC_CANARY_DNS_LISTEN`; the error names the address.
    pub async fn bind(config: &CanaryDns) -> anyhow::Result<DnsListener> {
        let socket = UdpSocket::bind(config.listen)
            .await
            .with_context(|| format!("binding the canary DNS listener to UDP {}", config.listen))?;
        Ok(DnsListener { socket: Arc::new(socket), zone: Arc::new(config.zone.clone()), answer: config.answer })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// Answers until `shutdown`, then waits for the answers under way.
    pub async fn run(self, recorder: Arc<TriggerRecorder>, shutdown: CancellationToken) {
        tracing::info!(address = ?self.socket.local_addr().ok(), zone = %self.zone.as_str(), "Canary DNS listener");
        let (permits, tasks) = (Arc::new(Semaphore::new(MAX_IN_FLIGHT)), TaskTracker::new());
        let mut buffer = vec![0u8; MAX_DATAGRAM];
        loop {
            let received = tokio::select! {
                () = shutdown.cancelled() => break,
                received = self.socket.recv_from(&mut buffer) => received,
            };
            let (length, peer) = match received {
                Ok(received) => received,
                Err(err) => {
                    tracing::debug!(error = %err, "Canary DNS receive failed");
                    tokio::time::sleep(RECEIVE_PAUSE).await;
                    continue;
                }
            };
            let Ok(permit) = permits.clone().try_acquire_owned() else { continue };
            let packet = buffer[..length].to_vec();
            let (recorder, socket, zone, address) =
                (recorder.clone(), self.socket.clone(), self.zone.clone(), self.answer);
            tasks.spawn(async move {
                if let Some(reply) = reply(&recorder, &zone, address, &packet, peer).await
                    && let Err(err) = socket.send_to(&reply, peer).await
                {
                    tracing::debug!(error = %err, %peer, "Canary DNS answer not sent");
                }
                drop(permit);
            });
        }
        tasks.close();
        tasks.wait().await;
    }
}

/// The answer to one datagram (none to a response or a scrap), recording the trigger it is.
async fn reply(
    recorder: &Arc<TriggerRecorder>,
    zone: &DnsZone,
    address: Option<Ipv4Addr>,
    packet: &[u8],
    peer: SocketAddr,
) -> Option<Vec<u8>> {
    let query = match super::parse(packet) {
        Packet::Query(query) => query,
        Packet::Refuse(reply) => return Some(reply),
        Packet::Ignore => return None,
    };
    let tokens = match query.place(zone) {
        Place::Outside => return Some(query.answer(Rcode::Refused, None)),
        Place::Apex => return Some(query.answer(Rcode::NoError, None)),
        Place::Below(tokens) => tokens,
    };
    for token in tokens {
        let call = Call {
            src_ip: peer.ip(),
            method: "DNS".to_string(),
            path: None,
            user_agent: None,
            dns_qname: Some(query.name()),
            headers: "{}".to_string(),
        };
        // A store that failed is answered as a known name, as the HTTP callback does.
        if recorder.heard(&token, call).await != Heard::Unknown {
            return Some(query.answer(Rcode::NoError, address));
        }
    }
    Some(query.answer(Rcode::NxDomain, None))
}
