//! Fetches `url` (`times` times, following redirects) through the guest
//! SDK's HTTP helper, as an extension granted `outbound-http` would; the
//! host decides what it reaches.
use toolhost_guest::{Arguments, Descriptor, Output, Tool, ToolError, http};

struct HttpFetch;

impl Tool for HttpFetch {
    fn describe() -> Descriptor {
        Descriptor::new("hostile.http_fetch", "Fetches URLs over HTTP.")
    }

    fn call(args: Arguments) -> Result<Output, ToolError> {
        let url = args.raw_str("url")?;
        let times = args.get("times").and_then(|t| t.as_u64()).unwrap_or(1);
        let mut last = None;
        for _ in 0..times {
            last = Some(http::get(url)?);
        }
        let response = last.ok_or_else(|| ToolError::new("fetch.nothing", "times was 0"))?;
        let text = response.text();
        Ok(Output::text(format!(
            "{} {} bytes from {}: {}",
            response.status,
            response.body.len(),
            response.url,
            text.chars().take(200).collect::<String>()
        )))
    }
}

toolhost_guest::export_tool!(HttpFetch);
