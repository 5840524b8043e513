//! Prometheus metrics (prometheus-client), shared by every stream of one process and served as
//! text on the admin listener's `/metrics`. Label values come from code ([`labels`]), never
//! from the upstream, so the number of series stays bounded.

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

pub use labels::{
    BodyRefusal, BusOp, ConnectionClose, ExportOutcome, HostedRefusal, Listener, Mapping,
    McpOutcome, ProgressOutcome, ProgressSource, Reload, Response, SpanOutcome, StreamEnd,
    Unfollowed, UpstreamCause,
};

pub mod labels;
mod taken;

fn duration_histogram() -> Histogram {
    // 10 ms … ~160 s: tools run from milliseconds (a lookup) to minutes (a deep search).
    Histogram::new(exponential_buckets(0.01, 2.0, 15))
}

pub struct Metrics {
    registry: Registry,
    pub requests: Family<labels::Requests, Counter>,
    pub streams_active: Gauge,
    pub streams: Family<labels::Streams, Counter>,
    pub tool_calls: Family<labels::ToolCalls, Counter>,
    pub tool_duration: Family<labels::ToolKind, Histogram, fn() -> Histogram>,
    pub events_injected: Family<labels::EventsInjected, Counter>,
    pub events_uninterpreted: Counter,
    pub upstream_errors: Family<labels::UpstreamErrors, Counter>,
    pub bytes_in: Counter,
    pub bytes_out: Counter,
    pub connections_active: Gauge,
    pub connections_rejected: Counter,
    pub config_reloads: Family<labels::ConfigReloads, Counter>,
    pub mcp_requests: Family<labels::McpRequests, Counter>,
    pub mcp_connections_rejected: Counter,
    pub progress: Family<labels::Progress, Counter>,
    pub mcp_bound_calls: Gauge,
    pub progress_bus_errors: Family<labels::BusErrors, Counter>,
    pub progress_bus_up: Gauge,
    /// Finished spans by what became of them: exported, dropped (queue full), failed (export).
    pub telemetry_spans: Family<labels::TelemetrySpans, Counter>,
    /// Export requests to the OTLP collector, by result (ok, error).
    pub telemetry_exports: Family<labels::TelemetryExports, Counter>,
    /// Hosted items of next-turn requests, by how they were mapped back: store, content;
    /// and companions removed.
    pub hosted_mappings: Family<labels::HostedMappings, Counter>,
    /// Pairs kept for the next turn (store).
    pub hosted_pairs_stored: Counter,
    /// Next-turn requests refused (400) because their hosted items cannot be mapped back, by
    /// reason: too_large, expired, evicted, another_caller, not_kept, unverified, ambiguous,
    /// unreadable.
    pub hosted_refusals: Family<labels::HostedRefusals, Counter>,
    /// Upstream events that broke a stream rule toolpulse had to work around, by rule.
    pub upstream_violations: Family<labels::UpstreamViolations, Counter>,
    /// Tool calls left as the upstream sent them for a per-stream limit, by reason
    /// (open_calls, name_bytes, id_bytes, held_bytes).
    pub tool_calls_untracked: Family<labels::Untracked, Counter>,
    /// Tool calls shown without their arguments: over 1 MiB, or past the stream's
    /// `[limits] max_open_call_bytes`.
    pub tool_call_arguments_dropped: Counter,
    /// Request bodies not forwarded, by listener and reason (timeout, budget, unreadable).
    pub request_bodies_refused: Family<labels::BodiesRefused, Counter>,
    /// Client connections toolpulse closed, by listener and reason (no_request, idle,
    /// send_timeout, evicted).
    pub client_connections_closed: Family<labels::ConnectionsClosed, Counter>,
    /// Admin listener connections answered 503 because `[admin] max_connections` were open.
    pub admin_connections_rejected: Counter,
    /// MCP `tools/call`s forwarded without being followed, by cause (connection_share,
    /// registry_full, request_share: past the 64 a POST may have followed).
    pub mcp_calls_unfollowed: Family<labels::McpUnfollowed, Counter>,
    /// `requests` and `streams` by label value, taken once ([`taken`]).
    requests_taken: taken::Taken<{ Response::COUNT }>,
    streams_taken: taken::Taken<{ StreamEnd::COUNT }>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut m = Metrics {
            registry: Registry::with_prefix("toolpulse"),
            requests: Family::default(),
            streams_active: Gauge::default(),
            streams: Family::default(),
            tool_calls: Family::default(),
            tool_duration: Family::new_with_constructor(duration_histogram),
            events_injected: Family::default(),
            events_uninterpreted: Counter::default(),
            upstream_errors: Family::default(),
            bytes_in: Counter::default(),
            bytes_out: Counter::default(),
            connections_active: Gauge::default(),
            connections_rejected: Counter::default(),
            config_reloads: Family::default(),
            mcp_requests: Family::default(),
            mcp_connections_rejected: Counter::default(),
            progress: Family::default(),
            mcp_bound_calls: Gauge::default(),
            progress_bus_errors: Family::default(),
            progress_bus_up: Gauge::default(),
            telemetry_spans: Family::default(),
            telemetry_exports: Family::default(),
            hosted_mappings: Family::default(),
            hosted_pairs_stored: Counter::default(),
            hosted_refusals: Family::default(),
            upstream_violations: Family::default(),
            tool_calls_untracked: Family::default(),
            tool_call_arguments_dropped: Counter::default(),
            request_bodies_refused: Family::default(),
            client_connections_closed: Family::default(),
            admin_connections_rejected: Counter::default(),
            mcp_calls_unfollowed: Family::default(),
            requests_taken: taken::Taken::default(),
            streams_taken: taken::Taken::default(),
        };
        let r = &mut m.registry;
        r.register(
            "requests",
            "Requests answered, by how the response was made",
            m.requests.clone(),
        );
        r.register(
            "streams_active",
            "Event streams being rewritten now",
            m.streams_active.clone(),
        );
        r.register(
            "streams",
            "Event streams ended, by how they ended",
            m.streams.clone(),
        );
        r.register(
            "tool_calls",
            "Tool calls seen, by kind and outcome",
            m.tool_calls.clone(),
        );
        r.register(
            "tool_duration_seconds",
            "Tool run time as measured by the proxy, by kind",
            m.tool_duration.clone(),
        );
        r.register(
            "events_injected",
            "Lifecycle events injected, by type",
            m.events_injected.clone(),
        );
        r.register(
            "events_uninterpreted",
            "Upstream events forwarded raw because they could not be read (fail-open)",
            m.events_uninterpreted.clone(),
        );
        r.register(
            "upstream_errors",
            "Upstream failures, by cause",
            m.upstream_errors.clone(),
        );
        r.register(
            "upstream_bytes",
            "Body bytes received from upstreams",
            m.bytes_in.clone(),
        );
        r.register(
            "client_bytes",
            "Body bytes sent to clients",
            m.bytes_out.clone(),
        );
        r.register(
            "connections_active",
            "Client connections open now",
            m.connections_active.clone(),
        );
        r.register(
            "connections_rejected",
            "Client connections answered 503 because max_connections were open",
            m.connections_rejected.clone(),
        );
        r.register(
            "request_bodies_refused",
            "Request bodies not forwarded, by listener and reason (timeout: slower than \
             [clients] body_timeout_ms; budget: over body_buffer_bytes; peer_share: over \
             body_buffer_bytes_per_peer; connection_share: over \
             body_buffer_bytes_per_connection; unreadable: cut short or malformed, a streamed \
             body's included)",
            m.request_bodies_refused.clone(),
        );
        r.register(
            "client_connections_closed",
            "Client connections toolpulse closed, by listener and reason (no_request: no \
             request head within head_timeout_ms of the accept or, on HTTP/1, of the previous \
             response; idle: idle_timeout_ms; send_timeout: no byte of a response taken within \
             send_timeout_ms; evicted: admin connections without a request in flight, the \
             oldest first, to admit a new one over [admin] max_connections)",
            m.client_connections_closed.clone(),
        );
        r.register(
            "admin_connections_rejected",
            "Admin listener connections answered 503 because [admin] max_connections were open",
            m.admin_connections_rejected.clone(),
        );
        r.register(
            "mcp_calls_unfollowed",
            "MCP tools/call requests forwarded without their progress followed, by cause \
             (connection_share: the connection has its share of the registry; registry_full; \
             request_share: past the 64 one POST may have followed)",
            m.mcp_calls_unfollowed.clone(),
        );
        r.register(
            "config_reloads",
            "SIGHUP config reloads, by result",
            m.config_reloads.clone(),
        );
        r.register(
            "mcp_requests",
            "Requests forwarded by the MCP front, by server and outcome",
            m.mcp_requests.clone(),
        );
        r.register(
            "mcp_connections_rejected",
            "MCP listener connections answered 503 because [mcp] max_connections were open",
            m.mcp_connections_rejected.clone(),
        );
        r.register(
            "progress",
            "Progress reports, by source (mcp, http) and what became of them",
            m.progress.clone(),
        );
        r.register(
            "mcp_bound_calls",
            "MCP tools/call requests whose progress is followed now",
            m.mcp_bound_calls.clone(),
        );
        r.register(
            "progress_bus_errors",
            "Progress bus (Redis) operations that failed, timed out or were skipped, by operation",
            m.progress_bus_errors.clone(),
        );
        r.register(
            "progress_bus_up",
            "Whether the progress bus (Redis) is reachable now (1) or down or not configured (0)",
            m.progress_bus_up.clone(),
        );
        r.register(
            "telemetry_spans",
            "OpenTelemetry spans finished, by what became of them (exported, dropped: the export \
             queue was full, failed: the export failed)",
            m.telemetry_spans.clone(),
        );
        r.register(
            "telemetry_exports",
            "Export requests to the OTLP collector, by result (ok, error)",
            m.telemetry_exports.clone(),
        );
        r.register(
            "hosted_mappings",
            "Hosted items of next-turn requests by how they were mapped back (store, content), and companions removed",
            m.hosted_mappings.clone(),
        );
        r.register(
            "hosted_refusals",
            "Next-turn requests refused because their hosted items cannot be mapped back, by reason (too_large, expired, evicted, another_caller, not_kept, unverified, ambiguous, unreadable)",
            m.hosted_refusals.clone(),
        );
        r.register(
            "hosted_pairs_stored",
            "Gateway pairs kept for the next turn behind hosted items",
            m.hosted_pairs_stored.clone(),
        );
        r.register(
            "upstream_violations",
            "Upstream events that broke a stream rule toolpulse worked around, by rule",
            m.upstream_violations.clone(),
        );
        r.register(
            "tool_calls_untracked",
            "Tool calls forwarded as the upstream sent them, without lifecycle events, for a \
             per-stream limit, by reason (open_calls: [limits] max_open_calls; name_bytes: a \
             name over 256 bytes; id_bytes: a call id or item id over 256 bytes; held_bytes: \
             [limits] max_open_call_bytes)",
            m.tool_calls_untracked.clone(),
        );
        r.register(
            "tool_call_arguments_dropped",
            "Tool calls shown without their arguments: over 1 MiB, or past the stream's \
             [limits] max_open_call_bytes",
            m.tool_call_arguments_dropped.clone(),
        );
        m
    }

    /// `requests` for requests answered as `response` (its counter taken once, [`taken`]).
    pub fn requests_answered(&self, response: Response) -> &Counter {
        let labels = || labels::Requests { response };
        self.requests_taken
            .get(&self.requests, response.index(), labels)
    }

    /// `streams` for streams that ended as `outcome` (its counter taken once).
    pub fn streams_ended(&self, outcome: StreamEnd) -> &Counter {
        let labels = || labels::Streams { outcome };
        self.streams_taken
            .get(&self.streams, outcome.index(), labels)
    }

    /// Counts `n` hosted items of a request mapped back (or companions removed) by `mapping`.
    pub fn hosted_mapped(&self, mapping: Mapping, n: u64) {
        if n > 0 {
            let label = labels::HostedMappings { outcome: mapping };
            self.hosted_mappings.get_or_create(&label).inc_by(n);
        }
    }

    /// Counts a next-turn request refused for its hosted items.
    pub fn hosted_refused(&self, reason: HostedRefusal) {
        let label = labels::HostedRefusals { reason };
        self.hosted_refusals.get_or_create(&label).inc();
    }

    /// Counts a finished tool call; `kind` and `outcome` are the core's words.
    pub fn tool_call(&self, kind: &'static str, outcome: &'static str, duration: Duration) {
        self.tool_calls
            .get_or_create(&labels::ToolCalls { kind, outcome })
            .inc();
        self.tool_duration
            .get_or_create(&labels::ToolKind { kind })
            .observe(duration.as_secs_f64());
    }

    /// Counts `n` progress reports from `source` by what became of them.
    pub fn progress(&self, source: ProgressSource, outcome: ProgressOutcome, n: u64) {
        let label = labels::Progress { source, outcome };
        self.progress.get_or_create(&label).inc_by(n);
    }

    pub fn request_body_refused(&self, listener: Listener, reason: BodyRefusal) {
        let label = labels::BodiesRefused { listener, reason };
        self.request_bodies_refused.get_or_create(&label).inc();
    }

    /// `n` MCP calls forwarded without being followed, for `cause`.
    pub fn mcp_unfollowed(&self, cause: Unfollowed, n: u64) {
        let calls = self
            .mcp_calls_unfollowed
            .get_or_create(&labels::McpUnfollowed { cause });
        calls.inc_by(n);
    }

    pub fn connection_closed(&self, listener: Listener, reason: ConnectionClose) {
        let label = labels::ConnectionsClosed { listener, reason };
        self.client_connections_closed.get_or_create(&label).inc();
    }

    pub fn upstream_error(&self, cause: UpstreamCause) {
        let label = labels::UpstreamErrors { cause };
        self.upstream_errors.get_or_create(&label).inc();
    }

    pub fn config_reload(&self, outcome: Reload) {
        let label = labels::ConfigReloads { outcome };
        self.config_reloads.get_or_create(&label).inc();
    }

    /// Counts `n` operations of the progress bus that failed, timed out or were skipped.
    pub fn bus_error(&self, op: BusOp, n: u64) {
        let label = labels::BusErrors { op };
        self.progress_bus_errors.get_or_create(&label).inc_by(n);
    }

    /// The Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("writing to a String cannot fail");
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_labels_and_histograms() {
        let m = Metrics::new();
        m.tool_call("web_search", "completed", Duration::from_millis(1500));
        m.events_injected
            .get_or_create(&labels::EventsInjected {
                r#type: "response.mcp_call.failed",
            })
            .inc();
        m.upstream_error(UpstreamCause::Unreachable);
        m.connection_closed(Listener::Admin, ConnectionClose::SendTimeout);
        let text = m.encode();
        assert!(
            text.contains(r#"toolpulse_tool_calls_total{kind="web_search",outcome="completed"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"toolpulse_tool_duration_seconds_count{kind="web_search"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"toolpulse_events_injected_total{type="response.mcp_call.failed"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"toolpulse_upstream_errors_total{cause="unreachable"} 1"#),
            "{text}"
        );
        let closed = r#"toolpulse_client_connections_closed_total{listener="admin",reason="send_timeout"} 1"#;
        assert!(text.contains(closed), "{text}");
        assert!(text.ends_with("# EOF\n"));
    }
}
