//! Response bodies: upstream bytes passed through, an event stream rewritten as it arrives, or a
//! small body the proxy wrote itself; each carries its request's [`RequestLog`].
//!
//! The rewriting adapter is pull-based: upstream is read only when the client side polls, so a
//! slow client slows the upstream (TCP backpressure) instead of growing a buffer. It owns the
//! heartbeat timer: when the upstream is pending and the rewriter says a heartbeat is due, it
//! sends one. On upstream EOF or error, or when the proxy drains, it asks the rewriter to close
//! open calls and ends the body cleanly. Dropping it (client gone) drops the upstream body, which
//! closes that upstream connection.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::Instant;

use super::log::{RequestLog, StreamEnd};
use crate::core::rewrite::{Observation, Rewriter};
use crate::features::hosted::shared::Pairs;
use crate::features::hosted::store::{Pair, Tenant};
use crate::features::progress::local::StreamHandle;
use crate::features::unconfigured::{self, Reported};
use crate::metrics::{UpstreamCause, labels};
use crate::net::drain::Watch;
use crate::net::upstream::UpstreamBody;
use crate::net::upstream::body::BoxError;
use crate::proxy::wake::Wake;

type Polled = Poll<Option<Result<Frame<Bytes>, BoxError>>>;

/// Upstream frames read between two looks at the drain signal while the upstream never pauses;
/// otherwise it is looked at when the upstream is pending (an atomic load while the task's
/// waker stays the same, [`crate::net::drain::Watch`]).
const DRAIN_CHECK_EVERY: u32 = 64;

/// What the proxy sends back to the client.
pub struct ProxyBody {
    inner: Inner,
    /// Written when the body is dropped; `None` for bodies without a request (tests).
    log: Option<RequestLog>,
}

enum Inner {
    Passthrough(UpstreamBody),
    Rewritten(Box<RewriteBody>),
    AgUi(Box<super::ag_ui_body::AgUiBody>),
    Full(Option<Bytes>),
}

impl ProxyBody {
    pub fn full(bytes: Bytes) -> Self {
        ProxyBody {
            inner: Inner::Full(Some(bytes)),
            log: None,
        }
    }

    pub fn passthrough(upstream: UpstreamBody, log: RequestLog) -> Self {
        ProxyBody {
            inner: Inner::Passthrough(upstream),
            log: Some(log),
        }
    }

    pub fn rewritten(
        upstream: UpstreamBody,
        rewriter: Rewriter,
        drain: Watch,
        sinks: Sinks,
        mut log: RequestLog,
    ) -> Self {
        log.stream = Some((StreamEnd::ClientGone, rewriter.stats()));
        let mut body = RewriteBody::new(upstream, rewriter, drain, sinks.unconfigured, log);
        body.progress = sinks.progress;
        body.store = Some((sinks.store, sinks.tenant));
        ProxyBody {
            inner: Inner::Rewritten(Box::new(body)),
            log: None,
        }
    }

    /// An AG-UI run (it carries its own log).
    pub fn ag_ui(body: super::ag_ui_body::AgUiBody) -> Self {
        ProxyBody {
            inner: Inner::AgUi(Box::new(body)),
            log: None,
        }
    }

    pub fn with_log(mut self, log: RequestLog) -> Self {
        self.log = Some(log);
        self
    }
}

impl Body for ProxyBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Polled {
        let this = self.get_mut();
        let polled = match &mut this.inner {
            Inner::Passthrough(body) => Pin::new(body).poll_frame(cx),
            Inner::Rewritten(body) => return Pin::new(body.as_mut()).poll_frame(cx),
            Inner::AgUi(body) => return Pin::new(body.as_mut()).poll_frame(cx),
            Inner::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
        };
        if let (Poll::Ready(Some(Ok(frame))), Some(log)) = (&polled, &mut this.log)
            && let Some(data) = frame.data_ref()
        {
            log.bytes_out += data.len() as u64;
            if matches!(this.inner, Inner::Passthrough(_)) {
                log.metrics().bytes_in.inc_by(data.len() as u64);
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Inner::Passthrough(body) => body.is_end_stream(),
            Inner::Rewritten(body) => body.is_end_stream(),
            Inner::AgUi(body) => body.is_end_stream(),
            Inner::Full(bytes) => bytes.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Inner::Passthrough(body) => body.size_hint(),
            Inner::Rewritten(_) | Inner::AgUi(_) => SizeHint::default(),
            Inner::Full(bytes) => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64))
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Streaming,
    /// The last data frame went out; a trailers frame from upstream may still follow.
    Ended,
}

