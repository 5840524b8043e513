//! The sections that shape the rewritten stream: `[[tools]]` (how calls are classified, and
//! their templates), `[failure]` (which outputs mean a failed call), `[heartbeat]`, `[limits]`,
//! `[events]` (the profiles) and `[sanitize]` (what of a call the events may show).

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::error::{ConfigError, Invalid};
use crate::core::lifecycle::classify::DEFAULT_PATTERN_KIND;
use crate::core::lifecycle::{Classifier, FailureRules, Kind};
use crate::core::profiles::Profile;
use crate::core::sanitize::Sanitizer;
use crate::core::settings::{Limits, ToolTemplates};

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

/// Validates `[[tools]]`: the classifier of call names, and each rule's templates.
pub(super) fn tools(
    raw: &[RawTool],
    invalid: Invalid,
) -> Result<(Classifier, Vec<ToolTemplates>), ConfigError> {
    let mut rules = Vec::new();
    for (i, tool) in raw.iter().enumerate() {
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
        let pattern = &raw[bad.rule].patterns.get_ref()[bad.pattern];
        let key = format!("tools[{}].match[{}]", bad.rule, bad.pattern);
        invalid(key, pattern.span(), bad.error.to_string())
    })?;

    let mut tool_templates = Vec::new();
    for (i, tool) in raw.iter().enumerate() {
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
    Ok((classifier, tool_templates))
}

/// Validates `[failure]`: its output patterns, and the `error.kind` of each.
pub(super) fn failure(raw: &RawFailure, invalid: Invalid) -> Result<FailureRules, ConfigError> {
    let patterns = &raw.output_patterns;
    let texts: Vec<String> = patterns.iter().map(|p| p.get_ref().clone()).collect();
    let kinds_table = raw.kinds.get_ref();
    if let Some(unknown) = kinds_table.keys().find(|k| !texts.contains(k)) {
        let message = format!("{unknown:?} is not one of failure.output_patterns");
        return Err(invalid("failure.kinds".into(), raw.kinds.span(), message));
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
    FailureRules::with_kinds(&texts, kinds).map_err(|(i, e)| {
        let key = format!("failure.output_patterns[{i}]");
        invalid(key, patterns[i].span(), e.to_string())
    })
}

/// Validates `[sanitize]`.
pub(super) fn sanitizer(raw: &RawSanitize, invalid: Invalid) -> Result<Sanitizer, ConfigError> {
    Sanitizer::new(
        raw.redact_keys.get_ref(),
        raw.max_string_bytes.max(1),
        raw.max_payload_bytes.max(1),
    )
    .map_err(|(i, e)| {
        let key = format!("sanitize.redact_keys[{i}]");
        invalid(key, raw.redact_keys.span(), e.to_string())
    })
}

/// Validates `[events]`: the profiles must go together.
pub(super) fn events(raw: &RawEvents, invalid: Invalid) -> Result<EventsConfig, ConfigError> {
    let profiles = &raw.profiles;
    crate::core::profiles::check_combination(profiles.get_ref())
        .map_err(|message| invalid("events.profiles".into(), profiles.span(), message))?;
    Ok(EventsConfig {
        profiles: profiles.get_ref().clone(),
        allowed_profiles: raw.allowed_profiles.clone(),
    })
}

/// The heartbeat interval of `[heartbeat]` (zero: off).
pub(super) fn heartbeat(raw: &RawHeartbeat) -> Duration {
    Duration::from_millis(raw.interval_ms)
}

/// Validates `[limits]`.
pub(super) fn limits(raw: &RawLimits, invalid: Invalid) -> Result<Limits, ConfigError> {
    let max_event_bytes = raw.max_event_bytes.clone();
    if !(MIN_MAX_EVENT_BYTES..=MAX_MAX_EVENT_BYTES).contains(max_event_bytes.get_ref()) {
        let message = format!("must be between {MIN_MAX_EVENT_BYTES} and {MAX_MAX_EVENT_BYTES}");
        return Err(invalid(
            "limits.max_event_bytes".into(),
            max_event_bytes.span(),
            message,
        ));
    }
    let max_open_calls = raw.max_open_calls.clone();
    if *max_open_calls.get_ref() == 0 {
        let message = "must be at least 1".to_string();
        return Err(invalid(
            "limits.max_open_calls".into(),
            max_open_calls.span(),
            message,
        ));
    }
    let max_open_call_bytes = raw.max_open_call_bytes.clone();
    if *max_open_call_bytes.get_ref() < MIN_MAX_OPEN_CALL_BYTES {
        let message = format!("must be at least {MIN_MAX_OPEN_CALL_BYTES}");
        return Err(invalid(
            "limits.max_open_call_bytes".into(),
            max_open_call_bytes.span(),
            message,
        ));
    }
    Ok(Limits {
        max_event_bytes: max_event_bytes.into_inner(),
        max_open_calls: max_open_calls.into_inner(),
        max_open_call_bytes: max_open_call_bytes.into_inner(),
    })
}
