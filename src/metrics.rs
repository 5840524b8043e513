//! Prometheus metrics (prometheus-client), shared by every stream of one process and served as
//! text on the admin listener's `/metrics`. Label values are `&'static str`s from code, never
//! strings from the upstream, so the number of series stays bounded.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::features::progress::Delivery;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Outcome {
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindOutcome {
    pub kind: &'static str,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Kind {
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventType {
    pub r#type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Cause {
    pub cause: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ServerOutcome {
    /// A configured `[[mcp.servers]]` name (so the series stay bounded).
    pub server: String,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceOutcome {
    pub source: &'static str,
    pub outcome: &'static str,
}

/// An operation of the progress bus (Redis): register, unregister, refresh, bind, find,
/// publish, subscribe, connect, queue.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Op {
    pub op: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Response {
    pub response: &'static str,
}

fn duration_histogram() -> Histogram {
    // 10 ms … ~160 s: tools run from milliseconds (a lookup) to minutes (a deep search).
    Histogram::new(exponential_buckets(0.01, 2.0, 15))
}

pub struct Metrics {
    registry: Registry,
    pub requests: Family<Response, Counter>,
    pub streams_active: Gauge,
    pub streams: Family<Outcome, Counter>,
    pub tool_calls: Family<KindOutcome, Counter>,
    pub tool_duration: Family<Kind, Histogram, fn() -> Histogram>,
    pub events_injected: Family<EventType, Counter>,
    pub events_uninterpreted: Counter,
    pub upstream_errors: Family<Cause, Counter>,
    pub bytes_in: Counter,
    pub bytes_out: Counter,
    pub connections_active: Gauge,
    pub connections_rejected: Counter,
    pub config_reloads: Family<Outcome, Counter>,
    pub mcp_requests: Family<ServerOutcome, Counter>,
    pub mcp_connections_rejected: Counter,
    pub progress: Family<SourceOutcome, Counter>,
    pub mcp_bound_calls: Gauge,
    pub progress_bus_errors: Family<Op, Counter>,
    pub progress_bus_up: Gauge,
    /// Finished spans by what became of them: exported, dropped (queue full), failed (export).
    pub telemetry_spans: Family<Outcome, Counter>,
    /// Export requests to the OTLP collector, by result (ok, error).
    pub telemetry_exports: Family<Outcome, Counter>,
    /// Hosted items of next-turn requests, by how they were mapped back: store, content;
    /// and companions removed.
    pub hosted_mappings: Family<Outcome, Counter>,
    /// Pairs kept for the next turn (store).
    pub hosted_pairs_stored: Counter,
    /// Next-turn requests refused (400) because their hosted items cannot be mapped back, by
    /// reason: too_large, expired, evicted, another_caller, not_kept, unverified, ambiguous,
    /// unreadable.
    pub hosted_refusals: Family<HostedReason, Counter>,
    /// Upstream events that broke a stream rule toolpulse had to work around, by rule.
    pub upstream_violations: Family<Rule, Counter>,
    /// Tool calls left as the upstream sent them for a per-stream limit, by reason
    /// (open_calls, name_bytes, id_bytes, held_bytes).
    pub tool_calls_untracked: Family<Reason, Counter>,
    /// Tool calls shown without their arguments: over 1 MiB, or past the stream's
    /// `[limits] max_open_call_bytes`.
    pub tool_call_arguments_dropped: Counter,
    /// Request bodies not forwarded, by listener and reason (timeout, budget, unreadable).
    pub request_bodies_refused: Family<ListenerReason, Counter>,
    /// Client connections toolpulse closed, by listener and reason (no_request, idle,
    /// send_timeout, evicted).
    pub client_connections_closed: Family<ListenerReason, Counter>,
    /// Admin listener connections answered 503 because `[admin] max_connections` were open.
    pub admin_connections_rejected: Counter,
    /// MCP `tools/call`s forwarded without being followed, by cause (connection_share,
    /// registry_full, request_share: past the 64 a POST may have followed).
    pub mcp_calls_unfollowed: Family<Cause, Counter>,
}

/// A listener (proxy, mcp, admin) and why toolpulse refused or closed something of it.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ListenerReason {
    pub listener: &'static str,
    pub reason: &'static str,
}

/// Why a next-turn request was refused for its hosted items.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HostedReason {
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Reason {
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Rule {
    pub rule: &'static str,
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

    /// Counts how a request's hosted items were mapped back.
    pub fn hosted_mapped(&self, mapped: &crate::features::hosted::request::Mapped) {
        for (outcome, n) in [
            ("store", mapped.from_store),
            ("content", mapped.from_content),
            ("companion_removed", mapped.companions),
        ] {
            if n > 0 {
                self.hosted_mappings
                    .get_or_create(&Outcome { outcome })
                    .inc_by(n);
            }
        }
    }

    /// Counts a next-turn request refused for its hosted items (`reason` is one of a fixed few).
    pub fn hosted_refused(&self, reason: &'static str) {
        self.hosted_refusals
            .get_or_create(&HostedReason { reason })
            .inc();
    }

    pub fn tool_call(&self, kind: &'static str, outcome: &'static str, duration: Duration) {
        self.tool_calls
            .get_or_create(&KindOutcome { kind, outcome })
            .inc();
        self.tool_duration
            .get_or_create(&Kind { kind })
            .observe(duration.as_secs_f64());
    }

    /// Counts one progress report from `source` (`mcp` or `http`) by what the hub did with it.
    pub fn progress(&self, source: &'static str, delivery: Delivery) {
        let outcome = match delivery {
            Delivery::Delivered => "delivered",
            Delivery::Unmatched => "unmatched",
            Delivery::Ambiguous => "ambiguous",
            Delivery::Late => "late",
            Delivery::Waiting => "waiting",
        };
        let label = SourceOutcome { source, outcome };
        self.progress.get_or_create(&label).inc();
    }

    pub fn request_body_refused(&self, listener: &'static str, reason: &'static str) {
        let label = ListenerReason { listener, reason };
        self.request_bodies_refused.get_or_create(&label).inc();
    }

    /// `n` MCP calls forwarded without being followed, for `cause`.
    pub fn mcp_unfollowed(&self, cause: &'static str, n: u64) {
        let calls = self.mcp_calls_unfollowed.get_or_create(&Cause { cause });
        calls.inc_by(n);
    }

    pub fn connection_closed(&self, listener: &'static str, reason: &'static str) {
        let label = ListenerReason { listener, reason };
        self.client_connections_closed.get_or_create(&label).inc();
    }

    pub fn upstream_error(&self, cause: &'static str) {
        self.upstream_errors.get_or_create(&Cause { cause }).inc();
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
            .get_or_create(&EventType {
                r#type: "response.mcp_call.failed",
            })
            .inc();
        m.upstream_error("unreachable");
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
        assert!(text.ends_with("# EOF\n"));
    }
}
