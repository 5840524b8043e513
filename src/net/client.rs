//! The MCP front's client to its servers: hyper-util's pooled client (at most
//! [`POOL_MAX_IDLE`] idle connections, for [`POOL_IDLE_TIMEOUT`]), connecting as the proxy's own
//! client does (`tls::connector`). Response-header timeouts are the caller's
//! (`tokio::time::timeout`); streams have no total time limit.

use std::time::Duration;

use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::config::ProxyConfig;
use crate::http1::buffer::READ_BUF_MAX;
use crate::net::tls;
use crate::net::upstream::outgoing::Outgoing;

/// hyper-util's client, sending [`Outgoing`] bodies.
pub type HyperClient = Client<HttpsConnector<HttpConnector>, Outgoing>;

/// Idle pooled connections are closed after this long (gateways often close at 60–120 s).
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// At most this many idle connections are kept (per upstream host; toolpulse has one): after
/// a burst of streams the rest close at once instead of holding fds until the idle timeout,
/// like nginx's `keepalive` directive.
const POOL_MAX_IDLE: usize = 128;

/// The client, its reads bounded as the proxy's own client bounds them ([`READ_BUF_MAX`]).
pub fn build(config: &ProxyConfig) -> anyhow::Result<HyperClient> {
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .pool_max_idle_per_host(POOL_MAX_IDLE)
        .http1_max_buf_size(READ_BUF_MAX)
        .build(tls::connector(config)?))
}
