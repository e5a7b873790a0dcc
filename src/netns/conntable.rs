//! The kernel's TCP connection tables of one network namespace, as `/proc/<pid>/net/tcp` and
//! `tcp6` print them: what the tarpit watcher reads at each poll. Only established connections on
//! the ports asked about are kept, each as the remote address and the local port; an IPv4-mapped
//! IPv6 address (a dual-stack listener's IPv4 client) is reported as the IPv4 address it is.
//!
//! The tables print addresses as the kernel holds them in memory: each 32-bit word of the
//! network-order address as a native-endian hex number (`0100007F` is 127.0.0.1 on x86); ports are
//! plain hex numbers.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

/// `st` of an established connection.
const ESTABLISHED: &str = "01";

/// One established connection: who is connected, to which local port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Connection {
    pub remote: IpAddr,
    pub port: u16,
}

/// Adds to `out` the established connections of `table` (the text of a `tcp` or `tcp6` file)
/// whose local port `wanted` accepts. Lines that do not parse are skipped.
pub fn established(table: &str, wanted: impl Fn(u16) -> bool, out: &mut Vec<Connection>) {
    for line in table.lines().skip(1) {
        let mut fields = line.split_ascii_whitespace();
        let (Some(_slot), Some(local), Some(remote), Some(state)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if state != ESTABLISHED {
            continue;
        }
        let Some(port) = local.rsplit_once(':').and_then(|(_, port)| u16::from_str_radix(port, 16).ok()) else {
            continue;
        };
        if !wanted(port) {
            continue;
        }
        if let Some(remote) = remote.rsplit_once(':').and_then(|(address, _)| address_of(address))
            && !remote.is_unspecified()
        {
            out.push(Connection { remote, port });
        }
    }
}

/// The established connections of process `pid`'s namespace, TCP and TCP6, on `wanted` ports.
pub fn read(pid: u32, wanted: impl Fn(u16) -> bool + Copy) -> io::Result<Vec<Connection>> {
    let net = Path::new("/proc").join(pid.to_string()).join("net");
    let mut out = Vec::new();
    established(&std::fs::read_to_string(net.join("tcp"))?, wanted, &mut out);
    // A kernel without IPv6 has no tcp6 table: nothing is connected over it.
    match std::fs::read_to_string(net.join("tcp6")) {
        Ok(table) => established(&table, wanted, &mut out),
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(err) => return Err(err),
    }
    Ok(out)
}

/// A table address: 8 hex digits (IPv4) or 32 (IPv6).
fn address_of(hex: &str) -> Option<IpAddr> {
    match hex.len() {
        8 => Some(IpAddr::V4(Ipv4Addr::from(word(hex)?))),
        32 => {
            let mut bytes = [0u8; 16];
            for (i, chunk) in bytes.chunks_exact_mut(4).enumerate() {
                chunk.copy_from_slice(&word(&hex[i * 8..i * 8 + 8])?);
            }
            let v6 = Ipv6Addr::from(bytes);
            Some(v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4))
        }
        _ => None,
    }
}

/// One printed word back to the bytes it holds in memory.
fn word(hex: &str) -> Option<[u8; 4]> {
    u32::from_str_radix(hex, 16).ok().map(u32::to_ne_bytes)
}

/// One table line as the kernel prints it, for an address and ports: how tests and the benchmark
/// make tables (`state` `01` is established, `0A` listening).
pub fn table_line(slot: usize, local: (IpAddr, u16), remote: (IpAddr, u16), state: &str) -> String {
    fn hex(ip: IpAddr) -> String {
        let bytes: Vec<u8> = match ip {
            IpAddr::V4(v4) => v4.octets().to_vec(),
            IpAddr::V6(v6) => v6.octets().to_vec(),
        };
        bytes.chunks_exact(4).map(|w| format!("{:08X}", u32::from_ne_bytes([w[0], w[1], w[2], w[3]]))).collect()
    }
    format!(
        "{slot:>4}: {}:{:04X} {}:{:04X} {state} 00000000:00000000 00:00000000 00000000     0        0 {} 1 0000000000000000 20 4 30 10 -1",
        hex(local.0),
        local.1,
        hex(remote.0),
        remote.1,
        10_000 + slot
    )
}

/// The header line of a table.
pub const TABLE_HEADER: &str =
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode";

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(table: &str, port: u16) -> Vec<Connection> {
        let mut out = Vec::new();
        established(table, |p| p == port, &mut out);
        out
    }

    #[test]
    fn kernel_lines_parse_as_the_kernel_means_them() {
        // Lines as a little-endian kernel prints them: 10.213.9.2:22 ← 10.213.9.250:41234.
        let v4 = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   \
                  0: 0209D50A:0016 FA09D50A:A112 01 00000000:00000000 00:00000000 00000000     0        0 1 1 0 20 4 30 10 -1\n   \
                  1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0 100 0 0 10 0\n";
        if cfg!(target_endian = "little") {
            assert_eq!(parse(v4, 22), [Connection { remote: "10.213.9.250".parse().unwrap(), port: 22 }]);
        }
        assert_eq!(parse(v4, 80), [], "other ports are not asked about");
    }

    #[test]
    fn only_established_connections_count() {
        let local: IpAddr = "10.0.0.2".parse().unwrap();
        let remote: IpAddr = "10.0.0.9".parse().unwrap();
        let table = [
            TABLE_HEADER.to_string(),
            table_line(0, (local, 22), ("0.0.0.0".parse().unwrap(), 0), "0A"),
            table_line(1, (local, 22), (remote, 50000), "01"),
            table_line(2, (local, 22), (remote, 50001), "06"),
            "garbage".into(),
            "   3: 0209D50A:ZZZZ FA09D50A:A112 01".into(),
        ]
        .join("\n");
        assert_eq!(parse(&table, 22), [Connection { remote, port: 22 }]);
    }

    #[test]
    fn ipv6_and_ipv4_mapped_addresses() {
        let local: IpAddr = "fd7a::2".parse().unwrap();
        let v6: IpAddr = "fd7a::250".parse().unwrap();
        let mapped: IpAddr = "::ffff:10.1.2.3".parse().unwrap();
        let table = [
            TABLE_HEADER.to_string(),
            table_line(0, (local, 8080), (v6, 40000), "01"),
            table_line(1, ("::ffff:10.1.2.2".parse().unwrap(), 8080), (mapped, 40001), "01"),
        ]
        .join("\n");
        let found = parse(&table, 8080);
        assert_eq!(
            found,
            [Connection { remote: v6, port: 8080 }, Connection { remote: "10.1.2.3".parse().unwrap(), port: 8080 }]
        );
        assert_eq!(found[1].remote.to_string(), "10.1.2.3", "a mapped address is reported as IPv4");
    }

    #[test]
    fn the_tables_of_this_process_read() {
        // This test's own namespace has some table; reading it must work and find nothing odd.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let _client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let _server = listener.accept().unwrap();
        let found = read(std::process::id(), |p| p == port).unwrap();
        assert_eq!(found, [Connection { remote: "127.0.0.1".parse().unwrap(), port }]);
    }
}
