//! Where a guest's outbound HTTP may go (issue 10, the egress policy).
//! Pure: the egress sender resolves the name, asks here about each
//! address, and connects only to an address allowed here, so nothing can
//! change between the check and the connection.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An app's egress policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EgressPolicy {
    /// Anywhere (`wasmkeep dev`: the developer's own machine and network).
    Open,
    /// Public addresses only (a hosted node): never loopback, private,
    /// link-local (the cloud metadata address), unique-local or CGNAT
    /// addresses; and, when the list is given, only these hosts.
    Public { allowed_hosts: Option<Vec<HostPattern>> },
}

/// A host an app may reach: `api.example.com`, or `*.example.com` for
/// any name below `example.com` (not `example.com` itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern(String);

impl HostPattern {
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim().to_ascii_lowercase();
        let name = s.strip_prefix("*.").unwrap_or(&s);
        let valid = !name.is_empty()
            && name.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            });
        valid.then_some(Self(s))
    }

    fn matches(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        match self.0.strip_prefix("*.") {
            Some(domain) => {
                host.len() > domain.len() + 1 && host.ends_with(domain) && {
                    let cut = host.len() - domain.len();
                    host.as_bytes()[cut - 1] == b'.'
                }
            }
            None => host == self.0,
        }
    }
}

impl EgressPolicy {
    /// Whether a request may name `host` at all (before it is resolved).
    pub fn allows_host(&self, host: &str) -> bool {
        match self {
            Self::Open | Self::Public { allowed_hosts: None } => true,
            Self::Public { allowed_hosts: Some(allowed) } => allowed.iter().any(|p| p.matches(host)),
        }
    }

    /// Whether a connection may be made to `addr` (one the name resolved to).
    pub fn allows_addr(&self, addr: IpAddr) -> bool {
        match self {
            Self::Open => true,
            Self::Public { .. } => is_public(addr),
        }
    }
}

/// Whether `addr` is a public unicast address: none of loopback, private,
/// link-local, unique-local, CGNAT, multicast, unspecified, reserved or
/// documentation ranges, and no IPv6 form that carries such an IPv4
/// address (mapped, NAT64, 6to4) or hides one (Teredo).
pub fn is_public(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(a: Ipv4Addr) -> bool {
    let [o1, o2, o3, _] = a.octets();
    let refused = o1 == 0                                   // "this network"
        || o1 == 10                                         // RFC 1918
        || o1 == 127                                        // loopback
        || (o1 == 100 && (64..128).contains(&o2))           // CGNAT, RFC 6598
        || (o1 == 169 && o2 == 254)                         // link-local, cloud metadata
        || (o1 == 172 && (16..32).contains(&o2))            // RFC 1918
        || (o1 == 192 && o2 == 0 && o3 == 0)                // IETF protocol assignments
        || (o1 == 192 && o2 == 0 && o3 == 2)                // documentation
        || (o1 == 192 && o2 == 168)                         // RFC 1918
        || (o1 == 198 && (o2 == 18 || o2 == 19))            // benchmarking
        || (o1 == 198 && o2 == 51 && o3 == 100)             // documentation
        || (o1 == 203 && o2 == 0 && o3 == 113)              // documentation
        || o1 >= 224; // multicast, reserved, broadcast
    !refused
}

fn is_public_v6(a: Ipv6Addr) -> bool {
    let s = a.segments();
    if let Some(v4) = a.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    // NAT64 (64:ff9b::/96) carries an IPv4 address in its last 32 bits.
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
        return is_public_v4(Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8));
    }
    // 6to4 (2002::/16) carries one in bits 16 to 48.
    if s[0] == 0x2002 {
        return is_public_v4(Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8));
    }
    let refused = a.is_unspecified()
        || a.is_loopback()
        || s[0..6] == [0, 0, 0, 0, 0, 0]                    // IPv4-compatible (deprecated)
        || (s[0] & 0xfe00) == 0xfc00                        // unique-local fc00::/7
        || (s[0] & 0xffc0) == 0xfe80                        // link-local fe80::/10
        || (s[0] & 0xffc0) == 0xfec0                        // site-local (deprecated)
        || (s[0] & 0xff00) == 0xff00                        // multicast
        || (s[0] == 0x2001 && s[1] == 0x0db8)               // documentation
        || (s[0] == 0x2001 && s[1] == 0); // Teredo hides an IPv4 address
    !refused
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn private_and_local_addresses_are_not_public() {
        for refused in [
            "127.0.0.1",
            "127.255.0.9",
            "0.0.0.0",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "224.0.0.1",
            "255.255.255.255",
            "240.0.0.1",
            "192.0.2.1",
            "198.18.0.1",
            "::",
            "::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "2002:a9fe:a9fe::1",
            "2001:db8::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
        ] {
            assert!(!is_public(ip(refused)), "{refused}");
        }
    }

    #[test]
    fn public_addresses_are_public() {
        for public in [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.216.34",
            "172.15.255.255",
            "172.32.0.1",
            "100.63.255.255",
            "100.128.0.1",
            "169.253.1.1",
            "192.169.0.1",
            "223.255.255.255",
            "2606:4700:4700::1111",
            "2a00:1450:4001:80b::200e",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            assert!(is_public(ip(public)), "{public}");
        }
    }

    #[test]
    fn the_open_policy_allows_everything_and_the_public_one_public_addresses() {
        assert!(EgressPolicy::Open.allows_addr(ip("127.0.0.1")));
        assert!(EgressPolicy::Open.allows_host("localhost"));
        let public = EgressPolicy::Public { allowed_hosts: None };
        assert!(!public.allows_addr(ip("127.0.0.1")));
        assert!(public.allows_addr(ip("8.8.8.8")));
        assert!(public.allows_host("anything.example"));
    }

    #[test]
    fn allowed_hosts_match_exactly_or_below_a_wildcard() {
        let p = |s: &str| HostPattern::parse(s).unwrap();
        let policy = EgressPolicy::Public { allowed_hosts: Some(vec![p("api.example.com"), p("*.cdn.example.net")]) };
        assert!(policy.allows_host("api.example.com"));
        assert!(policy.allows_host("API.Example.COM."));
        assert!(!policy.allows_host("example.com"));
        assert!(!policy.allows_host("evil-api.example.com"));
        assert!(policy.allows_host("a.cdn.example.net"));
        assert!(policy.allows_host("a.b.cdn.example.net"));
        assert!(!policy.allows_host("cdn.example.net"));
        assert!(!policy.allows_host("xcdn.example.net"));
        for bad in ["", "*.", "a..b", "-a.com", "a b.com", "*.*.com", "a_b.com"] {
            assert_eq!(HostPattern::parse(bad), None, "{bad}");
        }
    }
}
