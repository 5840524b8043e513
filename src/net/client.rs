//! Connecting to upstreams: `http://` or `https://` (rustls with the platform's roots plus an
//! optional private CA), HTTP/1.1 or HTTP/2 by ALPN, TCP_NODELAY, a connect timeout. The proxy
//! path uses [`connector`] through its own client ([`super::upstream`]); the MCP front uses
//! hyper-util's pooled client ([`build`]: at most [`POOL_MAX_IDLE`] idle connections, for
//! [`POOL_IDLE_TIMEOUT`]). Response-header timeouts are the caller's (`tokio::time::timeout`);
//! streams have no total time limit.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::config::ProxyConfig;
use crate::http1::buffer::READ_BUF_MAX;
use crate::net::upstream::outgoing::Outgoing;

pub type Upstream = Client<HttpsConnector<HttpConnector>, Outgoing>;

/// Idle pooled connections are closed after this long (gateways often close at 60–120 s).
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// At most this many idle connections are kept (per upstream host; toolpulse has one): after
/// a burst of streams the rest close at once instead of holding fds until the idle timeout,
/// like nginx's `keepalive` directive.
const POOL_MAX_IDLE: usize = 128;

pub fn build(config: &ProxyConfig) -> anyhow::Result<Upstream> {
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .pool_max_idle_per_host(POOL_MAX_IDLE)
        .http1_max_buf_size(READ_BUF_MAX)
        .build(connector(config)?))
}

/// TCP (TCP_NODELAY, the connect timeout), then TLS for `https://` with ALPN `h2` and
/// `http/1.1`.
pub fn connector(config: &ProxyConfig) -> anyhow::Result<HttpsConnector<HttpConnector>> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(config.connect_timeout));
    let tls = tls_config(config.upstream_ca.as_deref())?;
    let https = HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http);
    Ok(https)
}

pub(crate) fn tls_config(extra_ca: Option<&Path>) -> anyhow::Result<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for error in &native.errors {
        tracing::debug!(%error, "could not load a platform root certificate");
    }
    roots.add_parsable_certificates(native.certs);
    if let Some(path) = extra_ca {
        let certs = CertificateDer::pem_file_iter(path)
            .with_context(|| format!("proxy.upstream_ca: cannot read {}", path.display()))?;
        let mut added = 0;
        for cert in certs {
            let cert =
                cert.with_context(|| format!("proxy.upstream_ca: bad PEM in {}", path.display()))?;
            roots
                .add(cert)
                .context("proxy.upstream_ca: not a usable CA certificate")?;
            added += 1;
        }
        anyhow::ensure!(
            added > 0,
            "proxy.upstream_ca: no certificate in {}",
            path.display()
        );
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_root_certificates(roots)
        .with_no_client_auth())
}
