//! Pages of other sites the operator lets use the API
//! (`serve --allow-origin ORIGIN`): a chat app served on its own port —
//! SillyTavern at `http://127.0.0.1:8000` — whose extension drives this
//! server from the browser.
//!
//! Only exact origins: no wildcard, no pattern, no `null`. A request from
//! a listed origin passes the site guard like one of this server's own
//! pages and is answered with CORS headers naming that origin alone
//! (preflights included); every other foreign `Origin` stays refused
//! before anything else is looked at (`serve.origin_refused`). The token
//! rides in the `Authorization` header, which a preflight must allow, never
//! in a URL; no cookie is used, so credentials are never allowed.

use std::time::Duration;

use axum::http::{HeaderName, HeaderValue, Method, header};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::ServeError;

/// How long a browser may keep a preflight's answer.
const PREFLIGHT_MAX_AGE: Duration = Duration::from_secs(600);

/// The foreign origins let in, as a browser sends them in `Origin`
/// (`scheme://host[:port]`, lowercase, the scheme's default port left out).
#[derive(Debug, Clone, Default)]
pub struct AllowedOrigins(Vec<String>);

impl AllowedOrigins {
    /// Check each of `origins` (what an operator typed) and keep it in the
    /// form a browser sends.
    pub fn parse(origins: &[String]) -> Result<Self, ServeError> {
        let mut allowed: Vec<String> = Vec::new();
        for origin in origins {
            let serialized = serialize(origin).map_err(|reason| ServeError::OriginInvalid {
                origin: origin.chars().take(200).collect(),
                reason,
            })?;
            if !allowed.contains(&serialized) {
                allowed.push(serialized);
            }
        }
        Ok(Self(allowed))
    }

    /// Whether a request's `Origin` is one of them, exactly.
    pub fn contains(&self, origin: &str) -> bool {
        self.0.iter().any(|allowed| allowed == origin)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The origins, as a browser sends them.
    pub fn as_slice(&self) -> &[String] {
        &self.0
    }

    /// The layer answering preflights and adding CORS headers for these
    /// origins; `None` when there are none (no CORS at all, as before).
    pub(crate) fn layer(&self) -> Option<CorsLayer> {
        if self.0.is_empty() {
            return None;
        }
        let origins = self
            .0
            .iter()
            .filter_map(|origin| HeaderValue::from_str(origin).ok());
        Some(
            CorsLayer::new()
                .allow_origin(AllowOrigin::list(origins))
                .allow_methods([Method::GET, Method::POST, Method::DELETE])
                .allow_headers([
                    header::AUTHORIZATION,
                    header::CONTENT_TYPE,
                    header::ACCEPT,
                    HeaderName::from_static("last-event-id"),
                    HeaderName::from_static("mcp-session-id"),
                    HeaderName::from_static("mcp-protocol-version"),
                ])
                .expose_headers([
                    header::LOCATION,
                    header::RETRY_AFTER,
                    HeaderName::from_static("mcp-session-id"),
                ])
                // A page on a private address (SillyTavern on a LAN
                // address) calling this loopback server: Chrome asks first.
                .allow_private_network(true)
                .max_age(PREFLIGHT_MAX_AGE),
        )
    }
}

/// `origin` as a browser serializes it, or why it is not an origin.
fn serialize(origin: &str) -> Result<String, String> {
    if origin.contains('*') {
        return Err(
            "a wildcard is refused: name each page's origin, e.g. http://127.0.0.1:8000".to_owned(),
        );
    }
    if origin.trim() == "null" {
        return Err("`null` is the origin of no page this server can trust".to_owned());
    }
    if !origin.contains("://") {
        return Err(
            "an origin starts with http:// or https://, e.g. http://127.0.0.1:8000".to_owned(),
        );
    }
    let url = url::Url::parse(origin.trim()).map_err(|error| format!("not a URL: {error}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("an origin is http:// or https://".to_owned());
    }
    if url.host().is_none() {
        return Err("an origin names a host".to_owned());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("an origin has no user name or password".to_owned());
    }
    if !matches!(url.path(), "" | "/") || url.query().is_some() || url.fragment().is_some() {
        return Err(
            "an origin is only scheme://host[:port], without a path, query or fragment".to_owned(),
        );
    }
    Ok(url.origin().ascii_serialization())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(origins: &[&str]) -> Result<AllowedOrigins, ServeError> {
        AllowedOrigins::parse(&origins.iter().map(|o| (*o).to_owned()).collect::<Vec<_>>())
    }

    #[test]
    fn origins_are_kept_as_a_browser_sends_them() {
        let allowed = parsed(&[
            "http://127.0.0.1:8000/",
            "HTTP://LocalHost:8000",
            "https://tavern.example:443",
            "http://[::1]:8000",
            "http://127.0.0.1:8000",
        ])
        .expect("origins");
        assert_eq!(
            allowed.as_slice(),
            [
                "http://127.0.0.1:8000",
                "http://localhost:8000",
                "https://tavern.example",
                "http://[::1]:8000"
            ]
        );
        assert!(allowed.contains("http://localhost:8000"));
        assert!(!allowed.contains("http://localhost:8001"));
        assert!(!allowed.contains("http://127.0.0.1:8000/"));
        assert!(!allowed.contains("https://127.0.0.1:8000"));
    }

    #[test]
    fn anything_but_an_exact_origin_is_refused() {
        for (origin, reason) in [
            ("*", "wildcard"),
            ("null", "`null`"),
            ("127.0.0.1:8000", "http:// or https://"),
            ("file:///home/me", "http:// or https://"),
            ("http://127.0.0.1:8000/tavern", "without a path"),
            ("http://127.0.0.1:8000/?a=1", "without a path"),
            ("http://me:pw@127.0.0.1:8000", "user name"),
            ("http://*.example.com", "wildcard"),
            ("http://", "not a URL"),
        ] {
            let error = parsed(&[origin]).expect_err(origin).to_string();
            assert!(error.starts_with("serve.origin_invalid"), "{error}");
            assert!(error.contains(reason), "{origin}: {error}");
        }
        assert!(parsed(&[]).expect("none").is_empty());
        assert!(parsed(&[]).expect("none").layer().is_none());
    }
}
