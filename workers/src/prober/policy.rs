//! Which addresses the prober may send a packet to. Never: loopback, unspecified, link-local,
//! multicast, broadcast, the fleet's own addresses (deckies, swarm hosts, the master's address
//! agents dial) and this host's own (a bind to the address succeeds only for a local one, so the
//! check sends nothing). Private ranges (everything not public by the webhook rules: RFC 1918,
//! CGNAT, unique-local, documentation…) only with `SVC_PROBER_ALLOW_PRIVATE=true`.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr, UdpSocket};

use svc::roster::Counter;
use svc::roster::counters::prober as counter;
use svc::webhook::destination::is_public;

/// Why an address is not probed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Loopback, unspecified, link-local, multicast or broadcast: never.
    Reserved,
    /// The fleet's or this host's own: never.
    Own,
    /// Private, and `SVC_PROBER_ALLOW_PRIVATE` is off.
    Private,
}

impl Refusal {
    /// The heartbeat counter that counts it.
    pub fn counter(self) -> Counter {
        match self {
            Refusal::Reserved => counter::SKIPPED_RESERVED,
            Refusal::Own => counter::SKIPPED_OWN,
            Refusal::Private => counter::SKIPPED_PRIVATE,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Policy {
    pub allow_private: bool,
    /// The fleet's addresses, read again every poll.
    pub own: HashSet<IpAddr>,
}

/// An IPv4-mapped IPv6 address is the IPv4 address.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    }
}

impl Policy {
    pub fn judge(&self, ip: IpAddr) -> Result<(), Refusal> {
        let ip = canonical(ip);
        let reserved = ip.is_loopback()
            || ip.is_unspecified()
            || ip.is_multicast()
            || match ip {
                IpAddr::V4(v4) => v4.is_link_local() || v4.is_broadcast(),
                IpAddr::V6(v6) => v6.is_unicast_link_local() || v6.segments()[0] & 0xffc0 == 0xfec0,
            };
        if reserved {
            return Err(Refusal::Reserved);
        }
        if self.own.contains(&ip) || is_local(ip) {
            return Err(Refusal::Own);
        }
        if !is_public(ip) && !self.allow_private {
            return Err(Refusal::Private);
        }
        Ok(())
    }
}

/// Whether `ip` is one of this host's addresses: only a local address can be bound.
fn is_local(ip: IpAddr) -> bool {
    UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge(policy: &Policy, ip: &str) -> Result<(), Refusal> {
        policy.judge(ip.parse().unwrap())
    }

    #[test]
    fn never_reserved_or_own_addresses_and_private_only_when_allowed() {
        let mut policy = Policy::default();
        for ip in [
            "127.0.0.1",
            "::1",
            "0.0.0.0",
            "169.254.169.254",
            "fe80::1",
            "224.0.0.1",
            "ff02::1",
            "255.255.255.255",
            "::ffff:127.0.0.1",
        ] {
            assert_eq!(judge(&policy, ip), Err(Refusal::Reserved), "{ip}");
        }
        for ip in ["10.1.2.3", "192.168.1.1", "172.16.0.9", "100.64.0.1", "fd00::1"] {
            assert_eq!(judge(&policy, ip), Err(Refusal::Private), "{ip}");
        }
        assert_eq!(judge(&policy, "8.8.8.8"), Ok(()));
        policy.allow_private = true;
        assert_eq!(judge(&policy, "10.1.2.3"), Ok(()));
        assert_eq!(judge(&policy, "127.0.0.1"), Err(Refusal::Reserved), "allowing private never allows loopback");
        policy.own.insert("10.1.2.3".parse().unwrap());
        assert_eq!(judge(&policy, "10.1.2.3"), Err(Refusal::Own));
        assert_eq!(judge(&policy, "::ffff:10.1.2.3"), Err(Refusal::Own));
    }
}
