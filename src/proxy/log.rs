//! The record of one request, written when its response body is done (or dropped): one
//! structured log line and the per-request metrics. It never holds bodies or header values, so
//! credentials (`authorization`, `cookie`, `x-api-key`) cannot reach the logs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::Method;

use crate::core::rewrite::Stats;
use crate::features::telemetry::{RequestEnd, RequestSpan};
use crate::metrics::{Metrics, ProgressOutcome, ProgressSource, Response, labels};

/// How a rewritten stream ended: the metric's words are the log's.
pub use crate::metrics::StreamEnd;

pub struct RequestLog {
    metrics: Arc<Metrics>,
    method: Method,
    path: String,
    started: Instant,
    pub status: u16,
    pub response: Response,
    pub upstream_latency: Option<Duration>,
    /// The URL the upstream answered 404 (scheme, authority, path; never the query): a wrong
    /// path prefix in the upstream URL shows as a 404 whose cause the client's path hides.
    pub not_found: Option<String>,
    pub bytes_out: u64,
    /// Set for rewritten streams.
    pub stream: Option<(StreamEnd, Stats)>,
    pub tool_calls: u64,
    /// The request's server span, when tracing is on; ended with this record.
    pub span: Option<RequestSpan>,
}

impl RequestLog {
    pub fn new(metrics: Arc<Metrics>, method: Method, path: String) -> Self {
        RequestLog {
            metrics,
            method,
            path,
            started: Instant::now(),
            status: 0,
            response: Response::ProxyError,
            upstream_latency: None,
            not_found: None,
            bytes_out: 0,
            stream: None,
            tool_calls: 0,
            span: None,
        }
    }
}

impl RequestLog {
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }
}

impl Drop for RequestLog {
    fn drop(&mut self) {
        let m = &self.metrics;
        m.requests_answered(self.response).inc();
        m.bytes_out.inc_by(self.bytes_out);
        let duration_ms = self.started.elapsed().as_millis() as u64;
        let upstream_ms = self.upstream_latency.map(|d| d.as_millis() as u64);
        let (end, stats) = match self.stream {
            Some((end, stats)) => {
                m.streams_ended(end).inc();
                m.streams_active.dec();
                m.events_uninterpreted
                    .inc_by(stats.unreadable + stats.oversize_events);
                for (rule, n) in stats.violations.broken() {
                    let rule = labels::UpstreamViolations {
                        rule: rule.as_str(),
                    };
                    m.upstream_violations.get_or_create(&rule).inc_by(n);
                }
                if stats.violations.any() {
                    // Once per stream, however often: a gateway that breaks a rule breaks it
                    // in every event of a kind.
                    tracing::info!(
                        rules = %stats.violations,
                        path = %self.path,
                        "the upstream broke stream rules (docs/stream-rules.md): mended or forwarded as they were"
                    );
                }
                untracked(m, &stats, &self.path);
                // Reports a newer one replaced before they reached the client.
                if stats.progress_coalesced > 0 {
                    let (source, coalesced) = (ProgressSource::Stream, ProgressOutcome::Coalesced);
                    m.progress(source, coalesced, stats.progress_coalesced);
                }
                (Some(end.as_str()), stats)
            }
            None => (None, Stats::default()),
        };
        tracing::info!(
            method = %self.method,
            path = %self.path,
            status = self.status,
            response = self.response.as_str(),
            upstream_url = self.not_found.as_deref().map(tracing::field::display),
            upstream_ms,
            duration_ms,
            stream_end = end,
            events_in = stats.events_in,
            events_injected = stats.injected,
            events_uninterpreted = stats.unreadable + stats.oversize_events,
            tool_calls = self.tool_calls,
            bytes_out = self.bytes_out,
            "request"
        );
        if let Some(span) = self.span.take() {
            span.end(&RequestEnd {
                status: self.status,
                response: self.response,
                stream: self.stream,
                bytes_out: self.bytes_out,
            });
        }
    }
}

/// Counts (and says once per stream) what the stream's limits left alone: calls forwarded
/// untracked, calls shown without their arguments, pairs not stored for want of them, and
/// events not injected for want of a `sequence_number`.
fn untracked(m: &crate::metrics::Metrics, stats: &Stats, path: &str) {
    let untracked = stats.untracked;
    for (reason, n) in untracked.by_reason() {
        if n > 0 {
            let reason = labels::Untracked { reason };
            m.tool_calls_untracked.get_or_create(&reason).inc_by(n);
        }
    }
    m.tool_call_arguments_dropped
        .inc_by(untracked.arguments_dropped);
    if untracked.any() || stats.pairs_unkept > 0 || stats.numbers_exhausted > 0 {
        let [open_calls, name_bytes, id_bytes, held_bytes] = untracked.by_reason().map(|r| r.1);
        tracing::warn!(
            path = %path,
            open_calls,
            name_bytes,
            id_bytes,
            held_bytes,
            arguments_dropped = untracked.arguments_dropped,
            pairs_unkept = stats.pairs_unkept,
            numbers_exhausted = stats.numbers_exhausted,
            "the upstream's stream went past toolpulse's per-stream limits ([limits]): those tool \
             calls were forwarded as sent, without lifecycle events or arguments"
        );
    }
}
