//! A remote MCP server over TLS: server-everything behind a TLS front on
//! 127.0.0.1 whose certificate a test CA issued. The registration names
//! the CA file and the environment variable of its Authorization secret.
//! The right CA works and the secret arrives as a bearer token; a wrong CA
//! is a clear certificate error; a missing secret is refused before
//! connecting.

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{Map, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use toolhost_mcp::{
    CallOutcome, McpRegistry, Registration, Transport, call_tool, project, refresh,
};

use common::{TIMEOUT, server_script};

/// A CA that signs one server certificate for 127.0.0.1 and localhost.
struct TestPki {
    ca_pem: String,
    server_chain: Vec<CertificateDer<'static>>,
    server_key: PrivateKeyDer<'static>,
}

fn test_ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    CertifiedIssuer::self_signed(params, KeyPair::generate().expect("ca key")).expect("ca")
}

fn test_pki() -> TestPki {
    let ca = test_ca("toolhost test CA");
    let server_key = KeyPair::generate().expect("server key");
    let server = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .expect("server params")
        .signed_by(&server_key, &ca)
        .expect("server certificate");
    TestPki {
        ca_pem: ca.pem(),
        server_chain: vec![server.der().clone()],
        server_key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der())),
    }
}

/// A TLS front on 127.0.0.1 forwarding to `backend`; it keeps the decrypted
/// head of the first request of each connection (to see the headers).
async fn tls_front(pki: &TestPki, backend: u16) -> (u16, Arc<Mutex<Vec<String>>>) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(pki.server_chain.clone(), pki.server_key.clone_key())
        .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&heads);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let seen = Arc::clone(&seen);
            tokio::spawn(async move {
                // A client that refuses the certificate ends here.
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut first = vec![0_u8; 16 * 1024];
                let Ok(read) = tls.read(&mut first).await else {
                    return;
                };
                seen.lock()
                    .expect("heads")
                    .push(String::from_utf8_lossy(&first[..read]).into_owned());
                let Ok(mut upstream) = TcpStream::connect(("127.0.0.1", backend)).await else {
                    return;
                };
                if upstream.write_all(&first[..read]).await.is_ok() {
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut upstream).await;
                }
            });
        }
    });
    (port, heads)
}

/// `remote`, registered in `dir` for `https://127.0.0.1:{port}/mcp`, its
/// secret in `auth_env` and `ca_pem` its only trusted CA.
fn registered(dir: &Path, port: u16, auth_env: &str, ca_pem: &str) -> (McpRegistry, Registration) {
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, ca_pem).expect("ca file");
    let mut registry = McpRegistry::load(&dir.join("mcp")).expect("registry");
    registry
        .add_allowing_all(
            "remote",
            Transport::Http {
                url: format!("https://127.0.0.1:{port}/mcp"),
                auth_env: Some(auth_env.to_owned()),
                ca_file: Some(ca_file),
            },
        )
        .expect("add");
    let registration = registry.find("remote").expect("found").clone();
    (registry, registration)
}

/// Cargo sets `CARGO_PKG_NAME` for every test process: an environment
/// variable that exists without the test changing its own environment.
const SECRET_VARIABLE: &str = "CARGO_PKG_NAME";

#[tokio::test]
async fn the_named_ca_and_the_secret_from_the_environment_reach_a_tls_server() {
    let Some(script) = server_script() else {
        return;
    };
    let (mut server, backend) = common::serve_http(&script).await;
    let pki = test_pki();
    let (port, heads) = tls_front(&pki, backend).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (registry, registration) = registered(dir.path(), port, SECRET_VARIABLE, &pki.ca_pem);
    let cache = refresh(&registry, &registration, TIMEOUT)
        .await
        .expect("refresh over TLS");
    assert!(cache.tools.iter().any(|tool| tool.name == "echo"));
    let mut arguments = Map::new();
    arguments.insert("message".into(), json!("over tls"));
    let CallOutcome::Completed(echo) = call_tool(&registration, "echo", arguments, TIMEOUT).await
    else {
        panic!("echo over TLS did not complete");
    };
    assert_eq!(project(&echo).content, "Echo: over tls");

    let heads = heads.lock().expect("heads").clone();
    let secret = std::env::var(SECRET_VARIABLE).expect("cargo sets it");
    assert!(!heads.is_empty());
    for head in &heads {
        assert!(
            head.to_ascii_lowercase().contains(&format!(
                "authorization: bearer {}",
                secret.to_ascii_lowercase()
            )),
            "{head}"
        );
    }
    // Only the variable's name is on disk, never the secret.
    let stored = std::fs::read_to_string(dir.path().join("mcp/registrations.json")).expect("file");
    assert!(stored.contains(SECRET_VARIABLE), "{stored}");
    assert!(!stored.contains(&format!("\"{secret}\"")), "{stored}");
    server.kill().await.ok();
}

#[tokio::test]
async fn a_wrong_ca_is_a_clear_certificate_error() {
    let pki = test_pki();
    // Nothing needs to answer behind the front: the handshake fails first.
    let (port, heads) = tls_front(&pki, 9).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let other_ca = test_ca("some other CA").pem();
    let (registry, registration) = registered(dir.path(), port, SECRET_VARIABLE, &other_ca);
    let error = refresh(&registry, &registration, TIMEOUT)
        .await
        .expect_err("an untrusted certificate");
    assert_eq!(error.code(), "mcp.connect_failed", "{error}");
    let message = error.to_string().to_ascii_lowercase();
    assert!(
        message.contains("certificate") || message.contains("unknownissuer"),
        "{error}"
    );
    assert!(
        heads.lock().expect("heads").is_empty(),
        "no request got through"
    );
}

#[tokio::test]
async fn a_missing_secret_is_refused_before_connecting() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let dir = tempfile::tempdir().expect("tempdir");
    let unset = "TOOLHOST_TEST_SECRET_THAT_IS_NOT_SET";
    let (_registry, registration) = registered(dir.path(), port, unset, &test_pki().ca_pem);
    match call_tool(&registration, "echo", Map::new(), TIMEOUT).await {
        CallOutcome::Failed(info) => {
            assert_eq!(info.code, "mcp.connect_failed");
            assert!(info.message.contains(unset), "{}", info.message);
        }
        other => panic!("expected a refusal: {other:?}"),
    }
    let accepted =
        tokio::time::timeout(std::time::Duration::from_millis(200), listener.accept()).await;
    assert!(accepted.is_err(), "nothing connects without the secret");
}
