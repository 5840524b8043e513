//! Answers on the MCP listener: a server's answer forwarded (an SSE answer read through
//! [`Answer`], anything else byte for byte), or a small body toolpulse wrote.
//!
//! Pull-based like the proxy's: the server is read only when the gateway side polls. The calls
//! of the request are released when the answer ends, breaks or is dropped (gateway gone). An
//! upstream error mid-answer is passed on as an error, so the gateway sees the stream break
//! (and may resume it with `Last-Event-ID`) instead of a clean but truncated end.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio_util::sync::WaitForCancellationFutureOwned;

use super::answer::Answer;
use super::calls::Calls;
use super::log::McpLog;
use crate::metrics::McpOutcome;

type Polled = Poll<Option<Result<Frame<Bytes>, hyper::Error>>>;

pub struct McpBody(Inner);

enum Inner {
    Full(Option<Bytes>),
    Forwarded(Box<Forwarded>),
}

/// A server's answer on its way to the gateway.
pub struct Forwarded {
    upstream: Incoming,
    /// `None`: forwarded byte for byte (not an uncompressed event stream).
    answer: Option<Answer>,
    /// Taken (and so released) when the answer ends.
    calls: Option<Calls>,
    /// Completes when the answer must end early (shutdown).
    ending: Pin<Box<WaitForCancellationFutureOwned>>,
    log: McpLog,
    done: bool,
}

impl McpBody {
    pub fn full(bytes: Bytes) -> Self {
        McpBody(Inner::Full(Some(bytes)))
    }

    pub fn forwarded(
        upstream: Incoming,
        answer: Option<Answer>,
        calls: Calls,
        ending: WaitForCancellationFutureOwned,
        log: McpLog,
    ) -> Self {
        McpBody(Inner::Forwarded(Box::new(Forwarded {
            upstream,
            answer,
            calls: Some(calls),
            ending: Box::pin(ending),
            log,
            done: false,
        })))
    }
}

impl Forwarded {
    /// The answer is over: its calls are released, the rest of the bytes go out.
    fn end(&mut self, outcome: McpOutcome) -> Polled {
        self.done = true;
        self.log.outcome = outcome;
        let mut calls = self.calls.take();
        let rest = match (&mut self.answer, &mut calls) {
            (Some(answer), Some(calls)) => answer.finish(calls),
            _ => Bytes::new(),
        };
        drop(calls);
        self.data(rest)
    }

    fn data(&mut self, out: Bytes) -> Polled {
        if out.is_empty() {
            return Poll::Ready(None);
        }
        self.log.bytes_out += out.len() as u64;
        Poll::Ready(Some(Ok(Frame::data(out))))
    }

    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Polled {
        loop {
            if self.done {
                return Poll::Ready(None);
            }
            if self.ending.as_mut().poll(cx).is_ready() {
                return self.end(McpOutcome::Ended);
            }
            let frame = match Pin::new(&mut self.upstream).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => return self.end(McpOutcome::Answered),
                Poll::Ready(Some(Err(error))) => {
                    tracing::warn!(%error, "MCP server's answer broke; passing the break on");
                    self.done = true;
                    self.log.outcome = McpOutcome::Broken;
                    self.calls = None;
                    return Poll::Ready(Some(Err(error)));
                }
                Poll::Ready(Some(Ok(frame))) => frame,
            };
            let data = match frame.into_data() {
                Ok(data) => data,
                Err(trailers) => return Poll::Ready(Some(Ok(trailers))),
            };
            let out = match (&mut self.answer, &mut self.calls) {
                (Some(answer), Some(calls)) => answer.feed(&data, calls),
                _ => data,
            };
            if !out.is_empty() {
                return self.data(out);
            }
        }
    }
}

impl Body for McpBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Polled {
        match &mut self.get_mut().0 {
            Inner::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Inner::Forwarded(forwarded) => forwarded.poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.0 {
            Inner::Full(bytes) => bytes.is_none(),
            Inner::Forwarded(forwarded) => forwarded.done,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.0 {
            Inner::Full(bytes) => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64))
            }
            // A read answer may lose events; one forwarded byte for byte keeps its length.
            Inner::Forwarded(forwarded) if forwarded.answer.is_none() => {
                forwarded.upstream.size_hint()
            }
            Inner::Forwarded(_) => SizeHint::default(),
        }
    }
}
