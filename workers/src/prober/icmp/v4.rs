//! DECNET's four IPv4 stimuli, each a UDP datagram to a closed port built whole (header and all,
//! on an `IPPROTO_RAW` socket) so its TTL, DF bit and options are ours: as sent (Port
//! Unreachable from the target, `P`), with TTL 1 (Time Exceeded from the first router, `T`), 1500
//! bytes with DF set (Fragmentation Needed from a hop with a smaller MTU, `F`) and with a
//! malformed IP option (Parameter Problem, `X`; most stacks ignore the option). DECNET sends 1500
//! bytes of payload for `F`, which no 1500-byte link lets out: 1500 bytes in all is the largest
//! datagram that leaves. Each stimulus has its own source port, by which its error is known.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddrV4};
use std::os::fd::OwnedFd;
use std::time::Duration;

use rustix::net::{AddressFamily, SendFlags, SocketType, ipproto};
use tokio::time::Instant;

use super::{Elicited, Reply, Stimulus};

pub const STIMULI: [Stimulus; 4] = [
    Stimulus { name: "port_unreachable", letter: 'P', icmp_type: 3, icmp_code: Some(3) },
    Stimulus { name: "time_exceeded", letter: 'T', icmp_type: 11, icmp_code: Some(0) },
    Stimulus { name: "frag_needed", letter: 'F', icmp_type: 3, icmp_code: Some(4) },
    Stimulus { name: "param_problem", letter: 'X', icmp_type: 12, icmp_code: None },
];

/// How each stimulus's datagram differs.
struct Shape {
    ttl: u8,
    dont_fragment: bool,
    options: &'static [u8],
    payload: usize,
}

const SHAPES: [Shape; 4] = [
    Shape { ttl: 64, dont_fragment: false, options: &[], payload: 32 },
    Shape { ttl: 1, dont_fragment: false, options: &[], payload: 32 },
    Shape { ttl: 64, dont_fragment: true, options: &[], payload: 1500 - 20 - 8 },
    // Option 0x91 (copied, class 0, number 17) with a length of 2, padded with End of Options.
    Shape { ttl: 64, dont_fragment: false, options: &[0x91, 0x02, 0x00, 0x00], payload: 8 },
];

const ICMP: u8 = 1;
const UDP: u8 = 17;

/// A raw ICMP socket, opened before the stimuli are sent.
pub struct Listener(OwnedFd);

impl Listener {
    /// `Err` with `PermissionDenied` without CAP_NET_RAW.
    pub fn open() -> io::Result<Listener> {
        Ok(Listener(rustix::net::socket(AddressFamily::INET, SocketType::RAW, Some(ipproto::ICMP))?))
    }

    /// Sends the four stimuli to `target` and reads their errors for up to `wait`; returns the
    /// closed port the first was sent to, and what each drew.
    pub async fn elicit(&self, target: Ipv4Addr, wait: Duration) -> io::Result<(u16, Elicited)> {
        let sender = rustix::net::socket(AddressFamily::INET, SocketType::RAW, Some(ipproto::RAW))?;
        let mut held = Vec::with_capacity(4);
        let mut sports = [0u16; 4];
        let mut sent_at = [None; 4];
        let mut closed_port = 0;
        for (i, (stimulus, shape)) in STIMULI.iter().zip(&SHAPES).enumerate() {
            let (socket, sport, dport) = super::ports(IpAddr::V4(Ipv4Addr::UNSPECIFIED))?;
            held.push(socket);
            sports[i] = sport;
            if i == 0 {
                closed_port = dport;
            }
            let packet = datagram(target, sport, dport, shape);
            match rustix::net::sendto(&sender, &packet, SendFlags::empty(), &SocketAddrV4::new(target, 0)) {
                Ok(_) => sent_at[i] = Some(Instant::now()),
                Err(err) => {
                    tracing::debug!(target_ip = %target, stimulus = stimulus.name, error = %err, "Stimulus not sent")
                }
            }
        }
        let answers = super::collect(&self.0, sent_at, wait, |packet, _| recognise(packet, target, &sports)).await;
        drop(held);
        Ok((closed_port, Elicited { stimuli: &STIMULI, answers }))
    }
}

