//! The TCP/IP fingerprint of a target's stack from its SYN-ACK: TTL, window, DF, MSS, window
//! scale, SACK, timestamps and the options' order, DECNET's `tcpfp_raw`/`tcpfp_hash` built from
//! them and a p0f-style signature (`ver:ittl+dist:olen:mss:wsize,scale:olayout:quirks:pclass`).
//! The SYN is the kernel's own, from an ordinary connect; a raw socket opened before it keeps a
//! copy of what arrives, where the SYN-ACK is found once the connection is up. A raw socket needs
//! CAP_NET_RAW: without it [`Capture::open`] says so and the probe is reported skipped. IPv4 only
//! (an IPv6 raw socket hands over no hop limit without more machinery).

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::OwnedFd;

use rustix::net::{AddressFamily, RecvFlags, SocketType, ipproto};
use sha2::{Digest, Sha256};

/// What one SYN-ACK says about its sender's stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SynAck {
    pub ttl: u8,
    pub window_size: u16,
    pub df: bool,
    pub ip_id: u16,
    /// IP options' length in bytes.
    pub ip_options: usize,
    pub ecn: bool,
    pub mss: u16,
    /// -1 when absent (DECNET's value).
    pub window_scale: i16,
    pub sack_ok: bool,
    pub timestamp: bool,
    /// TCP options in order, as DECNET's short codes (`M,N,W,S,T,E`).
    pub options_order: String,
    /// The same, p0f's names (`mss,sok,ts,nop,ws`).
    pub olayout: String,
}

impl SynAck {
    /// DECNET's raw fingerprint text.
    pub fn raw(&self) -> String {
        format!(
            "{}:{}:{}:{}:{}:{}:{}:{}",
            self.ttl,
            self.window_size,
            u8::from(self.df),
            self.mss,
            self.window_scale,
            u8::from(self.sack_ok),
            u8::from(self.timestamp),
            self.options_order
        )
    }

    /// The first 32 hex of the raw text's SHA-256 (DECNET's `tcpfp_hash`).
    pub fn hash(&self) -> String {
        svc::text::hex(&Sha256::digest(self.raw().as_bytes())[..16])
    }

    /// The initial TTL the sender most likely used, and the hops since.
    pub fn initial_ttl(&self) -> (u8, u8) {
        let initial = initial_ttl(self.ttl);
        (initial, initial - self.ttl)
    }

    /// p0f v3's signature of the SYN-ACK.
    pub fn p0f(&self) -> String {
        let (ittl, distance) = self.initial_ttl();
        let scale = if self.window_scale < 0 { 0 } else { self.window_scale };
        let mut quirks = Vec::new();
        if self.df {
            quirks.push("df");
            if self.ip_id != 0 {
                quirks.push("id+");
            }
        } else if self.ip_id == 0 {
            quirks.push("id-");
        }
        if self.ecn {
            quirks.push("ecn");
        }
        let mss = if self.mss == 0 { "*".to_string() } else { self.mss.to_string() };
        format!(
            "4:{ittl}+{distance}:{}:{mss}:{},{scale}:{}:{}:0",
            self.ip_options,
            self.window_size,
            self.olayout,
            quirks.join(",")
        )
    }
}

/// The initial TTL a packet that arrived with `ttl` most likely left with (32, 64, 128 or 255).
pub fn initial_ttl(ttl: u8) -> u8 {
    match ttl {
        0..=32 => 32,
        33..=64 => 64,
        65..=128 => 128,
        _ => 255,
    }
}

/// A raw socket that sees a copy of every TCP segment this host receives, opened before the
/// connection whose SYN-ACK it is to find.
pub struct Capture(OwnedFd);

impl Capture {
    /// `Err` with `PermissionDenied` without CAP_NET_RAW.
    pub fn open() -> io::Result<Capture> {
        let fd = rustix::net::socket(AddressFamily::INET, SocketType::RAW, Some(ipproto::TCP))?;
        Ok(Capture(fd))
    }

    /// The SYN-ACK `from` sent to our `local` port, from what has arrived by now (the connection
    /// is up, so it has). Reads without waiting until the queue is empty.
    pub fn syn_ack(&self, from: SocketAddr, local_port: u16) -> Option<SynAck> {
        let IpAddr::V4(source) = from.ip() else { return None };
        let mut buf = [0u8; 1500];
        loop {
            let (n, _) = rustix::net::recv(&self.0, &mut buf[..], RecvFlags::DONTWAIT).ok()?;
            if let Some(found) = parse(&buf[..n], source, from.port(), local_port) {
                return Some(found);
            }
        }
    }
}

const SYN: u8 = 0x02;
const ACK: u8 = 0x10;
const ECE: u8 = 0x40;
const CWR: u8 = 0x80;

