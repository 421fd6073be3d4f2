//! Outbound HTTP for an extension granted `outbound-http`, over the standard
//! `wasi:http/outgoing-handler@0.2` (the `wasip2` crate's bindings).
//!
//! The host admits each request against the hosts a user granted; this
//! helper turns its answers into typed errors a tool can return as they
//! are ([`HttpError`] converts into a [`ToolError`]):
//!
//! ```ignore
//! use toolhost_guest::http;
//!
//! let response = http::get("https://api.example.com/v1/weather?city=Oslo")?;
//! let text = response.text();
//! ```
//!
//! [`fetch`] follows up to [`MAX_REDIRECTS`] redirects of a `GET`; each hop
//! is a new request the host admits or refuses on its own, so a redirect to
//! a host the user did not grant is [`HttpError::Denied`].
//!
//! Add `outbound-http` to the manifest's `capabilities` and list the hosts
//! in `allowed-hosts`; the component then imports `wasi:http`.

use crate::ToolError;

/// Redirects [`fetch`] follows before giving up.
pub const MAX_REDIRECTS: u32 = 5;

/// A finished response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// Names lowercase, in the order received.
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
    /// The URL that answered (after redirects).
    pub url: String,
}

impl Response {
    /// The first value of header `name` (any case), as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(header, _)| header.eq_ignore_ascii_case(name))
            .and_then(|(_, value)| std::str::from_utf8(value).ok())
    }

    /// The body as UTF-8, invalid sequences replaced.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, HttpError> {
        serde_json::from_slice(&self.body).map_err(|error| {
            HttpError::Other(format!("the response is not the JSON expected: {error}"))
        })
    }
}

/// Why a request did not give a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpError {
    /// Not a URL this helper can send (`http`/`https`, a host, a path).
    InvalidUrl(String),
    /// The host refused it: the URL's host (or the address it resolves to)
    /// is not granted to this extension.
    Denied(String),
    /// The call already made as many requests as one call may.
    TooManyRequests(String),
    /// The response body is larger than the host lets a tool read.
    TooLarge,
    /// The server did not answer in time.
    Timeout,
    /// Any other failure, as `wasi:http` named it.
    Other(String),
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::InvalidUrl(why) => write!(f, "not a URL this tool can request: {why}"),
            Self::Denied(url) => write!(
                f,
                "the host refused the request to {url}: its host is not granted to this extension"
            ),
            Self::TooManyRequests(why) => f.write_str(why),
            Self::TooLarge => f.write_str("the response body is larger than the host allows"),
            Self::Timeout => f.write_str("the server did not answer in time"),
            Self::Other(why) => write!(f, "the request failed: {why}"),
        }
    }
}

impl std::error::Error for HttpError {}

impl HttpError {
    /// The error code a tool reports it with.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidUrl(_) => "http.invalid_url",
            Self::Denied(_) => "http.denied",
            Self::TooManyRequests(_) => "http.too_many_requests",
            Self::TooLarge => "http.response_too_large",
            Self::Timeout => "http.timeout",
            Self::Other(_) => "http.failed",
        }
    }
}

impl From<HttpError> for ToolError {
    fn from(error: HttpError) -> Self {
        ToolError::new(error.code(), error.to_string())
    }
}

/// `GET url`, following redirects.
pub fn get(url: &str) -> Result<Response, HttpError> {
    fetch(&Request::get(url))
}

/// One request to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Option<Vec<u8>>,
}

impl Request {
    pub fn get(url: &str) -> Self {
        Self {
            method: "GET".into(),
            url: url.into(),
            headers: Vec::new(),
            body: None,
        }
    }

