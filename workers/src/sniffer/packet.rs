//! One captured frame decoded down to its TCP segment: the link layers libpcap hands us
//! (Ethernet with VLAN tags, Linux cooked v1/v2, raw IP, BSD loopback), IPv4 and IPv6 (skipping
//! extension headers), then the TCP header. Anything else, a fragment, or a header that does not
//! fit its frame is `None`: decoding never panics and never reads past the frame.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The link layers we decode, from libpcap's `DLT_*`/`LINKTYPE_*` numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkType {
    Ethernet,
    LinuxSll,
    LinuxSll2,
    /// Raw IPv4 or IPv6, told apart by the version nibble.
    Raw,
    /// BSD loopback: a 4-byte address family in host order.
    Null,
}

impl LinkType {
    pub fn from_dlt(dlt: i32) -> Option<LinkType> {
        match dlt {
            1 => Some(LinkType::Ethernet),
            113 => Some(LinkType::LinuxSll),
            276 => Some(LinkType::LinuxSll2),
            12 | 14 | 101 | 228 | 229 => Some(LinkType::Raw),
            0 | 108 => Some(LinkType::Null),
            _ => None,
        }
    }
}

/// TCP flag bits.
pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const ACK: u8 = 0x10;

/// A TCP segment and what its IP header said about the sender.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment<'a> {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    /// IPv4 TTL or IPv6 hop limit.
    pub ttl: u8,
    /// IPv4 TOS or IPv6 traffic class.
    pub tos: u8,
    /// IPv4 identification; IPv6 has none outside a fragment header.
    pub ip_id: Option<u16>,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    pub options: &'a [u8],
    pub payload: &'a [u8],
}

impl Segment<'_> {
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const ETHERTYPE_VLAN: [u16; 3] = [0x8100, 0x88a8, 0x9100];
const IPPROTO_TCP: u8 = 6;

/// The TCP segment `frame` carries, if it carries one we can read.
pub fn decode(link: LinkType, frame: &[u8]) -> Option<Segment<'_>> {
    let (ethertype, ip) = match link {
        LinkType::Ethernet => {
            let mut at = 12;
            let mut ethertype = be16(frame, at)?;
            while ETHERTYPE_VLAN.contains(&ethertype) {
                at += 4;
                ethertype = be16(frame, at)?;
            }
            (Some(ethertype), frame.get(at + 2..)?)
        }
        LinkType::LinuxSll => (Some(be16(frame, 14)?), frame.get(16..)?),
        LinkType::LinuxSll2 => (Some(be16(frame, 0)?), frame.get(20..)?),
        LinkType::Raw => (None, frame),
        LinkType::Null => (None, frame.get(4..)?),
    };
    match ethertype {
        Some(ETHERTYPE_IPV4) => ipv4(ip),
        Some(ETHERTYPE_IPV6) => ipv6(ip),
        Some(_) => None,
        None => match ip.first()? >> 4 {
            4 => ipv4(ip),
            6 => ipv6(ip),
            _ => None,
        },
    }
}

fn ipv4(ip: &[u8]) -> Option<Segment<'_>> {
    let header_len = usize::from(ip.first()? & 0x0f) * 4;
    let total_len = usize::from(be16(ip, 2)?);
    // A fragment (more to come, or not the first) cannot be read alone.
    let fragment = be16(ip, 6)?;
    if ip[0] >> 4 != 4 || header_len < 20 || fragment & 0x3fff != 0 || *ip.get(9)? != IPPROTO_TCP {
        return None;
    }
    // The total length trims Ethernet padding; a frame cut short by the snap length keeps what it has.
    let ip = ip.get(..total_len.max(header_len).min(ip.len()))?;
    if ip.len() < header_len {
        return None;
    }
    let src = IpAddr::V4(Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]));
    let dst = IpAddr::V4(Ipv4Addr::new(*ip.get(16)?, ip[17], ip[18], ip[19]));
    tcp(ip.get(header_len..)?, src, dst, ip[8], ip[1], Some(be16(ip, 4)?))
}

fn ipv6(ip: &[u8]) -> Option<Segment<'_>> {
    if ip.len() < 40 || ip[0] >> 4 != 6 {
        return None;
    }
    let payload_len = usize::from(be16(ip, 4)?);
    let tos = (ip[0] << 4) | (ip[1] >> 4);
    let src = IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(&ip[8..24]).ok()?));
    let dst = IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(&ip[24..40]).ok()?));
    let mut rest = ip.get(40..40 + payload_len.min(ip.len() - 40))?;
    let mut next = ip[6];
    // Hop-by-hop, routing and destination options are skipped; a fragment header ends it.
    for _ in 0..8 {
        match next {
            IPPROTO_TCP => return tcp(rest, src, dst, ip[7], tos, None),
            0 | 43 | 60 => {
                let len = (usize::from(*rest.get(1)?) + 1) * 8;
                next = *rest.first()?;
                rest = rest.get(len..)?;
            }
            _ => return None,
        }
    }
    None
}

