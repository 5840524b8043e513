//! The request on its way to an HTTP/1 upstream: its head in one buffer, and its body
//! ([`Upload`]) framed by `Content-Length` or chunked, as hyper's client frames it: a
//! `Content-Length` the request has is kept; a body known to be empty gets no framing; a body
//! of known size gets a `Content-Length`; any other is sent chunked.

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http::header::{self, HeaderValue};
use http::request::Parts;
use http_body::Body;
use tokio::io::AsyncWrite;

use super::io::Io;
use crate::proxy::request_body::RequestBody;

/// How the request body is delimited on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Exactly this many bytes (0: no body).
    Length(u64),
    Chunked,
}

/// Why a request body could not be sent whole.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    #[error("reading the request body: {0}")]
    Body(Box<dyn std::error::Error + Send + Sync>),
    #[error("the request body is longer than its Content-Length")]
    TooLong,
    #[error("the request body ended before its Content-Length")]
    TooShort,
    #[error("writing the request to the upstream: {0}")]
    Write(#[from] io::Error),
}

/// Decides the body's framing, setting `Content-Length` or `Transfer-Encoding` as it says.
pub fn frame(head: &mut Parts, body: &RequestBody) -> Framing {
    let length = head
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if let Some(length) = length {
        return Framing::Length(length);
    }
    if body.is_end_stream() {
        return Framing::Length(0);
    }
    if let Some(length) = body.size_hint().exact() {
        head.headers
            .insert(header::CONTENT_LENGTH, HeaderValue::from(length));
        return Framing::Length(length);
    }
    head.headers.insert(
        header::TRANSFER_ENCODING,
        HeaderValue::from_static("chunked"),
    );
    Framing::Chunked
}

/// The request line and the header fields, `HTTP/1.1`, the target in origin form.
pub fn encode_head(head: &Parts) -> BytesMut {
    let target = head.uri.path_and_query().map_or("/", |p| p.as_str());
    let fields: usize = head
        .headers
        .iter()
        .map(|(n, v)| n.as_str().len() + v.len() + 4)
        .sum();
    let mut out = BytesMut::with_capacity(head.method.as_str().len() + target.len() + 13 + fields);
    out.put_slice(head.method.as_str().as_bytes());
    out.put_u8(b' ');
    out.put_slice(target.as_bytes());
    out.put_slice(b" HTTP/1.1\r\n");
    for (name, value) in &head.headers {
        out.put_slice(name.as_str().as_bytes());
        out.put_slice(b": ");
        out.put_slice(value.as_bytes());
        out.put_slice(b"\r\n");
    }
    out.put_slice(b"\r\n");
    out
}

/// A request body being written: frames taken from the body as the connection can take them
/// (the body is only polled once what came before is written, so it is read no faster than the
/// upstream reads), each framed as the head said.
pub struct Upload {
    body: RequestBody,
    framing: Framing,
    /// What is left of a `Content-Length` body.
    remaining: u64,
    /// Bytes framed and not yet written (a chunk's size line, its data, its CRLF).
    pending: VecDeque<Bytes>,
    /// The body ended and its end is queued.
    ended: bool,
}

impl Upload {
    pub fn new(body: RequestBody, framing: Framing) -> Upload {
        let remaining = match framing {
            Framing::Length(n) => n,
            Framing::Chunked => 0,
        };
        Upload {
            body,
            framing,
            remaining,
            pending: VecDeque::new(),
            ended: false,
        }
    }

    /// Writes what it can; ready once the whole body is written and flushed.
    pub fn poll(&mut self, io: &mut Io, cx: &mut Context<'_>) -> Poll<Result<(), UploadError>> {
        loop {
            if !self.pending.is_empty() {
                ready!(write_some(io, &mut self.pending, cx))?;
                continue;
            }
            if self.ended {
                ready!(Pin::new(&mut *io).poll_flush(cx))?;
                return Poll::Ready(Ok(()));
            }
            match ready!(Pin::new(&mut self.body).poll_frame(cx)) {
                Some(Ok(frame)) => {
                    // Trailers are not sent (hyper's client sends them only when the request
                    // announced them, which a proxied request cannot: `Trailer` is hop-by-hop).
                    if let Ok(data) = frame.into_data()
                        && !data.is_empty()
                    {
                        self.queue(data)?;
                    }
                }
                Some(Err(e)) => return Poll::Ready(Err(UploadError::Body(e))),
                None => self.end()?,
            }
        }
    }

    fn queue(&mut self, data: Bytes) -> Result<(), UploadError> {
        match self.framing {
            Framing::Length(_) => {
                let len = data.len() as u64;
                if len > self.remaining {
                    return Err(UploadError::TooLong);
                }
                self.remaining -= len;
                self.pending.push_back(data);
            }
            Framing::Chunked => {
                self.pending
                    .push_back(Bytes::from(format!("{:x}\r\n", data.len())));
                self.pending.push_back(data);
                self.pending.push_back(Bytes::from_static(b"\r\n"));
            }
        }
        Ok(())
    }

    fn end(&mut self) -> Result<(), UploadError> {
        self.ended = true;
        match self.framing {
            Framing::Length(_) if self.remaining > 0 => Err(UploadError::TooShort),
            Framing::Length(_) => Ok(()),
            Framing::Chunked => {
                self.pending.push_back(Bytes::from_static(b"0\r\n\r\n"));
                Ok(())
            }
        }
    }
}

/// Writes from the front of `pending` (vectored where the stream takes it), dropping what was
/// written; ready after one write.
pub fn write_some(
    io: &mut Io,
    pending: &mut VecDeque<Bytes>,
    cx: &mut Context<'_>,
) -> Poll<io::Result<()>> {
    let written = if io.is_write_vectored() && pending.len() > 1 {
        let mut slices = [IoSlice::new(&[]); 4];
        let n = pending.len().min(slices.len());
        for (slice, bytes) in slices.iter_mut().zip(pending.iter()) {
            *slice = IoSlice::new(bytes);
        }
        ready!(Pin::new(&mut *io).poll_write_vectored(cx, &slices[..n]))?
    } else {
        let front = pending.front().map_or(&[][..], |b| &b[..]);
        ready!(Pin::new(&mut *io).poll_write(cx, front))?
    };
    if written == 0 {
        return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
    }
    let mut left = written;
    while left > 0 {
        let Some(front) = pending.front_mut() else {
            break;
        };
        if front.len() > left {
            front.advance(left);
            break;
        }
        left -= front.len();
        pending.pop_front();
    }
    Poll::Ready(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Request;

    #[test]
    fn the_head_is_one_buffer_in_origin_form() {
        let (mut head, ()) = Request::post("http://gw:8080/v1/responses?x=1")
            .header("host", "gw:8080")
            .header("content-type", "application/json")
            .body(())
            .expect("request")
            .into_parts();
        head.headers.append("x-a", HeaderValue::from_static("1"));
        head.headers.append("x-a", HeaderValue::from_static("2"));
        let out = encode_head(&head);
        assert_eq!(
            &out[..],
            b"POST /v1/responses?x=1 HTTP/1.1\r\nhost: gw:8080\r\ncontent-type: application/json\r\nx-a: 1\r\nx-a: 2\r\n\r\n"
        );
        assert!(out.capacity() >= out.len());
    }
}
