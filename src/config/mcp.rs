//! The `[mcp]` and `[progress]` sections: the MCP front's listener, the MCP servers behind it,
//! and how progress from tools is accepted and paced. The one cross-section rule: an MCP
//! listener beyond loopback needs a token, since `/v1/progress` on it would otherwise let anyone
//! who reaches it write into users' streams.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use http::Uri;
use serde::Deserialize;
use toml::Spanned;

use super::bus::{self, BusConfig, DEFAULT_BUS_PREFIX, REDIS_URL_ENV, RedisUrl};
use super::error::{ConfigError, Invalid};
use super::proxy::parse_upstream;

pub const DEFAULT_MCP_LISTEN: &str = "127.0.0.1:8090";
pub const DEFAULT_CALL_NAME: &str = "{tool}";
/// Connections the MCP listener keeps open at once (the gateway needs a few per server).
pub const DEFAULT_MCP_MAX_CONNECTIONS: usize = 1024;
pub const DEFAULT_BIND_WINDOW_MS: u64 = 5_000;
pub const DEFAULT_MIN_INTERVAL_MS: u64 = 100;
/// The environment variable that may carry `[progress] token` (kept out of config files).
pub const PROGRESS_TOKEN_ENV: &str = "TOOLPULSE_PROGRESS_TOKEN";
/// A shorter bearer token is too easy to guess.
pub const MIN_TOKEN_CHARS: usize = 16;

/// The `[mcp]` section. Present (`Some` in the config's `mcp`) when the MCP listener runs:
/// when at least one server is configured or `[mcp] listen` is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpConfig {
    pub listen: SocketAddr,
    /// Connections open at once; more are answered 503 and closed.
    pub max_connections: usize,
    pub servers: Vec<McpServer>,
    /// The MCP paths want `X-Toolpulse-Token: <[progress] token>` too (not only
    /// `POST /v1/progress`).
    pub require_token: bool,
}

impl McpConfig {
    /// The server served at `/<name>`.
    pub fn server(&self, name: &str) -> Option<&McpServer> {
        self.servers.iter().find(|s| s.name == name)
    }
}

/// One `[[mcp.servers]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    /// The path segment it is served at (`/<name>` on the MCP listener).
    pub name: String,
    /// The server's Streamable HTTP endpoint.
    pub upstream: Uri,
    /// How the gateway names this server's tools in function_call items; contains `{tool}`.
    pub call_name: String,
}

impl McpServer {
    /// The function_call name of this server's tool `tool`.
    pub fn function_name(&self, tool: &str) -> String {
        self.call_name.replace("{tool}", tool)
    }
}

/// The `[progress]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgressConfig {
    /// Required as `Authorization: Bearer …` on `POST /v1/progress` when set.
    pub token: Option<BearerToken>,
    /// How long an MCP call may wait for its stream to show the call.
    pub bind_window: Duration,
    /// At most one progress event per call per this interval reaches a client.
    pub min_interval: Duration,
    /// The Redis shared by replicas; `None`: the in-process registry alone.
    pub bus: Option<BusConfig>,
}

impl Default for ProgressConfig {
    fn default() -> Self {
        ProgressConfig {
            token: None,
            bind_window: Duration::from_millis(DEFAULT_BIND_WINDOW_MS),
            min_interval: Duration::from_millis(DEFAULT_MIN_INTERVAL_MS),
            bus: None,
        }
    }
}

/// A secret compared in constant time and never printed (`Debug` shows `[redacted]`).
#[derive(Clone, PartialEq, Eq)]
pub struct BearerToken(String);

