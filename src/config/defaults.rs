//! Every key of the config file with its built-in default, read from the sections' own
//! defaults (`Raw*::default()` and the `DEFAULT_*` constants): what `toolpulse config
//! --defaults` prints, and what the configuration reference and `config/toolpulse.toml` are
//! checked against. A key without a default (an address to fill in, a secret) is printed
//! commented out, with an example.

use std::fmt::Write;

use toml::Value;

use super::{RawConfig, ag_ui, bus, clients, mcp, telemetry};
use crate::core::profiles::Profile;

/// One key of the config file.
#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    /// The section as written in its header: `proxy`, `mcp.servers` (an array of tables),
    /// `tools`.
    pub section: &'static str,
    pub name: &'static str,
    pub value: Default,
    /// What the key does, on one line.
    pub about: &'static str,
}

/// A key's built-in value.
#[derive(Debug, Clone, PartialEq)]
pub enum Default {
    /// This value (as TOML) when the key is absent.
    Value(String),
    /// No value of its own: an example, as TOML.
    Unset(String),
    /// A table of names the user picks; an example entry (`name = value`).
    Table(String),
}

/// The sections that are arrays of tables (`[[tools]]`), with no entry by default.
pub const ARRAY_SECTIONS: [&str; 2] = ["tools", "mcp.servers"];

/// Sections whose presence turns their feature on: printed commented out.
const SWITCH_SECTIONS: &[&str] = &["ag_ui"];

fn int(n: impl TryInto<i64>) -> Default {
    Default::Value(Value::Integer(n.try_into().unwrap_or(i64::MAX)).to_string())
}