/// The datagram of `shape` from `sport` to `target`'s `dport`. The kernel fills in the source
/// address, the identification and the header checksum; the UDP checksum is left out (0), as
/// IPv4 allows.
fn datagram(target: Ipv4Addr, sport: u16, dport: u16, shape: &Shape) -> Vec<u8> {
    let header_len = 20 + shape.options.len();
    let udp_len = 8 + shape.payload;
    let total = (header_len + udp_len) as u16;
    let flags: u16 = if shape.dont_fragment { 0x4000 } else { 0 };
    let mut packet = Vec::with_capacity(header_len + udp_len);
    packet.push(0x40 | (header_len / 4) as u8);
    packet.push(0);
    packet.extend_from_slice(&total.to_be_bytes());
    packet.extend_from_slice(&[0, 0]);
    packet.extend_from_slice(&flags.to_be_bytes());
    packet.extend_from_slice(&[shape.ttl, UDP, 0, 0, 0, 0, 0, 0]);
    packet.extend_from_slice(&target.octets());
    packet.extend_from_slice(shape.options);
    packet.extend_from_slice(&sport.to_be_bytes());
    packet.extend_from_slice(&dport.to_be_bytes());
    packet.extend_from_slice(&(udp_len as u16).to_be_bytes());
    packet.extend_from_slice(&[0, 0]);
    packet.resize(header_len + udp_len, 0);
    packet
}

/// An IPv4 packet read from the raw socket, if it is an ICMP error quoting one of our datagrams to
/// `target` (told apart by `sports`): which one, and the error.
fn recognise(packet: &[u8], target: Ipv4Addr, sports: &[u16; 4]) -> Option<(usize, Reply)> {
    let ihl = usize::from(*packet.first()? & 0x0f) * 4;
    if *packet.get(9)? != ICMP {
        return None;
    }
    let from = Ipv4Addr::new(*packet.get(12)?, packet[13], packet[14], packet[15]);
    let icmp = packet.get(ihl..)?;
    let (icmp_type, icmp_code) = (*icmp.first()?, *icmp.get(1)?);
    if !matches!(icmp_type, 3 | 11 | 12) {
        return None;
    }
    let quoted = icmp.get(8..)?;
    let inner_ihl = usize::from(*quoted.first()? & 0x0f) * 4;
    let inner_dst = Ipv4Addr::new(*quoted.get(16)?, quoted[17], quoted[18], quoted[19]);
    if *quoted.get(9)? != UDP || inner_dst != target {
        return None;
    }
    let udp = quoted.get(inner_ihl..inner_ihl + 2)?;
    let index = sports.iter().position(|&p| p == u16::from_be_bytes([udp[0], udp[1]]))?;
    let reply = Reply { from: IpAddr::V4(from), icmp_type, icmp_code, echo_len: quoted.len(), rtt_ms: 0 };
    Some((index, reply))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stimuli_are_built_as_shaped_and_their_errors_recognised() {
        let target = Ipv4Addr::new(10, 0, 0, 2);
        let bad_option = datagram(target, 50_000, 33_434, &SHAPES[3]);
        assert_eq!((bad_option[0], bad_option.len()), (0x46, 24 + 8 + 8));
        assert_eq!(&bad_option[20..24], &[0x91, 0x02, 0, 0]);
        let big = datagram(target, 50_001, 33_434, &SHAPES[2]);
        assert_eq!((big.len(), u16::from_be_bytes([big[6], big[7]])), (1500, 0x4000));
        assert_eq!(datagram(target, 50_002, 33_434, &SHAPES[1])[8], 1, "TTL 1");

        // A router's Time Exceeded quoting the second stimulus.
        let quoted = datagram(target, 50_001, 33_434, &SHAPES[1]);
        let mut packet = vec![0x45, 0xc0, 0, 0, 0, 0, 0, 0, 64, ICMP, 0, 0, 10, 9, 9, 1, 10, 0, 0, 1];
        packet.extend_from_slice(&[11, 0, 0, 0, 0, 0, 0, 0]);
        packet.extend_from_slice(&quoted);
        let sports = [50_000, 50_001, 50_002, 50_003];
        let (index, reply) = recognise(&packet, target, &sports).unwrap();
        assert_eq!((index, reply.icmp_type, reply.echo_len), (1, 11, 60));
        assert_eq!(reply.from, IpAddr::V4(Ipv4Addr::new(10, 9, 9, 1)));
        assert!(recognise(&packet, Ipv4Addr::new(10, 0, 0, 3), &sports).is_none(), "to another host");
        assert!(recognise(&packet, target, &[1, 2, 3, 4]).is_none(), "another datagram's");
        packet[20] = 0;
        assert!(recognise(&packet, target, &sports).is_none(), "an echo reply is no error");
    }
}
