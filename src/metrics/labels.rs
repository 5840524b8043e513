//! The label sets of toolpulse's metrics, and the values their labels take: enums whose
//! variants are spelled once, beside the text Prometheus shows (the text is a public contract:
//! dashboards and alerts read it). Code above the metrics (net, features, proxy, app) reports
//! in these values, converting its own states into them; it never passes strings, so the
//! number of series stays bounded. Values the core spells (a tool's kind and outcome, an
//! injected event's type, a broken stream rule, an untracked call's reason) stay the core's
//! `&'static str`s: the core imports nothing above it, and its enums carry their own `as_str`.

use std::fmt::Write as _;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};

/// An enum of label values, each with its text, encoded as that text. Not prometheus-client's
/// derive: it writes a variant's identifier as it is, which would force `snake_case` variants
/// to keep today's label values.
macro_rules! label_values {
    ($(#[$meta:meta])* pub enum $name:ident {
        $($(#[$variant_meta:meta])* $variant:ident = $text:literal,)+
    }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
        pub enum $name {
            $($(#[$variant_meta])* $variant,)+
        }

        impl $name {
            /// How many values the label takes.
            pub const COUNT: usize = [$($text),+].len();

            /// The value's place among them, from 0.
            pub fn index(self) -> usize {
                self as usize
            }

            /// The label value, as the metric (and the log line) shows it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl EncodeLabelValue for $name {
            fn encode(&self, encoder: &mut LabelValueEncoder) -> std::fmt::Result {
                encoder.write_str(self.as_str())
            }
        }
    };
}

label_values! {
    /// How a request was answered.
    pub enum Response {
        /// An event stream, rewritten.
        Rewritten = "rewritten",
        /// Forwarded as the upstream sent it.
        Passthrough = "passthrough",
        /// A non-streaming response, presented (profile `hosted`).
        Presented = "presented",
        /// An AG-UI run (`[ag_ui]`), translated from the gateway's stream or error.
        AgUi = "ag_ui",
        /// toolpulse's own error (the upstream failed, or toolpulse is overloaded).
        ProxyError = "proxy_error",
        /// The request was refused before it was forwarded.
        InvalidRequest = "invalid_request",
    }
}

label_values! {
    /// How a rewritten stream ended.
    pub enum StreamEnd {
        /// The upstream finished its body.
        Completed = "completed",
        /// The upstream connection broke mid-stream.
        UpstreamError = "upstream_error",
        /// The client went away first.
        ClientGone = "client_gone",
        /// Ended by the proxy when the drain timeout ran out.
        Drained = "drained",
    }
}

label_values! {
    /// Why the upstream failed a request.
    pub enum UpstreamCause {
        Unreachable = "unreachable",
        HeaderTimeout = "header_timeout",
        Error = "error",
        Overloaded = "overloaded",
        /// The upstream's body broke off after the response had begun.
        BrokenStream = "broken_stream",
    }
}

label_values! {
    /// What became of a SIGHUP reload.
    pub enum Reload {
        Applied = "applied",
        Rejected = "rejected",
    }
}

label_values! {
    /// How a request on the MCP listener ended.
    pub enum McpOutcome {
        /// The server's answer was forwarded whole.
        Answered = "answered",
        ClientGone = "client_gone",
        /// The server's answer broke off.
        Broken = "broken",
        /// A stream ended by the drain.
        Ended = "ended",
        Unreachable = "unreachable",
        /// No response headers within the header timeout.
        Timeout = "timeout",
        UpstreamError = "upstream_error",
        NotFound = "not_found",
        InvalidHost = "invalid_host",
        InvalidToken = "invalid_token",
        BodyTimeout = "body_timeout",
        OverBudget = "over_budget",
        /// `/v1/progress`: the report was delivered (202).
        Delivered = "delivered",
        Unauthorized = "unauthorized",
        Unmatched = "unmatched",
        Ambiguous = "ambiguous",
        Rejected = "rejected",
    }
}

impl McpOutcome {
    /// Whether the server could not be reached, did not answer in time or broke off its
    /// answer: a failure of the server, whatever the status said.
    pub fn is_server_failure(self) -> bool {
        matches!(
            self,
            McpOutcome::Unreachable
                | McpOutcome::Timeout
                | McpOutcome::UpstreamError
                | McpOutcome::Broken
        )
    }
}

label_values! {
    /// Where a progress report came from.
    pub enum ProgressSource {
        /// An MCP server's `notifications/progress`.
        Mcp = "mcp",
        /// `POST /v1/progress`.
        Http = "http",
        /// Another replica, through the bus.
        Bus = "bus",
        /// The rewritten stream (reports coalesced before they reached the client).
        Stream = "stream",
    }
}

label_values! {
    /// What became of a progress report.
    pub enum ProgressOutcome {
        Delivered = "delivered",
        Unmatched = "unmatched",
        Ambiguous = "ambiguous",
        Late = "late",
        Waiting = "waiting",
        /// A newer report replaced it before it reached the client.
        Coalesced = "coalesced",
    }
}

label_values! {
    /// An operation of the progress bus (Redis).
    pub enum BusOp {
        Connect = "connect",
        Subscribe = "subscribe",
        Publish = "publish",
        PublishOversize = "publish_oversize",
        Bind = "bind",
        Find = "find",
        Queue = "queue",
        Register = "register",
        Unregister = "unregister",
        Refresh = "refresh",
        HostedPut = "hosted_put",
        HostedGet = "hosted_get",
    }
}

label_values! {
    /// What became of a finished span.
    pub enum SpanOutcome {
        Exported = "exported",
        /// The export queue was full.
        Dropped = "dropped",
        /// The export failed.
        Failed = "failed",
    }
}

label_values! {
    /// The result of an export request to the OTLP collector.
    pub enum ExportOutcome {
        Ok = "ok",
        Error = "error",
    }
}

label_values! {
    /// How a next turn's hosted item was mapped back, or what was removed with them.
    pub enum Mapping {
        /// From the pair kept in the store.
        Store = "store",
        /// From the content the item carries.
        Content = "content",
        /// A companion item removed.
        CompanionRemoved = "companion_removed",
    }
}

label_values! {
    /// Why a next-turn request was refused for its hosted items.
    pub enum HostedRefusal {
        TooLarge = "too_large",
        Expired = "expired",
        Evicted = "evicted",
        AnotherCaller = "another_caller",
        NotKept = "not_kept",
        Unverified = "unverified",
        Ambiguous = "ambiguous",
        Unreadable = "unreadable",
    }
}

label_values! {
    /// A listener of toolpulse.
    pub enum Listener {
        Proxy = "proxy",
        Mcp = "mcp",
        Admin = "admin",
    }
}

label_values! {
    /// Why a request body was not forwarded.
    pub enum BodyRefusal {
        /// Slower than `[clients] body_timeout_ms`.
        Timeout = "timeout",
        /// Over `body_buffer_bytes`.
        Budget = "budget",
        /// Over `body_buffer_bytes_per_peer`.
        PeerShare = "peer_share",
        /// Over `body_buffer_bytes_per_connection`.
        ConnectionShare = "connection_share",
        /// Cut short or malformed.
        Unreadable = "unreadable",
    }
}

label_values! {
    /// Why toolpulse closed a client connection.
    pub enum ConnectionClose {
        NoRequest = "no_request",
        Idle = "idle",
        SendTimeout = "send_timeout",
        /// An admin connection without a request in flight, to admit a new one.
        Evicted = "evicted",
    }
}

label_values! {
    /// Why MCP `tools/call`s were forwarded without being followed.
    pub enum Unfollowed {
        /// The connection has its share of the registry.
        ConnectionShare = "connection_share",
        RegistryFull = "registry_full",
        /// Past the calls one POST may have followed.
        RequestShare = "request_share",
    }
}

/// `toolpulse_requests_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Requests {
    pub response: Response,
}

/// `toolpulse_streams_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Streams {
    pub outcome: StreamEnd,
}

/// `toolpulse_tool_calls_total`: the core's words for the kind and the outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ToolCalls {
    pub kind: &'static str,
    pub outcome: &'static str,
}

/// `toolpulse_tool_duration_seconds`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ToolKind {
    pub kind: &'static str,
}

