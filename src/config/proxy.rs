//! The `[proxy]` and `[admin]` sections: the proxy's listener and the gateway it forwards to,
//! and the admin listener (health, readiness, metrics); with the parsers of a listen address
//! and an upstream URL the command line uses too.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use http::Uri;
use serde::Deserialize;
use toml::Spanned;

use super::error::{ConfigError, Invalid};

pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 5_000;
/// Generous: a non-streaming request may legitimately take minutes before its headers.
pub const DEFAULT_HEADER_TIMEOUT_MS: u64 = 300_000;
pub const DEFAULT_DRAIN_TIMEOUT_MS: u64 = 30_000;
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;
pub const DEFAULT_MAX_HEADER_BYTES: usize = 64 * 1024;
/// hyper's HTTP/1 read buffer cannot be smaller.
pub const MIN_MAX_HEADER_BYTES: usize = 8192;
pub const DEFAULT_ADMIN_LISTEN: &str = "127.0.0.1:9464";
pub const DEFAULT_ADMIN_MAX_CONNECTIONS: usize = 16;

/// The `[admin]` section: health, readiness and metrics, on their own address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminConfig {
    pub listen: SocketAddr,
    /// Connections served at once (scrapers and probes need a few); more are answered 503.
    pub max_connections: usize,
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            listen: DEFAULT_ADMIN_LISTEN
                .parse()
                .expect("a valid default address"),
            max_connections: DEFAULT_ADMIN_MAX_CONNECTIONS,
        }
    }
}

/// The `[proxy]` section: where to listen and which gateway to forward to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyConfig {
    pub listen: SocketAddr,
    /// The gateway's base URL (`http://` or `https://`, optionally with a path prefix).
    /// Required to serve; `--upstream` may give it instead.
    pub upstream: Option<Uri>,
    /// Extra PEM root certificates trusted for `https://` upstreams (private CAs).
    pub upstream_ca: Option<PathBuf>,
    /// Forward the client's `Host` instead of the upstream's authority.
    pub preserve_host: bool,
    pub connect_timeout: Duration,
    /// How long the upstream may take to send response headers; the body has no time limit.
    pub header_timeout: Duration,
    /// On SIGTERM/SIGINT, how long in-flight streams may run on before they are ended.
    pub drain_timeout: Duration,
    /// Client connections served at once; more are answered 503.
    pub max_connections: usize,
    /// Largest request head (request line and headers) accepted.
    pub max_header_bytes: usize,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            listen: DEFAULT_LISTEN.parse().expect("a valid default address"),
            upstream: None,
            upstream_ca: None,
            preserve_host: false,
            connect_timeout: Duration::from_millis(DEFAULT_CONNECT_TIMEOUT_MS),
            header_timeout: Duration::from_millis(DEFAULT_HEADER_TIMEOUT_MS),
            drain_timeout: Duration::from_millis(DEFAULT_DRAIN_TIMEOUT_MS),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_header_bytes: DEFAULT_MAX_HEADER_BYTES,
        }
    }
}

/// The path clients' requests start with: the OpenAI SDKs' base URL ends in it
/// (`OPENAI_BASE_URL=http://toolpulse:8080/v1`), so requests arrive as `/v1/responses`.
pub const CLIENT_PATH: &str = "/v1";

/// A warning for an upstream whose path ends in [`CLIENT_PATH`]: its prefix goes before the
/// client's path, so `http://gw:9000/v1` sends `/v1/responses` to `/v1/v1/responses`, which a
/// gateway answers 404. A gateway may really serve under such a prefix, so this only warns.
pub fn upstream_path_warning(upstream: &Uri) -> Option<String> {
    let path = upstream.path().trim_end_matches('/');
    let base = path.strip_suffix(CLIENT_PATH)?;
    let origin = match (upstream.scheme_str(), upstream.authority()) {
        (Some(scheme), Some(authority)) => format!("{scheme}://{authority}"),
        _ => return None,
    };
    Some(format!(
        "the upstream {origin}{path} ends in {CLIENT_PATH}, which clients send themselves: \
         POST {CLIENT_PATH}/responses goes to {origin}{path}{CLIENT_PATH}/responses. If the \
         gateway serves {CLIENT_PATH}/responses, give the upstream without it: {origin}{base}"
    ))
}

/// Parses a listen address, with an example in the error: `8183` alone, the most common slip,
/// is answered with the two addresses it may have meant.
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    text.parse().map_err(
        |_| match text.trim().trim_start_matches(':').parse::<u16>() {
            Ok(port) => format!(
                "{text:?} is a port without an address: give 127.0.0.1:{port} (this machine \
                 only) or 0.0.0.0:{port} (every interface)"
            ),
            Err(_) => format!(
                "{text:?} is not an address such as 127.0.0.1:8080, 0.0.0.0:8080 or [::1]:8080"
            ),
        },
    )
}

