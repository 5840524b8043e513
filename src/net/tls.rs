//! Connecting to upstreams: `http://` or `https://` (rustls with the platform's roots plus an
//! optional private CA), HTTP/1.1 or HTTP/2 by ALPN, TCP_NODELAY, a connect timeout. The proxy's
//! own client (`upstream`) and the MCP front's hyper-util client (`client`) connect with
//! [`connector`]; the telemetry exporter takes [`client_config`] alone.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::config::ProxyConfig;

/// TCP (TCP_NODELAY, the connect timeout), then TLS for `https://` with ALPN `h2` and
/// `http/1.1`.
pub fn connector(config: &ProxyConfig) -> anyhow::Result<HttpsConnector<HttpConnector>> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(config.connect_timeout));
    let tls = client_config(config.upstream_ca.as_deref())?;
    let https = HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http);
    Ok(https)
}

/// rustls' client config: the platform's root certificates, and those of `extra_ca` (PEM).
pub fn client_config(extra_ca: Option<&Path>) -> anyhow::Result<rustls::ClientConfig> {
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
