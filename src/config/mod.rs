//! Configuration: the TOML file as written (`Raw*`, serde with `deny_unknown_fields`) turned into
//! a validated [`Config`] whose errors name the key and the line. Parsing is separate from file
//! loading ([`Config::from_toml_str`] vs [`Config::load`]) so tests need no files.
//!
//! The keys are a public contract; `config/toolpulse.toml` documents each with its default.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use http::Uri;

use crate::core::lifecycle::classify::DEFAULT_PATTERN_KIND;
use crate::core::lifecycle::classify::{FALLBACK, Origin};
use crate::core::lifecycle::{Classifier, FailureRules};
use crate::core::profiles::Profile;
use crate::core::sanitize::Sanitizer;
pub use crate::core::settings::{Limits, ToolTemplates};
pub use bus::{BusConfig, REDIS_URL_ENV, RedisUrl};
pub use clients::ClientLimits;
pub use hosted::{HOSTED_KEY_ENV, HostedConfig};
pub use mcp::{BearerToken, McpConfig, McpServer, PROGRESS_TOKEN_ENV, ProgressConfig};
use raw::*;
pub use telemetry::TelemetryConfig;

pub mod bus;
pub mod clients;
pub mod hosted;
pub mod mcp;
mod raw;
mod settings;
pub mod telemetry;

pub const DEFAULT_HEARTBEAT_MS: u64 = 10_000;
pub const DEFAULT_MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;
/// Below this an ordinary `response.completed` would already count as oversize.
pub const MIN_MAX_EVENT_BYTES: usize = 1024;
pub const MAX_MAX_EVENT_BYTES: usize = 1 << 30;
pub const DEFAULT_MAX_OPEN_CALLS: usize = 256;
/// What one stream's open calls may hold together (names, ids, arguments): eight calls with
/// arguments at their 1 MiB cap, thousands of ordinary ones.
pub const DEFAULT_MAX_OPEN_CALL_BYTES: usize = 8 * 1024 * 1024;
/// Below this one ordinary call would not fit (a name and two ids at their caps, and some
/// arguments).
pub const MIN_MAX_OPEN_CALL_BYTES: usize = 4096;
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

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path}: {error}")]
    Read { path: String, error: std::io::Error },
    /// Not TOML, or a section, key or value type the config does not have. `report` is toml's
    /// own account (several lines: the offending line quoted, a caret under the spot); it is
    /// kept as text, not as a `#[source]`, because it already is the whole message and an error
    /// chain (`{:#}`) would print it twice.
    #[error("invalid config: {report}")]
    Syntax {
        report: String,
        /// The same on one line: "line 2, column 15: invalid type: … (in `interval_ms = "10s"`)".
        brief: String,
    },
    #[error("invalid config: line {line}: {key}: {message}")]
    Invalid {
        key: String,
        line: usize,
        message: String,
    },
    /// An error in the file at `path` ([`Config::load`]): said with the file's name, since it may
    /// come from `TOOLPULSE_CONFIG` rather than the command line.
    #[error("{path}: {error}")]
    InFile {
        path: String,
        error: Box<ConfigError>,
    },
}

/// How much of the offending line a one-line syntax error quotes.
const MAX_QUOTED_LINE_CHARS: usize = 80;

impl ConfigError {
    fn syntax(error: toml::de::Error, text: &str) -> ConfigError {
        let report = plain_types(error.to_string().trim_end());
        let message = plain_types(&join_lines(error.message()));
        let brief = match error.span() {
            Some(span) => {
                let mut at = span.start.min(text.len());
                while !text.is_char_boundary(at) {
                    at -= 1;
                }
                let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
                let line_end = text[at..].find('\n').map_or(text.len(), |i| at + i);
                let line = text[..at].matches('\n').count() + 1;
                let column = text[line_start..at].chars().count() + 1;
                if may_hold_a_secret(&text[..line_start], &text[line_start..line_end]) {
                    let report = format!(
                        "TOML parse error at line {line}, column {column}\n{message}\n\
                         (the line is not shown: it may hold a secret)"
                    );
                    let brief = format!("line {line}, column {column}: {message}");
                    return ConfigError::Syntax { report, brief };
                }
                let quoted: String = text[line_start..line_end]
                    .trim()
                    .chars()
                    .take(MAX_QUOTED_LINE_CHARS)
                    .collect();
                format!("line {line}, column {column}: {message} (in `{quoted}`)")
            }
            None => message,
        };
        ConfigError::Syntax { report, brief }
    }