/// Parses and checks an upstream base URL: `http`/`https`, an authority, no query.
pub fn parse_upstream(text: &str) -> Result<Uri, String> {
    let uri: Uri = text.parse().map_err(|e| format!("not a URL: {e}"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err("must start with http:// or https://".into());
    }
    if uri.authority().is_none() {
        return Err("must name a host".into());
    }
    if uri.query().is_some() {
        return Err("must not have a query".into());
    }
    Ok(uri)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawAdmin {
    pub(super) listen: Spanned<String>,
    pub(super) max_connections: Spanned<usize>,
}

impl Default for RawAdmin {
    fn default() -> Self {
        RawAdmin {
            listen: Spanned::new(0..0, DEFAULT_ADMIN_LISTEN.to_string()),
            max_connections: Spanned::new(0..0, DEFAULT_ADMIN_MAX_CONNECTIONS),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawProxy {
    pub(super) listen: Spanned<String>,
    pub(super) upstream: Option<Spanned<String>>,
    pub(super) upstream_ca: Option<PathBuf>,
    pub(super) preserve_host: bool,
    pub(super) connect_timeout_ms: u64,
    pub(super) header_timeout_ms: u64,
    pub(super) drain_timeout_ms: u64,
    pub(super) max_connections: Spanned<usize>,
    pub(super) max_header_bytes: Spanned<usize>,
}

impl Default for RawProxy {
    fn default() -> Self {
        RawProxy {
            listen: Spanned::new(0..0, DEFAULT_LISTEN.to_string()),
            upstream: None,
            upstream_ca: None,
            preserve_host: false,
            connect_timeout_ms: DEFAULT_CONNECT_TIMEOUT_MS,
            header_timeout_ms: DEFAULT_HEADER_TIMEOUT_MS,
            drain_timeout_ms: DEFAULT_DRAIN_TIMEOUT_MS,
            max_connections: Spanned::new(0..0, DEFAULT_MAX_CONNECTIONS),
            max_header_bytes: Spanned::new(0..0, DEFAULT_MAX_HEADER_BYTES),
        }
    }
}

/// Validates `[proxy]`.
pub(super) fn proxy(raw: RawProxy, invalid: Invalid) -> Result<ProxyConfig, ConfigError> {
    let listen = raw.listen.get_ref().parse().map_err(|e| {
        let message = format!("not an address like 127.0.0.1:8080: {e}");
        invalid("proxy.listen".into(), raw.listen.span(), message)
    })?;
    let upstream = match &raw.upstream {
        Some(text) => Some(
            parse_upstream(text.get_ref())
                .map_err(|m| invalid("proxy.upstream".into(), text.span(), m))?,
        ),
        None => None,
    };
    if *raw.max_connections.get_ref() == 0 {
        let message = "must be at least 1".to_string();
        let span = raw.max_connections.span();
        return Err(invalid("proxy.max_connections".into(), span, message));
    }
    if *raw.max_header_bytes.get_ref() < MIN_MAX_HEADER_BYTES {
        let message = format!("must be at least {MIN_MAX_HEADER_BYTES}");
        let span = raw.max_header_bytes.span();
        return Err(invalid("proxy.max_header_bytes".into(), span, message));
    }
    Ok(ProxyConfig {
        drain_timeout: Duration::from_millis(raw.drain_timeout_ms),
        max_connections: raw.max_connections.into_inner(),
        max_header_bytes: raw.max_header_bytes.into_inner(),
        listen,
        upstream,
        upstream_ca: raw.upstream_ca,
        preserve_host: raw.preserve_host,
        connect_timeout: Duration::from_millis(raw.connect_timeout_ms),
        header_timeout: Duration::from_millis(raw.header_timeout_ms),
    })
}

/// Validates `[admin]`.
pub(super) fn admin(raw: &RawAdmin, invalid: Invalid) -> Result<AdminConfig, ConfigError> {
    let listen = raw.listen.get_ref().parse().map_err(|e| {
        let message = format!("not an address like 127.0.0.1:9464: {e}");
        invalid("admin.listen".into(), raw.listen.span(), message)
    })?;
    let max_connections = *raw.max_connections.get_ref();
    if max_connections == 0 {
        let message = "must be at least 1".to_string();
        let span = raw.max_connections.span();
        return Err(invalid("admin.max_connections".into(), span, message));
    }
    Ok(AdminConfig {
        listen,
        max_connections,
    })
}
