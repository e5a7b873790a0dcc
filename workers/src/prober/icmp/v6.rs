//! DECNET's four IPv6 stimuli: a UDP datagram to a closed port (Port Unreachable from the target,
//! `U`), the same with hop limit 1 (Hop Limit Exceeded from the first router, `H`), a packet whose
//! Next Header is 253, reserved for experiments (Parameter Problem code 1, `N`), and a UDP datagram
//! behind a Destination Options header carrying option type 0x80, whose two high bits tell the
//! receiver to discard the packet and answer (Parameter Problem code 2, `B`). The kernel builds
//! every IPv6 header: the UDP ones on UDP sockets, the other two on raw sockets of their Next
//! Header. The UDP datagrams are told apart by source port, the experimental one by its Next Header.

use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr, SocketAddrV6};
use std::os::fd::OwnedFd;
use std::time::Duration;

use rustix::net::{AddressFamily, Protocol, SendFlags, SocketType, ipproto};
use tokio::time::Instant;

use super::{Elicited, Reply, Stimulus};

pub const STIMULI: [Stimulus; 4] = [
    Stimulus { name: "port_unreachable_v6", letter: 'U', icmp_type: 1, icmp_code: Some(4) },
    Stimulus { name: "hop_limit_exceeded", letter: 'H', icmp_type: 3, icmp_code: Some(0) },
    Stimulus { name: "unknown_next_header", letter: 'N', icmp_type: 4, icmp_code: Some(1) },
    Stimulus { name: "bad_dest_option", letter: 'B', icmp_type: 4, icmp_code: Some(2) },
];

const UDP: u8 = 17;
const DEST_OPTIONS: u8 = 60;
const EXPERIMENTAL: u8 = 253;

/// A raw ICMPv6 socket, opened before the stimuli are sent.
pub struct Listener(OwnedFd);

fn raw(next_header: u8) -> io::Result<OwnedFd> {
    let protocol = Protocol::from_raw(std::num::NonZeroU32::new(next_header.into()).expect("not 0"));
    Ok(rustix::net::socket(AddressFamily::INET6, SocketType::RAW, Some(protocol))?)
}

impl Listener {
    /// `Err` with `PermissionDenied` without CAP_NET_RAW.
    pub fn open() -> io::Result<Listener> {
        Ok(Listener(rustix::net::socket(AddressFamily::INET6, SocketType::RAW, Some(ipproto::ICMPV6))?))
    }

    /// Sends the four stimuli to `target` and reads their errors for up to `wait`; returns the
    /// closed port the first was sent to, and what each drew.
    pub async fn elicit(&self, target: Ipv6Addr, wait: Duration) -> io::Result<(u16, Elicited)> {
        let family = IpAddr::V6(Ipv6Addr::UNSPECIFIED);
        let (plain, plain_port, closed_port) = super::ports(family)?;
        let (hop, hop_port, hop_closed) = super::ports(family)?;
        rustix::net::sockopt::set_ipv6_unicast_hops(&hop, Some(1))?;
        let (options, options_port, options_closed) = super::ports(family)?;
        let to = |port| SocketAddr::V6(SocketAddrV6::new(target, port, 0, 0));
        // The options datagram's UDP checksum needs the source address the kernel will pick.
        options.connect(to(options_closed))?;
        let IpAddr::V6(source) = options.local_addr()?.ip() else { unreachable!("an IPv6 socket") };
        let raw_to = SocketAddrV6::new(target, 0, 0, 0);
        let sends: [io::Result<()>; 4] = [
            plain.send_to(&[0; 32], to(closed_port)).map(drop),
            hop.send_to(&[0; 32], to(hop_closed)).map(drop),
            raw(EXPERIMENTAL)
                .and_then(|s| Ok(rustix::net::sendto(&s, &[0; 8], SendFlags::empty(), &raw_to)?))
                .map(drop),
            raw(DEST_OPTIONS)
                .and_then(|s| {
                    let packet = options_datagram(source, target, options_port, options_closed);
                    Ok(rustix::net::sendto(&s, &packet, SendFlags::empty(), &raw_to)?)
                })
                .map(drop),
        ];
        let mut sent_at = [None; 4];
        for (i, sent) in sends.into_iter().enumerate() {
            match sent {
                Ok(()) => sent_at[i] = Some(Instant::now()),
                Err(err) => {
                    tracing::debug!(target_ip = %target, stimulus = STIMULI[i].name, error = %err, "Stimulus not sent")
                }
            }
        }
        let sports = [plain_port, hop_port, 0, options_port];
        let answers =
            super::collect(&self.0, sent_at, wait, |message, from| recognise(message, from?, target, &sports)).await;
        Ok((closed_port, Elicited { stimuli: &STIMULI, answers }))
    }
}

