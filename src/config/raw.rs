//! The config file as written: serde structs with `deny_unknown_fields`, each section with the
//! documented defaults. [`super::Config::from_toml_str`] validates them into a `Config`.

use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

use super::*;
use crate::core::lifecycle::Kind;
use crate::core::profiles::Profile;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawConfig {
    pub(super) tools: Vec<RawTool>,
    pub(super) failure: RawFailure,
    pub(super) heartbeat: RawHeartbeat,
    pub(super) limits: RawLimits,
    pub(super) proxy: RawProxy,
    pub(super) admin: RawAdmin,
    pub(super) events: RawEvents,
    pub(super) sanitize: RawSanitize,
    pub(super) mcp: super::mcp::RawMcp,
    pub(super) progress: super::mcp::RawProgress,
    pub(super) telemetry: super::telemetry::RawTelemetry,
    pub(super) hosted: super::hosted::RawHosted,
    pub(super) clients: super::clients::RawClients,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawEvents {
    pub(super) profiles: Spanned<Vec<Profile>>,
    pub(super) allowed_profiles: Vec<Profile>,
}

impl Default for RawEvents {
    fn default() -> Self {
        RawEvents {
            profiles: Spanned::new(0..0, vec![Profile::Hosted]),
            allowed_profiles: Profile::ALL.to_vec(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawSanitize {
    pub(super) redact_keys: Spanned<Vec<String>>,
    pub(super) max_string_bytes: usize,
    pub(super) max_payload_bytes: usize,
}

impl Default for RawSanitize {
    fn default() -> Self {
        let keys = crate::core::sanitize::DEFAULT_REDACT_PATTERNS
            .iter()
            .map(|k| k.to_string());
        RawSanitize {
            redact_keys: Spanned::new(0..0, keys.collect()),
            max_string_bytes: crate::core::sanitize::DEFAULT_MAX_STRING_BYTES,
            max_payload_bytes: crate::core::sanitize::DEFAULT_MAX_PAYLOAD_BYTES,
        }
    }
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTool {
    #[serde(rename = "match")]
    pub(super) patterns: Spanned<Vec<Spanned<String>>>,
    pub(super) kind: Kind,
    pub(super) display: Option<String>,
    pub(super) summary: Option<String>,
    pub(super) server_label: Option<String>,
    pub(super) count: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawFailure {
    pub(super) output_patterns: Vec<Spanned<String>>,
    /// `pattern = "kind"`: the `error.kind` reported when that output pattern matches.
    pub(super) kinds: Spanned<std::collections::BTreeMap<String, String>>,
}

impl Default for RawFailure {
    fn default() -> Self {
        RawFailure {
            output_patterns: Vec::new(),
            kinds: Spanned::new(0..0, Default::default()),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawHeartbeat {
    pub(super) interval_ms: u64,
}

impl Default for RawHeartbeat {
    fn default() -> Self {
        RawHeartbeat {
            interval_ms: DEFAULT_HEARTBEAT_MS,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawLimits {
    pub(super) max_event_bytes: Spanned<usize>,
    pub(super) max_open_calls: Spanned<usize>,
    pub(super) max_open_call_bytes: Spanned<usize>,
}

impl Default for RawLimits {
    fn default() -> Self {
        RawLimits {
            max_event_bytes: Spanned::new(0..0, DEFAULT_MAX_EVENT_BYTES),
            max_open_calls: Spanned::new(0..0, DEFAULT_MAX_OPEN_CALLS),
            max_open_call_bytes: Spanned::new(0..0, DEFAULT_MAX_OPEN_CALL_BYTES),
        }
    }
}
