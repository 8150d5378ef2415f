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
    /// link-local (the cloud metadata address), unique-local, CGNAT or any
    /// other special-purpose address ([`is_public`]); and, when the list
    /// is given, only these hosts.
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

/// Whether `addr` is a public unicast address: in no block of the
/// special-purpose tables below, or in one that carries a public IPv4
/// address (mapped, NAT64's well-known prefix, 6to4).
pub fn is_public(addr: IpAddr) -> bool {
    special_block(addr).is_none()
}

/// Why `addr` is not public: the special-purpose block it is in (for an
/// address that carries an IPv4 address, that address's block), by its
/// name and RFC.
fn special_block(addr: IpAddr) -> Option<&'static str> {
    match addr {
        IpAddr::V4(a) => special_v4(a),
        IpAddr::V6(a) => special_v6(a),
    }
}

fn special_v4(a: Ipv4Addr) -> Option<&'static str> {
    SPECIAL_V4.iter().find(|b| b.holds(a)).map(|b| b.name)
}

fn special_v6(a: Ipv6Addr) -> Option<&'static str> {
    let block = SPECIAL_V6.iter().find(|b| b.holds(a))?;
    match block.kind {
        Kind::Refused => Some(block.name),
        // What the carried address may reach decides: a gateway or relay
        // forwards there.
        Kind::CarriesV4 => special_v4(Ipv4Addr::from_bits((a.to_bits() >> (96 - u32::from(block.len))) as u32)),
    }
}

/// A special-purpose block: refused, or one whose addresses carry an IPv4
/// address that decides.
struct Special<A> {
    start: A,
    len: u8,
    kind: Kind,
    /// The registry's name, and the RFC that defines the block.
    name: &'static str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Refused,
    /// An address carries an IPv4 address in the 32 bits after the prefix.
    CarriesV4,
}

impl Special<Ipv4Addr> {
    fn holds(&self, a: Ipv4Addr) -> bool {
        within(a.to_bits().into(), self.start.to_bits().into(), self.len, 32)
    }
}

impl Special<Ipv6Addr> {
    fn holds(&self, a: Ipv6Addr) -> bool {
        within(a.to_bits(), self.start.to_bits(), self.len, 128)
    }
}

/// Whether `a` is in the block of `len` bits from `start`, in addresses of
/// `width` bits.
fn within(a: u128, start: u128, len: u8, width: u32) -> bool {
    (a ^ start).checked_shr(width - u32::from(len)).unwrap_or(0) == 0
}

const fn v4(start: [u8; 4], len: u8, name: &'static str) -> Special<Ipv4Addr> {
    let [a, b, c, d] = start;
    Special { start: Ipv4Addr::new(a, b, c, d), len, kind: Kind::Refused, name }
}

const fn v6(start: [u16; 8], len: u8, kind: Kind, name: &'static str) -> Special<Ipv6Addr> {
    let [a, b, c, d, e, f, g, h] = start;
    Special { start: Ipv6Addr::new(a, b, c, d, e, f, g, h), len, kind, name }
}

