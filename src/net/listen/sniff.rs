//! A client connection served as HTTP/1 or HTTP/2, told apart by its first bytes.
//!
//! They are read (at most the 24 of the HTTP/2 preface) as they arrive, each read waiting for
//! the socket to be readable: a client that sends a part of the preface and then nothing costs
//! what a silent one costs, one wake-up per arrival. (Peeking instead cannot wait for *more*
//! bytes: the socket stays readable while the peeked ones sit there, so peeking again meant a
//! timer, every 5 ms until the head timeout: 4,000 clients that sent `P` took 84 % of a core.)
//! The bytes read go to the connection first: into the HTTP/1 server's read buffer, or before
//! the socket for hyper's HTTP/2 ([`Prefixed`]). Each version's connection is boxed at its own
//! size (hyper-util's automatic builder has one type for both, as large as an HTTP/2
//! connection, 7.5 KiB, whichever it serves). HTTP/1.1 is served by toolpulse's own server
//! ([`super::h1`]), HTTP/2 by hyper's.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;

use super::h1;
use super::prefixed::{MAX_PREFIX, Prefixed};
use super::respond::Respond;
use super::watched::Closed;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What an HTTP/2 client sends first (RFC 9113 §3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

const _: () = assert!(H2_PREFACE.len() == MAX_PREFIX);

/// How a listener serves its connections: HTTP/1.1 with toolpulse's own server, HTTP/2 with
/// hyper's.
pub struct Builders {
    pub http1: h1::conn::Limits,
    pub http2: http2::Builder<TokioExecutor>,
    /// Times a connection was polled while its first bytes were awaited.
    sniff_polls: AtomicU64,
}

impl Builders {
    pub fn new(http1: h1::conn::Limits, http2: http2::Builder<TokioExecutor>) -> Self {
        Builders {
            http1,
            http2,
            sniff_polls: AtomicU64::new(0),
        }
    }

    /// How many times this listener's connections were polled (each a read attempt) while
    /// their first bytes were awaited: about one per connection and arrival of bytes, however
    /// long a client waits between them.
    pub fn sniff_polls(&self) -> u64 {
        self.sniff_polls.load(Ordering::Relaxed)
    }
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

type Io = TokioIo<Prefixed>;

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
        /// The first bytes, `read` of them so far.
        first: [u8; MAX_PREFIX],
        read: usize,
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
            first: [0; MAX_PREFIX],
            read: 0,
            closed: false,
        }
    }

    /// Why the HTTP/1 connection closed itself, if it timed its client out: no next request
    /// head within the head timeout (before the first, [`super::watched`] times it), or no
    /// byte of a response taken within the send timeout.
    pub fn closed(&self) -> Option<Closed> {
        match self {
            Connection::Http1(conn) => conn.closed(),
            _ => None,
        }
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
            let (stream, respond, builders, first, read) = match this {
                Connection::Http1(conn) => return conn.as_mut().poll(cx),
                Connection::Http2(conn) => return conn.as_mut().poll(cx).map_err(Into::into),
                Connection::Sniffing { closed: true, .. } => return Poll::Ready(Ok(())),
                Connection::Sniffing {
                    stream,
                    respond,
                    builders,
                    first,
                    read,
                    ..
                } => (stream, respond, *builders, first, read),
            };
            builders.sniff_polls.fetch_add(1, Ordering::Relaxed);
            let socket = stream.as_ref().expect("present until served");
            let version = ready!(poll_version(socket, first, read, cx))?;
            let stream = stream.take().expect("present until served");
            let respond = respond.take().expect("present until served");
            let first = &first[..*read];
            *this = match version {
                Version::Http1 => {
                    let shared = h1::body::Shared::new(stream);
                    shared.reader().buf.extend_from_slice(first);
                    let limits = builders.http1.clone();
                    Connection::Http1(Box::pin(h1::conn::Connection::new(shared, respond, limits)))
                }
                Version::Http2 => {
                    let service = H2Service(Arc::new(respond));
                    let io = TokioIo::new(Prefixed::new(first, stream));
                    Connection::Http2(Box::pin(builders.http2.serve_connection(io, service)))
                }
            };
        }
    }
}

/// Reads the first bytes into `first` as they arrive until they tell the version. A read
/// that finds nothing clears the socket's readiness, so the next poll waits for new bytes.
fn poll_version(
    socket: &TcpStream,
    first: &mut [u8; MAX_PREFIX],
    read: &mut usize,
    cx: &mut Context<'_>,
) -> Poll<io::Result<Version>> {
    loop {
        ready!(socket.poll_read_ready(cx))?;
        match socket.try_read(&mut first[*read..]) {
            // The client closed: HTTP/1, whose connection then just ends.
            Ok(0) => return Poll::Ready(Ok(Version::Http1)),
            Ok(n) => *read += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Poll::Ready(Err(e)),
        }
        if let Some(version) = version_of(&first[..*read]) {
            return Poll::Ready(Ok(version));
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
