//! Where a webhook may deliver: the destination rules, applied at create, at patch and again before
//! every delivery. A URL must be `http` or `https`, name a host, carry no credentials and stay under
//! [`MAX_URL_CHARS`] ([`Target::parse`]); its host is then resolved and **every** address it
//! resolves to must be public ([`Target::resolve`]): not private, loopback, link-local (cloud
//! metadata included), unspecified, reserved, documentation, multicast, shared (100.64/10), IPv6
//! unique-local or site-local, however it is spelled (IPv4-mapped and IPv4-compatible IPv6 forms,
//! numeric host forms the WHATWG parser reads as addresses). A name that does not resolve fails
//! closed. The [`Destination`] keeps the addresses it checked, and delivery connects to those
//! only, so a second lookup cannot be rebound to another address between check and connect.
//! `SVC_WEBHOOK_ALLOW_PRIVATE` turns the address rules off, nothing else.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use url::{Host, Url};

/// The longest webhook URL accepted.
pub const MAX_URL_CHARS: usize = 2000;
/// How long resolving a webhook's host may take.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a webhook URL is refused. The texts are the client's: they name the rule, never an address
/// the host resolved to (which would make the API a probe of internal DNS).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("Webhook URL is not a valid URL")]
    Unparsable,
    #[error("Webhook URL is longer than {MAX_URL_CHARS} characters")]
    TooLong,
    #[error("Webhook URL scheme must be http or https")]
    Scheme,
    #[error("Webhook URL has no host")]
    NoHost,
    #[error("Webhook URL must not carry credentials")]
    Credentials,
    #[error("Webhook host did not resolve")]
    Unresolved,
    #[error(
        "Webhook destination is not allowed: its host resolves to a private, loopback, link-local or \
         reserved address (set SVC_WEBHOOK_ALLOW_PRIVATE=true to allow internal receivers)"
    )]
    Forbidden,
}

impl Refusal {
    /// Worth trying again later: a name that did not resolve may resolve then. Every other refusal
    /// holds until the webhook changes.
    pub fn is_transient(&self) -> bool {
        *self == Refusal::Unresolved
    }
}

/// A webhook URL that passed the rules that need no lookup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    url: Url,
}

/// A target with the addresses its host resolved to, every one of them checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Destination {
    pub url: Url,
    pub addrs: Vec<SocketAddr>,
}

impl Destination {
    pub fn is_https(&self) -> bool {
        self.url.scheme() == "https"
    }

    /// The host as the `Host` header and TLS name it: a name, or an address in URL form.
    pub fn host(&self) -> String {
        match self.url.host() {
            Some(Host::Ipv6(ip)) => format!("[{ip}]"),
            Some(host) => host.to_string(),
            None => String::new(),
        }
    }
}

impl Target {
    pub fn parse(text: &str) -> Result<Target, Refusal> {
        if text.chars().count() > MAX_URL_CHARS {
            return Err(Refusal::TooLong);
        }
        let url = Url::parse(text.trim()).map_err(|_| Refusal::Unparsable)?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Refusal::Scheme);
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(Refusal::Credentials);
        }
        match url.host() {
            None => return Err(Refusal::NoHost),
            Some(Host::Domain("")) => return Err(Refusal::NoHost),
            Some(_) => {}
        }
        Ok(Target { url })
    }

    /// The URL as it is stored and shown (normalised by the parser).
    pub fn as_str(&self) -> &str {
        self.url.as_str()
    }

    /// Resolves the host and checks every address, unless `allow_private`.
    pub async fn resolve(&self, allow_private: bool) -> Result<Destination, Refusal> {
        let port = self.url.port_or_known_default().ok_or(Refusal::Scheme)?;
        let addrs: Vec<SocketAddr> = match self.url.host().ok_or(Refusal::NoHost)? {
            Host::Ipv4(ip) => vec![SocketAddr::new(ip.into(), port)],
            Host::Ipv6(ip) => vec![SocketAddr::new(ip.into(), port)],
            Host::Domain(name) => {
                let lookup = tokio::net::lookup_host((name, port));
                match tokio::time::timeout(RESOLVE_TIMEOUT, lookup).await {
                    Ok(Ok(found)) => found.collect(),
                    Ok(Err(err)) => {
                        tracing::debug!(host = name, error = %err, "Webhook host did not resolve");
                        vec![]
                    }
                    Err(_) => vec![],
                }
            }
        };
        if addrs.is_empty() {
            return Err(Refusal::Unresolved);
        }
        if !allow_private && let Some(bad) = addrs.iter().find(|addr| !is_public(addr.ip())) {
            tracing::warn!(host = %self.url.host_str().unwrap_or(""), address = %bad.ip(), "Refused a webhook destination");
            return Err(Refusal::Forbidden);
        }
        Ok(Destination { url: self.url.clone(), addrs })
    }
}