    /// The error on one line, for log pipelines that take a line per entry (a SIGHUP reload).
    pub fn one_line(&self) -> String {
        match self {
            ConfigError::Syntax { brief, .. } => format!("invalid config: {brief}"),
            ConfigError::InFile { path, error } => format!("{path}: {}", error.one_line()),
            other => join_lines(&other.to_string()),
        }
    }
}

/// The keys whose values are never secret: a line setting one of them may be quoted in an
/// error. Any other line (a token, a key, a URL that may carry a password, a collector header,
/// a misspelt or unknown key, a line whose key cannot be read) is not: it is said by its line
/// and column only.
const QUOTABLE_KEYS: &[&str] = &[
    "match",
    "kind",
    "server_label",
    "summary",
    "count",
    "output_patterns",
    "interval_ms",
    "max_event_bytes",
    "max_open_calls",
    "max_open_call_bytes",
    "listen",
    "upstream_ca",
    "preserve_host",
    "connect_timeout_ms",
    "header_timeout_ms",
    "drain_timeout_ms",
    "max_connections",
    "max_header_bytes",
    "profiles",
    "allowed_profiles",
    "redact_keys",
    "max_string_bytes",
    "max_payload_bytes",
    "name",
    "call_name",
    "bind_window_ms",
    "min_interval_ms",
    "bus_prefix",
    "service_name",
    "sample_ratio",
    "record_payloads",
    "max_entries",
    "max_bytes",
    "ttl_ms",
    "max_json_bytes",
    "head_timeout_ms",
    "body_timeout_ms",
    "idle_timeout_ms",
    "ping_interval_ms",
    "ping_timeout_ms",
    "max_streams_per_connection",
    "body_buffer_bytes",
    "body_buffer_bytes_per_peer",
    "body_buffer_bytes_per_connection",
    "require_token",
];

/// Whether `line` (after the text `before` it) may hold a secret, so an error must not quote it.
fn may_hold_a_secret(before: &str, line: &str) -> bool {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return false;
    }
    if line.starts_with('[') {
        // A table header holds no value, unless it is a value written where a header is.
        return line.contains('=');
    }
    let section = before
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .unwrap_or("");
    if section.trim_matches(['[', ']', ' ']) == "telemetry.headers" {
        return true;
    }
    let Some((key, _)) = line.split_once('=') else {
        return true;
    };
    let key = key.trim().trim_matches(['"', '\'']);
    !QUOTABLE_KEYS.contains(&key)
}

/// serde's names of the types a key expects (`expected u64`), said in words a config's reader
/// knows (`expected a whole number (0 or more)`); what was found is said in TOML's words too.
fn plain_types(message: &str) -> String {
    const WORDS: [(&str, &str); 5] = [
        (
            r"expected (u8|u16|u32|u64|u128|usize)\b",
            "expected a whole number (0 or more)",
        ),
        (
            r"expected (i8|i16|i32|i64|i128|isize)\b",
            "expected a whole number",
        ),
        (r"expected (f32|f64)\b", "expected a number such as 1.0"),
        (r"expected a boolean\b", "expected true or false"),
        (
            r"expected a sequence\b",
            "expected a list such as [\"a\", \"b\"]",
        ),
    ];
    let mut text = message.to_string();
    for (pattern, words) in WORDS {
        let regex = regex::Regex::new(pattern).expect("a valid pattern");
        text = regex.replace_all(&text, words).into_owned();
    }
    text.replace("invalid type: sequence", "invalid type: a list")
        .replace("invalid type: map", "invalid type: a table")
        .replace("expected a map", "expected a table")
}

