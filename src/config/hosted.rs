//! The `[hosted]` section: the key of hosted item ids and the bounds of the store that maps
//! hosted items back to the gateway's pairs on the next turn (docs/hosted.md).
//!
//! ```toml
//! [hosted]
//! key = "…"                 # or TOOLPULSE_HOSTED_KEY; default: random per process
//! max_entries = 100000      # pairs kept
//! max_bytes = 268435456     # bytes of pairs kept (256 MiB)
//! ttl_ms = 86400000         # a pair is kept this long (24 h)
//! max_json_bytes = 16777216 # a non-streaming response read whole to present it (16 MiB)
//! max_mapped_body_bytes = 8388608 # a next turn's body once mapped back (8 MiB)
//! ```

use std::sync::LazyLock;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::error::{ConfigError, Invalid};
use crate::core::ids::Key;

/// The environment variable that gives the key when the file does not.
pub const HOSTED_KEY_ENV: &str = "TOOLPULSE_HOSTED_KEY";

pub const DEFAULT_MAX_ENTRIES: usize = 100_000;
pub const DEFAULT_MAX_BYTES: usize = 256 << 20;
pub const DEFAULT_TTL_MS: u64 = 24 * 3600 * 1000;
pub const DEFAULT_MAX_JSON_BYTES: usize = 16 << 20;
/// Twice the read limit: a body read whole (4 MiB at most) whose `item_reference`s each become
/// a call and its output may grow, but not without bound (40,000 references to one pair of
/// 10 KB would be 400 MB).
pub const DEFAULT_MAX_MAPPED_BODY_BYTES: usize = 8 << 20;
/// A key shorter than this is refused (HMAC wants at least the hash's strength).
pub const MIN_KEY_BYTES: usize = 16;

/// This process's key, used when the config names none: random, and the same for every config
/// the process loads, so a reload does not orphan the ids already given out.
static PROCESS_KEY: LazyLock<Key> = LazyLock::new(|| {
    let mut bytes = [0u8; 32];
    // An OS without randomness cannot run a TLS client either; a zero key still gives ids
    // that verify within the process, only forgeable: say so loudly.
    if getrandom::fill(&mut bytes).is_err() {
        tracing::error!("no randomness for the hosted id key: set [hosted] key");
    }
    Key::new(&bytes)
});

/// The process's random key.
pub fn process_key() -> Key {
    PROCESS_KEY.clone()
}

#[derive(Debug, Clone, PartialEq)]
pub struct HostedConfig {
    pub key: Key,
    /// Whether the key came from the config (the file or the environment), not the process.
    pub key_configured: bool,
    pub max_entries: usize,
    pub max_bytes: usize,
    pub ttl: Duration,
    pub max_json_bytes: usize,
    /// The largest body a next turn's mapping may build; past it the client gets a 400.
    pub max_mapped_body_bytes: usize,
}

impl Default for HostedConfig {
    fn default() -> Self {
        HostedConfig {
            key: process_key(),
            key_configured: false,
            max_entries: DEFAULT_MAX_ENTRIES,
            max_bytes: DEFAULT_MAX_BYTES,
            ttl: Duration::from_millis(DEFAULT_TTL_MS),
            max_json_bytes: DEFAULT_MAX_JSON_BYTES,
            max_mapped_body_bytes: DEFAULT_MAX_MAPPED_BODY_BYTES,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawHosted {
    pub(super) key: Option<Spanned<String>>,
    pub(super) max_entries: Spanned<usize>,
    pub(super) max_bytes: usize,
    pub(super) ttl_ms: Spanned<u64>,
    pub(super) max_json_bytes: usize,
    pub(super) max_mapped_body_bytes: Spanned<usize>,
}

impl Default for RawHosted {
    fn default() -> Self {
        RawHosted {
            key: None,
            max_entries: Spanned::new(0..0, DEFAULT_MAX_ENTRIES),
            max_bytes: DEFAULT_MAX_BYTES,
            ttl_ms: Spanned::new(0..0, DEFAULT_TTL_MS),
            max_json_bytes: DEFAULT_MAX_JSON_BYTES,
            max_mapped_body_bytes: Spanned::new(0..0, DEFAULT_MAX_MAPPED_BODY_BYTES),
        }
    }
}

pub(super) fn hosted(
    raw: &RawHosted,
    env_key: Option<&str>,
    invalid: Invalid,
) -> Result<HostedConfig, ConfigError> {
    let key = match (&raw.key, env_key) {
        (Some(key), _) => Some((key.get_ref().as_str(), key.span())),
        (None, Some(key)) => Some((key, 0..0)),
        (None, None) => None,
    };
    if let Some((key, span)) = &key
        && key.len() < MIN_KEY_BYTES
    {
        let message = format!("must be at least {MIN_KEY_BYTES} bytes (e.g. openssl rand -hex 32)");
        return Err(invalid("hosted.key".into(), span.clone(), message));
    }
    if *raw.max_entries.get_ref() == 0 {
        let span = raw.max_entries.span();
        return Err(invalid(
            "hosted.max_entries".into(),
            span,
            "must be at least 1".into(),
        ));
    }
    if *raw.ttl_ms.get_ref() == 0 {
        let span = raw.ttl_ms.span();
        return Err(invalid(
            "hosted.ttl_ms".into(),
            span,
            "must be at least 1".into(),
        ));
    }
    if *raw.max_mapped_body_bytes.get_ref() == 0 {
        let span = raw.max_mapped_body_bytes.span();
        return Err(invalid(
            "hosted.max_mapped_body_bytes".into(),
            span,
            "must be at least 1".into(),
        ));
    }
    Ok(HostedConfig {
        key_configured: key.is_some(),
        key: key.map_or_else(process_key, |(k, _)| Key::new(k.as_bytes())),
        max_entries: *raw.max_entries.get_ref(),
        max_bytes: raw.max_bytes,
        ttl: Duration::from_millis(*raw.ttl_ms.get_ref()),
        max_json_bytes: raw.max_json_bytes,
        max_mapped_body_bytes: *raw.max_mapped_body_bytes.get_ref(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_key_is_one_per_process() {
        assert_eq!(process_key(), process_key());
        assert_eq!(format!("{:?}", process_key()), "Key([REDACTED])");
    }
}