fn text(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

fn strings<S: AsRef<str>>(list: impl IntoIterator<Item = S>) -> String {
    let list = list.into_iter().map(|s| Value::String(s.as_ref().into()));
    Value::Array(list.collect()).to_string()
}

fn profiles(list: &[Profile]) -> Default {
    Default::Value(strings(list.iter().map(|p| p.name())))
}

fn unset(example: String) -> Default {
    Default::Unset(example)
}

/// Each key's section, name and what it does, one a line, in the order `config --defaults`
/// prints them; [`value`] gives each its default.
const KEYS: &str = "\
tools match glob patterns on the function_call's name; the first rule that matches wins, then the built-in ones
tools kind mcp | web_search | file_search | function | ignore
tools server_label an mcp call's server_label (default \"gateway\")
tools display payload profiles: a human string, {name} = that argument
tools summary tool_call_end's summary: {count}, {tool} and argument placeholders
tools count a JSON pointer into the output at the result list (or a number)
failure output_patterns regexes on a tool's output text that mark it failed (besides status failed/incomplete and a non-null error)
failure kinds pattern = the error.kind the `tool` profile reports for it (default \"tool_error\")
heartbeat interval_ms `: keep-alive` after this long without output while a shown tool runs; 0: off
events profiles the profiles of every stream (at most one of hosted, openai, openai-inline)
events allowed_profiles the profiles a request may pick with x-toolpulse-profiles
sanitize redact_keys globs on payload keys (any depth, any case) whose values become \"[REDACTED]\"
sanitize max_string_bytes a payload string is cut here, on a UTF-8 boundary
sanitize max_payload_bytes a larger payload drops its bulk and says \"truncated\": true
hosted key HMAC key of hosted ids, 16 bytes or more (or TOOLPULSE_HOSTED_KEY); unset: shared through [progress] bus, else one per process
hosted max_entries next-turn pairs kept in memory
hosted max_bytes their bytes; a caller may hold a quarter, a response an eighth
hosted ttl_ms how long a pair is kept (24 h)
hosted max_json_bytes a non-streaming response read whole to present it
hosted max_mapped_body_bytes the body a next turn's mapping may build; over it: 400 mapped_body_too_large
limits max_event_bytes a larger event is forwarded as it arrives, unread
limits max_open_calls tool calls followed at once per stream
limits max_open_call_bytes names, ids and arguments of one stream's open calls together
proxy listen where clients connect (--listen)
proxy upstream the gateway's base URL, without /v1 (--upstream); required, no default
proxy upstream_ca extra PEM roots for an https upstream
proxy preserve_host forward the client's Host instead of the upstream's
proxy connect_timeout_ms connecting to the upstream (TCP and TLS); past it: 502
proxy header_timeout_ms from the request sent to the response head; past it: 504
proxy drain_timeout_ms on SIGTERM/SIGINT, how long streams in flight may run on
proxy max_connections client connections at once
proxy max_header_bytes the largest request head; at least 8192
admin listen /healthz, /readyz, /metrics (--admin-listen)
admin max_connections admin connections at once
clients head_timeout_ms a request head within this of the accept (HTTP/1: of the last response)
clients body_timeout_ms a body read whole arrives within this; a streamed one pauses at most this long
clients idle_timeout_ms no request in flight this long: closed (HTTP/2: GOAWAY)
clients send_timeout_ms a client that takes no byte of its response this long: closed
clients ping_interval_ms HTTP/2 pings this often
clients ping_timeout_ms an unanswered ping closes the connection after this
clients max_streams_per_connection concurrent HTTP/2 streams
clients body_buffer_bytes bodies read whole, held at once by all listeners; over it: 503
clients body_buffer_bytes_per_peer of it, one client address on one listener; unset: an eighth, at least two bodies
clients body_buffer_bytes_per_connection of it, one connection (HTTP/2: all its streams)
mcp listen the MCP front's address, the default when it runs; setting it (or a server) runs it
mcp max_connections MCP connections at once (this when unset)
mcp require_token the MCP paths want X-Toolpulse-Token: <[progress] token> too
mcp.servers name served at http://<[mcp] listen>/<name>
mcp.servers upstream the server's Streamable HTTP endpoint
mcp.servers call_name how the gateway names this server's tools (this when unset)
progress token Bearer token of POST /v1/progress (or TOOLPULSE_PROGRESS_TOKEN); required off loopback
progress bind_window_ms how long an MCP call may wait for its stream to show the call
progress min_interval_ms at most one progress event per call per interval
progress bus several replicas: Redis shared (TOOLPULSE_REDIS_URL wins); needs [mcp]
progress bus_prefix every Redis key and channel starts with \"<prefix>:\" (this when unset)
ag_ui path the AG-UI endpoint on the proxy listener (docs/ag-ui.md); setting the section runs it
ag_ui model the model when a run's forwardedProps.model names none; unset: such a run is a 400
telemetry otlp_endpoint OTLP/HTTP base URL, /v1/traces appended (or OTEL_EXPORTER_OTLP_ENDPOINT); unset: off
telemetry service_name service.name (or OTEL_SERVICE_NAME; this when unset)
telemetry sample_ratio share of new traces recorded (continued ones follow their parent)
telemetry record_payloads tool arguments and results as span attributes, sanitized
telemetry headers extra headers for the collector; ${NAME} is that environment variable
";

/// Every key, in the order `config --defaults` prints them.
pub fn keys() -> Vec<Key> {
    let raw = RawConfig::default();
    let mut keys = Vec::new();
    for line in KEYS.lines() {
        let mut parts = line.splitn(3, ' ');
        let (Some(section), Some(name), Some(about)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let value = value(&raw, section, name).unwrap_or_else(|| unset(String::new()));
        keys.push(Key {
            section,
            name,
            value,
            about,
        });
    }
    keys
}

/// The default of `[section] name`, from the section's own defaults; `None` for a key
/// [`KEYS`] names and this does not know (a unit test fails on it).
fn value(raw: &RawConfig, section: &str, name: &str) -> Option<Default> {
    let (proxy, admin, clients) = (&raw.proxy, &raw.admin, &raw.clients);
    let (progress, hosted, sanitize) = (&raw.progress, &raw.hosted, &raw.sanitize);
    let budget = *clients.body_buffer_bytes.get_ref();
    Some(match (section, name) {
        ("tools", "match") => unset(strings(["github_*", "jira_*"])),
        ("tools", "kind") => unset(text("mcp")),
        ("tools", "server_label") => unset(text("github")),
        ("tools", "display") => unset(text("Asking {repo}…")),
        ("tools", "summary") => unset(text("Found {count} results")),
        ("tools", "count") => unset(text("/results")),
        ("failure", "output_patterns") => Default::Value(strings(
            raw.failure.output_patterns.iter().map(|p| p.get_ref()),
        )),
        ("failure", "kinds") => Default::Table(format!(
            "{} = {}",
            text("^search failed: "),
            text("search_failed")
        )),
        ("heartbeat", "interval_ms") => int(raw.heartbeat.interval_ms),
        ("events", "profiles") => profiles(raw.events.profiles.get_ref()),
        ("events", "allowed_profiles") => profiles(&raw.events.allowed_profiles),
        ("sanitize", "redact_keys") => Default::Value(strings(sanitize.redact_keys.get_ref())),
        ("sanitize", "max_string_bytes") => int(sanitize.max_string_bytes),
        ("sanitize", "max_payload_bytes") => int(sanitize.max_payload_bytes),
        ("hosted", "key") => unset(text("…")),
        ("hosted", "max_entries") => int(*hosted.max_entries.get_ref()),
        ("hosted", "max_bytes") => int(hosted.max_bytes),
        ("hosted", "ttl_ms") => int(*hosted.ttl_ms.get_ref()),
        ("hosted", "max_json_bytes") => int(hosted.max_json_bytes),
        ("hosted", "max_mapped_body_bytes") => int(*hosted.max_mapped_body_bytes.get_ref()),
        ("limits", "max_event_bytes") => int(*raw.limits.max_event_bytes.get_ref()),
        ("limits", "max_open_calls") => int(*raw.limits.max_open_calls.get_ref()),
        ("limits", "max_open_call_bytes") => int(*raw.limits.max_open_call_bytes.get_ref()),
        ("proxy", "listen") => Default::Value(text(proxy.listen.get_ref())),
        ("proxy", "upstream") => unset(text("http://127.0.0.1:9000")),
        ("proxy", "upstream_ca") => unset(text("/etc/toolpulse/ca.pem")),
        ("proxy", "preserve_host") => Default::Value(proxy.preserve_host.to_string()),
        ("proxy", "connect_timeout_ms") => int(proxy.connect_timeout_ms),
        ("proxy", "header_timeout_ms") => int(proxy.header_timeout_ms),
        ("proxy", "drain_timeout_ms") => int(proxy.drain_timeout_ms),
        ("proxy", "max_connections") => int(*proxy.max_connections.get_ref()),
        ("proxy", "max_header_bytes") => int(*proxy.max_header_bytes.get_ref()),
        ("admin", "listen") => Default::Value(text(admin.listen.get_ref())),
        ("admin", "max_connections") => int(*admin.max_connections.get_ref()),
        ("clients", "head_timeout_ms") => int(*clients.head_timeout_ms.get_ref()),
        ("clients", "body_timeout_ms") => int(*clients.body_timeout_ms.get_ref()),
        ("clients", "idle_timeout_ms") => int(*clients.idle_timeout_ms.get_ref()),
        ("clients", "send_timeout_ms") => int(*clients.send_timeout_ms.get_ref()),
        ("clients", "ping_interval_ms") => int(*clients.ping_interval_ms.get_ref()),
        ("clients", "ping_timeout_ms") => int(*clients.ping_timeout_ms.get_ref()),
        ("clients", "max_streams_per_connection") => {
            int(*clients.max_streams_per_connection.get_ref())
        }
        ("clients", "body_buffer_bytes") => int(*clients.body_buffer_bytes.get_ref()),
        ("clients", "body_buffer_bytes_per_peer") => {
            unset(clients::default_peer_share(budget).to_string())
        }
        ("clients", "body_buffer_bytes_per_connection") => {
            unset(clients::default_connection_share(budget).to_string())
        }
        ("mcp", "listen") => unset(text(mcp::DEFAULT_MCP_LISTEN)),
        ("mcp", "max_connections") => unset(mcp::DEFAULT_MCP_MAX_CONNECTIONS.to_string()),
        ("mcp", "require_token") => unset(false.to_string()),
        ("mcp.servers", "name") => unset(text("github")),
        ("mcp.servers", "upstream") => unset(text("http://github-mcp:3000/mcp")),
        ("mcp.servers", "call_name") => unset(text(mcp::DEFAULT_CALL_NAME)),
        ("progress", "token") => unset(text("…")),
        ("progress", "bind_window_ms") => int(progress.bind_window_ms),
        ("progress", "min_interval_ms") => int(progress.min_interval_ms),
        ("progress", "bus") => unset(text("redis://redis:6379/0")),
        ("progress", "bus_prefix") => unset(text(bus::DEFAULT_BUS_PREFIX)),
        ("ag_ui", "path") => unset(text(ag_ui::DEFAULT_PATH)),
        ("ag_ui", "model") => unset(text("gpt-4.1")),
        ("telemetry", "otlp_endpoint") => unset(text("http://127.0.0.1:4318")),
        ("telemetry", "service_name") => unset(text(telemetry::DEFAULT_SERVICE_NAME)),
        ("telemetry", "sample_ratio") => {
            Default::Value(Value::Float(*raw.telemetry.sample_ratio.get_ref()).to_string())
        }
        ("telemetry", "record_payloads") => {
            Default::Value(raw.telemetry.record_payloads.to_string())
        }
        ("telemetry", "headers") => Default::Table(format!(
            "Authorization = {}",
            text("Basic ${LANGFUSE_AUTH}")
        )),
        _ => return None,
    })
}

/// The defaults as commented TOML: each section, each key with what it does; a key with no
/// default commented out with an example. Without its commented lines it is a config that
/// resolves to the built-in one.
pub fn defaults_toml() -> String {
    let mut out = String::from(
        "# toolpulse's built-in defaults (`toolpulse config --defaults`). Every key is optional:\n\
         # `key = value` is what applies without it; `# key = value` is an example for a key\n\
         # with no default of its own.\n",
    );
    let keys = keys();
    let mut section = "";
    for key in &keys {
        if key.section != section {
            section = key.section;
            let header = if ARRAY_SECTIONS.contains(&section) {
                format!("# [[{section}]]  (none by default)")
            } else if SWITCH_SECTIONS.contains(&section) {
                format!("# [{section}]  (off without the section)")
            } else {
                format!("[{section}]")
            };
            let _ = write!(out, "\n{header}\n");
        }
        let _ = writeln!(out, "# {}", key.about);
        let _ = match &key.value {
            Default::Value(value) => writeln!(out, "{} = {value}", key.name),
            Default::Unset(example) => writeln!(out, "# {} = {example}", key.name),
            Default::Table(entry) => {
                writeln!(out, "# [{}.{}]\n# {entry}", key.section, key.name)
            }
        };
    }
    out
}