/// Whether `ip` is an address on the public internet, which a webhook may reach.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], bits: u32) -> bool {
    let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    const NOT_PUBLIC: [([u8; 4], u32); 16] = [
        ([0, 0, 0, 0], 8),       // "this network", unspecified
        ([10, 0, 0, 0], 8),      // private
        ([100, 64, 0, 0], 10),   // shared address space (carrier-grade NAT)
        ([127, 0, 0, 0], 8),     // loopback
        ([169, 254, 0, 0], 16),  // link-local, cloud metadata (169.254.169.254)
        ([172, 16, 0, 0], 12),   // private
        ([192, 0, 0, 0], 24),    // IETF protocol assignments
        ([192, 0, 2, 0], 24),    // documentation
        ([192, 31, 196, 0], 24), // AS112
        ([192, 52, 193, 0], 24), // AMT
        ([192, 88, 99, 0], 24),  // deprecated 6to4 relay
        ([192, 168, 0, 0], 16),  // private
        ([198, 18, 0, 0], 15),   // benchmarking
        ([198, 51, 100, 0], 24), // documentation
        ([203, 0, 113, 0], 24),  // documentation
        ([224, 0, 0, 0], 3),     // multicast (224/4) and reserved (240/4, broadcast)
    ];
    !NOT_PUBLIC.iter().any(|(net, bits)| in_v4(ip, *net, *bits))
}

fn in_v6(ip: Ipv6Addr, net: [u16; 8], bits: u32) -> bool {
    let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
    u128::from(ip) & mask == u128::from(Ipv6Addr::from(net)) & mask
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    // An IPv4-mapped address reaches the IPv4 address inside it.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    // Only global unicast (2000::/3) is public. Everything outside it is not: unspecified,
    // loopback, IPv4-compatible (::/96), NAT64 (64:ff9b::/96), discard, unique-local (fc00::/7),
    // link-local (fe80::/10), site-local (fec0::/10), multicast (ff00::/8).
    if !in_v6(ip, [0x2000, 0, 0, 0, 0, 0, 0, 0], 3) {
        return false;
    }
    const NOT_PUBLIC: [([u16; 8], u32); 4] = [
        ([0x2001, 0, 0, 0, 0, 0, 0, 0], 23), // IETF protocol assignments, Teredo (embeds IPv4)
        ([0x2001, 0x0db8, 0, 0, 0, 0, 0, 0], 32), // documentation
        ([0x2002, 0, 0, 0, 0, 0, 0, 0], 16), // 6to4 (embeds IPv4)
        ([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20), // documentation
    ];
    !NOT_PUBLIC.iter().any(|(net, bits)| in_v6(ip, *net, *bits))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(url: &str) -> Refusal {
        Target::parse(url).unwrap_err()
    }

    #[test]
    fn urls_need_a_web_scheme_a_host_and_no_credentials() {
        assert_eq!(refusal("ftp://example.com/x"), Refusal::Scheme);
        assert_eq!(refusal("file:///etc/passwd"), Refusal::Scheme);
        assert_eq!(refusal("gopher://example.com"), Refusal::Scheme);
        assert_eq!(refusal("http://user:pw@example.com/"), Refusal::Credentials);
        assert_eq!(refusal("http://user@example.com/"), Refusal::Credentials);
        assert_eq!(refusal("not a url"), Refusal::Unparsable);
        assert_eq!(refusal("http://"), Refusal::Unparsable);
        assert_eq!(refusal(&format!("https://example.com/{}", "a".repeat(2048))), Refusal::TooLong);
        assert!(Target::parse("https://hooks.example.com/services/T0/B0?x=1").is_ok());
    }

    #[tokio::test]
    async fn every_spelling_of_an_internal_address_is_refused() {
        for url in [
            "http://10.0.0.1/",
            "http://127.0.0.1:8080/",
            "http://[::1]/",
            "http://169.254.169.254/latest/meta-data/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:7f00:1]/",
            "http://[::127.0.0.1]/",
            "http://[64:ff9b::a00:1]/",
            "http://0.0.0.0/",
            "http://[::]/",
            "http://100.64.0.1/",
            "http://[fd00::1]/",
            "http://[fe80::1]/",
            "http://[fec0::1]/",
            "http://[ff02::1]/",
            "http://224.0.0.1/",
            "http://255.255.255.255/",
            "http://192.168.1.1/",
            "http://172.31.255.255/",
            "http://2130706433/",
            "http://0x7f.1/",
            "http://0177.0.0.1/",
            "http://localhost/",
        ] {
            let target = Target::parse(url).unwrap_or_else(|e| panic!("{url}: {e}"));
            assert_eq!(target.resolve(false).await, Err(Refusal::Forbidden), "{url}");
        }
    }

    #[tokio::test]
    async fn public_addresses_pass_and_the_opt_out_lifts_only_the_address_rules() {
        // Literal addresses only: no test asks a DNS server anything.
        for url in ["http://8.8.8.8/", "https://[2606:4700:4700::1111]:8443/x", "http://172.32.0.1/"] {
            let destination = Target::parse(url).unwrap().resolve(false).await.unwrap();
            assert_eq!(destination.addrs.len(), 1, "{url}");
        }
        let local = Target::parse("http://127.0.0.1:9/hook").unwrap().resolve(true).await.unwrap();
        assert_eq!(local.addrs, ["127.0.0.1:9".parse().unwrap()]);
        assert!(Refusal::Unresolved.is_transient() && !Refusal::Forbidden.is_transient());
    }

    #[test]
    fn mapped_addresses_are_judged_by_the_address_inside() {
        assert!(is_public("::ffff:8.8.8.8".parse().unwrap()));
        assert!(!is_public("::ffff:10.1.2.3".parse().unwrap()));
        assert!(!is_public("2001:db8::1".parse().unwrap()));
        assert!(is_public("2a00:1450:4001::1".parse().unwrap()));
    }
}