fn tcp<'a>(t: &'a [u8], src: IpAddr, dst: IpAddr, ttl: u8, tos: u8, ip_id: Option<u16>) -> Option<Segment<'a>> {
    let data_offset = usize::from(*t.get(12)? >> 4) * 4;
    if data_offset < 20 || data_offset > t.len() {
        return None;
    }
    Some(Segment {
        src: SocketAddr::new(src, be16(t, 0)?),
        dst: SocketAddr::new(dst, be16(t, 2)?),
        ttl,
        tos,
        ip_id,
        seq: be32(t, 4)?,
        ack: be32(t, 8)?,
        flags: t[13],
        window: be16(t, 14)?,
        options: &t[20..data_offset],
        payload: &t[data_offset..],
    })
}

fn be16(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

fn be32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

/// What a SYN's options say, in the order they came (`M1460,S,T,N,W7`, p0f's spelling).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TcpOptions {
    pub mss: Option<u16>,
    pub wscale: Option<u8>,
    pub sack_permitted: bool,
    pub timestamps: bool,
    pub signature: String,
}

impl TcpOptions {
    pub fn parse(options: &[u8]) -> TcpOptions {
        let mut parsed = TcpOptions::default();
        let mut tokens: Vec<String> = Vec::new();
        let mut at = 0;
        while let Some(&kind) = options.get(at) {
            match kind {
                0 => {
                    tokens.push("E".into());
                    break;
                }
                1 => {
                    tokens.push("N".into());
                    at += 1;
                    continue;
                }
                _ => {}
            }
            let Some(len) = options.get(at + 1).map(|&l| usize::from(l)).filter(|&l| l >= 2) else {
                tokens.push("?".into());
                break;
            };
            let Some(body) = options.get(at + 2..at + len) else {
                tokens.push("?".into());
                break;
            };
            match (kind, body.len()) {
                (2, 2) => {
                    let mss = u16::from_be_bytes([body[0], body[1]]);
                    parsed.mss = Some(mss);
                    tokens.push(format!("M{mss}"));
                }
                (3, 1) => {
                    parsed.wscale = Some(body[0]);
                    tokens.push(format!("W{}", body[0]));
                }
                (4, 0) => {
                    parsed.sack_permitted = true;
                    tokens.push("S".into());
                }
                (8, 8) => {
                    parsed.timestamps = true;
                    tokens.push("T".into());
                }
                _ => tokens.push(format!("K{kind}")),
            }
            at += len;
        }
        parsed.signature = tokens.join(",");
        parsed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet/IPv4/TCP SYN from 10.0.0.1:40000 to 10.0.0.2:443 with MSS, SACK, TS, NOP, WS.
    fn syn_frame() -> Vec<u8> {
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        let options = [2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7];
        let tcp_len = 20 + options.len();
        let mut ip = vec![0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        ip[2..4].copy_from_slice(&((20 + tcp_len) as u16).to_be_bytes());
        let mut tcp = vec![0u8; 20];
        tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
        tcp[2..4].copy_from_slice(&443u16.to_be_bytes());
        tcp[4..8].copy_from_slice(&1000u32.to_be_bytes());
        tcp[12] = ((tcp_len / 4) as u8) << 4;
        tcp[13] = SYN;
        tcp[14..16].copy_from_slice(&64240u16.to_be_bytes());
        tcp.extend_from_slice(&options);
        f.extend(ip);
        f.extend(tcp);
        f.extend([0u8; 6]); // Ethernet padding, not payload
        f
    }

    #[test]
    fn an_ethernet_ipv4_syn_decodes_with_its_options() {
        let frame = syn_frame();
        let seg = decode(LinkType::Ethernet, &frame).unwrap();
        assert_eq!(seg.src, "10.0.0.1:40000".parse().unwrap());
        assert_eq!(seg.dst, "10.0.0.2:443".parse().unwrap());
        assert_eq!((seg.ttl, seg.ip_id, seg.seq, seg.window), (64, Some(0x1234), 1000, 64240));
        assert!(seg.has(SYN) && !seg.has(ACK));
        assert!(seg.payload.is_empty(), "padding is not payload");
        let options = TcpOptions::parse(seg.options);
        assert_eq!(options.signature, "M1460,S,T,N,W7");
        assert_eq!(
            (options.mss, options.wscale, options.sack_permitted, options.timestamps),
            (Some(1460), Some(7), true, true)
        );
    }

    #[test]
    fn every_prefix_of_a_frame_decodes_or_not_without_panicking() {
        let frame = syn_frame();
        for end in 0..frame.len() {
            let _ = decode(LinkType::Ethernet, &frame[..end]);
            let _ = decode(LinkType::Raw, &frame[14..end.max(14)]);
        }
    }
}
