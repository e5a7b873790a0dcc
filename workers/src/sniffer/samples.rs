//! A recorded TLS 1.2 handshake (`openssl s_client -tls1_2 -servername a.example` against `openssl
//! s_server`: its ClientHello and ServerHello records) and a builder of raw IPv4/TCP frames, for the
//! sniffer's tests and benchmarks. tshark gives the ClientHello JA3 `871a754af286dfb70c1b53c6887c62e0`,
//! FoxIO's ja4plus JA4 `t12d280700_d943125447b4_e7e480e5a997`.

use std::net::{IpAddr, SocketAddr};

const CLIENT_HELLO_HEX: [&str; 5] = [
    "16030100c9010000c503036b74d6b50235e9df3045357d67a0609f827f6d8603c48d1a711e2fca38be9869000038c02c",
    "c030009fcca9cca8ccaac02bc02f009ec024c028006bc023c0270067c00ac0140039c009c0130033009d009c003d003c",
    "0035002f00ff010000640000000e000c000009612e6578616d706c65000b000403000102000a000c000a001d0017001e",
    "00190018002300000016000000170000000d002a0028040305030603080708080809080a080b08040805080604010501",
    "0601030303010302040205020602",
];
const SERVER_HELLO_HEX: [&str; 2] = [
    "16030300410200003d030393bf4af84ceae8d6a2e299747e3986de90e9c4070674054a444f574e4752440100c0300000",
    "15ff01000100000b0004030001020023000000170000",
];

/// The ClientHello record.
pub fn client_hello() -> Vec<u8> {
    unhex(&CLIENT_HELLO_HEX)
}

/// The ServerHello record.
pub fn server_hello() -> Vec<u8> {
    unhex(&SERVER_HELLO_HEX)
}

fn unhex(parts: &[&str]) -> Vec<u8> {
    let hex: String = parts.concat();
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
}

/// A raw IPv4 frame carrying one TCP segment.
pub fn frame(src: SocketAddr, dst: SocketAddr, flags: u8, seq: u32, ack: u32, payload: &[u8]) -> Vec<u8> {
    let (IpAddr::V4(s), IpAddr::V4(d)) = (src.ip(), dst.ip()) else { panic!("IPv4 endpoints only") };
    let total = (40 + payload.len()) as u16;
    let mut f = vec![0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, 6, 0, 0];
    f[2..4].copy_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&s.octets());
    f.extend_from_slice(&d.octets());
    f.extend_from_slice(&src.port().to_be_bytes());
    f.extend_from_slice(&dst.port().to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend_from_slice(&ack.to_be_bytes());
    f.extend_from_slice(&[0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    f.extend_from_slice(payload);
    f
}
