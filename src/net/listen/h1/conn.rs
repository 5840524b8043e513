//! One client connection served as HTTP/1.1 by toolpulse itself: request heads read from the
//! shared buffer (`http1::server`), each handed to the responder with its body ([`Incoming`]),
//! the response framed (`http1::server` again) and its head and body frames queued
//! (`http1::encode`) and written together, vectored, with no second buffer: a chunk's size
//! line, its data and its CRLF are slices of one write. One exchange at a time; keep-alive as
//! the request and response allow.
//!
//! While a request waits for its response or the response streams, the socket is watched for
//! the client's close (as hyper's server does, half-closes included): the response is then
//! dropped, and with it the upstream exchange. A client that takes no byte of its response for
//! the send timeout ([`SendTimer`]) is closed with a reset: it is not reading, and a reset
//! frees at once the bytes the kernel still holds for it.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::{Buf, Bytes};
use http::Request;
use http_body::Body;
use tokio::time::Sleep;

use super::body::{Incoming, Shared};
use super::date::with_date;
use super::gone::CloseWatch;
use super::linger::Linger;
use super::send::{SendTimer, take, write};
use crate::http1::encode::{LAST_CHUNK, Out};
use crate::http1::head::has_blank_line;
use crate::http1::server::{self, Asked, Parsed};
use crate::http1::{Framing, Known};
use crate::net::listen::respond::{ClientBody, Respond};
use crate::net::listen::watched::Closed;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How long a client may take to send a request head after the previous response (its first
/// is timed from the accept by the listener's `watched`) and to take a byte of a response.
#[derive(Debug, Clone)]
pub struct Limits {
    pub head_timeout: Duration,
    pub max_head_bytes: usize,
    pub send_timeout: Duration,
}

pub struct Connection<R: Respond> {
    shared: Arc<Shared>,
    respond: R,
    limits: Limits,
    state: State<R>,
    /// Set while a head after the first is awaited.
    timer: Option<Pin<Box<Sleep>>>,
    /// How much of the read buffer is known to hold no blank line.
    searched: usize,
    /// Asked to close: after the exchange in progress, or now if none is.
    closing: bool,
    /// Why toolpulse closed it, when it timed the client out itself.
    closed: Option<Closed>,
    send_timer: SendTimer,
    /// Made when an exchange first looks for the client's close.
    close_watch: Option<CloseWatch>,
}

enum State<R: Respond> {
    Head,
    Waiting {
        response: Pin<Box<R::Future>>,
        exchange: Exchange,
    },
    Writing {
        body: R::Body,
        out: Out,
        framing: Framing,
        /// Of a `Content-Length` body, the bytes still owed.
        remaining: u64,
        ended: bool,
        exchange: Exchange,
    },
    /// Closing while the client may still be sending ([`Linger`]).
    Linger(Linger),
}

/// What one exchange's end depends on.
struct Exchange {
    asked: Asked,
    keep_alive: bool,
    /// The request body was read to its end (once seen, not asked again).
    body_done: bool,
    /// The client sent more while this exchange ran: no more watching for its close.
    sent_more: bool,
    /// The close watch has its waker registered with the socket ([`CloseWatch::poll_peek`]).
    watch_armed: bool,
    /// Answered 408: the client was too slow sending its request.
    too_slow: bool,
}

impl<R: Respond> Connection<R> {
    pub fn new(shared: Arc<Shared>, respond: R, limits: Limits) -> Self {
        Connection {
            shared,
            respond,
            state: State::Head,
            timer: None,
            searched: 0,
            closing: false,
            closed: None,
            send_timer: SendTimer::new(limits.send_timeout),
            close_watch: None,
            limits,
        }
    }

    /// Why it closed, when it timed the client out: no next request head within the head
    /// timeout, or no byte of a response taken within the send timeout.
    pub fn closed(&self) -> Option<Closed> {
        self.closed
    }

    /// Closes it after the exchange in progress, or at once when there is none.
    pub fn graceful_shutdown(self: Pin<&mut Self>) {
        let this = self.get_mut();
        this.closing = true;
        match &mut this.state {
            State::Head | State::Linger(_) => {}
            State::Waiting { exchange, .. } | State::Writing { exchange, .. } => {
                exchange.keep_alive = false;
            }
        }
    }

    /// Reads until a whole head is in, then starts its exchange. Ready(true): the connection
    /// is done (closed by the client, timed out or asked to close); Ready(false): the state
    /// moved on (to the exchange, or to lingering after a refused head).
    fn poll_head(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<bool>> {
        let shared = self.shared.clone();
        let mut reader = shared.reader();
        loop {
            if self.closing && reader.buf.is_empty() {
                return Poll::Ready(Ok(true));
            }
            let max = self.limits.max_head_bytes;
            let complete = has_blank_line(&reader.buf, self.searched) || reader.buf.len() >= max;
            self.searched = reader.buf.len();
            let parsed = match complete {
                true => server::parse(&reader.buf, max),
                false => Ok(Parsed::Partial),
            };
            match parsed {
                Ok(Parsed::Partial) => {}
                Ok(Parsed::Complete { head, len }) => {
                    reader.buf.advance(len);
                    reader.begin_body(head.framing, head.expect_continue);
                    drop(reader);
                    self.start(*head);
                    return Poll::Ready(Ok(false));
                }
                Err(error) => {
                    tracing::debug!(%error, "request head refused");
                    // Best effort: the connection closes either way.
                    let refusal = with_date(|date| server::refusal(error.status(), date));
                    let _ = shared.stream.try_write(&refusal);
                    return Poll::Ready(Ok(!self.linger()));
                }
            }
            if let Some(timer) = &mut self.timer
                && timer.as_mut().poll(cx).is_ready()
            {
                self.closed = Some(Closed::NoRequest);
                return Poll::Ready(Ok(true));
            }
            match ready!(reader.poll_fill(&shared.stream, cx)) {
                Ok(0) => return Poll::Ready(Ok(true)),
                Ok(_) => {}
                Err(error) => return Poll::Ready(Err(error)),
            }
        }
    }

    /// Moves to lingering; false when the connection is gone already.
    fn linger(&mut self) -> bool {
        match Linger::start(&self.shared.stream) {
            Some(linger) => {
                self.state = State::Linger(linger);
                true
            }
            None => false,
        }
    }

    fn start(&mut self, head: server::Head) {
        self.timer = None;
        self.searched = 0;
        let body = match head.framing {
            Framing::Nothing | Framing::Length(0) => ClientBody::Empty,
            framing => ClientBody::H1(Incoming::new(self.shared.clone(), framing)),
        };
        let parts = head.parts;
        let exchange = Exchange {
            asked: Asked {
                method: parts.method.clone(),
                version: parts.version,
            },
            keep_alive: head.keep_alive && !self.closing,
            body_done: false,
            sent_more: false,
            watch_armed: false,
            too_slow: false,
        };
        let response = Box::pin(self.respond.respond(Request::from_parts(parts, body)));
        self.state = State::Waiting { response, exchange };
    }

    /// Whether the client closed (or reset) the connection while its exchange runs. Only
    /// looked at once the request body is read (until then the body reads the socket), and
    /// until the client sends anything more (a pipelined request: not a close).
    fn client_gone(
        shared: &Shared,
        watch: &mut Option<CloseWatch>,
        exchange: &mut Exchange,
        cx: &mut Context<'_>,
    ) -> bool {
        if exchange.sent_more {
            return false;
        }
        if !exchange.body_done {
            exchange.body_done = shared.reader().body_done();
            if !exchange.body_done {
                return false;
            }
        }
        let watch = watch.get_or_insert_with(CloseWatch::default);
        match watch.poll_peek(&shared.stream, &mut exchange.watch_armed, cx) {
            Poll::Pending => false,
            Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => true,
            Poll::Ready(Ok(_)) => {
                exchange.sent_more = true;
                false
            }
        }
    }

    /// Writes the response as its body gives frames. Ready(true): the exchange ended and the
    /// connection may carry another.
    fn poll_write(&mut self, cx: &mut Context<'_>) -> Poll<Result<bool, BoxError>> {
        let State::Writing {
            body,
            out,
            framing,
            remaining,
            ended,
            exchange,
        } = &mut self.state
        else {
            unreachable!("only called while writing");
        };
        let mut body_pending = false;
        loop {
            while !*ended && !body_pending && out.has_room() {
                match Pin::new(&mut *body).poll_frame(cx) {
                    Poll::Ready(Some(Ok(frame))) => take(frame, out, *framing, remaining),
                    Poll::Ready(None) => {
                        *ended = true;
                        match framing {
                            Framing::Chunked => out.push(None, Bytes::new(), LAST_CHUNK),
                            Framing::Length(_) if *remaining > 0 => {
                                tracing::debug!(
                                    missing = *remaining,
                                    "response body ended before its Content-Length"
                                );
                                exchange.keep_alive = false;
                            }
                            _ => {}
                        }
                    }
                    // Ended without its last chunk, so the client sees it was cut.
                    Poll::Ready(Some(Err(error))) => return Poll::Ready(Err(error.into())),
                    Poll::Pending => body_pending = true,
                }
            }
            if !out.is_empty() {
                match write(&self.shared, out, cx) {
                    Poll::Ready(Ok(())) => {
                        self.send_timer.progress();
                        continue;
                    }
                    Poll::Ready(Err(error)) => return Poll::Ready(Err(error.into())),
                    Poll::Pending if self.send_timer.expired(cx) => {
                        tracing::debug!("client took no byte within the send timeout: closed");
                        self.closed = Some(Closed::SendTimeout);
                        if let Err(error) = self.shared.stream.set_zero_linger() {
                            tracing::debug!(%error, "could not set a reset on close");
                        }
                        return Poll::Ready(Ok(false));
                    }
                    Poll::Pending => {}
                }
            } else if *ended {
                return Poll::Ready(Ok(exchange.keep_alive && !self.closing));
            }
            if Self::client_gone(&self.shared, &mut self.close_watch, exchange, cx) {
                tracing::debug!("client closed the connection mid-response");
                return Poll::Ready(Ok(false));
            }
            return Poll::Pending;
        }
    }
}

impl<R: Respond> Future for Connection<R> {
    type Output = Result<(), BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        loop {
            match &mut this.state {
                State::Head => match ready!(this.poll_head(cx)) {
                    Ok(true) => return Poll::Ready(Ok(())),
                    Ok(false) => {}
                    Err(error) => return Poll::Ready(Err(error.into())),
                },
                State::Waiting { response, exchange } => {
                    let Poll::Ready(response) = response.as_mut().poll(cx) else {
                        if Self::client_gone(&this.shared, &mut this.close_watch, exchange, cx) {
                            tracing::debug!("client closed the connection before its response");
                            return Poll::Ready(Ok(()));
                        }
                        return Poll::Pending;
                    };
                    // The handler's future goes first: a request body it did not read is
                    // dropped with it, and what of that body is already here is skipped.
                    let State::Waiting { mut exchange, .. } =
                        std::mem::replace(&mut this.state, State::Head)
                    else {
                        unreachable!("in the Waiting arm")
                    };
                    let (mut head, body) = response.into_parts();
                    let known = Known {
                        empty: body.is_end_stream(),
                        length: body.size_hint().exact(),
                    };
                    let body_done = {
                        let mut reader = this.shared.reader();
                        reader.answered();
                        reader.body_done()
                    };
                    // Kept open only when the request is read whole: a head saying keep-alive
                    // on a connection then closed for the body's sake would let the client
                    // send its next request into the close.
                    let keep_alive = exchange.keep_alive && !this.closing && body_done;
                    let (bytes, framing, keep_alive) = with_date(|date| {
                        server::encode(&mut head, &exchange.asked, known, keep_alive, date)
                    });
                    exchange.keep_alive = keep_alive;
                    exchange.too_slow = head.status == http::StatusCode::REQUEST_TIMEOUT;
                    let remaining = match framing {
                        Framing::Length(n) => n,
                        _ => 0,
                    };
                    this.state = State::Writing {
                        body,
                        out: Out::new(bytes.freeze()),
                        framing,
                        remaining,
                        // Nothing is sent, whatever the body holds.
                        ended: matches!(framing, Framing::Nothing | Framing::Length(0)),
                        exchange,
                    };
                }
                State::Linger(linger) => {
                    ready!(linger.poll(&this.shared.stream, cx));
                    return Poll::Ready(Ok(()));
                }
                State::Writing { exchange, .. } => {
                    let too_slow = exchange.too_slow;
                    let again = ready!(this.poll_write(cx))?;
                    if this.closed.is_some() {
                        return Poll::Ready(Ok(()));
                    }
                    let mut reader = this.shared.reader();
                    if !reader.body_done() {
                        // Answered before the body was read: the client may still send it.
                        // Not lingered for when it was too slow to (as nginx after a 408).
                        drop(reader);
                        if !too_slow && this.linger() {
                            continue;
                        }
                        return Poll::Ready(Ok(()));
                    }
                    if !again {
                        return Poll::Ready(Ok(()));
                    }
                    reader.rest();
                    drop(reader);
                    this.state = State::Head;
                    let deadline = tokio::time::Instant::now() + this.limits.head_timeout;
                    this.timer = Some(Box::pin(tokio::time::sleep_until(deadline)));
                }
            }
        }
    }
}
