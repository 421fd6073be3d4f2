//! Sending an admitted request: resolve, check every address, connect,
//! TLS, HTTP/1.1, and a response body that stops at the cap.
//!
//! wasmtime-wasi-http's own sender connects to whatever the name resolves
//! to; this one resolves first and connects only to an address the policy
//! allows, so the check and the connection use the same address (no DNS
//! rebinding between them).

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use toolhost_core::allowed_hosts::Scheme;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody};

use super::{Admitted, Driver};

trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {}

pub(crate) async fn send(
    admitted: Admitted,
    mut request: http::Request<WasiBody>,
    options: Option<RequestOptions>,
) -> Result<(http::Response<WasiBody>, Driver), Error> {
    let Admitted {
        destination,
        policy,
        deadline_at,
    } = admitted;
    // A guest may ask for shorter waits, never for longer than its call.
    let left = || deadline_at.saturating_duration_since(Instant::now());
    let within = |asked: Option<Duration>| asked.map_or_else(left, |asked| asked.min(left()));
    let options = options.unwrap_or_default();

    let addresses: Vec<SocketAddr> = match destination.address() {
        Some(address) => vec![SocketAddr::new(address, destination.port)],
        None => {
            let lookup = tokio::net::lookup_host((destination.host.as_str(), destination.port));
            match tokio::time::timeout(left(), lookup).await {
                Err(_) => return Err(Error::DnsTimeout),
                Ok(Err(error)) => {
                    return Err(Error::DnsError {
                        rcode: Some(error.to_string()),
                        info_code: None,
                    });
                }
                Ok(Ok(found)) => found.collect(),
            }
        }
    };
    let permitted: Vec<SocketAddr> = addresses
        .iter()
        .copied()
        .filter(|address| policy.allowed.may_connect(address.ip()))
        .collect();
    if permitted.is_empty() {
        tracing::warn!(
            %destination,
            resolved = ?addresses,
            "HTTP request refused: the name resolves only to addresses that are not public and not granted"
        );
        return Err(Error::DestinationIpProhibited);
    }

    let connect_timeout = within(options.connect_timeout);
    let tcp = tokio::time::timeout(connect_timeout, connect(&permitted))
        .await
        .map_err(|_| Error::ConnectionTimeout)?
        .map_err(Error::Connect)?;
    let stream: Box<dyn Stream> = match destination.scheme {
        Scheme::Http => Box::new(tcp),
        Scheme::Https => {
            let name = server_name(&destination.host)?;
            let tls = tokio::time::timeout(connect_timeout, tls()?.connect(name, tcp))
                .await
                .map_err(|_| Error::ConnectionTimeout)?
                .map_err(Error::Tls)?;
            Box::new(tls)
        }
    };
    let (mut sender, connection) = tokio::time::timeout(
        connect_timeout,
        hyper::client::conn::http1::handshake(TokioIo::new(stream)),
    )
    .await
    .map_err(|_| Error::ConnectionTimeout)??;

    // On the wire the request names only its path; the authority went into
    // the `Host` header already.
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |path| path.as_str());
    *request.uri_mut() = http::Uri::try_from(path).map_err(|_| Error::HttpRequestUriInvalid)?;

    let first_byte = within(options.first_byte_timeout);
    let response = async move {
        tokio::time::timeout(first_byte, sender.send_request(request))
            .await
            .map_err(|_| Error::ConnectionReadTimeout)?
            .map_err(Error::from)
    };
    let (response, connection) = drive_until_answered(response, connection).await?;

    if let Some(length) = response
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok())
        && length > policy.max_response_bytes
    {
        return Err(Error::HttpResponseBodySize(Some(length)));
    }
    let between_bytes = within(options.between_bytes_timeout);
    let response = response.map(|incoming| {
        CappedBody {
            incoming,
            left: policy.max_response_bytes,
            between_bytes,
            idle: Box::pin(tokio::time::sleep(between_bytes)),
        }
        .boxed_unsync()
    });
    Ok((response, Box::new(connection)))
}

/// The first address that accepts, in resolver order.
async fn connect(addresses: &[SocketAddr]) -> std::io::Result<TcpStream> {
    let mut last = None;
    for address in addresses {
        match TcpStream::connect(address).await {
            Ok(stream) => return Ok(stream),
            Err(error) => last = Some(error),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no address to connect to")))
}

/// Poll the response and the connection together until the response head
/// arrives; the connection future then goes on as the body's driver.
async fn drive_until_answered<C>(
    response: impl Future<Output = Result<http::Response<Incoming>, Error>>,
    connection: C,
) -> Result<
    (
        http::Response<Incoming>,
        impl Future<Output = Result<(), Error>> + Send,
    ),
    Error,
>
where
    C: Future<Output = Result<(), hyper::Error>> + Send + Unpin,
{
    let mut response = std::pin::pin!(response);
    let mut connection = Some(connection);
    let answered = std::future::poll_fn(|cx| {
        if let Poll::Ready(result) = response.as_mut().poll(cx) {
            return Poll::Ready(result);
        }
        if let Some(running) = connection.as_mut()
            && let Poll::Ready(ended) = Pin::new(running).poll(cx)
        {
            connection = None;
            return match ended {
                // The connection ended cleanly: the response is complete.
                Ok(()) => response.as_mut().poll(cx),
                Err(error) => Poll::Ready(Err(Error::from(error))),
            };
        }
        Poll::Pending
    })
    .await?;
    Ok((answered, async move {
        match connection {
            Some(running) => running.await.map_err(Error::from),
            None => Ok(()),
        }
    }))
}

fn server_name(host: &str) -> Result<rustls::pki_types::ServerName<'static>, Error> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(address) = bare.parse::<std::net::IpAddr>() {
        return Ok(rustls::pki_types::ServerName::from(address));
    }
    rustls::pki_types::ServerName::try_from(bare.to_owned())
        .map_err(|_| Error::HttpRequestUriInvalid)
}

/// One TLS configuration per process: the system's roots, HTTP/1.1.
fn tls() -> Result<tokio_rustls::TlsConnector, Error> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    let config = CONFIG.get_or_init(|| {
        toolhost_net::install_crypto_provider();
        use rustls_platform_verifier::BuilderVerifierExt;
        let mut config = rustls::ClientConfig::builder()
            .with_platform_verifier()
            .map_err(|error| error.to_string())?
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    });
    match config {
        Ok(config) => Ok(tokio_rustls::TlsConnector::from(Arc::clone(config))),
        Err(message) => Err(Error::InternalError(Some(format!(
            "toolhost: TLS is not available: {message}"
        )))),
    }
}

/// A response body that fails once more than `left` bytes arrived, or when
/// the server goes quiet for longer than `between_bytes`.
struct CappedBody {
    incoming: Incoming,
    left: u64,
    between_bytes: Duration,
    idle: Pin<Box<tokio::time::Sleep>>,
}

impl Body for CappedBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        match Pin::new(&mut self.incoming).poll_frame(cx) {
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Ready(Some(Err(error))) => Poll::Ready(Some(Err(Error::from(error)))),
            Poll::Ready(Some(Ok(frame))) => {
                let size = frame.data_ref().map_or(0, |data| data.len() as u64);
                if size > self.left {
                    return Poll::Ready(Some(Err(Error::HttpResponseBodySize(None))));
                }
                self.left -= size;
                let next = tokio::time::Instant::now() + self.between_bytes;
                self.idle.as_mut().reset(next);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => {
                ready!(self.idle.as_mut().poll(cx));
                Poll::Ready(Some(Err(Error::ConnectionReadTimeout)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.incoming.size_hint()
    }
}
