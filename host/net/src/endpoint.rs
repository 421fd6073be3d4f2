//! [`Endpoint`]: a URL a user named for the host to reach, parsed once with
//! the `url` crate and checked; never split by hand.
//!
//! A hand-split URL is what let `http://127.0.0.1:1@OTHER-HOST/` pass a
//! loopback check: everything before `@` is userinfo, and the host is
//! OTHER-HOST. Here the host is whatever the parser says it is, and a URL
//! with userinfo is refused outright (credentials come from the
//! environment, never from a URL that ends up in logs and files).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use url::{Host, Url};

/// Why a URL cannot be an endpoint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    #[error("`{url}` is not a URL: {reason}")]
    NotAUrl { url: String, reason: String },
    #[error("`{url}` uses {scheme}:, but only http: and https: are supported")]
    Scheme { url: String, scheme: String },
    #[error(
        "`{url}` carries a user name or password before its host; put credentials in an environment variable instead"
    )]
    Userinfo { url: String },
    #[error("`{url}` names no host")]
    NoHost { url: String },
}

/// A checked `http:` or `https:` URL with a host and no userinfo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    url: Url,
}

impl Endpoint {
    pub fn parse(text: &str) -> Result<Self, EndpointError> {
        let url = Url::parse(text.trim()).map_err(|error| EndpointError::NotAUrl {
            url: text.to_owned(),
            reason: error.to_string(),
        })?;
        let shown = || text.to_owned();
        if !matches!(url.scheme(), "http" | "https") {
            return Err(EndpointError::Scheme {
                url: shown(),
                scheme: url.scheme().to_owned(),
            });
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(EndpointError::Userinfo { url: shown() });
        }
        if url.host().is_none() {
            return Err(EndpointError::NoHost { url: shown() });
        }
        Ok(Self { url })
    }

    pub fn url(&self) -> &Url {
        &self.url
    }

    pub fn as_str(&self) -> &str {
        self.url.as_str()
    }

    pub fn is_https(&self) -> bool {
        self.url.scheme() == "https"
    }

    /// Whether the parsed host is this machine: `localhost`, an address in
    /// 127.0.0.0/8, or `::1` (an IPv4-mapped loopback too).
    pub fn is_loopback(&self) -> bool {
        match self.url.host() {
            Some(Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
            Some(Host::Ipv4(address)) => address.is_loopback(),
            Some(Host::Ipv6(address)) => {
                address == Ipv6Addr::LOCALHOST
                    || address.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
            }
            None => false,
        }
    }

    /// The origin (scheme, host, port) requests go to.
    pub fn origin(&self) -> url::Origin {
        self.url.origin()
    }

    /// The host as an address, when it is one (for tests and messages).
    pub fn ip(&self) -> Option<IpAddr> {
        match self.url.host()? {
            Host::Ipv4(address) => Some(IpAddr::V4(address)),
            Host::Ipv6(address) => Some(IpAddr::V6(address)),
            Host::Domain(_) => None,
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.url.as_str())
    }
}

/// `127.0.0.1`, for callers building loopback URLs.
pub const LOOPBACK_V4: Ipv4Addr = Ipv4Addr::LOCALHOST;

#[cfg(test)]
mod tests {
    use super::*;

    fn loopback(text: &str) -> bool {
        Endpoint::parse(text).is_ok_and(|endpoint| endpoint.is_loopback())
    }

    /// The review's bypass: the old hand-split check called these loopback.
    #[test]
    fn userinfo_is_refused_whatever_it_looks_like() {
        for url in [
            "http://127.0.0.1:1@example.com/",
            "http://127.0.0.1@example.com/mcp",
            "http://localhost:80@evil.test:8080/",
            "http://user:pass@127.0.0.1:9/",
            "https://token@api.example.com/v1",
        ] {
            assert!(
                matches!(Endpoint::parse(url), Err(EndpointError::Userinfo { .. })),
                "{url}"
            );
            assert!(!loopback(url), "{url}");
        }
    }

    #[test]
    fn loopback_is_the_parsed_host() {
        for url in [
            "http://127.0.0.1:8080/mcp",
            "http://127.8.9.10/",
            "http://localhost:3000",
            "http://LOCALHOST/",
            "http://[::1]:9000/mcp",
            "http://[::ffff:127.0.0.1]/",
        ] {
            assert!(loopback(url), "{url}");
        }
        for url in [
            "http://example.com/",
            "http://127.0.0.1.example.com/",
            "http://localhost.example.com/",
            "http://10.0.0.1/",
            "http://[::2]/",
            "http://0x7f000001.example/",
        ] {
            assert!(!loopback(url), "{url}");
        }
        // The parser normalizes odd spellings of 127.0.0.1 to the address.
        assert!(loopback("http://0x7f000001/"));
        assert!(loopback("http://2130706433/"));
    }

    #[test]
    fn only_http_and_https_with_a_host() {
        assert!(matches!(
            Endpoint::parse("ftp://127.0.0.1/"),
            Err(EndpointError::Scheme { .. })
        ));
        assert!(matches!(
            Endpoint::parse("file:///etc/passwd"),
            Err(EndpointError::Scheme { .. })
        ));
        assert!(matches!(
            Endpoint::parse("127.0.0.1:80"),
            Err(EndpointError::NotAUrl { .. } | EndpointError::Scheme { .. })
        ));
        assert!(matches!(
            Endpoint::parse("not a url"),
            Err(EndpointError::NotAUrl { .. })
        ));
        let endpoint = Endpoint::parse("https://api.example.com/v1").unwrap();
        assert!(endpoint.is_https());
        assert_eq!(endpoint.as_str(), "https://api.example.com/v1");
    }
}
