//! What the core reads of the configuration, as one value: the config builds it
//! (`Config::settings`), every stream shares it, and no core module knows the config's type.

use std::time::Duration;

use crate::core::ids::Key;
use crate::core::lifecycle::classify::{Classifier, FailureRules};
use crate::core::profile::Profile;
use crate::core::sanitize::Sanitizer;

/// The settings of every stream's rewriter.
#[derive(Debug, Clone)]
pub struct Settings {
    pub limits: Limits,
    /// How long a running tool may leave the client without bytes before a heartbeat comment;
    /// zero turns heartbeats off.
    pub heartbeat: Duration,
    /// The profiles of every stream, unless a request picks others.
    pub profiles: Vec<Profile>,
    pub classifier: Classifier,
    pub failure: FailureRules,
    pub sanitizer: Sanitizer,
    /// The templates of each `[[tools]]` rule, by rule index.
    pub templates: Vec<ToolTemplates>,
    /// The key of hosted item ids.
    pub key: Key,
}

/// The bounds on what one stream holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// An event longer than this is forwarded raw, uninterpreted, without being buffered whole.
    pub max_event_bytes: usize,
    /// Tool calls tracked at once per stream; calls beyond it are forwarded without events.
    pub max_open_calls: usize,
    /// What one stream's open calls may hold together (names, ids, arguments); a call past it
    /// is forwarded without events, one already shown loses its arguments.
    pub max_open_call_bytes: usize,
}

/// Per-tool strings for the profiles (`[[tools]] display/summary/count/server_label`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolTemplates {
    /// "Searching the web for “{query}”…": `{name}` placeholders from the call's arguments.
    pub display: Option<String>,
    /// "Found {count} results": `{count}`, `{tool}` and argument placeholders.
    pub summary: Option<String>,
    /// A JSON pointer into the tool's output at the result list (its length is the count) or a
    /// number.
    pub count: Option<String>,
    /// The `server_label` of the call's `mcp_call` companion item (profile `openai`).
    pub server_label: Option<String>,
}