impl BearerToken {
    /// Whether `candidate` is this token. The time taken depends on the lengths only, so the
    /// answer does not leak how many leading bytes matched.
    pub fn matches(&self, candidate: &[u8]) -> bool {
        let token = self.0.as_bytes();
        if token.len() != candidate.len() {
            return false;
        }
        let diff = token
            .iter()
            .zip(candidate)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        std::hint::black_box(diff) == 0
    }
}

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawMcp {
    pub(super) listen: Option<Spanned<String>>,
    pub(super) max_connections: Option<Spanned<usize>>,
    pub(super) require_token: Option<Spanned<bool>>,
    pub(super) servers: Vec<RawMcpServer>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMcpServer {
    pub(super) name: Spanned<String>,
    pub(super) upstream: Spanned<String>,
    pub(super) call_name: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawProgress {
    pub(super) token: Option<Spanned<String>>,
    pub(super) bind_window_ms: u64,
    pub(super) min_interval_ms: u64,
    pub(super) bus: Option<Spanned<String>>,
    pub(super) bus_prefix: Option<Spanned<String>>,
}

impl Default for RawProgress {
    fn default() -> Self {
        RawProgress {
            token: None,
            bind_window_ms: DEFAULT_BIND_WINDOW_MS,
            min_interval_ms: DEFAULT_MIN_INTERVAL_MS,
            bus: None,
            bus_prefix: None,
        }
    }
}

/// Validates `[progress]`; `env_token` is [`PROGRESS_TOKEN_ENV`]'s value, used when the file
/// names no token.
pub(super) fn progress(
    raw: &RawProgress,
    env_token: Option<&str>,
    invalid: Invalid,
) -> Result<ProgressConfig, ConfigError> {
    let token = match (&raw.token, env_token) {
        (Some(token), _) => Some(
            token_from(token.get_ref())
                .map_err(|m| invalid("progress.token".into(), token.span(), m))?,
        ),
        (None, Some(text)) => {
            Some(token_from(text).map_err(|m| invalid(PROGRESS_TOKEN_ENV.into(), 0..0, m))?)
        }
        (None, None) => None,
    };
    Ok(ProgressConfig {
        token,
        bind_window: Duration::from_millis(raw.bind_window_ms),
        min_interval: Duration::from_millis(raw.min_interval_ms),
        bus: None,
    })
}

/// Validates `bus` and `bus_prefix`; `env_url` is [`REDIS_URL_ENV`]'s value, which wins over
/// the file's. The bus carries progress from the MCP listener and keeps the pairs behind hosted
/// items for every replica, so it is valid with or without the listener.
pub(super) fn bus(
    raw: &RawProgress,
    env_url: Option<&str>,
    invalid: Invalid,
) -> Result<Option<BusConfig>, ConfigError> {
    let prefix = match &raw.bus_prefix {
        Some(text) => bus::prefix(text.get_ref())
            .map_err(|m| invalid("progress.bus_prefix".into(), text.span(), m))?,
        None => DEFAULT_BUS_PREFIX.to_string(),
    };
    let url = match (env_url, &raw.bus) {
        (Some(text), _) => {
            RedisUrl::parse(text).map_err(|m| invalid(REDIS_URL_ENV.into(), 0..0, m))?
        }
        (None, Some(text)) => RedisUrl::parse(text.get_ref())
            .map_err(|m| invalid("progress.bus".into(), text.span(), m))?,
        (None, None) => return Ok(None),
    };
    Ok(Some(BusConfig { url, prefix }))
}

fn token_from(text: &str) -> Result<BearerToken, String> {
    if text.chars().count() < MIN_TOKEN_CHARS {
        return Err(format!("must be at least {MIN_TOKEN_CHARS} characters"));
    }
    if !text.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("must be visible ASCII without spaces (it is sent in a header)".into());
    }
    Ok(BearerToken(text.to_string()))
}

/// Validates `[mcp]`: `None` when the listener does not run (no server, no `listen`).
pub(super) fn mcp(
    raw: &RawMcp,
    progress: &ProgressConfig,
    invalid: Invalid,
) -> Result<Option<McpConfig>, ConfigError> {
    let max_connections = match &raw.max_connections {
        Some(n) if *n.get_ref() == 0 => {
            let message = "must be at least 1".to_string();
            return Err(invalid("mcp.max_connections".into(), n.span(), message));
        }
        Some(n) => *n.get_ref(),
        None => DEFAULT_MCP_MAX_CONNECTIONS,
    };
    if raw.listen.is_none() && raw.servers.is_empty() {
        return Ok(None);
    }
    let (text, span) = match &raw.listen {
        Some(listen) => (listen.get_ref().as_str(), listen.span()),
        None => (DEFAULT_MCP_LISTEN, 0..0),
    };
    let listen: SocketAddr = text.parse().map_err(|e| {
        let message = format!("not an address like {DEFAULT_MCP_LISTEN}: {e}");
        invalid("mcp.listen".into(), span.clone(), message)
    })?;
    let require_token = raw.require_token.as_ref().is_some_and(|r| *r.get_ref());
    if let Some(required) = raw.require_token.as_ref().filter(|r| *r.get_ref())
        && progress.token.is_none()
    {
        let message = format!("needs [progress] token (or {PROGRESS_TOKEN_ENV}) to require");
        return Err(invalid(
            "mcp.require_token".into(),
            required.span(),
            message,
        ));
    }
    if !listen.ip().is_loopback() && progress.token.is_none() {
        let message = format!(
            "{listen} is reachable beyond this host: set [progress] token (or \
             {PROGRESS_TOKEN_ENV}) so that only holders of it can post progress"
        );
        return Err(invalid("mcp.listen".into(), span, message));
    }
    let mut servers: Vec<McpServer> = Vec::new();
    for (i, server) in raw.servers.iter().enumerate() {
        let key = |field: &str| format!("mcp.servers[{i}].{field}");
        let name = server.name.get_ref();
        check_name(name).map_err(|m| invalid(key("name"), server.name.span(), m))?;
        if servers.iter().any(|s| &s.name == name) {
            let message = format!("{name:?} is already the name of another server");
            return Err(invalid(key("name"), server.name.span(), message));
        }
        let upstream = parse_upstream(server.upstream.get_ref())
            .map_err(|m| invalid(key("upstream"), server.upstream.span(), m))?;
        let call_name = match &server.call_name {
            Some(call_name) if !call_name.get_ref().contains("{tool}") => {
                let message = "must contain {tool} (the MCP tool's name)".to_string();
                return Err(invalid(key("call_name"), call_name.span(), message));
            }
            Some(call_name) => call_name.get_ref().clone(),
            None => DEFAULT_CALL_NAME.to_string(),
        };
        servers.push(McpServer {
            name: name.clone(),
            upstream,
            call_name,
        });
    }
    Ok(Some(McpConfig {
        listen,
        max_connections,
        servers,
        require_token,
    }))
}

/// A server's name is one URL path segment that needs no escaping.
fn check_name(name: &str) -> Result<(), String> {
    let plain = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
    if name.is_empty() || !name.bytes().all(plain) || name.bytes().all(|b| b == b'.') {
        return Err("must be a path segment of letters, digits, '-', '_' and '.'".into());
    }
    Ok(())
}