/// An upstream event stream, rewritten chunk by chunk.
/// Where a rewritten stream reports what it saw, beside its log.
pub struct Sinks {
    /// Tools that ran without a `[[tools]]` rule, once per proxy and name.
    pub unconfigured: Arc<Reported>,
    /// The stream's registration for out-of-band progress, when a progress source is on.
    pub progress: Option<StreamHandle>,
    /// The next-turn store of hosted items' pairs.
    pub store: Arc<Pairs>,
    /// Whose pairs this stream's are: the caller's, and this response's.
    pub tenant: Tenant,
}

pub struct RewriteBody {
    upstream: UpstreamBody,
    rewriter: Rewriter,
    /// Armed at the rewriter's next heartbeat time while the upstream is quiet.
    heartbeat: Wake,
    /// Completes when the proxy's drain timeout runs out.
    drain: Watch,
    /// Upstream frames read since the drain signal was last looked at.
    frames_unchecked: u32,
    trailers: Option<http::HeaderMap>,
    /// The rest of one upstream chunk's output, sent before the upstream is read again (its
    /// unchanged events as slices of the chunk).
    queued: VecDeque<Bytes>,
    state: State,
    end: StreamEnd,
    /// Where tools that ran without a `[[tools]]` rule are reported, once per proxy and name.
    unconfigured: Arc<Reported>,
    /// The stream's registration for out-of-band progress, when a progress source is on.
    progress: Option<StreamHandle>,
    /// The next-turn store of hosted items' pairs, and whose this stream's are.
    store: Option<(Arc<Pairs>, Tenant)>,
    log: RequestLog,
}

impl RewriteBody {
    fn new(
        upstream: UpstreamBody,
        rewriter: Rewriter,
        drain: Watch,
        unconfigured: Arc<Reported>,
        log: RequestLog,
    ) -> Self {
        RewriteBody {
            upstream,
            rewriter,
            heartbeat: Wake::default(),
            drain,
            frames_unchecked: 0,
            trailers: None,
            queued: VecDeque::new(),
            state: State::Streaming,
            end: StreamEnd::ClientGone,
            unconfigured,
            progress: None,
            store: None,
            log,
        }
    }

    /// The rewriter's clock is the runtime's (so tests may pause time).
    fn now() -> std::time::Instant {
        Instant::now().into_std()
    }

    /// Reports what the rewriter observed since the last call (most events: nothing, which
    /// is told before any iterator is set up).
    fn report_observations(&mut self) {
        let RewriteBody {
            rewriter,
            log,
            unconfigured,
            progress,
            store,
            ..
        } = self;
        let Some(observations) = rewriter.take_observations() else {
            return;
        };
        for observation in observations {
            if let Some(name) = unconfigured::unconfigured_name(&observation) {
                unconfigured.report(name);
            }
            if let Some(span) = &mut log.span {
                span.observe(&observation);
            }
            match observation {
                Observation::CallRunning {
                    call_id,
                    name,
                    arguments,
                } => {
                    if let Some(progress) = progress {
                        progress.call_running(&call_id, &name, &arguments);
                    }
                }
                Observation::Injected(kind) => {
                    let label = labels::EventsInjected { r#type: kind };
                    log.metrics().events_injected.get_or_create(&label).inc();
                }
                Observation::CallFinished {
                    call_id,
                    name,
                    kind,
                    outcome,
                    duration,
                    ..
                } => {
                    if let Some(progress) = progress {
                        progress.call_finished(&call_id);
                    }
                    log.tool_calls += 1;
                    log.metrics().tool_call(kind.as_str(), outcome, duration);
                    let duration_ms = duration.as_millis() as u64;
                    // `?`: the name is the upstream's, quoted with escapes so it cannot break the line.
                    tracing::debug!(tool = ?name, kind = kind.as_str(), outcome, duration_ms, "tool call");
                }
                Observation::Progress { .. } => {}
                Observation::ResponseId { shown, upstream } => {
                    if let Some((store, tenant)) = store {
                        let now = std::time::Instant::now();
                        store.put_response_id(&shown, &upstream, *tenant, now);
                    }
                }
                Observation::HostedPair {
                    id,
                    call_item,
                    output_item,
                    ..
                } => {
                    if let Some((store, tenant)) = store {
                        let pair = Pair {
                            call_item,
                            output_item,
                        };
                        if store.put(&id, pair, *tenant, std::time::Instant::now()) {
                            log.metrics().hosted_pairs_stored.inc();
                        }
                    }
                }
            }
        }
    }

    /// Hands `out` to the client, reporting what the rewriter observed meanwhile.
    fn send(&mut self, out: Bytes) -> Polled {
        self.report_observations();
        if out.is_empty() {
            return Poll::Pending;
        }
        self.log.bytes_out += out.len() as u64;
        Poll::Ready(Some(Ok(Frame::data(out))))
    }

    /// Upstream ended, broke, or the drain ran out: close open calls, send the rest, then end.
    fn end(&mut self, end: StreamEnd) -> Polled {
        self.state = State::Ended;
        self.end = end;
        let rest = self.rewriter.finish(Self::now());
        match self.send(rest) {
            Poll::Pending => Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(t)))),
            data => data,
        }
    }

    /// Progress reports that arrived for this stream's calls, rendered (empty when there are
    /// none: then the inbox wakes this task at the next one); `None` for a stream without a
    /// progress source, which has nothing to hand over at all.
    fn take_progress(&mut self, cx: &mut Context<'_>) -> Option<Bytes> {
        let reports = self.progress.as_ref()?.inbox.take(cx.waker());
        let mut out = bytes::BytesMut::new();
        for (call_id, report) in reports {
            out.extend_from_slice(&self.rewriter.progress(&call_id, report, Self::now()));
        }
        Some(out.freeze())
    }

    /// Upstream is pending: sends a heartbeat (or held-back progress) if one is due, else arms
    /// the timer for it.
    fn poll_heartbeat(&mut self, cx: &mut Context<'_>) -> Polled {
        loop {
            ready!(self.heartbeat.poll_until(self.rewriter.next_wake(), cx));
            let beat = self.rewriter.on_idle(Self::now());
            if !beat.is_empty() {
                return self.send(beat);
            }
        }
    }
}

