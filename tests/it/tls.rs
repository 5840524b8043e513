//! An `https://` upstream behind a private CA: trusted through `[proxy] upstream_ca`, refused
//! (502) without it. The gateway is a rustls server on 127.0.0.1 with a certificate made here.
//! An `https://` upstream that speaks plain HTTP: a 502 that says so.

use crate::common;

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::TcpListener;
use toolpulse::Config;

struct Pki {
    ca_pem: String,
    server: rustls::ServerConfig,
}

fn pki() -> Pki {
    let ca_key = rcgen::KeyPair::generate().expect("key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).expect("CA");
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate().expect("key");
    let params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).expect("params");
    let cert = params.signed_by(&key, &issuer).expect("server cert");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(cert.der().to_vec())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .expect("server config");
    server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Pki {
        ca_pem: ca.pem(),
        server,
    }
}

/// The gateway; `versions` gets the HTTP version of every request it serves.
async fn tls_gateway(
    server: rustls::ServerConfig,
    body: Vec<u8>,
    versions: tokio::sync::mpsc::UnboundedSender<http::Version>,
) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
    let body = Bytes::from(body);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, body, versions) = (acceptor.clone(), body.clone(), versions.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let _ = versions.send(req.version());
                    let body = body.clone();
                    async move {
                        Ok::<_, Infallible>(
                            http::Response::builder()
                                .header("content-type", "text/event-stream")
                                .body(Full::new(body))
                                .expect("response"),
                        )
                    }
                });
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_upstream_with_a_private_ca() {
    let pki = pki();
    let mut http1_only = pki.server.clone();
    http1_only.alpn_protocols = vec![b"http/1.1".to_vec()];
    let input = read(&fixtures_dir().join("web_search.sse"));
    let (versions, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let port = tls_gateway(pki.server, input.clone(), versions).await;
    let dir = std::env::temp_dir().join(format!("toolpulse-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, &pki.ca_pem).expect("write CA");
    let upstream = format!("https://localhost:{port}");
    let client = http_client();

    let mut config = Config::default();
    config.proxy.upstream_ca = Some(ca_file);
    let proxy = start_proxy(config.clone(), &upstream).await;
    let response = post(&client, format!("http://{proxy}/v1/responses"), "{}").await;
    assert_eq!(response.status(), 200);
    let out = read_all(&mut response.into_body()).await;
    invariants::check(&input, &out, usize::MAX).expect("invariants");
    assert!(String::from_utf8_lossy(&out).contains("response.web_search_call.completed"));
    // The gateway offers h2 in ALPN: the shared HTTP/2 connection carried the stream.
    assert_eq!(seen.recv().await, Some(http::Version::HTTP_2));

    // A gateway that speaks HTTP/1.1 only: the stream drives its TLS connection itself, twice.
    let (versions, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let port_http1 = tls_gateway(http1_only, input.clone(), versions).await;
    let proxy = start_proxy(config, &format!("https://localhost:{port_http1}")).await;
    for _ in 0..2 {
        let response = post(&client, format!("http://{proxy}/v1/responses"), "{}").await;
        assert_eq!(response.status(), 200);
        let out = read_all(&mut response.into_body()).await;
        invariants::check(&input, &out, usize::MAX).expect("invariants");
        assert_eq!(seen.recv().await, Some(http::Version::HTTP_11));
    }

    let proxy = start_proxy(Config::default(), &upstream).await;
    let response = post(&client, format!("http://{proxy}/v1/responses"), "{}").await;
    assert_eq!(response.status(), 502, "an unknown CA is refused");
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    assert!(String::from_utf8_lossy(&body).contains("proxy_error"));
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_upstream_that_speaks_plain_http_is_named_as_such() {
    // A plain HTTP server, as most answer a request they cannot read (hyper, nginx): a 400.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut hello = [0; 512];
            let _ = stream.read(&mut hello).await;
            let answer =
                "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
            let _ = stream.write_all(answer.as_bytes()).await;
        }
    });
    let upstream = format!("https://127.0.0.1:{port}");
    let proxy = start_proxy(Config::default(), &upstream).await;
    let response = post(&http_client(), format!("http://{proxy}/v1/responses"), "{}").await;
    assert_eq!(response.status(), 502);
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let error: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(error["error"]["code"], "upstream_unreachable");
    let message = error["error"]["message"].as_str().expect("a message");
    assert!(
        message.contains("InvalidContentType")
            && message.contains("does not speak TLS")
            && message.contains("try http:// instead of https://"),
        "{message}"
    );
}