/// The `B` stimulus after its IPv6 header: Destination Options (option 0x80, four bytes of data)
/// and a UDP datagram with 8 bytes, its checksum over the pseudo-header as IPv6 requires.
fn options_datagram(source: Ipv6Addr, target: Ipv6Addr, sport: u16, dport: u16) -> Vec<u8> {
    let mut udp = Vec::with_capacity(16);
    udp.extend_from_slice(&sport.to_be_bytes());
    udp.extend_from_slice(&dport.to_be_bytes());
    udp.extend_from_slice(&16u16.to_be_bytes());
    udp.extend_from_slice(&[0; 10]);
    let mut pseudo = Vec::with_capacity(40 + udp.len());
    pseudo.extend_from_slice(&source.octets());
    pseudo.extend_from_slice(&target.octets());
    pseudo.extend_from_slice(&(udp.len() as u32).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, UDP]);
    pseudo.extend_from_slice(&udp);
    let checksum = match internet_checksum(&pseudo) {
        0 => 0xffff,
        sum => sum,
    };
    udp[6..8].copy_from_slice(&checksum.to_be_bytes());
    let mut packet = vec![UDP, 0, 0x80, 4, 0, 0, 0, 0];
    packet.extend_from_slice(&udp);
    packet
}

/// RFC 1071's one's-complement sum.
fn internet_checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An ICMPv6 message from `from`, if it is an error quoting one of our stimuli to `target`:
/// which one, and the error.
fn recognise(message: &[u8], from: IpAddr, target: Ipv6Addr, sports: &[u16; 4]) -> Option<(usize, Reply)> {
    let (icmp_type, icmp_code) = (*message.first()?, *message.get(1)?);
    if !matches!(icmp_type, 1 | 3 | 4) {
        return None;
    }
    let quoted = message.get(8..)?;
    let dst: [u8; 16] = quoted.get(24..40)?.try_into().ok()?;
    if Ipv6Addr::from(dst) != target {
        return None;
    }
    let udp_at = match *quoted.get(6)? {
        EXPERIMENTAL => return Some((2, reply(from, icmp_type, icmp_code, quoted))),
        UDP => 40,
        DEST_OPTIONS if *quoted.get(40)? == UDP => 40 + (usize::from(*quoted.get(41)?) + 1) * 8,
        _ => return None,
    };
    let sport = quoted.get(udp_at..udp_at + 2)?;
    let index = sports.iter().position(|&p| p != 0 && p == u16::from_be_bytes([sport[0], sport[1]]))?;
    Some((index, reply(from, icmp_type, icmp_code, quoted)))
}

fn reply(from: IpAddr, icmp_type: u8, icmp_code: u8, quoted: &[u8]) -> Reply {
    Reply { from, icmp_type, icmp_code, echo_len: quoted.len(), rtt_ms: 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quoting(next_header: u8, target: Ipv6Addr, after: &[u8]) -> Vec<u8> {
        let mut header = vec![0x60, 0, 0, 0, 0, after.len() as u8, next_header, 64];
        header.extend_from_slice(&Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1).octets());
        header.extend_from_slice(&target.octets());
        header.extend_from_slice(after);
        header
    }

    #[test]
    fn each_error_is_matched_to_its_stimulus() {
        let target: Ipv6Addr = "fd00::2".parse().unwrap();
        let from: IpAddr = "fd00::2".parse().unwrap();
        let sports = [50_000, 50_001, 0, 50_003];
        let options = options_datagram("fd00::1".parse().unwrap(), target, 50_003, 33_434);
        let mut message = vec![4, 2, 0, 0, 0, 0, 0, 42];
        message.extend_from_slice(&quoting(DEST_OPTIONS, target, &options));
        let (index, found) = recognise(&message, from, target, &sports).unwrap();
        assert_eq!((index, found.icmp_type, found.icmp_code, found.echo_len), (3, 4, 2, 40 + 24));

        let mut message = vec![4, 1, 0, 0, 0, 0, 0, 40];
        message.extend_from_slice(&quoting(EXPERIMENTAL, target, &[0; 8]));
        assert_eq!(recognise(&message, from, target, &sports).map(|(i, _)| i), Some(2));
        assert!(recognise(&message, from, "fd00::3".parse().unwrap(), &sports).is_none(), "to another host");

        let mut message = vec![1, 4, 0, 0, 0, 0, 0, 0];
        message.extend_from_slice(&quoting(UDP, target, &[0xc3, 0x51, 0x82, 0x9a, 0, 40, 0, 0]));
        assert_eq!(recognise(&message, from, target, &sports).map(|(i, _)| i), Some(1));
        message[0] = 129;
        assert!(recognise(&message, from, target, &sports).is_none(), "an echo reply is no error");
    }

    #[test]
    fn the_checksum_is_rfc_1071s() {
        // RFC 1071's worked example: the sum of 0001 f203 f4f5 f6f7 is ddf2, complemented 220d.
        assert_eq!(internet_checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]), 0x220d);
    }
}
