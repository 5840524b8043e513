//! The oracle of fuzz target `h1_request`: toolpulse's own HTTP/1.1 server reading a client's
//! request (`http1::server`: the head, then the body as its framing says) gives the same outcome
//! however the bytes are split, and whatever it accepts, hyper's HTTP/1 server accepts with the
//! same method, target, version, header fields and body. Where hyper reads a request toolpulse
//! refuses, the refusal must be one of [`STRICTER_THAN_HYPER`].

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use toolpulse::http1::decode::{DecodeError, Decoder};
use toolpulse::http1::server::{self, HeadError, Parsed};

use crate::checks::chunks;

/// The head limit both servers are given.
const MAX_HEAD: usize = 16 * 1024;

/// Where toolpulse's server refuses a request that hyper's accepts, on purpose:
///
/// - an invalid `Content-Length` beside `Transfer-Encoding: chunked`: the length is dropped
///   either way, but hyper checks it only when it comes before `Transfer-Encoding`;
/// - a bare LF in the trailer section, which hyper takes as a line end (as in target `h1`,
///   `checks::STRICTER_THAN_HYPER`): toolpulse wants CRLF everywhere in chunked framing.
pub const STRICTER_THAN_HYPER: [Refusal; 2] = [
    Refusal::Head(HeadError::InvalidLengthBesideChunked),
    Refusal::Body(DecodeError::TrailerBareLf),
];

/// A request as the server hands it to its handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: http::Method,
    pub uri: String,
    pub version: http::Version,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Head(HeadError),
    Body(DecodeError),
}

/// What reading the input gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Read(Request),
    /// More bytes are needed (the input ended within the head or the body).
    Incomplete,
    Refused(Refusal),
}

/// `data` = `[max_chunk, seed, request…]`: the request's bytes are read by toolpulse whole and
/// in pieces ([`chunks`]), and by hyper's server whole. Returns whether toolpulse read a request.
pub fn h1_request(data: &[u8]) -> bool {
    let [max_chunk, seed, request @ ..] = data else {
        return false;
    };
    let whole = read(&[request]);
    let split = read(&chunks(request, *max_chunk, *seed));
    assert_eq!(whole, split, "the outcome depends on the split");
    let theirs = hyper_read(request);
    match (&whole, &theirs) {
        (Outcome::Read(ours), Ok(Some(theirs))) => {
            assert_eq!(ours, theirs, "toolpulse and hyper read differently");
        }
        (Outcome::Read(ours), Err(e)) => {
            panic!("toolpulse reads what hyper refuses ({e:?}): {ours:?}")
        }
        (Outcome::Read(ours), Ok(None)) => {
            panic!("toolpulse reads a request where hyper waits for more: {ours:?}")
        }
        (Outcome::Incomplete, Ok(Some(theirs))) => {
            panic!("toolpulse waits for more where hyper reads: {theirs:?}")
        }
        (Outcome::Refused(refusal), Ok(Some(theirs))) => assert!(
            STRICTER_THAN_HYPER.contains(refusal),
            "toolpulse refuses ({refusal:?}) what hyper reads: {theirs:?}"
        ),
        // Refusing sooner, or waiting for the blank line before judging a head, is fine.
        _ => {}
    }
    matches!(whole, Outcome::Read(_))
}

/// Reads a request as the connection does: the head parsed once its blank line is in (or the
/// limit is reached), then the body decoded from what follows.
fn read(pieces: &[&[u8]]) -> Outcome {
    let mut pieces = pieces.iter();
    let mut pending: Vec<u8> = Vec::new();
    let head = loop {
        let complete = has_blank_line(&pending) || pending.len() >= MAX_HEAD;
        if complete {
            match server::parse(&pending, MAX_HEAD) {
                Ok(Parsed::Partial) => {}
                Ok(Parsed::Complete { head, len }) => {
                    pending.drain(..len);
                    break head;
                }
                Err(e) => return Outcome::Refused(Refusal::Head(e)),
            }
        }
        match pieces.next() {
            Some(piece) => pending.extend_from_slice(piece),
            None => return Outcome::Incomplete,
        }
    };
    let mut decoder = Decoder::new(head.framing);
    let mut body = Vec::new();
    while !decoder.is_done() {
        let step = match decoder.decode(&pending) {
            Ok(step) => step,
            Err(e) => return Outcome::Refused(Refusal::Body(e)),
        };
        if let Some(range) = step.data.clone() {
            body.extend_from_slice(&pending[range]);
        }
        pending.drain(..step.consumed);
        if step.consumed == 0 && !decoder.is_done() {
            match pieces.next() {
                Some(piece) => pending.extend_from_slice(piece),
                None => return Outcome::Incomplete,
            }
        }
    }
    let parts = head.parts;
    Outcome::Read(Request {
        method: parts.method,
        uri: parts.uri.to_string(),
        version: parts.version,
        headers: parts.headers,
        body,
    })
}

fn has_blank_line(buf: &[u8]) -> bool {
    buf.windows(2).any(|w| w == b"\n\n") || buf.windows(3).any(|w| w == b"\n\r\n")
}

/// The reference reading: hyper's HTTP/1 server given `request`, then no more bytes (reads
/// wait). `Ok(None)`: it waits for more.
fn hyper_read(request: &[u8]) -> Result<Option<Request>, hyper::Error> {
    use http_body_util::BodyExt;

    type Seen = Rc<RefCell<Option<Result<Request, hyper::Error>>>>;
    let seen: Seen = Rc::default();
    let service = {
        let seen = seen.clone();
        hyper::service::service_fn(move |request: http::Request<hyper::body::Incoming>| {
            let seen = seen.clone();
            async move {
                let (parts, body) = request.into_parts();
                let read = body.collect().await.map(|b| Request {
                    method: parts.method,
                    uri: parts.uri.to_string(),
                    version: parts.version,
                    headers: parts.headers,
                    body: b.to_bytes().to_vec(),
                });
                seen.borrow_mut().get_or_insert(read);
                Ok::<_, std::convert::Infallible>(http::Response::new(http_body_util::Empty::<
                    bytes::Bytes,
                >::new()))
            }
        })
    };
    let io = Feed { rest: request };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.max_buf_size(MAX_HEAD);
    let mut connection = std::pin::pin!(builder.serve_connection(io, service));
    let mut cx = Context::from_waker(Waker::noop());
    // No timer and no other task: polls until it has the request, ends, or makes no progress.
    for _ in 0..256 {
        if let Some(read) = seen.borrow_mut().take() {
            return read.map(Some);
        }
        match connection.as_mut().poll(&mut cx) {
            Poll::Ready(Err(e)) => {
                return match seen.borrow_mut().take() {
                    Some(read) => read.map(Some),
                    None => Err(e),
                };
            }
            Poll::Ready(Ok(())) => return seen.borrow_mut().take().transpose(),
            Poll::Pending => {}
        }
    }
    seen.borrow_mut().take().transpose()
}

/// The client's side: reads give the request's bytes, then wait; writes are taken whole.
struct Feed<'a> {
    rest: &'a [u8],
}

impl hyper::rt::Read for Feed<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.rest.is_empty() {
            return Poll::Pending;
        }
        let n = self.rest.len().min(buf.remaining());
        let (now, later) = self.rest.split_at(n);
        buf.put_slice(now);
        self.rest = later;
        Poll::Ready(Ok(()))
    }
}

impl hyper::rt::Write for Feed<'_> {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
