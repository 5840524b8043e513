//! A client connection served as HTTP/1 or HTTP/2, told apart by peeking at its first bytes.
//!
//! hyper-util's automatic builder tells them apart by reading the first 24 bytes, then hands
//! hyper's HTTP/1 connection those bytes as a first, separate read. hyper reads into an 8 KiB
//! buffer; a second read into a buffer that already holds 24 bytes makes it grow to 16 KiB,
//! which the connection then keeps while its response streams. And its connection is one
//! type for both versions, as large as an HTTP/2 connection (7.5 KiB) whichever it serves.
//! Seen with heaptrack, 1,000 streams open: both were among the largest allocations per stream.
//! Peeking leaves the bytes in the socket; each version's connection is boxed at its own size.
//! HTTP/1.1 is served by toolpulse's own server ([`super::h1`]), HTTP/2 by hyper's.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::ReadBuf;
use tokio::net::TcpStream;
use tokio::time::Sleep;

use super::h1;
use super::respond::Respond;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What an HTTP/2 client sends first (RFC 9113 §3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// How long to wait before peeking again at a client that has sent a part of the HTTP/2
/// preface and not the rest (peeking cannot wait for more bytes; such clients are rare).
const PEEK_AGAIN: Duration = Duration::from_millis(5);

/// How a listener serves its connections: HTTP/1.1 with toolpulse's own server, HTTP/2 with
/// hyper's.
pub struct Builders {
    pub http1: h1::conn::Limits,
    pub http2: http2::Builder<TokioExecutor>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    Http1,
    Http2,
}

/// The version the first bytes `peeked` tell: `None` when they cannot tell yet (a part of the
/// preface); no bytes (the client closed) is HTTP/1, whose connection then just ends.
fn version_of(peeked: &[u8]) -> Option<Version> {
    if !H2_PREFACE.starts_with(peeked) || peeked.is_empty() {
        Some(Version::Http1)
    } else if peeked.len() == H2_PREFACE.len() {
        Some(Version::Http2)
    } else {
        None
    }
}

type Io = TokioIo<TcpStream>;

/// hyper's HTTP/2 connection calls a [`Respond`] through this.
pub struct H2Service<R>(Arc<R>);

impl<R: Respond + Sync> hyper::service::Service<Request<Incoming>> for H2Service<R> {
    type Response = Response<R::Body>;
    type Error = Infallible;
    type Future = Answer<R::Future>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        Answer(Box::pin(self.0.respond(request.map(Into::into))))
    }
}

/// A [`Respond`]'s answer, as hyper's services answer.
pub struct Answer<F>(Pin<Box<F>>);

impl<F: Future> Future for Answer<F> {
    type Output = Result<F::Output, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.as_mut().poll(cx).map(Ok)
    }
}

/// A connection: waiting for its first bytes, then served.
pub enum Connection<'a, R: Respond + Sync> {
    Sniffing {
        stream: Option<TcpStream>,
        respond: Option<R>,
        builders: &'a Builders,
        again: Option<Pin<Box<Sleep>>>,
        closed: bool,
    },
    Http1(Pin<Box<h1::conn::Connection<R>>>),
    Http2(Pin<Box<http2::Connection<Io, H2Service<R>, TokioExecutor>>>),
}

impl<'a, R: Respond + Sync> Connection<'a, R> {
    pub fn new(builders: &'a Builders, stream: TcpStream, respond: R) -> Self {
        Connection::Sniffing {
            stream: Some(stream),
            respond: Some(respond),
            builders,
            again: None,
            closed: false,
        }
    }

    /// Whether it closed because no next HTTP/1 request head came within the head timeout
    /// (before the first, [`super::watched`] times it).
    pub fn head_timed_out(&self) -> bool {
        matches!(self, Connection::Http1(conn) if conn.head_timed_out())
    }

    /// Closes it gracefully (HTTP/1 after its response, HTTP/2 with GOAWAY); at once before it
    /// is served (nothing was asked of it yet).
    pub fn graceful_shutdown(self: Pin<&mut Self>) {
        match self.get_mut() {
            Connection::Sniffing { closed, .. } => *closed = true,
            Connection::Http1(conn) => conn.as_mut().graceful_shutdown(),
            Connection::Http2(conn) => conn.as_mut().graceful_shutdown(),
        }
    }
}

impl<R: Respond + Sync> Future for Connection<'_, R> {
    type Output = Result<(), BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // The served connections are boxed, the rest Unpin: so is the connection.
        let this = self.get_mut();
        loop {
            let (stream, respond, builders, again) = match this {
                Connection::Http1(conn) => return conn.as_mut().poll(cx),
                Connection::Http2(conn) => return conn.as_mut().poll(cx).map_err(Into::into),
                Connection::Sniffing { closed: true, .. } => return Poll::Ready(Ok(())),
                Connection::Sniffing {
                    stream,
                    respond,
                    builders,
                    again,
                    ..
                } => (stream, respond, *builders, again),
            };
            if let Some(sleep) = again {
                ready!(sleep.as_mut().poll(cx));
            }
            let socket = stream.as_ref().expect("present until served");
            let mut first = [0; H2_PREFACE.len()];
            let mut peeked = ReadBuf::new(&mut first);
            // An error (a reset) is for the connection to meet on its first read.
            let version = match ready!(socket.poll_peek(cx, &mut peeked)) {
                Ok(_) => version_of(peeked.filled()),
                Err(_) => Some(Version::Http1),
            };
            let Some(version) = version else {
                let deadline = tokio::time::Instant::now() + PEEK_AGAIN;
                match again {
                    Some(sleep) => sleep.as_mut().reset(deadline),
                    None => *again = Some(Box::pin(tokio::time::sleep_until(deadline))),
                }
                continue;
            };
            let stream = stream.take().expect("present until served");
            let respond = respond.take().expect("present until served");
            *this = match version {
                Version::Http1 => {
                    let shared = h1::body::Shared::new(stream);
                    let limits = builders.http1.clone();
                    Connection::Http1(Box::pin(h1::conn::Connection::new(shared, respond, limits)))
                }
                Version::Http2 => {
                    let service = H2Service(Arc::new(respond));
                    let io = TokioIo::new(stream);
                    Connection::Http2(Box::pin(builders.http2.serve_connection(io, service)))
                }
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_bytes_tell_the_version_once_they_can() {
        let h1 = Some(Version::Http1);
        assert_eq!(version_of(b"POST /v1/responses HTTP/1.1\r\n"), h1);
        assert_eq!(version_of(b"G"), h1);
        assert_eq!(version_of(b"PRX"), h1);
        assert_eq!(version_of(b""), h1, "closed before a byte");
        assert_eq!(version_of(H2_PREFACE), Some(Version::Http2));
        assert_eq!(
            version_of(b"PRI * HTTP/2.0\r\n"),
            None,
            "a part of the preface"
        );
    }
}
