//! The body of an AG-UI run: the gateway's stream through the core's AG-UI translator, pulled
//! as the client reads (so a slow client slows the gateway, as for a rewritten stream). It
//! registers the running calls for out-of-band progress and hands their reports to the
//! translator, sends heartbeat comments while a call runs, and ends the run when the gateway's
//! stream ends, breaks, or the proxy drains. Dropping it (the client went away) drops the
//! upstream body, which closes that upstream connection: the gateway's request is cancelled.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame};
use tokio::time::Instant;

use super::log::{RequestLog, StreamEnd};
use crate::core::ag_ui::Translator;
use crate::core::rewrite::Observation;
use crate::features::progress::local::StreamHandle;
use crate::metrics::UpstreamCause;
use crate::net::drain::Watch;
use crate::net::upstream::UpstreamBody;
use crate::net::upstream::body::BoxError;
use crate::proxy::wake::Wake;

type Polled = Poll<Option<Result<Frame<Bytes>, BoxError>>>;

pub struct AgUiBody {
    /// `None` once it ended, or when the run had no stream (its error is all it says).
    upstream: Option<UpstreamBody>,
    translator: Translator,
    /// What is ready to go before the upstream is read again (`RUN_STARTED`, an error run).
    queued: Option<Bytes>,
    drain: Watch,
    progress: Option<StreamHandle>,
    heartbeat: Wake,
    end: StreamEnd,
    log: RequestLog,
}

impl AgUiBody {
    /// A run over the gateway's stream `upstream`; `first` goes out first.
    pub fn new(
        upstream: Option<UpstreamBody>,
        translator: Translator,
        first: Bytes,
        drain: Watch,
        progress: Option<StreamHandle>,
        log: RequestLog,
    ) -> Self {
        AgUiBody {
            end: match upstream {
                Some(_) => StreamEnd::ClientGone,
                None => StreamEnd::Completed,
            },
            upstream,
            translator,
            queued: Some(first).filter(|b| !b.is_empty()),
            drain,
            progress,
            heartbeat: Wake::default(),
            log,
        }
    }

    /// The translator's clock is the runtime's (so tests may pause time).
    fn now() -> std::time::Instant {
        Instant::now().into_std()
    }

    /// Hands `out` to the client (nothing: pending), reporting what the translator observed.
    fn send(&mut self, out: Bytes) -> Polled {
        for observation in self.translator.take_observations() {
            if let Some(span) = &mut self.log.span {
                span.observe(&observation);
            }
            match observation {
                Observation::CallRunning {
                    call_id,
                    name,
                    arguments,
                } => {
                    if let Some(progress) = &self.progress {
                        progress.call_running(&call_id, &name, &arguments);
                    }
                }
                Observation::CallFinished {
                    call_id,
                    kind,
                    outcome,
                    duration,
                    ..
                } => {
                    if let Some(progress) = &self.progress {
                        progress.call_finished(&call_id);
                    }
                    self.log.tool_calls += 1;
                    self.log
                        .metrics()
                        .tool_call(kind.as_str(), outcome, duration);
                }
                _ => {}
            }
        }
        if out.is_empty() {
            return Poll::Pending;
        }
        self.log.bytes_out += out.len() as u64;
        Poll::Ready(Some(Ok(Frame::data(out))))
    }

    /// The run ends: the gateway's stream ended (`None`) or failed with `message`.
    fn end(&mut self, end: StreamEnd, failure: Option<(&str, &str)>) -> Polled {
        self.upstream = None;
        self.end = end;
        let now = Self::now();
        let out = match failure {
            None => self.translator.finish(now),
            Some((message, code)) => self.translator.fail(message, Some(code), now),
        };
        match self.send(out) {
            Poll::Pending => Poll::Ready(None),
            data => data,
        }
    }

    /// Progress reports that arrived for the run's calls, translated.
    fn take_progress(&mut self, cx: &mut Context<'_>) -> Bytes {
        let Some(progress) = &self.progress else {
            return Bytes::new();
        };
        let mut out = bytes::BytesMut::new();
        for (call_id, report) in progress.inbox.take(cx.waker()) {
            out.extend_from_slice(&self.translator.progress(&call_id, report, Self::now()));
        }
        out.freeze()
    }

    /// The gateway is quiet: a heartbeat if one is due, else the timer armed for it.
    fn poll_heartbeat(&mut self, cx: &mut Context<'_>) -> Polled {
        loop {
            std::task::ready!(
                self.heartbeat
                    .poll_until(self.translator.next_heartbeat(), cx)
            );
            let beat = self.translator.on_idle(Self::now());
            if !beat.is_empty() {
                return self.send(beat);
            }
        }
    }
}

impl Body for AgUiBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Polled {
        let this = self.get_mut();
        loop {
            if let Some(first) = this.queued.take() {
                return this.send(first);
            }
            let Some(upstream) = &mut this.upstream else {
                return Poll::Ready(None);
            };
            let polled = Pin::new(upstream).poll_frame(cx);
            let frame = match polled {
                Poll::Pending => {
                    if this.drain.poll(cx) {
                        let message = "toolpulse is shutting down: the run was cut short";
                        return this.end(StreamEnd::Drained, Some((message, "drained")));
                    }
                    let progress = this.take_progress(cx);
                    if let polled @ Poll::Ready(_) = this.send(progress) {
                        return polled;
                    }
                    return this.poll_heartbeat(cx);
                }
                Poll::Ready(None) => return this.end(StreamEnd::Completed, None),
                Poll::Ready(Some(Err(error))) => {
                    tracing::warn!(%error, "upstream stream broke; ending the AG-UI run");
                    let metrics = this.log.metrics();
                    metrics.upstream_error(UpstreamCause::BrokenStream);
                    let message = format!("the gateway's stream broke: {error}");
                    return this.end(StreamEnd::UpstreamError, Some((&message, "broken_stream")));
                }
                Poll::Ready(Some(Ok(frame))) => frame,
            };
            let Ok(data) = frame.into_data() else {
                // Trailers end the gateway's body.
                return this.end(StreamEnd::Completed, None);
            };
            this.log.metrics().bytes_in.inc_by(data.len() as u64);
            let mut out = bytes::BytesMut::from(&this.translator.feed(&data, Self::now())[..]);
            out.extend_from_slice(&this.take_progress(cx));
            if let polled @ Poll::Ready(_) = this.send(out.freeze()) {
                return polled;
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.upstream.is_none() && self.queued.is_none()
    }
}

impl Drop for AgUiBody {
    fn drop(&mut self) {
        // A run dropped before it ended lost its client.
        self.log.stream = Some((self.end, self.translator.stats()));
    }
}