/// `toolpulse_events_injected_total`: the event's `type`, as the core wrote it.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventsInjected {
    pub r#type: &'static str,
}

/// `toolpulse_upstream_errors_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UpstreamErrors {
    pub cause: UpstreamCause,
}

/// `toolpulse_config_reloads_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConfigReloads {
    pub outcome: Reload,
}

/// `toolpulse_mcp_requests_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct McpRequests {
    /// A configured `[[mcp.servers]]` name (so the series stay bounded).
    pub server: String,
    pub outcome: McpOutcome,
}

/// `toolpulse_progress_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Progress {
    pub source: ProgressSource,
    pub outcome: ProgressOutcome,
}

/// `toolpulse_progress_bus_errors_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BusErrors {
    pub op: BusOp,
}

/// `toolpulse_telemetry_spans_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TelemetrySpans {
    pub outcome: SpanOutcome,
}

/// `toolpulse_telemetry_exports_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TelemetryExports {
    pub outcome: ExportOutcome,
}

/// `toolpulse_hosted_mappings_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HostedMappings {
    pub outcome: Mapping,
}

/// `toolpulse_hosted_refusals_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HostedRefusals {
    pub reason: HostedRefusal,
}

/// `toolpulse_upstream_violations_total`: the stream rule, as the core names it.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UpstreamViolations {
    pub rule: &'static str,
}

/// `toolpulse_tool_calls_untracked_total`: the limit, as the core names it.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Untracked {
    pub reason: &'static str,
}

/// `toolpulse_request_bodies_refused_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BodiesRefused {
    pub listener: Listener,
    pub reason: BodyRefusal,
}

/// `toolpulse_client_connections_closed_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConnectionsClosed {
    pub listener: Listener,
    pub reason: ConnectionClose,
}

/// `toolpulse_mcp_calls_unfollowed_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct McpUnfollowed {
    pub cause: Unfollowed,
}
