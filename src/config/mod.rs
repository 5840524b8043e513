//! Configuration: the TOML file as written (`Raw*`, serde with `deny_unknown_fields`) turned into
//! a validated [`Config`] whose errors name the key and the line. Parsing is separate from file
//! loading ([`Config::from_toml_str`] vs [`Config::load`]) so tests need no files.
//!
//! The keys are a public contract; `config/toolpulse.toml` documents each with its default.
//! Each section is read and validated in a file of its own (its `Raw*` struct beside the value
//! it becomes); this file gathers them into one [`Config`], in the order their errors are told.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use http::Uri;
use serde::Deserialize;

use crate::core::lifecycle::{Classifier, FailureRules};
use crate::core::sanitize::Sanitizer;
pub use crate::core::settings::{Limits, ToolTemplates};
pub use ag_ui::AgUiConfig;
pub use bus::{BusConfig, REDIS_URL_ENV, RedisUrl};
pub use clients::ClientLimits;
pub use error::ConfigError;
pub use hosted::{HOSTED_KEY_ENV, HostedConfig};
pub use mcp::{BearerToken, McpConfig, McpServer, PROGRESS_TOKEN_ENV, ProgressConfig};
pub use proxy::{
    AdminConfig, CLIENT_PATH, DEFAULT_ADMIN_LISTEN, DEFAULT_ADMIN_MAX_CONNECTIONS,
    DEFAULT_CONNECT_TIMEOUT_MS, DEFAULT_DRAIN_TIMEOUT_MS, DEFAULT_HEADER_TIMEOUT_MS,
    DEFAULT_LISTEN, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_HEADER_BYTES, MIN_MAX_HEADER_BYTES,
    ProxyConfig, parse_listen, parse_upstream, upstream_path_warning,
};
pub use stream::{
    DEFAULT_HEARTBEAT_MS, DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_OPEN_CALL_BYTES,
    DEFAULT_MAX_OPEN_CALLS, EventsConfig, MAX_MAX_EVENT_BYTES, MIN_MAX_EVENT_BYTES,
    MIN_MAX_OPEN_CALL_BYTES,
};
pub use telemetry::TelemetryConfig;

pub mod ag_ui;
pub mod bus;
pub mod clients;
pub mod defaults;
mod describe;
mod error;
pub mod hosted;
pub mod mcp;
mod proxy;
mod settings;
mod stream;
pub mod telemetry;

/// The validated configuration of the rewriting core.
#[derive(Debug, Clone)]
pub struct Config {
    pub classifier: Classifier,
    pub failure: FailureRules,
    /// How long a running tool may leave the client without bytes before a heartbeat comment;
    /// zero turns heartbeats off.
    pub heartbeat: Duration,
    pub limits: Limits,
    pub proxy: ProxyConfig,
    pub admin: AdminConfig,
    pub events: EventsConfig,
    pub sanitizer: Sanitizer,
    /// The templates of each `[[tools]]` rule, by rule index.
    pub tool_templates: Vec<ToolTemplates>,
    /// The MCP front; `None` when its listener does not run.
    pub mcp: Option<McpConfig>,
    pub progress: ProgressConfig,
    /// OpenTelemetry export; off without an endpoint.
    pub telemetry: TelemetryConfig,
    /// `[hosted]`: ids and the next-turn store of profile `hosted`.
    pub hosted: HostedConfig,
    /// `[clients]`: timeouts and caps of every client connection.
    pub clients: ClientLimits,
    /// `[ag_ui]`: the AG-UI endpoint; `None` when the section is absent.
    pub ag_ui: Option<AgUiConfig>,
}

/// Command-line values that win over the file's, at start and at every reload.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    pub listen: Option<SocketAddr>,
    pub admin_listen: Option<SocketAddr>,
    pub upstream: Option<Uri>,
}

impl Overrides {
    pub fn apply(&self, config: &mut Config) {
        if let Some(listen) = self.listen {
            config.proxy.listen = listen;
        }
        if let Some(listen) = self.admin_listen {
            config.admin.listen = listen;
        }
        if let Some(upstream) = &self.upstream {
            config.proxy.upstream = Some(upstream.clone());
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            classifier: Classifier::default(),
            failure: FailureRules::default(),
            heartbeat: Duration::from_millis(DEFAULT_HEARTBEAT_MS),
            limits: Limits {
                max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
                max_open_calls: DEFAULT_MAX_OPEN_CALLS,
                max_open_call_bytes: DEFAULT_MAX_OPEN_CALL_BYTES,
            },
            proxy: ProxyConfig::default(),
            admin: AdminConfig::default(),
            events: EventsConfig::default(),
            sanitizer: Sanitizer::default(),
            tool_templates: Vec::new(),
            mcp: None,
            progress: ProgressConfig::default(),
            telemetry: TelemetryConfig::default(),
            hosted: HostedConfig::default(),
            clients: ClientLimits::default(),
            ag_ui: None,
        }
    }
}