impl Body for RewriteBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Polled {
        let this = self.get_mut();
        loop {
            if let Some(piece) = this.queued.pop_front() {
                this.log.bytes_out += piece.len() as u64;
                return Poll::Ready(Some(Ok(Frame::data(piece))));
            }
            if this.state == State::Ended {
                return Poll::Ready(this.trailers.take().map(|t| Ok(Frame::trailers(t))));
            }
            if this.frames_unchecked >= DRAIN_CHECK_EVERY {
                this.frames_unchecked = 0;
                if this.drain.poll(cx) {
                    return this.end(StreamEnd::Drained);
                }
            }
            if let Some(progress) = this.take_progress(cx)
                && let polled @ Poll::Ready(_) = this.send(progress)
            {
                return polled;
            }
            let frame = match Pin::new(&mut this.upstream).poll_frame(cx) {
                Poll::Pending => {
                    this.frames_unchecked = 0;
                    if this.drain.poll(cx) {
                        return this.end(StreamEnd::Drained);
                    }
                    return this.poll_heartbeat(cx);
                }
                Poll::Ready(None) => return this.end(StreamEnd::Completed),
                Poll::Ready(Some(Err(error))) => {
                    tracing::warn!(%error, "upstream stream broke; closing open tool calls");
                    this.log
                        .metrics()
                        .upstream_error(UpstreamCause::BrokenStream);
                    return this.end(StreamEnd::UpstreamError);
                }
                Poll::Ready(Some(Ok(frame))) => {
                    this.frames_unchecked += 1;
                    frame
                }
            };
            match frame.into_data() {
                Ok(data) => {
                    this.log.metrics().bytes_in.inc_by(data.len() as u64);
                    // The queue is empty here: it is sent whole before the upstream is read.
                    this.rewriter.feed_into(data, Self::now(), &mut this.queued);
                    // The first piece now (or none: `send` also hands over the observations),
                    // the others at the next polls.
                    let first = this.queued.pop_front().unwrap_or_default();
                    if let polled @ Poll::Ready(_) = this.send(first) {
                        return polled;
                    }
                }
                Err(frame) => {
                    // Trailers end the upstream body; they go after the closing events.
                    this.trailers = frame.into_trailers().ok();
                    return this.end(StreamEnd::Completed);
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.state == State::Ended && self.trailers.is_none() && self.queued.is_empty()
    }
}

impl Drop for RewriteBody {
    fn drop(&mut self) {
        // A stream dropped before it ended lost its client.
        self.log.stream = Some((self.end, self.rewriter.stats()));
    }
}
