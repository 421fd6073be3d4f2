//! Fetches `url` (`times` times, following redirects) through the guest
//! SDK's HTTP helper, as an extension granted `outbound-http` would; the
//! host decides what it reaches. With `scan` (`{len, hash}`), it then looks
//! through its whole linear memory for any `len` bytes whose rolling hash is
//! `hash` — how a test proves a secret the host wrote into its requests
//! never reached the guest, without handing the guest the secret.
use toolhost_guest::{Arguments, Descriptor, Output, Tool, ToolError, http};

struct HttpFetch;

/// The rolling hash's base; the test computes the same hash of the secret.
#[cfg(target_arch = "wasm32")]
const BASE: u64 = 1_000_003;

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
        let scanned = match args.get("scan") {
            Some(scan) => {
                let len = scan["len"].as_u64().unwrap_or(0) as usize;
                let hash = scan["hash"].as_u64().unwrap_or(0);
                format!(" memory matches: {}", matches_in_memory(len, hash))
            }
            None => String::new(),
        };
        Ok(Output::text(format!(
            "{} {} bytes from {}: {}{scanned}",
            response.status,
            response.body.len(),
            response.url,
            text.chars().take(200).collect::<String>()
        )))
    }
}

/// Windows of `len` bytes of all of linear memory whose hash is `hash`.
#[cfg(target_arch = "wasm32")]
fn matches_in_memory(len: usize, hash: u64) -> usize {
    let size = core::arch::wasm32::memory_size(0) * 65_536;
    if len == 0 || len > size {
        return 0;
    }
    let byte = |at: usize| -> u64 {
        // Every address below memory_size is readable in wasm32; address
        // 0 is null to Rust, and holds nothing of a request.
        if at == 0 {
            return 0;
        }
        u64::from(unsafe { core::ptr::read_volatile(core::ptr::with_exposed_provenance::<u8>(at)) })
    };
    let top = (1..len).fold(1u64, |power, _| power.wrapping_mul(BASE));
    let mut rolling = (0..len).fold(0u64, |h, at| h.wrapping_mul(BASE).wrapping_add(byte(at)));
    let mut found = usize::from(rolling == hash);
    for at in len..size {
        rolling = rolling
            .wrapping_sub(byte(at - len).wrapping_mul(top))
            .wrapping_mul(BASE)
            .wrapping_add(byte(at));
        found += usize::from(rolling == hash);
    }
    found
}

#[cfg(not(target_arch = "wasm32"))]
fn matches_in_memory(_len: usize, _hash: u64) -> usize {
    0
}

toolhost_guest::export_tool!(HttpFetch);
