//! Stored secrets in admitted requests: the host writes a secret into its
//! header only after the request was admitted, and only when the request
//! goes to the secret's host. The guest never sees the value (its request's
//! fields were built before; the response carries what the server sends),
//! and a request anywhere else — a redirect's `Location` included — is sent
//! with no secret at all.

use std::sync::Mutex;

use toolhost_core::allowed_hosts::{Destination, HostPattern};
use wasmtime_wasi_http::WasiBody;

/// One stored secret resolved for one call.
#[derive(Clone)]
pub struct SecretHeader {
    /// The stored secret's name: what the journal shows.
    pub secret: String,
    /// The requests it goes into.
    pub host: HostPattern,
    pub name: http::HeaderName,
    /// Marked sensitive: never printed, never compressed into a table.
    pub value: http::HeaderValue,
}

impl SecretHeader {
    /// `value` is the header's whole value (the grant's format filled); an
    /// unusable name or value is refused here, before any call runs.
    pub fn new(secret: &str, host: HostPattern, name: &str, value: &str) -> Result<Self, String> {
        let name = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("`{name}` is not a header name"))?;
        let mut value = http::HeaderValue::from_str(value)
            .map_err(|_| format!("secret `{secret}` does not fit in a header"))?;
        value.set_sensitive(true);
        Ok(Self {
            secret: secret.to_owned(),
            host,
            name,
            value,
        })
    }
}

impl std::fmt::Debug for SecretHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretHeader")
            .field("secret", &self.secret)
            .field("host", &self.host)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// What one call's requests carried, by name, for its journal event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Injected {
    pub secret: String,
    pub destination: String,
    pub header: String,
}

impl Injected {
    pub(super) fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "secret": self.secret,
            "destination": self.destination,
            "header": self.header,
        })
    }
}

/// The record one call's requests add to.
#[derive(Debug, Default)]
pub struct Injections(Mutex<Vec<Injected>>);

impl Injections {
    pub(super) fn push(&self, injected: Injected) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(injected);
    }

    pub(super) fn take(&self) -> Vec<Injected> {
        std::mem::take(
            &mut *self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}

/// Write every secret for `destination` into `request`, replacing what the
/// guest put in those headers; the secrets written. A `TRACE` (which asks
/// the server to echo the request, headers and all) or a `CONNECT` to a
/// secret's host is refused: the secret would come back to the guest.
pub(super) fn inject<'a>(
    secrets: &'a [SecretHeader],
    destination: &Destination,
    request: &mut http::Request<WasiBody>,
) -> Result<Vec<&'a SecretHeader>, wasmtime_wasi_http::Error> {
    let mut written = Vec::new();
    for secret in secrets {
        if secret.host.matches(destination) {
            if matches!(
                *request.method(),
                http::Method::TRACE | http::Method::CONNECT
            ) {
                tracing::warn!(%destination, method = %request.method(), "refused: a secret's host is never sent this method");
                return Err(wasmtime_wasi_http::Error::HttpRequestDenied);
            }
            request
                .headers_mut()
                .insert(secret.name.clone(), secret.value.clone());
            tracing::info!(
                secret = %secret.secret,
                %destination,
                header = %secret.name,
                "stored secret written into an admitted request"
            );
            written.push(secret);
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A GET to `uri` in which the guest set its own `authorization`.
    fn request(uri: &str) -> http::Request<WasiBody> {
        let mut request = super::super::tests::request(uri);
        request.headers_mut().insert(
            http::header::AUTHORIZATION,
            http::HeaderValue::from_static("guest's own"),
        );
        request
    }

    fn destination(uri: &str) -> Destination {
        super::super::destination(&uri.parse().expect("uri")).expect("destination")
    }

    #[test]
    fn a_secret_goes_only_to_its_host_in_its_header() {
        let secrets = [SecretHeader::new(
            "weather",
            "api.example.com".parse().expect("pattern"),
            "authorization",
            "Bearer s3cret",
        )
        .expect("secret")];
        let mut to_host = request("https://api.example.com/v1");
        let written = inject(
            &secrets,
            &destination("https://api.example.com/v1"),
            &mut to_host,
        )
        .expect("a GET");
        assert_eq!(written.len(), 1);
        let values: Vec<_> = to_host.headers().get_all("authorization").iter().collect();
        assert_eq!(values, ["Bearer s3cret"], "the guest's value is replaced");
        assert!(values[0].is_sensitive());
        for elsewhere in [
            "https://other.example.com/v1",
            "http://api.example.com/v1",
            "https://api.example.com:8443/v1",
        ] {
            let mut other = request(elsewhere);
            assert!(
                inject(&secrets, &destination(elsewhere), &mut other)
                    .expect("a GET")
                    .is_empty()
            );
            assert_eq!(
                other.headers()["authorization"],
                "guest's own",
                "{elsewhere}"
            );
        }
        assert!(!format!("{:?}", secrets[0]).contains("s3cret"));
        // A method that echoes the request back is never sent a secret.
        let mut trace = request("https://api.example.com/v1");
        *trace.method_mut() = http::Method::TRACE;
        assert!(
            inject(
                &secrets,
                &destination("https://api.example.com/v1"),
                &mut trace
            )
            .is_err()
        );
        assert_eq!(trace.headers()["authorization"], "guest's own");
    }

    #[test]
    fn a_value_that_cannot_be_a_header_is_refused() {
        let host: HostPattern = "api.example.com".parse().expect("pattern");
        assert!(SecretHeader::new("x", host.clone(), "authorization", "a\r\nb").is_err());
        assert!(SecretHeader::new("x", host, "bad header", "v").is_err());
    }
}