/// An IPv4 packet, if it is a SYN-ACK from `source:port` to `local_port`.
pub fn parse(packet: &[u8], source: Ipv4Addr, port: u16, local_port: u16) -> Option<SynAck> {
    let version_ihl = *packet.first()?;
    let ihl = usize::from(version_ihl & 0x0f) * 4;
    if version_ihl >> 4 != 4 || ihl < 20 || packet.get(9) != Some(&6) {
        return None;
    }
    if Ipv4Addr::new(packet[12], packet[13], packet[14], packet[15]) != source {
        return None;
    }
    let tcp = packet.get(ihl..)?;
    let be16 = |b: &[u8], at: usize| -> Option<u16> { Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?])) };
    if be16(tcp, 0)? != port || be16(tcp, 2)? != local_port {
        return None;
    }
    let flags = *tcp.get(13)?;
    if flags & (SYN | ACK) != SYN | ACK {
        return None;
    }
    let data_offset = usize::from(tcp.get(12)? >> 4) * 4;
    let options = tcp.get(20..data_offset.max(20))?;
    let mut out = SynAck {
        ttl: packet[8],
        window_size: be16(tcp, 14)?,
        df: packet[6] & 0x40 != 0,
        ip_id: be16(packet, 4)?,
        ip_options: ihl - 20,
        ecn: packet[1] & 0x03 != 0 || flags & (ECE | CWR) != 0,
        mss: 0,
        window_scale: -1,
        sack_ok: false,
        timestamp: false,
        options_order: String::new(),
        olayout: String::new(),
    };
    let (mut codes, mut names) = (Vec::new(), Vec::new());
    let mut at = 0;
    while at < options.len() {
        let kind = options[at];
        match kind {
            0 => {
                codes.push("E");
                names.push(format!("eol+{}", options.len() - at - 1));
                break;
            }
            1 => {
                codes.push("N");
                names.push("nop".into());
                at += 1;
                continue;
            }
            _ => {}
        }
        let length = usize::from(*options.get(at + 1)?);
        let body = options.get(at + 2..at + length.max(2))?;
        match kind {
            2 => {
                out.mss = u16::from_be_bytes([*body.first()?, *body.get(1)?]);
                codes.push("M");
                names.push("mss".into());
            }
            3 => {
                out.window_scale = i16::from(*body.first()?);
                codes.push("W");
                names.push("ws".into());
            }
            4 => {
                out.sack_ok = true;
                codes.push("S");
                names.push("sok".into());
            }
            5 => {
                codes.push("S");
                names.push("sack".into());
            }
            8 => {
                out.timestamp = true;
                codes.push("T");
                names.push("ts".into());
            }
            other => {
                codes.push("?");
                names.push(format!("?{other}"));
            }
        }
        at += length.max(2);
    }
    out.options_order = codes.join(",");
    out.olayout = names.join(",");
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Linux SYN-ACK: TTL 64, DF, window 65160, mss 1460, sackOK, ts, nop, ws 7.
    fn linux_syn_ack() -> Vec<u8> {
        let mut p = vec![0x45, 0, 0, 60, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 2, 10, 0, 0, 1];
        p.extend_from_slice(&[0x01, 0xbb, 0xc3, 0x50, 0, 0, 0, 1, 0, 0, 0, 2, 0xa0, 0x12, 0xfe, 0x88, 0, 0, 0, 0]);
        p.extend_from_slice(&[2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2, 1, 3, 3, 7]);
        p
    }

    #[test]
    fn reads_a_linux_syn_ack() {
        let found = parse(&linux_syn_ack(), Ipv4Addr::new(10, 0, 0, 2), 443, 50_000).unwrap();
        assert_eq!((found.ttl, found.window_size, found.df, found.mss, found.window_scale), (64, 65160, true, 1460, 7));
        assert_eq!(found.options_order, "M,S,T,N,W");
        assert_eq!(found.raw(), "64:65160:1:1460:7:1:1:M,S,T,N,W");
        assert_eq!(found.p0f(), "4:64+0:0:1460:65160,7:mss,sok,ts,nop,ws:df:0");
        assert_eq!(found.hash().len(), 32);
    }

    #[test]
    fn ignores_other_segments() {
        let packet = linux_syn_ack();
        assert!(parse(&packet, Ipv4Addr::new(10, 0, 0, 3), 443, 50_000).is_none(), "another source");
        assert!(parse(&packet, Ipv4Addr::new(10, 0, 0, 2), 443, 50_001).is_none(), "another connection");
        let mut plain_ack = packet.clone();
        plain_ack[33] = 0x10;
        assert!(parse(&plain_ack, Ipv4Addr::new(10, 0, 0, 2), 443, 50_000).is_none());
        assert!(parse(&packet[..30], Ipv4Addr::new(10, 0, 0, 2), 443, 50_000).is_none(), "cut short");
    }
}
