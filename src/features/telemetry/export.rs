//! Getting finished spans to the collector without ever slowing a stream.
//!
//! [`Queue`] is the tracer's span processor: ending a span hands its data to a bounded channel
//! with `try_send` (no lock held, no waiting); when the channel is full the span is dropped and
//! counted. One task ([`run`]) takes spans off the channel, batches them (up to
//! [`MAX_BATCH_SPANS`], or whatever arrived within [`BATCH_DELAY`]) and exports one batch at a
//! time. So a slow or unreachable collector fills the queue, never the streams' tasks.
//!
//! The SDK's own `BatchSpanProcessor` is not used: it runs on a thread of its own, keeps no
//! count of the spans it drops where `/metrics` could read it, and logs every failed export.
//! Here drops and failures are counted (`toolpulse_telemetry_spans_total`,
//! `toolpulse_telemetry_exports_total`) and an unreachable collector is logged once per
//! outage, and once when it answers again.

use std::sync::Arc;
use std::time::Duration;

use opentelemetry::Context;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::metrics::{ExportOutcome, Metrics, SpanOutcome, labels};

/// Finished spans waiting for export at most; more are dropped (the SDK's default queue size).
pub const MAX_QUEUED_SPANS: usize = 2048;
/// Spans per export request at most (the SDK's default batch size).
pub const MAX_BATCH_SPANS: usize = 512;
/// How long a batch waits to fill up after its first span.
pub const BATCH_DELAY: Duration = Duration::from_millis(500);

/// The span processor: a bounded, non-blocking hand-off to the export task.
pub struct Queue {
    spans: mpsc::Sender<SpanData>,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("queued", &(MAX_QUEUED_SPANS - self.spans.capacity()))
            .finish()
    }
}

/// Asks the export task to send what it holds; answered when it has.
pub type Flush = oneshot::Sender<()>;

impl Queue {
    /// The processor and the receiving ends its export task reads.
    pub fn new(metrics: Arc<Metrics>) -> (Queue, mpsc::Receiver<SpanData>) {
        let (spans, receiver) = mpsc::channel(MAX_QUEUED_SPANS);
        (Queue { spans, metrics }, receiver)
    }
}

impl SpanProcessor for Queue {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        if self.spans.try_send(span).is_err() {
            count_spans(&self.metrics, SpanOutcome::Dropped, 1);
        }
    }

    /// Flushing is asynchronous (the telemetry's own `flush`, which drains this queue):
    /// blocking here could stall the runtime thread the caller is on.
    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }
}

fn count_spans(metrics: &Metrics, outcome: SpanOutcome, n: usize) {
    let label = labels::TelemetrySpans { outcome };
    metrics
        .telemetry_spans
        .get_or_create(&label)
        .inc_by(n as u64);
}

/// Whether the collector is known to be unreachable: its first failure is logged, the next
/// ones are not, until an export succeeds again.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outage {
    down: bool,
}

impl Outage {
    /// Records an export's result; returns what to log, if anything.
    pub fn record(&mut self, ok: bool) -> Option<OutageChange> {
        let change = match (self.down, ok) {
            (false, false) => Some(OutageChange::Began),
            (true, true) => Some(OutageChange::Ended),
            _ => None,
        };
        self.down = !ok;
        change
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum OutageChange {
    Began,
    Ended,
}

/// The export task: batches spans from `spans` and exports them until every sender is gone.
pub async fn run<E: SpanExporter>(
    exporter: E,
    mut spans: mpsc::Receiver<SpanData>,
    mut flushes: mpsc::Receiver<Flush>,
    metrics: Arc<Metrics>,
    endpoint: String,
) {
    let mut outage = Outage::default();
    let mut batch = Vec::with_capacity(MAX_BATCH_SPANS);
    let mut flushed: Option<Flush> = None;
    loop {
        tokio::select! {
            received = spans.recv_many(&mut batch, MAX_BATCH_SPANS) => {
                if received == 0 {
                    break;
                }
            }
            Some(flush) = flushes.recv() => flushed = Some(flush),
        }
        if flushed.is_none() {
            fill(&mut spans, &mut batch).await;
        } else {
            // A flush takes whatever is queued right now, without waiting for more.
            while batch.len() < MAX_BATCH_SPANS
                && let Ok(span) = spans.try_recv()
            {
                batch.push(span);
            }
        }
        if !batch.is_empty() {
            let n = batch.len();
            let ok = exporter.export(std::mem::take(&mut batch)).await;
            report(&metrics, &mut outage, &endpoint, n, ok);
            batch.reserve(MAX_BATCH_SPANS);
        }
        if let Some(flush) = flushed.take() {
            if spans.is_empty() {
                let _ = flush.send(());
            } else {
                flushed = Some(flush);
            }
        }
    }
}

/// Adds spans to `batch` until it is full or [`BATCH_DELAY`] has passed.
async fn fill(spans: &mut mpsc::Receiver<SpanData>, batch: &mut Vec<SpanData>) {
    let deadline = Instant::now() + BATCH_DELAY;
    while batch.len() < MAX_BATCH_SPANS {
        let room = MAX_BATCH_SPANS - batch.len();
        match tokio::time::timeout_at(deadline, spans.recv_many(batch, room)).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

fn report(metrics: &Metrics, outage: &mut Outage, endpoint: &str, n: usize, ok: OTelSdkResult) {
    let (spans, export) = match ok {
        Ok(()) => (SpanOutcome::Exported, ExportOutcome::Ok),
        Err(_) => (SpanOutcome::Failed, ExportOutcome::Error),
    };
    count_spans(metrics, spans, n);
    let label = labels::TelemetryExports { outcome: export };
    metrics.telemetry_exports.get_or_create(&label).inc();
    match (outage.record(ok.is_ok()), ok) {
        (Some(OutageChange::Began), Err(error)) => tracing::warn!(
            %endpoint,
            %error,
            "cannot export spans to the OTLP collector; streams are unaffected, spans are \
             dropped and counted (toolpulse_telemetry_spans_total) until it answers again"
        ),
        (Some(OutageChange::Ended), _) => {
            tracing::info!(%endpoint, "the OTLP collector answers again; spans are exported")
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_is_reported_once_and_its_end_once() {
        let mut outage = Outage::default();
        assert_eq!(outage.record(true), None);
        assert_eq!(outage.record(false), Some(OutageChange::Began));
        assert_eq!(outage.record(false), None);
        assert_eq!(outage.record(false), None);
        assert_eq!(outage.record(true), Some(OutageChange::Ended));
        assert_eq!(outage.record(true), None);
        assert_eq!(outage.record(false), Some(OutageChange::Began));
    }

    #[tokio::test]
    async fn a_full_queue_drops_and_counts_instead_of_waiting() {
        let metrics = Arc::new(Metrics::new());
        let (queue, _receiver) = Queue::new(metrics.clone());
        let span = super::super::tests::span_data("s");
        for _ in 0..MAX_QUEUED_SPANS + 3 {
            queue.on_end(span.clone());
        }
        let text = metrics.encode();
        assert!(
            text.contains(r#"toolpulse_telemetry_spans_total{outcome="dropped"} 3"#),
            "{text}"
        );
    }
}