    pub fn post(url: &str, content_type: &str, body: Vec<u8>) -> Self {
        Self {
            method: "POST".into(),
            url: url.into(),
            headers: vec![("content-type".into(), content_type.as_bytes().to_vec())],
            body: Some(body),
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers
            .push((name.to_ascii_lowercase(), value.as_bytes().to_vec()));
        self
    }
}

/// Send `request`; a `GET` or `HEAD` follows redirects (up to
/// [`MAX_REDIRECTS`]), anything else returns the `3xx` as it came.
pub fn fetch(request: &Request) -> Result<Response, HttpError> {
    let follows = matches!(request.method.as_str(), "GET" | "HEAD");
    let mut request = request.clone();
    for _ in 0..=MAX_REDIRECTS {
        let response = send(&request)?;
        let location = match response.status {
            301 | 302 | 303 | 307 | 308 if follows => response.header("location"),
            _ => None,
        };
        let Some(location) = location else {
            return Ok(response);
        };
        request.url = resolve(&request.url, location)?;
    }
    Err(HttpError::Other(format!(
        "more than {MAX_REDIRECTS} redirects"
    )))
}

/// `location` read relative to `base`.
fn resolve(base: &str, location: &str) -> Result<String, HttpError> {
    if location.contains("://") {
        return Ok(location.to_owned());
    }
    let base = Url::parse(base)?;
    let path = if let Some(rest) = location.strip_prefix("//") {
        return Ok(format!("{}://{rest}", base.scheme));
    } else if location.starts_with('/') {
        location.to_owned()
    } else {
        let directory = base.path.rsplit_once('/').map_or("", |(dir, _)| dir);
        format!("{directory}/{location}")
    };
    Ok(format!("{}://{}{path}", base.scheme, base.authority))
}

/// A URL split the way `wasi:http` takes it.
struct Url {
    scheme: String,
    authority: String,
    path: String,
}

impl Url {
    fn parse(url: &str) -> Result<Self, HttpError> {
        let invalid = |why: &str| HttpError::InvalidUrl(format!("{why}: {url}"));
        let uri: http::Uri = url.parse().map_err(|_| invalid("not a URL"))?;
        let scheme = match uri.scheme_str() {
            Some(scheme) if scheme.eq_ignore_ascii_case("http") => "http",
            Some(scheme) if scheme.eq_ignore_ascii_case("https") => "https",
            _ => return Err(invalid("only http and https URLs")),
        };
        let authority = uri.authority().ok_or_else(|| invalid("no host"))?;
        if authority.as_str().contains('@') {
            return Err(invalid("credentials do not belong in a URL"));
        }
        Ok(Self {
            scheme: scheme.to_owned(),
            authority: authority.as_str().to_owned(),
            path: uri
                .path_and_query()
                .map_or_else(|| "/".to_owned(), |path| path.as_str().to_owned()),
        })
    }
}

/// One request, no redirect followed.
pub fn send(request: &Request) -> Result<Response, HttpError> {
    let url = Url::parse(&request.url)?;
    imp::send(request, &url).map(|(status, headers, body)| Response {
        status,
        headers,
        body,
        url: request.url.clone(),
    })
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use wasip2::http::outgoing_handler;
    use wasip2::http::types::{
        ErrorCode, Fields, IncomingBody, Method, OutgoingBody, OutgoingRequest, Scheme,
    };
    use wasip2::io::streams::StreamError;

    use super::{HttpError, Request, Url};

    /// Bytes read per `blocking-read`.
    const READ_CHUNK: u64 = 64 * 1024;

    type Received = (u16, Vec<(String, Vec<u8>)>, Vec<u8>);

    pub(super) fn send(request: &Request, url: &Url) -> Result<Received, HttpError> {
        let other = |what: &str| HttpError::Other(what.to_owned());
        let headers = Fields::from_list(&request.headers)
            .map_err(|error| HttpError::Other(format!("a header is not valid: {error:?}")))?;
        let outgoing = OutgoingRequest::new(headers);
        let method = match request.method.as_str() {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "PATCH" => Method::Patch,
            "OPTIONS" => Method::Options,
            other => Method::Other(other.to_owned()),
        };
        let scheme = if url.scheme == "https" {
            Scheme::Https
        } else {
            Scheme::Http
        };
        outgoing
            .set_method(&method)
            .map_err(|()| other("the method is not valid"))?;
        outgoing
            .set_scheme(Some(&scheme))
            .map_err(|()| other("the scheme is not valid"))?;
        outgoing
            .set_authority(Some(&url.authority))
            .map_err(|()| other("the host is not valid"))?;
        outgoing
            .set_path_with_query(Some(&url.path))
            .map_err(|()| other("the path is not valid"))?;
        let body = outgoing
            .body()
            .map_err(|()| other("the request body is unavailable"))?;
        let pending =
            outgoing_handler::handle(outgoing, None).map_err(|code| error(code, &request.url))?;
        if let Some(bytes) = &request.body {
            let stream = body
                .write()
                .map_err(|()| other("the request body is unavailable"))?;
            for chunk in bytes.chunks(4096) {
                stream
                    .blocking_write_and_flush(chunk)
                    .map_err(|error| stream_error(error, &request.url))?;
            }
        }
        OutgoingBody::finish(body, None).map_err(|code| error(code, &request.url))?;

        let response = loop {
            match pending.get() {
                Some(Ok(Ok(response))) => break response,
                Some(Ok(Err(code))) => return Err(error(code, &request.url)),
                Some(Err(())) => return Err(other("the response was already taken")),
                None => pending.subscribe().block(),
            }
        };
        let status = response.status();
        let headers = response.headers().entries();
        let incoming = response
            .consume()
            .map_err(|()| other("the response body is unavailable"))?;
        let stream = incoming
            .stream()
            .map_err(|()| other("the response body is unavailable"))?;
        let mut received = Vec::new();
        loop {
            match stream.blocking_read(READ_CHUNK) {
                Ok(chunk) => received.extend_from_slice(&chunk),
                Err(StreamError::Closed) => break,
                Err(failure) => return Err(stream_error(failure, &request.url)),
            }
        }
        drop(stream);
        drop(IncomingBody::finish(incoming));
        Ok((status, headers, received))
    }

    fn stream_error(failure: StreamError, url: &str) -> HttpError {
        match failure {
            StreamError::Closed => HttpError::Other("the connection closed".into()),
            StreamError::LastOperationFailed(io) => {
                if let Some(code) = wasip2::http::types::http_error_code(&io) {
                    return error(code, url);
                }
                // wasmtime-wasi-http 48 hands a body's failure to the guest
                // as text, not as an error-code: read the host's two.
                let text = io.to_debug_string();
                if text.contains("response body size exceeds limit") {
                    HttpError::TooLarge
                } else if text.contains("read timeout") {
                    HttpError::Timeout
                } else {
                    HttpError::Other(text)
                }
            }
        }
    }

    fn error(code: ErrorCode, url: &str) -> HttpError {
        match code {
            ErrorCode::HttpRequestDenied | ErrorCode::DestinationIpProhibited => {
                HttpError::Denied(url.to_owned())
            }
            ErrorCode::HttpResponseBodySize(_) => HttpError::TooLarge,
            ErrorCode::ConnectionReadTimeout
            | ErrorCode::ConnectionTimeout
            | ErrorCode::HttpResponseTimeout
            | ErrorCode::DnsTimeout => HttpError::Timeout,
            ErrorCode::InternalError(Some(message))
                if message.starts_with("toolhost: this call already made") =>
            {
                HttpError::TooManyRequests(message)
            }
            other => HttpError::Other(format!("{other:?}")),
        }
    }
}

/// Natively there is no host to send through: tools' logic is tested
/// natively, their requests in a sandbox.
#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use super::{HttpError, Request, Url};

