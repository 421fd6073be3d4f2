//! Where an extension granted `outbound-http` may send requests: a list of
//! [`HostPattern`]s, each `[scheme://]host[:port]`.
//!
//! - scheme: `https` (the default) or `http`;
//! - host: an exact DNS name (`api.example.com`), `*.suffix` (any name
//!   ending in `.suffix`, never `suffix` itself), an IPv4 literal or a
//!   bracketed IPv6 literal;
//! - port: a number, `*` for any, or omitted for the scheme's default.
//!
//! The manifest requests patterns, a grant gives a subset (each granted
//! pattern [covered](HostPattern::covers) by a requested one), and every
//! request is [matched](AllowedHosts::allows) before it is sent. An IP
//! literal in the list is also what lets a DNS name resolve to a private or
//! loopback address: nothing else reaches those. No I/O, no wasmtime.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// Longest pattern accepted, in bytes.
const MAX_PATTERN_BYTES: usize = 300;
/// Most patterns one manifest or grant may list.
pub const MAX_ALLOWED_HOSTS: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Https => "https",
        }
    }

    pub fn default_port(self) -> u16 {
        match self {
            Self::Http => 80,
            Self::Https => 443,
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text.to_ascii_lowercase().as_str() {
            "http" => Some(Self::Http),
            "https" => Some(Self::Https),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HostMatch {
    /// Exactly this DNS name (lowercase).
    Name(String),
    /// Any name ending in `.<suffix>` (lowercase, without the leading dot).
    Subdomains(String),
    /// Exactly this address.
    Address(IpAddr),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PortMatch {
    Any,
    Exactly(u16),
}

/// One allowed destination.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPattern {
    pub scheme: Scheme,
    pub host: HostMatch,
    pub port: PortMatch,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("allowed host `{pattern}`: {reason}")]
pub struct HostPatternError {
    pub pattern: String,
    pub reason: String,
}

impl FromStr for HostPattern {
    type Err = HostPatternError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let error = |reason: &str| HostPatternError {
            pattern: text.chars().take(80).collect(),
            reason: reason.to_owned(),
        };
        if text.len() > MAX_PATTERN_BYTES {
            return Err(error("longer than 300 bytes"));
        }
        let (scheme, rest) = match text.split_once("://") {
            Some((scheme, rest)) => (
                Scheme::parse(scheme).ok_or_else(|| error("the scheme must be http or https"))?,
                rest,
            ),
            None => (Scheme::Https, text),
        };
        if rest.contains(['/', '?', '#', '@']) {
            return Err(error(
                "a pattern names a host, not a URL: no path, query or user",
            ));
        }
        let (host, port) = split_port(rest).ok_or_else(|| error("the port is not valid"))?;
        let port = match port {
            None => PortMatch::Exactly(scheme.default_port()),
            Some("*") => PortMatch::Any,
            Some(number) => match number.parse::<u16>() {
                Ok(port) if port > 0 && !number.starts_with(['+', '0']) => PortMatch::Exactly(port),
                _ => return Err(error("the port must be 1..=65535 or *")),
            },
        };
        let host = if let Some(v6) = host.strip_prefix('[') {
            let v6 = v6
                .strip_suffix(']')
                .ok_or_else(|| error("an IPv6 address needs its closing ]"))?;
            match v6.parse::<std::net::Ipv6Addr>() {
                Ok(address) => HostMatch::Address(IpAddr::V6(address)),
                Err(_) => return Err(error("not an IPv6 address")),
            }
        } else if let Ok(address) = host.parse::<std::net::Ipv4Addr>() {
            HostMatch::Address(IpAddr::V4(address))
        } else if let Some(suffix) = host.strip_prefix("*.") {
            let suffix = dns_name(suffix).ok_or_else(|| error("not a DNS name after `*.`"))?;
            if !suffix.contains('.') {
                return Err(error(
                    "`*.` needs a suffix of two labels or more (`*.example.com`, not `*.com`)",
                ));
            }
            HostMatch::Subdomains(suffix)
        } else {
            HostMatch::Name(dns_name(host).ok_or_else(|| {
                error("the host must be a DNS name, `*.suffix`, an IPv4 address or [IPv6]")
            })?)
        };
        Ok(Self { scheme, host, port })
    }
}

/// `host[:port]`, with a bracketed IPv6 host kept whole.
fn split_port(text: &str) -> Option<(&str, Option<&str>)> {
    if text.starts_with('[') {
        let close = text.find(']')?;
        let (host, rest) = text.split_at(close + 1);
        return match rest {
            "" => Some((host, None)),
            _ => Some((host, Some(rest.strip_prefix(':')?))),
        };
    }
    match text.split_once(':') {
        None => Some((text, None)),
        Some((host, port)) if !port.contains(':') => Some((host, Some(port))),
        Some(_) => None,
    }
}

/// A DNS name of letters, digits and hyphens, lowercased; `None` otherwise
/// (an internationalized name is written in its `xn--` form).
fn dns_name(text: &str) -> Option<String> {
    let name = text.strip_suffix('.').unwrap_or(text).to_ascii_lowercase();
    let valid = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
        // An all-numeric last label would read as a mistyped address.
        && !name
            .rsplit('.')
            .next()
            .is_some_and(|tld| tld.bytes().all(|b| b.is_ascii_digit()));
    valid.then_some(name)
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://", self.scheme.as_str())?;
        match &self.host {
            HostMatch::Name(name) => f.write_str(name)?,
            HostMatch::Subdomains(suffix) => write!(f, "*.{suffix}")?,
            HostMatch::Address(IpAddr::V4(address)) => write!(f, "{address}")?,
            HostMatch::Address(IpAddr::V6(address)) => write!(f, "[{address}]")?,
        }
        match self.port {
            PortMatch::Any => f.write_str(":*"),
            PortMatch::Exactly(port) if port == self.scheme.default_port() => Ok(()),
            PortMatch::Exactly(port) => write!(f, ":{port}"),
        }
    }
}

impl serde::Serialize for HostPattern {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for HostPattern {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Where one request goes, as the host read it from the request's URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    pub scheme: Scheme,
    /// A DNS name (any case) or an address literal, IPv6 with or without
    /// brackets.
    pub host: String,
    pub port: u16,
}

impl Destination {
    /// The destination's host as an address, when it is a literal.
    pub fn address(&self) -> Option<IpAddr> {
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        host.parse().ok()
    }
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}:{}", self.scheme.as_str(), self.host, self.port)
    }
}