/// The config file as written: one struct per section, each in its section's file with the
/// documented defaults.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct RawConfig {
    tools: Vec<stream::RawTool>,
    failure: stream::RawFailure,
    heartbeat: stream::RawHeartbeat,
    limits: stream::RawLimits,
    proxy: proxy::RawProxy,
    admin: proxy::RawAdmin,
    events: stream::RawEvents,
    sanitize: stream::RawSanitize,
    mcp: mcp::RawMcp,
    progress: mcp::RawProgress,
    telemetry: telemetry::RawTelemetry,
    hosted: hosted::RawHosted,
    clients: clients::RawClients,
    ag_ui: Option<ag_ui::RawAgUi>,
}

impl Config {
    /// Parses and validates a config file's text (the environment is not read).
    pub fn from_toml_str(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml_with_token(text, None)
    }

    /// Like [`Config::from_toml_str`], with the value of [`PROGRESS_TOKEN_ENV`] as the
    /// `[progress] token` when the text names none.
    pub fn from_toml_with_token(
        text: &str,
        env_token: Option<&str>,
    ) -> Result<Config, ConfigError> {
        let token = env_token.map(str::to_string);
        Config::from_toml_with_env(text, &|name| match name {
            PROGRESS_TOKEN_ENV => token.clone(),
            _ => None,
        })
    }

    /// Like [`Config::from_toml_str`], reading the environment through `env` (an empty value
    /// counts as unset): [`PROGRESS_TOKEN_ENV`], the `OTEL_*` variables of `[telemetry]` and
    /// the `${NAME}`s its header values name.
    pub fn from_toml_with_env(
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let env_token = env(PROGRESS_TOKEN_ENV);
        let env_token = env_token.as_deref();
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::syntax(e, text))?;
        let invalid = |key: String, span: std::ops::Range<usize>, message: String| {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            ConfigError::Invalid { key, line, message }
        };
        let mut progress = mcp::progress(&raw.progress, env_token, &invalid)?;
        let mcp = mcp::mcp(&raw.mcp, &progress, &invalid)?;
        let redis_url = env(REDIS_URL_ENV);
        progress.bus = mcp::bus(&raw.progress, redis_url.as_deref(), &invalid)?;
        let telemetry = telemetry::telemetry(&raw.telemetry, env, &invalid)?;
        let hosted = hosted::hosted(&raw.hosted, env(HOSTED_KEY_ENV).as_deref(), &invalid)?;
        let clients = clients::clients(&raw.clients, &invalid)?;
        let ag_ui = ag_ui::ag_ui(raw.ag_ui.as_ref(), &invalid)?;
        let (classifier, tool_templates) = stream::tools(&raw.tools, &invalid)?;
        let failure = stream::failure(&raw.failure, &invalid)?;
        let sanitizer = stream::sanitizer(&raw.sanitize, &invalid)?;
        let events = stream::events(&raw.events, &invalid)?;
        let limits = stream::limits(&raw.limits, &invalid)?;
        let proxy = proxy::proxy(raw.proxy, &invalid)?;
        let admin = proxy::admin(&raw.admin, &invalid)?;
        Ok(Config {
            ag_ui,
            clients,
            telemetry,
            hosted,
            events,
            sanitizer,
            tool_templates,
            mcp,
            progress,
            proxy,
            admin,
            classifier,
            failure,
            heartbeat: stream::heartbeat(&raw.heartbeat),
            limits,
        })
    }

    /// The config of a process started without a file: the defaults, plus what the
    /// environment gives (`TOOLPULSE_PROGRESS_TOKEN`, the `OTEL_*` variables).
    pub fn from_environment() -> Result<Config, ConfigError> {
        Config::from_toml_with_env("", &|name| {
            std::env::var(name).ok().filter(|v| !v.is_empty())
        })
    }

    /// Reads and validates a config file; the `[progress] token` may come from
    /// [`PROGRESS_TOKEN_ENV`]. Its errors name the file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
            path: path.display().to_string(),
            error,
        })?;
        // An empty variable counts as unset, as shells and compose files often leave it.
        let config = Config::from_toml_with_env(&text, &|name| {
            std::env::var(name).ok().filter(|v| !v.is_empty())
        });
        config.map_err(|error| ConfigError::InFile {
            path: path.display().to_string(),
            error: Box::new(error),
        })
    }
}

#[cfg(test)]
mod tests;