/// The IANA IPv4 Special-Purpose Address Registry: every block that is not
/// globally reachable, and multicast, which has a registry of its own.
/// Blocks inside another are listed as the registry lists them.
const SPECIAL_V4: &[Special<Ipv4Addr>] = &[
    v4([0, 0, 0, 0], 8, "\"this network\", RFC 791"),
    v4([0, 0, 0, 0], 32, "\"this host on this network\", RFC 1122"),
    v4([10, 0, 0, 0], 8, "private use, RFC 1918"),
    v4([100, 64, 0, 0], 10, "shared address space (CGNAT), RFC 6598"),
    v4([127, 0, 0, 0], 8, "loopback, RFC 1122"),
    v4([169, 254, 0, 0], 16, "link-local (the cloud metadata address), RFC 3927"),
    v4([172, 16, 0, 0], 12, "private use, RFC 1918"),
    // All of it: its two globally reachable anycast addresses (PCP,
    // TURN) are no upstream of an HTTP request.
    v4([192, 0, 0, 0], 24, "IETF protocol assignments, RFC 6890"),
    v4([192, 0, 0, 0], 29, "IPv4 service continuity prefix, RFC 7335"),
    v4([192, 0, 0, 8], 32, "IPv4 dummy address, RFC 7600"),
    v4([192, 0, 0, 170], 32, "NAT64/DNS64 discovery, RFC 8880"),
    v4([192, 0, 0, 171], 32, "NAT64/DNS64 discovery, RFC 8880"),
    v4([192, 0, 2, 0], 24, "documentation (TEST-NET-1), RFC 5737"),
    // Deprecated ("N/A" in the registry): anycast to the nearest 6to4
    // relay, which may be the provider's own.
    v4([192, 88, 99, 0], 24, "6to4 relay anycast (deprecated), RFC 7526"),
    v4([192, 168, 0, 0], 16, "private use, RFC 1918"),
    v4([198, 18, 0, 0], 15, "benchmarking, RFC 2544"),
    v4([198, 51, 100, 0], 24, "documentation (TEST-NET-2), RFC 5737"),
    v4([203, 0, 113, 0], 24, "documentation (TEST-NET-3), RFC 5737"),
    v4([224, 0, 0, 0], 4, "multicast, RFC 5771"),
    v4([240, 0, 0, 0], 4, "reserved, RFC 1112"),
    v4([255, 255, 255, 255], 32, "limited broadcast, RFC 919"),
];