    type Received = (u16, Vec<(String, Vec<u8>)>, Vec<u8>);

    pub(super) fn send(_: &Request, _: &Url) -> Result<Received, HttpError> {
        Err(HttpError::Other(
            "outbound HTTP exists only inside the sandbox".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_resolve_against_the_url_they_came_from() {
        let base = "https://api.example.com/v1/items?page=2";
        assert_eq!(
            resolve(base, "/v2/items").expect("absolute path"),
            "https://api.example.com/v2/items"
        );
        assert_eq!(
            resolve(base, "other").expect("relative"),
            "https://api.example.com/v1/other"
        );
        assert_eq!(
            resolve(base, "//cdn.example.net/x").expect("scheme-relative"),
            "https://cdn.example.net/x"
        );
        assert_eq!(
            resolve(base, "http://elsewhere.example/").expect("absolute"),
            "http://elsewhere.example/"
        );
    }

    #[test]
    fn only_http_urls_with_a_host_and_no_credentials() {
        for bad in [
            "ftp://x.example/",
            "/relative",
            "https://user:pw@x.example/",
            "nonsense",
        ] {
            assert!(
                matches!(Url::parse(bad), Err(HttpError::InvalidUrl(_))),
                "{bad}"
            );
        }
        let url = Url::parse("HTTP://x.example:8080").expect("valid");
        assert_eq!(
            (
                url.scheme.as_str(),
                url.authority.as_str(),
                url.path.as_str()
            ),
            ("http", "x.example:8080", "/")
        );
    }
}
