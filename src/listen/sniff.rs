//! A client connection served as HTTP/1 or HTTP/2, told apart by peeking at its first bytes.
//!
//! hyper-util's automatic builder tells them apart by reading the first 24 bytes, then hands
//! hyper's HTTP/1 connection those bytes as a first, separate read. hyper reads into an 8 KiB
//! buffer; a second read into a buffer that already holds 24 bytes makes it grow to 16 KiB,
//! which the connection then keeps while its response streams (seen with heaptrack: one
//! 16,384-byte buffer per open stream, the largest allocation toolpulse had). Peeking leaves the
//! bytes in the socket, so hyper's first read takes the whole request head into 8 KiB.
//!
//! Only a client whose first bytes so far are a part of the HTTP/2 preface but not all of it
//! (one that sends the preface in pieces) is left to hyper-util's own sniffing: peeking again
//! would not wait for the rest.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::service::{HttpService, Service};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::io::ReadBuf;
use tokio::net::TcpStream;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What an HTTP/2 client sends first (RFC 9113 §3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The builders a listener serves its connections with: one per version, and hyper-util's
/// automatic one for what peeking cannot tell.
pub struct Builders {
    auto: auto::Builder<TokioExecutor>,
    http1: auto::Builder<TokioExecutor>,
    http2: auto::Builder<TokioExecutor>,
}

impl Builders {
    pub fn new(auto: auto::Builder<TokioExecutor>) -> Self {
        Builders {
            http1: auto.clone().http1_only(),
            http2: auto.clone().http2_only(),
            auto,
        }
    }

    fn for_version(&self, version: Option<Version>) -> &auto::Builder<TokioExecutor> {
        match version {
            Some(Version::Http1) => &self.http1,
            Some(Version::Http2) => &self.http2,
            None => &self.auto,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    Http1,
    Http2,
}

/// The version the first bytes `peeked` tell, `None` when they cannot tell yet (none, or a
/// part of the preface).
fn version_of(peeked: &[u8]) -> Option<Version> {
    if peeked.is_empty() {
        None
    } else if !H2_PREFACE.starts_with(peeked) {
        Some(Version::Http1)
    } else if peeked.len() == H2_PREFACE.len() {
        Some(Version::Http2)
    } else {
        None
    }
}

type Served<'a, S> = auto::Connection<'a, TokioIo<TcpStream>, S, TokioExecutor>;

/// A connection: waiting for its first bytes, then served.
pub enum Connection<'a, S>
where
    S: HttpService<Incoming>,
{
    Sniffing {
        stream: Option<TcpStream>,
        service: Option<S>,
        builders: &'a Builders,
        closed: bool,
    },
    Serving(Pin<Box<Served<'a, S>>>),
}

impl<'a, S, B> Connection<'a, S>
where
    S: Service<Request<Incoming>, Response = Response<B>> + Unpin + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    pub fn new(builders: &'a Builders, stream: TcpStream, service: S) -> Self {
        Connection::Sniffing {
            stream: Some(stream),
            service: Some(service),
            builders,
            closed: false,
        }
    }

    /// Closes it gracefully: at once before it is served (nothing was asked of it yet).
    pub fn graceful_shutdown(self: Pin<&mut Self>) {
        match self.get_mut() {
            Connection::Sniffing { closed, .. } => *closed = true,
            Connection::Serving(conn) => conn.as_mut().graceful_shutdown(),
        }
    }
}

impl<S, B> Future for Connection<'_, S>
where
    S: Service<Request<Incoming>, Response = Response<B>> + Unpin + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    type Output = Result<(), BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // The served connection is boxed, the rest Unpin: so is the connection.
        let this = self.get_mut();
        loop {
            match this {
                Connection::Serving(conn) => return conn.as_mut().poll(cx),
                Connection::Sniffing {
                    stream,
                    service,
                    builders,
                    closed,
                } => {
                    if *closed {
                        return Poll::Ready(Ok(()));
                    }
                    let socket = stream.as_ref().expect("present until served");
                    let mut first = [0; H2_PREFACE.len()];
                    let mut peeked = ReadBuf::new(&mut first);
                    // An error (a reset) is for hyper to meet on its first read.
                    let _ = ready!(socket.poll_peek(cx, &mut peeked));
                    let builder = builders.for_version(version_of(peeked.filled()));
                    let (stream, service) = (stream.take(), service.take());
                    let (stream, service) = stream.zip(service).expect("present until served");
                    let conn = builder.serve_connection(TokioIo::new(stream), service);
                    *this = Connection::Serving(Box::pin(conn));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_bytes_tell_the_version_once_they_can() {
        assert_eq!(
            version_of(b"POST /v1/responses HTTP/1.1\r\n"),
            Some(Version::Http1)
        );
        assert_eq!(version_of(b"G"), Some(Version::Http1));
        assert_eq!(version_of(b"PRX"), Some(Version::Http1));
        assert_eq!(version_of(H2_PREFACE), Some(Version::Http2));
        assert_eq!(
            version_of(b"PRI * HTTP/2.0\r\n"),
            None,
            "a part of the preface"
        );
        assert_eq!(version_of(b""), None);
    }
}
