//! The fleet network's IPv4 subnet: parsing `a.b.c.d/len`, which addresses deckies may take, and
//! handing out the next free one.

use std::collections::BTreeSet;
use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

/// An IPv4 subnet with room for at least two hosts besides its gateway.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Subnet {
    network: u32,
    prefix: u8,
}

impl Subnet {
    fn mask(self) -> u32 {
        u32::MAX << (32 - u32::from(self.prefix))
    }

    pub fn contains(self, addr: Ipv4Addr) -> bool {
        u32::from(addr) & self.mask() == self.network
    }

    fn broadcast(self) -> u32 {
        self.network | !self.mask()
    }

    /// Whether `addr` can be a host here: inside, and neither the network nor the broadcast address.
    pub fn is_host(self, addr: Ipv4Addr) -> bool {
        let raw = u32::from(addr);
        self.contains(addr) && raw != self.network && raw != self.broadcast()
    }

    /// The lowest host address not in `taken`.
    pub fn next_free(self, taken: &BTreeSet<Ipv4Addr>) -> Option<Ipv4Addr> {
        (self.network + 1..self.broadcast()).map(Ipv4Addr::from).find(|addr| !taken.contains(addr))
    }

    /// The first host address: the gateway when an INI names none.
    pub fn first_host(self) -> Ipv4Addr {
        Ipv4Addr::from(self.network + 1)
    }
}

/// Why a text is not a subnet; the text says what was given and what is wanted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SubnetError {
    #[error("`{0}` is not an IPv4 subnet like 10.0.0.0/24 (prefix 8 to 29)")]
    Malformed(String),
    #[error("`{text}` has host bits set; the network is {network}")]
    HostBitsSet { text: String, network: Subnet },
}

impl FromStr for Subnet {
    type Err = SubnetError;

    fn from_str(text: &str) -> Result<Subnet, SubnetError> {
        let bad = || SubnetError::Malformed(text.to_string());
        let (addr, prefix) = text.trim().split_once('/').ok_or_else(bad)?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| bad())?;
        let prefix: u8 = prefix.parse().map_err(|_| bad())?;
        if !(8..=29).contains(&prefix) {
            return Err(bad());
        }
        let subnet = Subnet { network: 0, prefix };
        let network = u32::from(addr) & subnet.mask();
        if network != u32::from(addr) {
            return Err(SubnetError::HostBitsSet { text: text.to_string(), network: Subnet { network, prefix } });
        }
        Ok(Subnet { network, prefix })
    }
}

impl fmt::Display for Subnet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", Ipv4Addr::from(self.network), self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subnets_parse_and_hand_out_host_addresses_in_order() {
        let subnet: Subnet = "10.9.0.0/29".parse().unwrap();
        assert_eq!(subnet.to_string(), "10.9.0.0/29");
        let mut taken: BTreeSet<Ipv4Addr> = [Ipv4Addr::new(10, 9, 0, 1), Ipv4Addr::new(10, 9, 0, 3)].into();
        let mut handed = Vec::new();
        while let Some(addr) = subnet.next_free(&taken) {
            taken.insert(addr);
            handed.push(addr.to_string());
        }
        assert_eq!(handed, ["10.9.0.2", "10.9.0.4", "10.9.0.5", "10.9.0.6"]);
        assert!(!subnet.is_host(Ipv4Addr::new(10, 9, 0, 7)), "broadcast");
        assert!(!subnet.is_host(Ipv4Addr::new(10, 9, 0, 0)), "network");
        assert!(!subnet.is_host(Ipv4Addr::new(10, 9, 1, 2)), "outside");
    }

    #[test]
    fn malformed_subnets_are_refused() {
        for bad in ["10.0.0.0", "10.0.0.0/33", "10.0.0.0/30", "10.0.0.1/24", "x/24", "::1/64"] {
            assert!(bad.parse::<Subnet>().is_err(), "{bad}");
        }
    }
}