impl HostPattern {
    pub fn matches(&self, destination: &Destination) -> bool {
        if self.scheme != destination.scheme {
            return false;
        }
        if let PortMatch::Exactly(port) = self.port
            && port != destination.port
        {
            return false;
        }
        match (&self.host, destination.address()) {
            (HostMatch::Address(address), Some(requested)) => *address == canonical(requested),
            (HostMatch::Address(_), None) | (_, Some(_)) => false,
            (HostMatch::Name(name), None) => destination
                .host
                .trim_end_matches('.')
                .eq_ignore_ascii_case(name),
            (HostMatch::Subdomains(suffix), None) => {
                let host = destination.host.trim_end_matches('.').to_ascii_lowercase();
                host.len() > suffix.len() + 1
                    && host.ends_with(suffix.as_str())
                    && host.as_bytes()[host.len() - suffix.len() - 1] == b'.'
            }
        }
    }

    /// Whether every destination `other` allows, `self` allows too: what a
    /// grant may give of a manifest's request.
    pub fn covers(&self, other: &HostPattern) -> bool {
        if self.scheme != other.scheme {
            return false;
        }
        let port = match (self.port, other.port) {
            (PortMatch::Any, _) => true,
            (PortMatch::Exactly(mine), PortMatch::Exactly(theirs)) => mine == theirs,
            (PortMatch::Exactly(_), PortMatch::Any) => false,
        };
        let host = match (&self.host, &other.host) {
            (mine, theirs) if mine == theirs => true,
            (HostMatch::Subdomains(suffix), HostMatch::Name(name))
            | (HostMatch::Subdomains(suffix), HostMatch::Subdomains(name)) => name
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.ends_with('.') && head.len() > 1),
            _ => false,
        };
        port && host
    }
}

/// An IPv4-mapped IPv6 address is the IPv4 address it maps.
pub fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// Whether `address` is on the public internet: not loopback, private,
/// link-local, shared (CGNAT), unspecified, multicast, broadcast,
/// documentation, benchmarking or reserved space. A DNS name reaches only
/// public addresses unless its address is listed as a literal.
pub fn is_public(address: IpAddr) -> bool {
    match canonical(address) {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            !(v4.is_unspecified()
                || v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_multicast()
                || v4.is_broadcast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
                || (a == 192 && b == 0 && c == 0)
                || (a == 198 && (18..20).contains(&b))
                || a >= 240)
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            !(v6.is_unspecified()
                || v6.is_loopback()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00 // unique local
                || (first & 0xffc0) == 0xfe80 // link-local
                || (first == 0x2001 && v6.segments()[1] == 0x0db8) // documentation
                || (first == 0x0064 && v6.segments()[1] == 0xff9b) // NAT64 of anything
                || v6.to_ipv4().is_some()) // IPv4-compatible
        }
    }
}

/// The patterns of one grant, checked together.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct AllowedHosts(Vec<HostPattern>);

impl AllowedHosts {
    /// No host at all.
    pub const fn none() -> Self {
        Self(Vec::new())
    }

    pub fn new(patterns: impl IntoIterator<Item = HostPattern>) -> Self {
        let mut patterns: Vec<HostPattern> = patterns.into_iter().collect();
        patterns.sort();
        patterns.dedup();
        Self(patterns)
    }

