//! ICMP error behaviour, the part of DECNET's `icmp_error` that needs no hand-made IP packet: a UDP
//! datagram to a closed port of the traceroute range, and whether (and how) the target answers
//! with Port Unreachable: its code, the TTL it arrived with and how many bytes of our datagram it
//! quotes back. Reading ICMP needs a raw socket (CAP_NET_RAW): without it [`Listener::open`] fails
//! and the probe is reported skipped. IPv4 only.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::OwnedFd;
use std::time::Duration;

use rustix::net::{AddressFamily, RecvFlags, SocketType, ipproto};
use sha2::{Digest, Sha256};
use tokio::time::Instant;

/// The traceroute ports: closed almost everywhere, and common enough to pass unremarked.
const CLOSED_PORTS: std::ops::RangeInclusive<u16> = 33434..=33534;
const DEST_UNREACHABLE: u8 = 3;
const PORT_UNREACHABLE: u8 = 3;
/// How often the raw socket is looked at while waiting.
const POLL: Duration = Duration::from_millis(20);

/// A Port Unreachable's shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortUnreachable {
    pub icmp_code: u8,
    pub ttl: u8,
    /// Bytes of our datagram (IP header on) the error quotes.
    pub echo_len: usize,
    pub rtt_ms: u64,
}

impl PortUnreachable {
    /// DECNET's letter matrix for the one stimulus sent (`P`), with what identifies the stack.
    pub fn hash(&self) -> String {
        let raw = format!("P:{}:{}:{}", self.echo_len, self.icmp_code, super::tcpfp::initial_ttl(self.ttl));
        Sha256::digest(raw.as_bytes()).iter().take(16).map(|b| format!("{b:02x}")).collect()
    }
}

/// A raw ICMP socket, opened before the datagram is sent.
pub struct Listener(OwnedFd);

impl Listener {
    /// `Err` with `PermissionDenied` without CAP_NET_RAW.
    pub fn open() -> io::Result<Listener> {
        Ok(Listener(rustix::net::socket(AddressFamily::INET, SocketType::RAW, Some(ipproto::ICMP))?))
    }

    /// Sends one datagram to a closed port of `target` and waits up to `timeout` for its error.
    pub async fn port_unreachable(&self, target: Ipv4Addr, timeout: Duration) -> Option<(u16, PortUnreachable)> {
        let socket = UdpSocket::bind("0.0.0.0:0").ok()?;
        let local = socket.local_addr().ok()?.port();
        // The kernel's random ephemeral port picks the closed port too.
        let span = CLOSED_PORTS.end() - CLOSED_PORTS.start() + 1;
        let port = CLOSED_PORTS.start() + local % span;
        let sent = Instant::now();
        socket.send_to(&[0u8; 32], SocketAddr::new(IpAddr::V4(target), port)).ok()?;
        let mut buf = [0u8; 1500];
        while sent.elapsed() < timeout {
            while let Ok((n, _)) = rustix::net::recv(&self.0, &mut buf[..], RecvFlags::DONTWAIT) {
                if let Some(mut found) = parse(&buf[..n], target, local, port) {
                    found.rtt_ms = sent.elapsed().as_millis() as u64;
                    return Some((port, found));
                }
            }
            tokio::time::sleep(POLL).await;
        }
        None
    }
}

/// An IPv4 packet, if it is `target`'s Port Unreachable for our datagram `local` → `port`.
pub fn parse(packet: &[u8], target: Ipv4Addr, local: u16, port: u16) -> Option<PortUnreachable> {
    let ihl = usize::from(*packet.first()? & 0x0f) * 4;
    if packet.get(9) != Some(&1) || Ipv4Addr::new(*packet.get(12)?, packet[13], packet[14], packet[15]) != target {
        return None;
    }
    let icmp = packet.get(ihl..)?;
    if *icmp.first()? != DEST_UNREACHABLE || *icmp.get(1)? != PORT_UNREACHABLE {
        return None;
    }
    let quoted = icmp.get(8..)?;
    let inner_ihl = usize::from(*quoted.first()? & 0x0f) * 4;
    let udp = quoted.get(inner_ihl..inner_ihl + 4)?;
    if quoted.get(9) != Some(&17)
        || u16::from_be_bytes([udp[0], udp[1]]) != local
        || u16::from_be_bytes([udp[2], udp[3]]) != port
    {
        return None;
    }
    Some(PortUnreachable { icmp_code: icmp[1], ttl: packet[8], echo_len: quoted.len(), rtt_ms: 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_port_unreachable_for_our_datagram_only() {
        let mut quoted = vec![0x45, 0, 0, 60, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        quoted.extend_from_slice(&[0xc3, 0x50, 0x82, 0x9a, 0, 40, 0, 0]);
        quoted.extend_from_slice(&[0; 32]);
        let mut packet = vec![0x45, 0xc0, 0, 0, 0, 0, 0, 0, 64, 1, 0, 0, 10, 0, 0, 2, 10, 0, 0, 1];
        packet.extend_from_slice(&[3, 3, 0, 0, 0, 0, 0, 0]);
        packet.extend_from_slice(&quoted);
        let target = Ipv4Addr::new(10, 0, 0, 2);
        let found = parse(&packet, target, 50_000, 33_434).unwrap();
        assert_eq!((found.icmp_code, found.ttl, found.echo_len), (3, 64, 60));
        assert!(parse(&packet, target, 50_001, 33_434).is_none(), "another datagram's");
        assert!(parse(&packet, Ipv4Addr::new(10, 0, 0, 3), 50_000, 33_434).is_none(), "another host's");
        packet[21] = 1;
        assert!(parse(&packet, target, 50_000, 33_434).is_none(), "host unreachable is not port unreachable");
    }
}