/// Text on one line: its lines trimmed and joined by a space (a regex error has several).
fn join_lines(text: &str) -> String {
    let lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    lines.collect::<Vec<_>>().join(" ")
}

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
}

/// The `[events]` section: which profiles render lifecycle events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventsConfig {
    /// The profiles of every stream, unless a request picks others.
    pub profiles: Vec<Profile>,
    /// The profiles a request may pick with `x-toolpulse-profiles`.
    pub allowed_profiles: Vec<Profile>,
}

impl Default for EventsConfig {
    fn default() -> Self {
        EventsConfig {
            profiles: vec![Profile::Hosted],
            allowed_profiles: Profile::ALL.to_vec(),
        }
    }
}

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
        }
    }
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

        let mut rules = Vec::new();
        for (i, tool) in raw.tools.iter().enumerate() {
            if tool.patterns.get_ref().is_empty() {
                let message = "must list at least one glob pattern".to_string();
                return Err(invalid(
                    format!("tools[{i}].match"),
                    tool.patterns.span(),
                    message,
                ));
            }
            let patterns = tool.patterns.get_ref().iter().map(|p| p.get_ref().clone());
            rules.push((patterns.collect(), tool.kind));
        }
        let classifier = Classifier::new(rules).map_err(|bad| {
            let pattern = &raw.tools[bad.rule].patterns.get_ref()[bad.pattern];
            let key = format!("tools[{}].match[{}]", bad.rule, bad.pattern);
            invalid(key, pattern.span(), bad.error.to_string())
        })?;

        let mut tool_templates = Vec::new();
        for (i, tool) in raw.tools.iter().enumerate() {
            if let Some(count) = &tool.count
                && !(count.get_ref().is_empty() || count.get_ref().starts_with('/'))
            {
                let message = "must be a JSON pointer such as \"/results\"".to_string();
                return Err(invalid(format!("tools[{i}].count"), count.span(), message));
            }
            tool_templates.push(ToolTemplates {
                display: tool.display.clone(),
                summary: tool.summary.clone(),
                count: tool.count.as_ref().map(|c| c.get_ref().clone()),
                server_label: tool.server_label.clone(),
            });
        }

        let patterns = &raw.failure.output_patterns;
        let texts: Vec<String> = patterns.iter().map(|p| p.get_ref().clone()).collect();
        let kinds_table = raw.failure.kinds.get_ref();
        if let Some(unknown) = kinds_table.keys().find(|k| !texts.contains(k)) {
            let message = format!("{unknown:?} is not one of failure.output_patterns");
            return Err(invalid(
                "failure.kinds".into(),
                raw.failure.kinds.span(),
                message,
            ));
        }
        let kinds = texts
            .iter()
            .map(|t| {
                kinds_table
                    .get(t)
                    .cloned()
                    .unwrap_or_else(|| DEFAULT_PATTERN_KIND.into())
            })
            .collect();
        let failure = FailureRules::with_kinds(&texts, kinds).map_err(|(i, e)| {
            let key = format!("failure.output_patterns[{i}]");
            invalid(key, patterns[i].span(), e.to_string())
        })?;

        let sanitize = &raw.sanitize;
        let sanitizer = Sanitizer::new(
            sanitize.redact_keys.get_ref(),
            sanitize.max_string_bytes.max(1),
            sanitize.max_payload_bytes.max(1),
        )
        .map_err(|(i, e)| {
            let key = format!("sanitize.redact_keys[{i}]");
            invalid(key, sanitize.redact_keys.span(), e.to_string())
        })?;
        let profiles = &raw.events.profiles;
        crate::core::profiles::check_combination(profiles.get_ref())
            .map_err(|message| invalid("events.profiles".into(), profiles.span(), message))?;
        let events = EventsConfig {
            profiles: profiles.get_ref().clone(),
            allowed_profiles: raw.events.allowed_profiles.clone(),
        };

        let max_event_bytes = raw.limits.max_event_bytes;
        if !(MIN_MAX_EVENT_BYTES..=MAX_MAX_EVENT_BYTES).contains(max_event_bytes.get_ref()) {
            let message =
                format!("must be between {MIN_MAX_EVENT_BYTES} and {MAX_MAX_EVENT_BYTES}");
            return Err(invalid(
                "limits.max_event_bytes".into(),
                max_event_bytes.span(),
                message,
            ));
        }
        let max_open_calls = raw.limits.max_open_calls;
        if *max_open_calls.get_ref() == 0 {
            let message = "must be at least 1".to_string();
            return Err(invalid(
                "limits.max_open_calls".into(),
                max_open_calls.span(),
                message,
            ));
        }
        let max_open_call_bytes = raw.limits.max_open_call_bytes;
        if *max_open_call_bytes.get_ref() < MIN_MAX_OPEN_CALL_BYTES {
            let message = format!("must be at least {MIN_MAX_OPEN_CALL_BYTES}");
            return Err(invalid(
                "limits.max_open_call_bytes".into(),
                max_open_call_bytes.span(),
                message,
            ));
        }

        let raw_proxy = raw.proxy;
        let listen = raw_proxy.listen.get_ref().parse().map_err(|e| {
            let message = format!("not an address like 127.0.0.1:8080: {e}");
            invalid("proxy.listen".into(), raw_proxy.listen.span(), message)
        })?;
        let upstream = match &raw_proxy.upstream {
            Some(text) => Some(
                parse_upstream(text.get_ref())
                    .map_err(|m| invalid("proxy.upstream".into(), text.span(), m))?,
            ),
            None => None,
        };
        if *raw_proxy.max_connections.get_ref() == 0 {
            let message = "must be at least 1".to_string();
            let span = raw_proxy.max_connections.span();
            return Err(invalid("proxy.max_connections".into(), span, message));
        }
        if *raw_proxy.max_header_bytes.get_ref() < MIN_MAX_HEADER_BYTES {
            let message = format!("must be at least {MIN_MAX_HEADER_BYTES}");
            let span = raw_proxy.max_header_bytes.span();
            return Err(invalid("proxy.max_header_bytes".into(), span, message));
        }
        let admin_listen = raw.admin.listen.get_ref().parse().map_err(|e| {
            let message = format!("not an address like 127.0.0.1:9464: {e}");
            invalid("admin.listen".into(), raw.admin.listen.span(), message)
        })?;
        let admin_max_connections = *raw.admin.max_connections.get_ref();
        if admin_max_connections == 0 {
            let message = "must be at least 1".to_string();
            let span = raw.admin.max_connections.span();
            return Err(invalid("admin.max_connections".into(), span, message));
        }
        let proxy = ProxyConfig {
            drain_timeout: Duration::from_millis(raw_proxy.drain_timeout_ms),
            max_connections: raw_proxy.max_connections.into_inner(),
            max_header_bytes: raw_proxy.max_header_bytes.into_inner(),
            listen,
            upstream,
            upstream_ca: raw_proxy.upstream_ca,
            preserve_host: raw_proxy.preserve_host,
            connect_timeout: Duration::from_millis(raw_proxy.connect_timeout_ms),
            header_timeout: Duration::from_millis(raw_proxy.header_timeout_ms),
        };

        Ok(Config {
            clients,
            telemetry,
            hosted,
            events,
            sanitizer,
            tool_templates,
            mcp,
            progress,
            proxy,
            admin: AdminConfig {
                listen: admin_listen,
                max_connections: admin_max_connections,
            },
            classifier,
            failure,
            heartbeat: Duration::from_millis(raw.heartbeat.interval_ms),
            limits: Limits {
                max_event_bytes: max_event_bytes.into_inner(),
                max_open_calls: max_open_calls.into_inner(),
                max_open_call_bytes: max_open_call_bytes.into_inner(),
            },
        })
    }

    /// A human-readable account of the resolved rules, for `toolpulse check`.
    pub fn describe(&self) -> String {
        use std::fmt::Write;
        let mut s = String::from("tool classification (first match wins):\n");
        for (i, rule) in self.classifier.rules().iter().enumerate() {
            let origin = match rule.origin {
                Origin::Config => "config",
                Origin::Default => "built-in",
            };
            let patterns = rule.patterns.join(", ");
            let kind = rule.kind.as_str();
            let _ = writeln!(s, "  {:>2}. {patterns} -> {kind} ({origin})", i + 1);
        }
        let _ = writeln!(s, "   *. anything else -> {} (fallback)", FALLBACK.as_str());
        s.push_str("failure output patterns:\n");
        if self.failure.patterns().is_empty() {
            s.push_str("  (none: only item status and `error` mark a failure)\n");
        }
        for pattern in self.failure.patterns() {
            let _ = writeln!(s, "  {pattern:?}");
        }
        let _ = match self.heartbeat.as_millis() {
            0 => writeln!(s, "heartbeat: off"),
            ms => writeln!(s, "heartbeat: every {ms} ms while a tool runs"),
        };
        let Limits {
            max_event_bytes,
            max_open_calls,
            max_open_call_bytes,
        } = self.limits;
        let _ = writeln!(
            s,
            "limits: max_event_bytes = {max_event_bytes}, max_open_calls = {max_open_calls}, \
             max_open_call_bytes = {max_open_call_bytes}"
        );
        let proxy = &self.proxy;
        let upstream = proxy
            .upstream
            .as_ref()
            .map_or("(none: give --upstream)".into(), Uri::to_string);
        let _ = writeln!(s, "proxy: listen {} -> upstream {upstream}", proxy.listen);
        let _ = writeln!(s, "admin: listen {}", self.admin.listen);
        match &self.mcp {
            None => s.push_str("mcp: off (no [[mcp.servers]], no [mcp] listen)\n"),
            Some(mcp) => {
                let _ = writeln!(s, "mcp: listen {}", mcp.listen);
                for server in &mcp.servers {
                    let (name, upstream) = (&server.name, &server.upstream);
                    let tool = server.function_name("TOOL");
                    let _ = writeln!(s, "  /{name} -> {upstream} (tools named {tool})");
                }
            }
        }
        let token = match self.progress.token {
            Some(_) => "required",
            None => "not required",
        };
        let _ = writeln!(s, "progress: bearer token {token}");
        if let Some(bus) = &self.progress.bus {
            let (url, prefix) = (&bus.url, &bus.prefix);
            let _ = writeln!(s, "progress: bus {url} (keys and channels {prefix}:*)");
        }
        let telemetry = &self.telemetry;
        let _ = match &telemetry.traces_endpoint {
            None => writeln!(s, "telemetry: off (no [telemetry] otlp_endpoint)"),
            Some(url) => writeln!(
                s,
                "telemetry: spans to {url} as {:?}, {} header(s), sample ratio {}, payloads {}",
                telemetry.service_name,
                telemetry.headers.len(),
                telemetry.sample_ratio,
                if telemetry.record_payloads {
                    "recorded"
                } else {
                    "not recorded"
                },
            ),
        };
        let names = |list: &[Profile]| list.iter().map(|p| p.name()).collect::<Vec<_>>().join(", ");
        let (on, allowed) = (
            names(&self.events.profiles),
            names(&self.events.allowed_profiles),
        );
        let _ = writeln!(
            s,
            "events: profiles {on}; a request may pick from {allowed}"
        );
        s
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
