//! Response bodies: upstream bytes passed through, an event stream rewritten as it arrives, or a
//! small body the proxy wrote itself.
//!
//! The rewriting adapter is pull-based: upstream is read only when the client side polls, so a
//! slow client slows the upstream (TCP backpressure) instead of growing a buffer. It owns the
//! heartbeat timer: when the upstream is pending and the rewriter says a heartbeat is due, it
//! sends one. On upstream EOF or error it asks the rewriter to close open calls and ends the body
//! cleanly. Dropping it (client gone) drops the upstream body, which closes that connection.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::time::{Instant, Sleep};

use crate::rewrite::{Rewriter, Stats};

/// What the proxy sends back to the client.
pub enum ProxyBody {
    Passthrough(Incoming),
    Rewritten(Box<RewriteBody>),
    Full(Option<Bytes>),
}

impl ProxyBody {
    pub fn full(bytes: Bytes) -> Self {
        ProxyBody::Full(Some(bytes))
    }

    pub fn rewritten(upstream: Incoming, rewriter: Rewriter) -> Self {
        ProxyBody::Rewritten(Box::new(RewriteBody::new(upstream, rewriter)))
    }
}

impl Body for ProxyBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        match self.get_mut() {
            ProxyBody::Passthrough(body) => Pin::new(body).poll_frame(cx),
            ProxyBody::Rewritten(body) => Pin::new(body.as_mut()).poll_frame(cx),
            ProxyBody::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ProxyBody::Passthrough(body) => body.is_end_stream(),
            ProxyBody::Rewritten(body) => body.is_end_stream(),
            ProxyBody::Full(bytes) => bytes.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ProxyBody::Passthrough(body) => body.size_hint(),
            ProxyBody::Rewritten(_) => SizeHint::default(),
            ProxyBody::Full(bytes) => {
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
pub struct RewriteBody {
    upstream: Incoming,
    rewriter: Rewriter,
    /// Armed at the rewriter's next heartbeat time while the upstream is quiet.
    heartbeat: Pin<Box<Sleep>>,
    heartbeat_at: Option<Instant>,
    trailers: Option<http::HeaderMap>,
    state: State,
}

impl RewriteBody {
    pub fn new(upstream: Incoming, rewriter: Rewriter) -> Self {
        RewriteBody {
            upstream,
            rewriter,
            heartbeat: Box::pin(tokio::time::sleep_until(Instant::now())),
            heartbeat_at: None,
            trailers: None,
            state: State::Streaming,
        }
    }

    pub fn stats(&self) -> Stats {
        self.rewriter.stats()
    }

    /// The rewriter's clock is the runtime's (so tests may pause time).
    fn now() -> std::time::Instant {
        Instant::now().into_std()
    }

    /// Upstream ended or broke: close open calls, send what is left, then end.
    fn end(
        &mut self,
        error: Option<hyper::Error>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        if let Some(error) = error {
            tracing::warn!(%error, "upstream stream broke; closing open tool calls");
        }
        self.state = State::Ended;
        let rest = self.rewriter.finish(Self::now());
        if rest.is_empty() {
            return Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(t))));
        }
        Poll::Ready(Some(Ok(Frame::data(rest))))
    }

    /// Upstream is pending: sends a heartbeat if one is due, else arms the timer for it.
    fn poll_heartbeat(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        loop {
            let Some(at) = self.rewriter.next_heartbeat().map(Instant::from_std) else {
                self.heartbeat_at = None;
                return Poll::Pending;
            };
            if self.heartbeat_at != Some(at) {
                self.heartbeat.as_mut().reset(at);
                self.heartbeat_at = Some(at);
            }
            ready!(self.heartbeat.as_mut().poll(cx));
            let beat = self.rewriter.on_idle(Self::now());
            if !beat.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(beat))));
            }
        }
    }
}

impl Body for RewriteBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        loop {
            if this.state == State::Ended {
                return Poll::Ready(this.trailers.take().map(|t| Ok(Frame::trailers(t))));
            }
            let frame = match Pin::new(&mut this.upstream).poll_frame(cx) {
                Poll::Pending => return this.poll_heartbeat(cx),
                Poll::Ready(None) => return this.end(None),
                Poll::Ready(Some(Err(error))) => return this.end(Some(error)),
                Poll::Ready(Some(Ok(frame))) => frame,
            };
            match frame.into_data() {
                Ok(data) => {
                    let out = this.rewriter.feed(&data, Self::now());
                    if !out.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(out))));
                    }
                }
                Err(frame) => {
                    // Trailers end the upstream body; they go after the closing events.
                    this.trailers = frame.into_trailers().ok();
                    return this.end(None);
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.state == State::Ended && self.trailers.is_none()
    }
}