/// The IANA IPv6 Special-Purpose Address Registry: every block that is not
/// globally reachable; the deprecated IPv4-compatible and site-local
/// blocks, and multicast; and the blocks that carry an IPv4 address. No
/// block that carries one overlaps another block.
const SPECIAL_V6: &[Special<Ipv6Addr>] = &[
    v6([0, 0, 0, 0, 0, 0, 0, 0], 128, Kind::Refused, "unspecified, RFC 4291"),
    v6([0, 0, 0, 0, 0, 0, 0, 1], 128, Kind::Refused, "loopback, RFC 4291"),
    v6([0, 0, 0, 0, 0, 0, 0, 0], 96, Kind::Refused, "IPv4-compatible (deprecated), RFC 4291"),
    v6([0, 0, 0, 0, 0, 0xffff, 0, 0], 96, Kind::CarriesV4, "IPv4-mapped, RFC 4291"),
    // NAT64's well-known prefix is for global IPv4 addresses only (RFC
    // 6052), and the one it carries is checked.
    v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96, Kind::CarriesV4, "IPv4-IPv6 translation, RFC 6052"),
    // Local-use NAT64: an operator's own gateway, reaching what its network
    // reaches (private and metadata addresses too), the IPv4 address
    // wherever the operator put it: refused whatever it carries.
    v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48, Kind::Refused, "local-use IPv4-IPv6 translation, RFC 8215"),
    v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64, Kind::Refused, "discard-only, RFC 6666"),
    v6([0x100, 0, 0, 1, 0, 0, 0, 0], 64, Kind::Refused, "dummy prefix, RFC 9780"),
    // All of it, as for 192.0.0.0/24: its globally reachable blocks
    // (anycast, AMT, AS112, ORCHIDv2, DETs) are no upstream of a guest's.
    v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 23, Kind::Refused, "IETF protocol assignments, RFC 2928"),
    // "N/A" in the registry; it hides an IPv4 address (obfuscated).
    v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32, Kind::Refused, "Teredo, RFC 4380"),
    v6([0x2001, 2, 0, 0, 0, 0, 0, 0], 48, Kind::Refused, "benchmarking, RFC 5180"),
    v6([0x2001, 0x10, 0, 0, 0, 0, 0, 0], 28, Kind::Refused, "ORCHID (deprecated), RFC 4843"),
    v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32, Kind::Refused, "documentation, RFC 3849"),
    v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16, Kind::CarriesV4, "6to4, RFC 3056"),
    v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20, Kind::Refused, "documentation, RFC 9637"),
    v6([0x5f00, 0, 0, 0, 0, 0, 0, 0], 16, Kind::Refused, "segment routing (SRv6) SIDs, RFC 9602"),
    v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, Kind::Refused, "unique-local, RFC 4193"),
    v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, Kind::Refused, "link-local unicast, RFC 4291"),
    v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, Kind::Refused, "site-local (deprecated), RFC 3879"),
    v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, Kind::Refused, "multicast, RFC 4291"),
];

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

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
            // Local-use NAT64 whatever it carries, at any of its places.
            "64:ff9b:1::1",
            "64:ff9b:1::a9fe:a9fe",
            "64:ff9b:1:a9fe:a9:fe00::",
            "64:ff9b:1::808:808",
            "192.88.99.1",
            "100::1",
            "2001:2::1",
            "3fff::1",
            "5f00::1",
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

    /// The blocks a hosted node refuses, as the IANA IPv4 and IPv6
    /// Special-Purpose Address Registries write them (every block that is
    /// not globally reachable), with the ones refused besides: written
    /// apart from the rule, so that a block missing from it fails here.
    const REFUSED: &[&str] = &[
        "0.0.0.0/8",
        "0.0.0.0/32",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.0.0/29",
        "192.0.0.8/32",
        "192.0.0.170/32",
        "192.0.0.171/32",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
        "255.255.255.255/32",
        "::/128",
        "::1/128",
        "::/96",
        "64:ff9b:1::/48",
        "100::/64",
        "100:0:0:1::/64",
        "2001::/23",
        "2001::/32",
        "2001:2::/48",
        "2001:10::/28",
        "2001:db8::/32",
        "3fff::/20",
        "5f00::/16",
        "fc00::/7",
        "fe80::/10",
        "fec0::/10",
        "ff00::/8",
    ];

    /// The blocks whose addresses carry an IPv4 address after the prefix.
    const CARRIERS: &[&str] = &["::ffff:0:0/96", "64:ff9b::/96", "2002::/16"];

    /// A block's first address, its last, and whether they are IPv6.
    fn block(cidr: &str) -> (u128, u128, bool) {
        let (start, len) = cidr.split_once('/').unwrap();
        let (start, len): (IpAddr, u32) = (start.parse().unwrap(), len.parse().unwrap());
        let (bits, width) = match start {
            IpAddr::V4(a) => (u128::from(a.to_bits()), 32),
            IpAddr::V6(a) => (a.to_bits(), 128),
        };
        let host = u128::MAX.checked_shr(128 - width + len).unwrap_or(0);
        assert_eq!(bits & host, 0, "{cidr} starts at its first address");
        (bits, bits | host, width == 128)
    }

    fn addr(bits: u128, v6: bool) -> IpAddr {
        if v6 { IpAddr::V6(Ipv6Addr::from_bits(bits)) } else { IpAddr::V4(Ipv4Addr::from_bits(bits as u32)) }
    }

    fn in_any(list: &[&str], bits: u128, v6: bool) -> bool {
        list.iter().map(|c| block(c)).any(|(first, last, six)| six == v6 && (first..=last).contains(&bits))
    }

    /// Start, middle and end of each block are refused; the addresses just
    /// outside it are allowed where they are public unicast (in no block,
    /// and for IPv6 in 2000::/3, the only space allocated as such).
    #[test]
    fn every_special_purpose_block_is_refused_from_its_start_to_its_end() {
        for cidr in REFUSED {
            let (first, last, v6) = block(cidr);
            for bits in [first, first + (last - first) / 2, last] {
                let a = addr(bits, v6);
                assert!(!is_public(a), "{a} in {cidr}");
            }
            let top = if v6 { u128::MAX } else { u128::from(u32::MAX) };
            for bits in [first.checked_sub(1), last.checked_add(1).filter(|b| *b <= top)].into_iter().flatten() {
                let unicast = !v6 || bits >> 125 == 1;
                if unicast && !in_any(REFUSED, bits, v6) && !in_any(CARRIERS, bits, v6) {
                    let a = addr(bits, v6);
                    assert!(is_public(a), "{a}, just outside {cidr}");
                }
            }
        }
    }

    /// An address that carries an IPv4 address is refused for every
    /// refused IPv4 block's start, middle and end, and allowed for a
    /// public one (6to4's subnet and interface bits change nothing).
    #[test]
    fn an_address_carrying_an_ipv4_address_is_as_public_as_it() {
        for carrier in CARRIERS {
            let (prefix, last, _) = block(carrier);
            let shift = (last - prefix).count_ones() - 32;
            let carrying = |v4: u128, rest: u128| addr(prefix | (v4 << shift) | rest, true);
            for cidr in REFUSED.iter().filter(|c| !block(c).2) {
                let (first, last, _) = block(cidr);
                for v4 in [first, first + (last - first) / 2, last] {
                    let a = carrying(v4, 0);
                    assert!(!is_public(a), "{a}: {carrier} carrying {cidr}");
                }
            }
            for v4 in ["1.1.1.1", "8.8.8.8", "100.128.0.0", "192.0.1.0", "223.255.255.255"] {
                let v4 = u128::from(v4.parse::<Ipv4Addr>().unwrap().to_bits());
                for rest in [0, (1u128 << shift) - 1] {
                    let a = carrying(v4, rest);
                    assert!(is_public(a), "{a}: {carrier} carrying a public address");
                }
            }
        }
    }

    /// The rule's tables are the registries above, block for block, each
    /// named with its RFC; a block that carries an IPv4 address overlaps
    /// no other (whichever the rule found first would decide).
    #[test]
    fn the_rules_tables_are_the_registries() {
        // As `Display` writes them, so that both sides spell a block alike.
        let canonical = |cidr: &str, kind: Kind| {
            let (start, len) = cidr.split_once('/').unwrap();
            (
                format!("{}/{len}", start.parse::<IpAddr>().unwrap()),
                if kind == Kind::Refused { "refused" } else { "carries" },
            )
        };
        let rule: Vec<_> = SPECIAL_V4
            .iter()
            .map(|b| (format!("{}/{}", b.start, b.len), b.kind, b.name))
            .chain(SPECIAL_V6.iter().map(|b| (format!("{}/{}", b.start, b.len), b.kind, b.name)))
            .collect();
        let ruled: BTreeSet<_> = rule.iter().map(|(cidr, kind, _)| canonical(cidr, *kind)).collect();
        let listed: BTreeSet<_> = REFUSED
            .iter()
            .map(|c| canonical(c, Kind::Refused))
            .chain(CARRIERS.iter().map(|c| canonical(c, Kind::CarriesV4)))
            .collect();
        assert_eq!(rule.len(), ruled.len(), "no block is in the rule twice");
        assert_eq!(listed.difference(&ruled).collect::<Vec<_>>(), [] as [&(String, &str); 0], "missing from the rule");
        assert_eq!(ruled.difference(&listed).collect::<Vec<_>>(), [] as [&(String, &str); 0], "not in the registries");
        for (cidr, kind, name) in &rule {
            assert!(name.contains(", RFC "), "{cidr} is named with its RFC: {name}");
            if *kind == Kind::CarriesV4 {
                let (first, last, _) = block(cidr);
                for (other, _, _) in rule.iter().filter(|(c, _, _)| c != cidr) {
                    let (f, l, six) = block(other);
                    assert!(!six || l < first || f > last, "{cidr} overlaps {other}");
                }
            }
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