    pub fn patterns(&self) -> &[HostPattern] {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The pattern allowing `destination`, if one does.
    pub fn allows(&self, destination: &Destination) -> Option<&HostPattern> {
        self.0.iter().find(|pattern| pattern.matches(destination))
    }

    /// Whether a resolved address may be connected to: a public one, or one
    /// listed as a literal.
    pub fn may_connect(&self, address: IpAddr) -> bool {
        is_public(address)
            || self
                .0
                .iter()
                .any(|pattern| pattern.host == HostMatch::Address(canonical(address)))
    }

    /// The patterns of `self` that no pattern of `requested` covers.
    pub fn beyond(&self, requested: &AllowedHosts) -> Vec<&HostPattern> {
        self.0
            .iter()
            .filter(|granted| !requested.0.iter().any(|asked| asked.covers(granted)))
            .collect()
    }
}

impl fmt::Display for AllowedHosts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, pattern) in self.0.iter().enumerate() {
            if index > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{pattern}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(text: &str) -> HostPattern {
        text.parse().unwrap_or_else(|error| panic!("{error}"))
    }

    fn to(scheme: Scheme, host: &str, port: u16) -> Destination {
        Destination {
            scheme,
            host: host.into(),
            port,
        }
    }

    #[test]
    fn patterns_parse_and_print_in_one_form() {
        for (text, shown) in [
            ("api.example.com", "https://api.example.com"),
            ("HTTPS://API.Example.com:443", "https://api.example.com"),
            ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
            ("http://[::1]:*", "http://[::1]:*"),
            ("*.example.org", "https://*.example.org"),
            (
                "https://api.example.com.:8443",
                "https://api.example.com:8443",
            ),
        ] {
            assert_eq!(pattern(text).to_string(), shown, "{text}");
            assert_eq!(pattern(shown), pattern(text));
        }
        for bad in [
            "",
            "ftp://example.com",
            "https://example.com/path",
            "user@example.com",
            "*.com",
            "*example.com",
            "exa mple.com",
            "example.com:0",
            "example.com:65536",
            "example.com:+80",
            "example.com:080",
            "[::1",
            "[nope]:80",
            "1.2.3",
            "-bad.example.com",
            "a..b",
            "x:1:2",
        ] {
            assert!(bad.parse::<HostPattern>().is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn requests_match_by_scheme_host_and_port() {
        use Scheme::*;
        let exact = pattern("api.example.com");
        assert!(exact.matches(&to(Https, "API.example.com", 443)));
        assert!(!exact.matches(&to(Http, "api.example.com", 443)));
        assert!(!exact.matches(&to(Https, "api.example.com", 8443)));
        assert!(!exact.matches(&to(Https, "evil-api.example.com", 443)));
        assert!(!exact.matches(&to(Https, "api.example.com.evil.net", 443)));

        let wildcard = pattern("*.example.com");
        assert!(wildcard.matches(&to(Https, "a.b.example.com", 443)));
        assert!(!wildcard.matches(&to(Https, "example.com", 443)));
        assert!(!wildcard.matches(&to(Https, "badexample.com", 443)));
        assert!(!wildcard.matches(&to(Https, ".example.com", 443)));

        let loopback = pattern("http://127.0.0.1:*");
        assert!(loopback.matches(&to(Http, "127.0.0.1", 9)));
        assert!(loopback.matches(&to(Http, "[::ffff:127.0.0.1]", 9)));
        assert!(!loopback.matches(&to(Http, "localhost", 9)));
        assert!(!exact.matches(&to(Https, "93.184.216.34", 443)));
    }

    #[test]
    fn a_grant_gives_only_what_its_request_covers() {
        let requested = AllowedHosts::new([pattern("*.example.com"), pattern("http://10.0.0.1:*")]);
        let granted = AllowedHosts::new([
            pattern("api.example.com"),
            pattern("*.eu.example.com"),
            pattern("http://10.0.0.1:8080"),
            pattern("example.com"),
            pattern("*.example.com:*"),
            pattern("http://api.example.com"),
        ]);
        let beyond: Vec<String> = granted
            .beyond(&requested)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            beyond,
            [
                "http://api.example.com",
                "https://example.com",
                "https://*.example.com:*"
            ]
        );
    }

    #[test]
    fn only_public_addresses_or_listed_literals_are_connected_to() {
        let allowed = AllowedHosts::new([pattern("http://127.0.0.1:*"), pattern("example.com")]);
        for address in [
            "127.0.0.2",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
        ] {
            let address: IpAddr = address.parse().expect("address");
            assert!(!allowed.may_connect(address), "{address}");
        }
        for address in [
            "127.0.0.1",
            "::ffff:127.0.0.1",
            "93.184.216.34",
            "2606:4700::1",
        ] {
            let address: IpAddr = address.parse().expect("address");
            assert!(allowed.may_connect(address), "{address}");
        }
    }
}
